package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/store"
)

// Files in the output directory.
const (
	StoreFile  = "gateway.db"
	GroupsFile = rollout.GroupsFile
)

// RoleHeader names the role of a call, overriding the role of its model.
const RoleHeader = "X-Delegate-Role"

// Config configures a Gateway. Start from DefaultConfig: a zero field
// means zero, and Validate refuses the ones that cannot be.
type Config struct {
	// Dir is the output directory: the store (StoreFile) and the group
	// records (GroupsFile). Required.
	Dir string
	// Server bounds the chat completions (package server). Its APIKey
	// must be empty: session ids are the keys.
	Server server.Config
	// Token, when set, must come with every /sessions request as a bearer
	// token. Agents never need it.
	Token string
	// Hosts lists the host names a request may carry besides IP
	// addresses and localhost (package internal/edge).
	Hosts []string
	// Roles maps a model's name to the role of its calls. Default: the
	// model's name. A call's RoleHeader overrides it.
	Roles map[string]string
	// Trained lists the roles whose calls become samples. Default: every
	// role.
	Trained []string
	// Prices are the models' prices by name, for each call's dollars.
	Prices map[string]delegate.Price
	// Templates are the models' chat-template hashes by name (see
	// TemplateHash); a model without one records "".
	Templates map[string]string
	// Tokenizers are the models' chat templates by name, for backends
	// without ids. A call whose backend gave none is tokenized with it
	// (Call.TokenizedBy). A call whose ids disagree with it drifts.
	Tokenizers map[string]Tokenizer
	// TTL bounds a session's life from its start. Default 30 minutes;
	// it must be positive.
	TTL time.Duration
	// GroupSize is the number of finished sessions of one group key that
	// make a group record. Default 4; at least 2.
	GroupSize int
	// Estimator computes a group's advantages. Default GRPO.
	Estimator reward.Estimator
	// Temperature, when set, replaces the sampling temperature of the
	// trained roles' calls. Agents often sample at 0; a group whose
	// sessions all answer alike teaches nothing.
	Temperature *float64
	// Verify rewards a session ended without a reward, from its task's
	// reference: 1 if right, else 0. World problems use world.Verify.
	// Nil: a reward must be given.
	Verify delegate.Verifier
	// Reward, when set, replaces 1 or 0 as a verified session's reward.
	// It is a reward.Config's Func or a reward.Graded's Reward, applied as
	// `delegate process` applies it (rollout.RewardScorer) to the
	// session's calls: the trained roles are the policy, every other
	// role's call is a sub-agent call. Finished.Terms shows its inputs.
	// A reward the caller gives is kept as given.
	Reward func(reward.Outcome) float64
	// RewardName names Reward in each session's terms, as
	// reward.Config.Describe does.
	RewardName string
	// Judge, when set, rewards a session ended without a reward whose
	// task is an open question (dataset JudgedDataset): it compares the
	// answer with the task's reference answer. The quality is the
	// judge's Diff/100, the reward that quality or, with Reward, Reward
	// of it. Nil: such a session needs a reward given.
	Judge *judge.Judge
	// GeneratedTokens makes Reward charge the trained roles' completion
	// tokens only, as the world's reward does; else their whole usage.
	GeneratedTokens bool
	// Sink, when set, is sent every committed group record in file order. It
	// is a trajectory API, fed as `delegate process --push` feeds it. A
	// session starts only once Sink.Wait returns: the trainer's queue has
	// room. Nil: records are only written.
	Sink rollout.Sink
	// SinkWait bounds how long POST /sessions waits for Sink.Wait before
	// it answers 503 with Retry-After. Default 10 seconds; 0 answers at
	// once when the queue is full.
	SinkWait time.Duration
	// MaxSessionCalls bounds the calls one session records, failed ones
	// included; each choice of a request is a call. A request that would
	// pass it is refused with 429 before the backend sees it. Default
	// 1,000.
	MaxSessionCalls int
	// MaxSessionBytes bounds the memory one session's calls hold, as
	// estimated from their sizes. A request that would pass it is refused
	// with 413. An answer is counted once it is generated, so a session
	// may hold one answer more. Default 16 MiB.
	MaxSessionBytes int64
	// MaxTotalBytes bounds the memory held by the open sessions and the
	// finished ones waiting for their group together. A request that
	// would pass it is refused with 429 and Retry-After. Default 1 GiB;
	// at least MaxSessionBytes.
	MaxTotalBytes int64
	// GroupTimeout closes a group that has waited this long since its
	// first session finished. With at least 2 sessions it is written as
	// a smaller group; with fewer it is dropped and counted. 0 waits for
	// ever. Default 10 minutes.
	GroupTimeout time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Ended, when set, sees each session as it ends. The session is stored
	// with its reward, or expired with no reward and no samples. It runs
	// on a request's goroutine and must not block.
	Ended func(fin *Finished, expired bool)
}

