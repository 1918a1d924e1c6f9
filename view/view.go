// Package view is delegate view: a web view over run directories. It
// reads the trace files of run --json, bench's output directories,
// process's rollouts, train's metrics and a gateway's sessions, polls
// running servers' /health and /metrics, and serves pages and JSON
// behind the project's HTTP edge. Large JSONL files are indexed by the
// offset of each line; a record is read again from disk when asked for,
// so memory grows with a few numbers per record, not with the records.
package view

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

//go:embed static
var static embed.FS

// Kinds of run the view reads.
const (
	KindTrace    = "trace"    // a file of run --json
	KindBench    = "bench"    // a results file of bench (or train's eval.jsonl)
	KindRollouts = "rollouts" // process's artifacts.jsonl and groups.jsonl
	KindTrain    = "train"    // an rl metrics.jsonl, one line per step
	KindGateway  = "gateway"  // a gateway's directory: gateway.db and groups.jsonl
)

// Paging bounds of every list endpoint.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Poll bounds: how often a live stream looks at its file.
const (
	MinPoll = 10 * time.Millisecond
	MaxPoll = 10 * time.Second
)

// requestBudget bounds the indexing one request does.
// A page of a large file then answers at once with what is read so far.
// Server.catchUp reads the rest in the background.
const requestBudget = 50 * time.Millisecond

// maxTraceFile bounds a trace file read whole.
const maxTraceFile = 64 << 20

// Config says what the view serves and to whom. Start from DefaultConfig.
type Config struct {
	// Paths are trace files and directories. A directory is searched two
	// levels down for the files of bench, process and train, and for
	// trace files (*.json).
	Paths []string
	// Token, when set, is the bearer token every request must carry. A
	// browser gives it once as ?token=, and then holds it in a cookie.
	Token string
	// Hosts are the extra Host names allowed without a token (edge.Config).
	Hosts []string
	// Poll is how often a live stream of metrics looks for new lines.
	// It must lie within MinPoll and MaxPoll.
	Poll time.Duration
	// Servers are running servers polled every Poll for /health and
	// /metrics: the live page.
	Servers []LiveServer
	Log     *slog.Logger // nil: none
}

// DefaultConfig is the config of the shipped view command, less what it
// serves.
func DefaultConfig() Config {
	return Config{Poll: time.Second}
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	if len(c.Paths) == 0 && len(c.Servers) == 0 {
		return errors.New("view: no directory, trace file or server given")
	}
	if err := validServers(c.Servers); err != nil {
		return err
	}
	if c.Poll < MinPoll || c.Poll > MaxPoll {
		return fmt.Errorf("view: poll %v out of bounds [%v, %v]", c.Poll, MinPoll, MaxPoll)
	}
	return nil
}

// Run is one thing the view shows.
// It is a trace file, a bench results file, a rollout directory or a training run.
type Run struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"`
	Name string `json:"name"` // the path as given, joined with what was found below it
	Path string `json:"-"`    // the file read

	bench    *benchRun
	rollouts *rolloutRun
	train    *trainRun
	gateway  *gatewayRun
}

// Server serves the view. Its methods may be called concurrently. Close
// ends the live streams, so that http.Server.Shutdown need not wait for
// them.
type Server struct {
	cfg    Config
	runs   []*Run
	ctx    context.Context
	cancel context.CancelFunc
	// indexed is closed once catchUp has reached the end of every file
	// (or stopped with Close).
	indexed chan struct{}
	live    *live
}

// New finds the runs under cfg.Paths. Nothing is read whole yet: each
// file is indexed on the first request that needs it.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg}
	for _, p := range cfg.Paths {
		found, err := discover(p)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("view: %s holds no trace, bench results, rollouts, training metrics or gateway sessions", p)
		}
		s.runs = append(s.runs, found...)
	}
	for i, r := range s.runs {
		r.ID = i
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.indexed = make(chan struct{})
	go s.catchUp()
	s.live = newLive(cfg.Servers, cfg.Poll)
	if len(cfg.Servers) > 0 {
		go s.live.run(s.ctx, cfg.Servers, cfg.Poll)
	}
	return s, nil
}