// DefaultConfig returns the defaults of every Config field; Dir is left
// for the caller.
func DefaultConfig() Config {
	return Config{Server: server.DefaultConfig(), TTL: 30 * time.Minute, GroupSize: 4, Estimator: reward.GRPO, SinkWait: 10 * time.Second,
		MaxSessionCalls: 1000, MaxSessionBytes: 16 << 20, MaxTotalBytes: 1 << 30, GroupTimeout: 10 * time.Minute}
}

// Validate reports a missing directory, a server API key, and bounds out
// of range.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("an output directory is required"))
	}
	if c.Server.APIKey != "" {
		errs = append(errs, errors.New("the server's API key must be empty: session ids are the keys"))
	}
	if c.SinkWait < 0 {
		errs = append(errs, fmt.Errorf("sink wait %v must not be negative", c.SinkWait))
	}
	if c.TTL <= 0 {
		errs = append(errs, fmt.Errorf("ttl %v: want more than 0", c.TTL))
	}
	if t := c.Temperature; t != nil && !(*t > 0 && *t <= 2) {
		errs = append(errs, fmt.Errorf("temperature %v: want more than 0, at most 2", *t))
	}
	if c.GroupSize < 2 {
		errs = append(errs, fmt.Errorf("group size %d: want at least 2", c.GroupSize))
	}
	if c.MaxSessionCalls < 1 {
		errs = append(errs, fmt.Errorf("max session calls %d: want at least 1", c.MaxSessionCalls))
	}
	if c.MaxSessionBytes < 1 {
		errs = append(errs, fmt.Errorf("max session bytes %d: want at least 1", c.MaxSessionBytes))
	}
	if c.MaxTotalBytes < c.MaxSessionBytes {
		errs = append(errs, fmt.Errorf("max total bytes %d: want at least max session bytes, %d", c.MaxTotalBytes, c.MaxSessionBytes))
	}
	if c.GroupTimeout < 0 {
		errs = append(errs, fmt.Errorf("group timeout %v must not be negative", c.GroupTimeout))
	}
	if _, err := reward.ParseEstimator(string(c.Estimator)); err != nil {
		errs = append(errs, err)
	}
	if c.Reward != nil && c.Verify == nil {
		errs = append(errs, errors.New("a reward function needs a verifier: it rewards verified sessions"))
	}
	return errors.Join(errs...)
}

// Gateway is the server. It is an http.Handler, safe for concurrent use.
// Close it to release its store; sessions open then are counted lost by
// the next Open.
type Gateway struct {
	cfg   Config
	srv   *server.Server
	db    *store.DB
	log   *slog.Logger
	admin edge.Config
	lost  int    // sessions found open at Open
	run   string // the store's run id, in every group record

	// inflight maps a request handed to the server to its session, for
	// the server's hook.
	inflight sync.Map // *http.Request -> inflight

	// held estimates the bytes held by the live sessions and the finished
	// ones in pending (MaxTotalBytes).
	held    atomic.Int64
	metrics *gatewayMetrics

	// Lock order: mu, then a session's mu; gmu alone.
	mu       sync.Mutex
	sessions map[string]*session // by digest of the id
	// due is at or before the earliest expiry among sessions: one that
	// ended may leave it early. Zero means none is live. expire looks at
	// the sessions only once due has passed.
	due time.Time

	gmu     sync.Mutex
	pending map[string][]*Finished // finished sessions by group key, not yet in a record
	groups  *os.File
	size    int64 // the recorded length of groups

	// The pusher, with Config.Sink. It is kicked at each commit, stopped
	// by stopPush, and done when it returns. pushed counts the records it
	// sent.
	pushKick chan struct{}
	stopPush context.CancelFunc
	pushDone chan struct{}
	pushed   atomic.Int64

	// The group timer, with Config.GroupTimeout: stopped by stopTimer,
	// done when it returns.
	stopTimer context.CancelFunc
	timerDone chan struct{}
}

// Open starts a gateway over models. It opens the store in cfg.Dir and marks
// the sessions it finds open as lost. It repairs the group file against the
// store and takes up finished sessions not yet in a group. log may be nil.
func Open(ctx context.Context, cfg Config, log *slog.Logger, models ...delegate.Model) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv, err := server.NewWithConfig(cfg.Server, log, models...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	db, err := store.OpenExclusive(ctx, filepath.Join(cfg.Dir, StoreFile))
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{
		cfg: cfg, srv: srv, db: db, log: log, sessions: map[string]*session{}, pending: map[string][]*Finished{},
		admin: edge.Config{Token: cfg.Token, Open: []string{"/health"}, Hosts: cfg.Hosts, Realm: "delegate-gateway", Refuse: refuse},
	}
	g.metrics = newGatewayMetrics(func() float64 { return float64(g.held.Load()) })
	if err := srv.RegisterMetrics(g.metrics.collectors()...); err != nil {
		_ = db.Close() // the registry's error is what matters
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := g.recover(ctx); err != nil {
		// The recovery error is what matters.
		_ = db.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	srv.SetHook(g.hook)
	srv.SetAccessLog(nil) // ServeHTTP logs every request, without its path
	if cfg.Sink != nil {
		pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		g.pushKick, g.stopPush, g.pushDone = make(chan struct{}, 1), stop, make(chan struct{})
		go g.pusher(pctx)
	}
	if cfg.GroupTimeout > 0 {
		tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		g.stopTimer, g.timerDone = stop, make(chan struct{})
		go g.timer(tctx)
	}
	return g, nil
}

// recover counts the sessions a crash left open as lost. It repairs the
// group file and loads the finished sessions not yet grouped.
func (g *Gateway) recover(ctx context.Context) error {
	lost, err := g.db.LoseOpenSessions(ctx)
	if err != nil {
		return err
	}
	g.lost = lost
	if g.run, err = g.db.RunID(ctx); err != nil {
		return err
	}
	if lost > 0 {
		g.log.Warn("sessions open at the last stop are lost", "sessions", lost)
	}
	lengths, err := g.db.FileLengths(ctx)
	if err != nil {
		return err
	}
	path := filepath.Join(g.cfg.Dir, GroupsFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close() // the stat error is what matters
		return fmt.Errorf("stat %s: %w", path, err)
	}
	want := lengths[GroupsFile]
	switch {
	case st.Size() < want:
		_ = f.Close() // the lost records are what matter
		return fmt.Errorf("%s is %d bytes but the store recorded %d: group records were lost outside the gateway; use a new directory", path, st.Size(), want)
	case st.Size() > want:
		// A record written but never committed: its sessions are still
		// ungrouped in the store and are grouped again.
		if err := f.Truncate(want); err != nil {
			_ = f.Close()
			return fmt.Errorf("repair %s: %w", path, err)
		}
		g.log.Warn("removed an uncommitted group record", "file", path, "bytes", st.Size()-want)
	}
	g.groups, g.size = f, want
	fin, err := g.db.FinishedSessions(ctx)
	if err != nil {
		return err
	}
	for _, s := range fin {
		var rec Finished
		if err := json.Unmarshal(s.Data, &rec); err != nil {
			return fmt.Errorf("decode finished session %s: %w", short(s.Key), err)
		}
		if rec.Version != FinishedVersion {
			return fmt.Errorf("finished session %s: version %d, this build reads version %d", short(s.Key), rec.Version, FinishedVersion)
		}
		g.pending[s.Group] = append(g.pending[s.Group], &rec)
		g.held.Add(finishedBytes(&rec))
	}
	return nil
}

// Lost returns the sessions found open, and so lost, when the gateway
// opened.
func (g *Gateway) Lost() int { return g.lost }

// Counts returns the stored sessions by status (open, finished, lost,
// expired).
func (g *Gateway) Counts(ctx context.Context) (map[string]int, error) { return g.db.SessionCounts(ctx) }

// Pushed returns the group records sent to Config.Sink since Open.
func (g *Gateway) Pushed() int64 { return g.pushed.Load() }

// Close stops sending to the sink, then closes the store and the group
// file. Sessions still open stay open in the store: the next Open counts
// them lost. Records not yet sent are sent after the next Open.
func (g *Gateway) Close() error {
	if g.stopTimer != nil {
		g.stopTimer()
		<-g.timerDone
	}
	if g.stopPush != nil {
		g.stopPush()
		<-g.pushDone
	}
	g.gmu.Lock()
	defer g.gmu.Unlock()
	return errors.Join(g.groups.Close(), g.db.Close())
}

// SetWriteTimeout tells the server the write timeout of the http.Server
// carrying the gateway (server.Server.SetWriteTimeout).
func (g *Gateway) SetWriteTimeout(d time.Duration) { g.srv.SetWriteTimeout(d) }

// ServeHTTP implements http.Handler: the session API, /health, and the
// agents' OpenAI-compatible routes under /s/{id}/v1 or /v1.
func (g *Gateway) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	start := time.Now()
	route := "other"
	defer func() {
		// Never the path: it may hold a session id.
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", w.status), slog.Duration("duration", time.Since(start)))
	}()
	p := r.URL.Path
	switch {
	case p == "/health":
		route = p
		g.serveAdmin(w, r, http.MethodGet, g.health)
	case p == "/metrics":
		// The server's registry holds the gateway's metrics too.
		route = p
		g.serveAdmin(w, r, http.MethodGet, g.srv.ServeHTTP)
	case p == "/sessions":
		route = p
		g.serveAdmin(w, r, http.MethodPost, g.create)
	case strings.HasPrefix(p, "/sessions/") && strings.HasSuffix(p, "/reward"):
		route = "/sessions/{id}/reward"
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/sessions/"), "/reward")
		g.serveAdmin(w, r, http.MethodPost, func(w http.ResponseWriter, r *http.Request) { g.finish(w, r, id) })
	case strings.HasPrefix(p, "/s/"):
		id, rest, _ := strings.Cut(strings.TrimPrefix(p, "/s/"), "/")
		route = "/s/{id}" + routeOf(rest)
		g.agent(w, r, id, "/"+rest)
	case p == "/v1" || strings.HasPrefix(p, "/v1/"):
		route = routeOf(strings.TrimPrefix(p, "/"))
		id, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="delegate-gateway"`)
			writeError(w, http.StatusUnauthorized, "invalid_api_key", "send a session id as the bearer key (POST /sessions gives one), or call /s/{id}/v1")
			return
		}
		g.agent(w, r, id, p)
	default:
		// The path is not echoed: it may hold a session id.
		writeError(w, http.StatusNotFound, "unknown_url", "unknown path (served: POST /sessions, POST /sessions/{id}/reward, GET /health, GET /metrics, and the OpenAI routes under /s/{id}/v1 or /v1)")
	}
}

// routeOf is the label of an agent route for the access log. It is a
// known route or "other", never a client's text.
func routeOf(rest string) string {
	switch p := "/" + strings.TrimSuffix(rest, "/"); {
	case p == "/v1/chat/completions", p == "/v1/models":
		return p
	case strings.HasPrefix(p, "/v1/models/"):
		return "/v1/models/{model}"
	}
	return "other"
}

// serveAdmin runs h behind the admin edge (Host, origin, media type,
// token) and the method check.
func (g *Gateway) serveAdmin(w http.ResponseWriter, r *http.Request, method string, h http.HandlerFunc) {
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("use %s", method))
		return
	}
	if rf, ok := g.admin.Check(r); !ok {
		if rf.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="delegate-gateway"`)
		}
		refuse(w, rf)
		return
	}
	h(w, r)
}