// refresher is a run whose files are indexed as they grow.
type refresher interface {
	// refresh indexes for a bounded time; more says it stopped early.
	refresh() (more bool, err error)
}

// catchUp indexes every run's files to their end, one run after another.
// The first pages of a large directory then find them read.
// Requests index what is written later. It stops with Close.
func (s *Server) catchUp() {
	defer close(s.indexed)
	for _, r := range s.runs {
		var ix refresher
		switch r.Kind {
		case KindBench:
			ix = r.bench
		case KindRollouts:
			ix = r.rollouts
		case KindTrain:
			ix = r.train
		case KindGateway:
			ix = r.gateway
		default:
			continue
		}
		for s.ctx.Err() == nil {
			more, err := ix.refresh()
			if err != nil {
				// The pages show the error when they ask for the run.
				s.cfg.Log.Warn("view: index", "run", r.Name, "err", err)
				break
			}
			if !more {
				break
			}
		}
	}
}

// Runs lists what the server found, in the order of Config.Paths.
func (s *Server) Runs() []*Run { return s.runs }

// Close ends the live streams and the polling of servers.
func (s *Server) Close() error {
	s.cancel()
	return nil
}

// discover lists the runs at path: a trace file, or what a directory
// and its subdirectories, two levels down, hold.
func discover(path string) ([]*Run, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	if !st.IsDir() {
		if _, err := readTraceFile(path); err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		return []*Run{{Kind: KindTrace, Name: path, Path: path}}, nil
	}
	var runs []*Run
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("view: %w", err)
		}
		names := map[string]bool{}
		for _, e := range entries {
			names[e.Name()] = !e.IsDir()
		}
		add := func(kind, file string) {
			p := filepath.Join(dir, file)
			runs = append(runs, &Run{Kind: kind, Name: p, Path: p})
		}
		if names[rl.MetricsFile] {
			add(KindTrain, rl.MetricsFile)
		}
		for _, f := range []string{"results.jsonl", "eval.jsonl"} {
			if names[f] {
				add(KindBench, f)
			}
		}
		if names[rollout.ArtifactsFile] {
			add(KindRollouts, rollout.ArtifactsFile)
		}
		if names[gateway.StoreFile] {
			add(KindGateway, gateway.StoreFile)
		}
		for _, e := range entries {
			if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if _, err := readTraceFile(p); err == nil {
				add(KindTrace, e.Name())
			}
		}
		if depth == 0 {
			return nil
		}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				if err := walk(filepath.Join(dir, e.Name()), depth-1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(path, 2); err != nil {
		return nil, err
	}
	for _, r := range runs {
		switch r.Kind {
		case KindBench:
			r.bench = newBenchRun(r.Path)
		case KindRollouts:
			r.rollouts = newRolloutRun(filepath.Dir(r.Path))
		case KindTrain:
			r.train = &trainRun{idx: lines{path: r.Path}}
		case KindGateway:
			r.gateway = newGatewayRun(filepath.Dir(r.Path))
		}
	}
	return runs, nil
}

// tokenCookie holds the token in a browser once given as ?token=.
const tokenCookie = "delegate_view_token"

// Handler serves the pages and the JSON API behind the edge. With a
// token, a request without an Authorization header may carry it as
// ?token= (then a cookie is set) or in that cookie.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "static/index.html")
	})
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /api/runs", s.handleRuns)
	mux.HandleFunc("GET /api/trace", s.handleTrace)
	mux.HandleFunc("GET /api/bench", s.handleBench)
	mux.HandleFunc("GET /api/bench/items", s.handleBenchItems)
	mux.HandleFunc("GET /api/bench/item", s.handleBenchItem)
	mux.HandleFunc("GET /api/rollouts", s.handleRollouts)
	mux.HandleFunc("GET /api/rollouts/list", s.handleRolloutList)
	mux.HandleFunc("GET /api/rollouts/item", s.handleRolloutItem)
	mux.HandleFunc("GET /api/train", s.handleTrain)
	mux.HandleFunc("GET /api/train/events", s.handleTrainEvents)
	mux.HandleFunc("GET /api/gateway", s.handleGateway)
	mux.HandleFunc("GET /api/gateway/session", s.handleGatewaySession)
	mux.HandleFunc("GET /api/live", s.handleLive)
	mux.HandleFunc("GET /api/live/events", s.handleLiveEvents)
	checked := edge.Config{Token: s.cfg.Token, Hosts: s.cfg.Hosts, Realm: "delegate view"}.Handler(mux)
	if s.cfg.Token == "" {
		return checked
	}
	return tokenFromBrowser(s.cfg.Token, checked)
}