// bearer returns the bearer token of r.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// agent hands an agent's request to the server, path rewritten to
// path, once its session checks out.
func (g *Gateway) agent(w http.ResponseWriter, r *http.Request, id, path string) {
	s, status, why := g.live(id)
	if s == nil {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="delegate-gateway"`)
		}
		writeError(w, status, "invalid_session", why)
		return
	}
	if role := r.Header.Get(RoleHeader); len(role) > 64 || strings.ContainsFunc(role, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		writeError(w, http.StatusBadRequest, "invalid_role", RoleHeader+": want at most 64 printable ASCII characters without spaces")
		return
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = path, ""
	r2.URL = &u
	// The session id goes no further. It is deleted from the agent's own
	// header, which nothing reads after this handler: a copy cost three
	// allocations a call.
	delete(r.Header, "Authorization")
	g.inflight.Store(r2, inflight{s: s, w: w})
	defer g.inflight.Delete(r2)
	g.srv.ServeHTTP(w, r2)
}

// health answers GET /health: the models' chat-template hashes, the
// live sessions and the stored ones by status.
func (g *Gateway) health(w http.ResponseWriter, r *http.Request) {
	counts, err := g.db.SessionCounts(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", err.Error())
		return
	}
	g.mu.Lock()
	live := len(g.sessions)
	g.mu.Unlock()
	h := map[string]any{"status": "ok", "live_sessions": live, "sessions": counts,
		"lost_at_start": g.lost, "chat_template_hashes": g.cfg.Templates, "held_bytes": g.held.Load()}
	if g.cfg.Sink != nil {
		h["groups_pushed"] = g.pushed.Load()
	}
	edge.WriteJSON(w, http.StatusOK, h)
}

// maxAdminBody bounds a session API request body.
const maxAdminBody = 1 << 20

// CreateRequest is the body of POST /sessions. Every field is optional.
type CreateRequest struct {
	// Task is the dataset item the agent works on: its id and reference
	// answer (for Config.Verify) at least.
	Task *delegate.Task `json:"task,omitempty"`
	// Group is the group key; default the task's id. One of the two is
	// required.
	Group string `json:"group,omitempty"`
	// Metadata is kept with the session.
	Metadata map[string]string `json:"metadata,omitempty"`
	// ChatTemplateHashes are the hashes the caller expects by model; a
	// model whose hash differs refuses the session (409).
	ChatTemplateHashes map[string]string `json:"chat_template_hashes,omitempty"`
}

// CreateResponse is the answer to POST /sessions.
type CreateResponse struct {
	SessionID          string            `json:"session_id"`
	BaseURL            string            `json:"base_url"`
	ExpiresAt          time.Time         `json:"expires_at"`
	ChatTemplateHashes map[string]string `json:"chat_template_hashes,omitempty"`
}

// create answers POST /sessions.
func (g *Gateway) create(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	for model, want := range req.ChatTemplateHashes {
		if got := g.cfg.Templates[model]; got != want {
			writeError(w, http.StatusConflict, "chat_template_mismatch", fmt.Sprintf(
				"model %q renders with chat template %q here, not %q: token ids would not match the caller's template", model, got, want))
			return
		}
	}
	group := req.Group
	if group == "" && req.Task != nil {
		group = req.Task.ID
	}
	if group == "" {
		writeError(w, http.StatusBadRequest, "no_group", "a session needs a group key (group) or a task id (task.id): its samples are grouped by it")
		return
	}
	g.expire(r.Context())
	var version *int
	if g.cfg.Sink != nil {
		// The trainer paces the sessions as it paces process's items.
		ctx, cancel := context.WithTimeout(r.Context(), g.cfg.SinkWait)
		v, err := g.cfg.Sink.Wait(ctx)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "trainer_busy", "the trainer's queue is full: try again ("+err.Error()+")")
			return
		}
		version = &v
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on a broken system source)
	id := "sess-" + hex.EncodeToString(b[:])
	now := g.cfg.Now()
	s := &session{id: id, key: digest(id), created: now, expires: now.Add(g.cfg.TTL), metadata: req.Metadata}
	if req.Task != nil {
		s.task = *req.Task
	}
	s.group, s.policyVersion = group, version
	// Not canceled with the request: the driver watches a cancelable
	// context with a goroutine per statement, and a session stored for a
	// client gone meanwhile just expires.
	if err := g.db.OpenSession(context.WithoutCancel(r.Context()), s.key, s.group, now.Unix()); err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", err.Error())
		return
	}
	g.mu.Lock()
	g.sessions[s.key] = s
	if g.due.IsZero() || s.expires.Before(g.due) {
		g.due = s.expires
	}
	g.mu.Unlock()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	edge.WriteJSON(w, http.StatusOK, CreateResponse{SessionID: id, BaseURL: scheme + "://" + r.Host + "/s/" + id + "/v1",
		ExpiresAt: s.expires.UTC(), ChatTemplateHashes: g.cfg.Templates})
}

// live returns the live session of id, or the status and reason to
// refuse it with.
func (g *Gateway) live(id string) (*session, int, string) {
	key := digest(id)
	g.mu.Lock()
	s := g.sessions[key]
	g.mu.Unlock()
	if s == nil {
		return nil, http.StatusUnauthorized, "unknown or ended session"
	}
	if !g.cfg.Now().Before(s.expires) {
		g.expire(context.Background())
		return nil, http.StatusUnauthorized, "unknown or ended session"
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done {
		return nil, http.StatusConflict, "the session is ending: its reward was given"
	}
	return s, 0, ""
}

// expire ends the live sessions past their time, recording each as
// expired. It looks at them only once the earliest expiry has passed:
// every POST /sessions calls it, and a scan of every open session each
// time made opening one cost more the more were open.
func (g *Gateway) expire(ctx context.Context) {
	now := g.cfg.Now()
	var gone []*session
	g.mu.Lock()
	if g.due.IsZero() || now.Before(g.due) {
		g.mu.Unlock()
		return
	}
	g.due = time.Time{}
	for k, s := range g.sessions {
		s.mu.Lock()
		switch {
		case !now.Before(s.expires) && !s.done:
			s.done = true
			gone = append(gone, s)
			delete(g.sessions, k)
		case g.due.IsZero() || s.expires.Before(g.due):
			// Ending sessions count too: a reward that fails leaves
			// them live.
			g.due = s.expires
		}
		s.mu.Unlock()
	}
	g.mu.Unlock()
	for _, s := range gone {
		g.release(s)
		if err := g.db.ExpireSession(context.WithoutCancel(ctx), s.key); err != nil {
			g.log.Error("record an expired session", "session", short(s.key), "err", err)
		}
		if g.cfg.Ended != nil {
			s.mu.Lock()
			calls, refused := s.callList(), s.refused
			s.mu.Unlock()
			g.cfg.Ended(&Finished{Version: FinishedVersion, Key: s.key, Task: s.task, Group: s.group, Metadata: s.metadata,
				Created: s.created.UTC(), Finished: now.UTC(), PolicyVersion: s.policyVersion, Calls: calls, Refused: refused}, true)
		}
	}
}

// RewardRequest is the body of POST /sessions/{id}/reward. With Reward
// nil the gateway verifies Answer, or else the last trained call's
// content, against the task's reference.
type RewardRequest struct {
	Reward *float64 `json:"reward,omitempty"`
	Answer *string  `json:"answer,omitempty"`
}

// RewardResponse is the answer to POST /sessions/{id}/reward, sent once
// the session is stored.
type RewardResponse struct {
	Session string  `json:"session"` // the stored key's first 16 digits, never the id
	Reward  float64 `json:"reward"`
	// Correct is the verifier's word, when it gave the reward.
	Correct *bool `json:"correct,omitempty"`
	// Terms are the inputs of a reward computed by Config.Reward.
	Terms   *Terms         `json:"terms,omitempty"`
	Calls   int            `json:"calls"`
	Samples map[string]int `json:"samples"` // by trained role
	Group   string         `json:"group"`
	// GroupsWritten counts the group records this session completed.
	GroupsWritten int `json:"groups_written"`
}

// finish answers POST /sessions/{id}/reward.
func (g *Gateway) finish(w http.ResponseWriter, r *http.Request, id string) {
	var req RewardRequest
	if !decodeBody(w, r, &req) {
		return
	}
	s, status, why := g.live(id)
	if s == nil {
		if status == http.StatusUnauthorized {
			status = http.StatusNotFound
		}
		writeError(w, status, "invalid_session", why)
		return
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "invalid_session", "the session is ending: its reward was given")
		return
	}
	s.done = true
	calls, refused := s.callList(), s.refused
	s.mu.Unlock()
	fin, err := g.score(r.Context(), s, calls, req)
	if err != nil {
		s.mu.Lock()
		s.done = false // the session goes on; the caller may give a reward
		s.mu.Unlock()
		writeError(w, http.StatusUnprocessableEntity, "unverifiable", err.Error())
		return
	}
	fin.Refused = refused
	data, err := json.Marshal(fin)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode_error", err.Error())
		return
	}
	if err := g.db.FinishSession(context.WithoutCancel(r.Context()), s.key, data); err != nil {
		s.mu.Lock()
		s.done = false // not stored: the reward may be given again
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, "store_error", err.Error())
		return
	}
	g.mu.Lock()
	delete(g.sessions, s.key)
	g.mu.Unlock()
	g.release(s)
	if g.cfg.Ended != nil {
		g.cfg.Ended(fin, false)
	}
	written, err := g.addFinished(context.WithoutCancel(r.Context()), fin)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "group_error", "the session is stored; its group record failed: "+err.Error())
		return
	}
	out := RewardResponse{Session: short(s.key), Reward: fin.Reward, Correct: fin.Correct, Terms: fin.Terms, Calls: len(fin.Calls),
		Samples: map[string]int{}, Group: fin.Group, GroupsWritten: written}
	for _, smp := range fin.Samples {
		out.Samples[smp.Role]++
	}
	edge.WriteJSON(w, http.StatusOK, out)
}

// score gives a session its reward and samples.
func (g *Gateway) score(ctx context.Context, s *session, calls []Call, req RewardRequest) (*Finished, error) {
	fin := &Finished{Version: FinishedVersion, Key: s.key, Task: s.task, Group: s.group, Metadata: s.metadata,
		Created: s.created.UTC(), Finished: g.cfg.Now().UTC(), Calls: calls, PolicyVersion: s.policyVersion}
	switch {
	case req.Reward != nil:
		if _, err := reward.Advantages(reward.DrGRPO, []float64{*req.Reward}); err != nil {
			return nil, fmt.Errorf("reward: %w", err)
		}
		fin.Reward = *req.Reward
	case s.task.Dataset == JudgedDataset && g.cfg.Judge != nil:
		if s.task.Answer == "" {
			return nil, errors.New("no reward given, and the open question has no reference answer for the judge")
		}
		if err := g.judgeSession(ctx, fin, sessionAnswer(req, calls)); err != nil {
			return nil, err
		}
	case g.cfg.Verify == nil:
		return nil, errors.New("no reward given, and the gateway has no verifier")
	case s.task.Answer == "":
		return nil, errors.New("no reward given, and the session's task has no reference answer")
	default:
		answer := sessionAnswer(req, calls)
		if g.cfg.Reward != nil {
			if err := g.computeReward(ctx, fin, answer); err != nil {
				return nil, err
			}
			break
		}
		v, err := g.cfg.Verify(s.task, answer)
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		fin.Correct = &v.Correct
		if v.Correct {
			fin.Reward = 1
		}
	}
	fin.Samples = Samples(calls)
	return fin, nil
}

// sessionAnswer is the answer a reward request names, else the last
// trained call's content.
func sessionAnswer(req RewardRequest, calls []Call) string {
	if req.Answer != nil {
		return *req.Answer
	}
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Trained && !calls[i].Failed {
			return calls[i].Output.Content
		}
	}
	return ""
}

// decodeBody reads a JSON body of at most maxAdminBody bytes into v,
// answering 400 or 413 when it cannot.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("body over %d bytes", maxAdminBody))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad_body", "read body: "+err.Error())
		return false
	case len(bytes.TrimSpace(body)) == 0:
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_body", "decode body: "+err.Error())
		return false
	}
	return true
}

// digest is the stored key of a session id: its SHA-256 in hex.
func digest(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// short is the first 16 digits of a key, for logs and answers.
func short(key string) string { return key[:min(16, len(key))] }

// writeError answers OpenAI's error object.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	edge.WriteJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

func refuse(w http.ResponseWriter, rf edge.Refusal) { writeError(w, rf.Status, rf.Code, rf.Message) }

// statusWriter keeps the status written, for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