// tokenFromBrowser lets a browser give the token once as ?token=.
// A browser cannot send a header when it opens a page.
// A right token is kept in an HttpOnly, same-site cookie,
// and the page is loaded again without it in the address.
func tokenFromBrowser(token string, h http.Handler) http.Handler {
	hash := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if t := r.URL.Query().Get("token"); t != "" {
				r.Header.Set("Authorization", "Bearer "+t)
				if edge.Authorized(r, hash) && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") {
					http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
					q := r.URL.Query()
					q.Del("token")
					u := *r.URL
					u.RawQuery = q.Encode()
					http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
					return
				}
			} else if c, err := r.Cookie(tokenCookie); err == nil {
				r.Header.Set("Authorization", "Bearer "+c.Value)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// apiError is the shape of every error of the API.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// reply writes v, or err in the edge's error shape.
func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		status := http.StatusInternalServerError
		var ae *apiError
		if errors.As(err, &ae) {
			status = ae.Status
		}
		edge.WriteJSON(w, status, map[string]any{"error": map[string]string{"message": err.Error()}})
		return
	}
	edge.WriteJSON(w, http.StatusOK, v)
}

// run finds the run of the request's ?run= of kind (any kind when "").
func (s *Server) run(r *http.Request, kind string) (*Run, error) {
	return s.runByID(r.URL.Query().Get("run"), kind)
}

func (s *Server) runByID(v, kind string) (*Run, error) {
	id, err := strconv.Atoi(v)
	if err != nil || id < 0 || id >= len(s.runs) {
		return nil, notFound("no run %q", v)
	}
	run := s.runs[id]
	if kind != "" && run.Kind != kind {
		return nil, badRequest("run %d is a %s, not a %s", id, run.Kind, kind)
	}
	return run, nil
}

// page reads ?offset= and ?limit=, within bounds.
func page(r *http.Request) (offset, limit int, err error) {
	q := r.URL.Query()
	offset, limit = 0, DefaultLimit
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, badRequest("offset %q: want a whole number ≥ 0", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxLimit {
			return 0, 0, badRequest("limit %q: want 1 to %d", v, MaxLimit)
		}
	}
	return offset, limit, nil
}

// index reads ?rec=, a line number from 0.
func index(r *http.Request) (int, error) {
	v := r.URL.Query().Get("rec")
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return 0, badRequest("rec %q: want a line number from 0", v)
	}
	return i, nil
}

// runSummary is a run in /api/runs.
type runSummary struct {
	*Run
	Error string `json:"error,omitempty"`
	// Count is the records of the run so far.
	// They are calls of a trace, results of a bench, rollouts or steps of training.
	Count int `json:"count"`
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	out := make([]runSummary, len(s.runs))
	for i, run := range s.runs {
		out[i].Run = run
		var err error
		switch run.Kind {
		case KindTrace:
			var t *delegate.Trace
			if t, err = readTraceFile(run.Path); err == nil {
				out[i].Count = len(t.Calls())
			}
		case KindBench:
			out[i].Count, err = run.bench.count()
		case KindRollouts:
			out[i].Count, err = run.rollouts.count()
		case KindTrain:
			out[i].Count, err = run.train.count()
		case KindGateway:
			out[i].Count, err = run.gateway.count(r.Context())
		}
		if err != nil {
			out[i].Error = err.Error()
		}
	}
	reply(w, map[string]any{"runs": out}, nil)
}

// page of a list: its items, and how many there are in all.
type listPage[T any] struct {
	Total    int      `json:"total"`
	Offset   int      `json:"offset"`
	Limit    int      `json:"limit"`
	Items    []T      `json:"items"`
	Progress Progress `json:"progress"`
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
