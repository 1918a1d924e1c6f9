package atropos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/delegatelab/delegate/internal/edge"
)

// Config configures a Server. Start from DefaultConfig: a zero field
// means zero, and Validate refuses a zero that makes no sense.
type Config struct {
	// Prefix names the JetStream stream (<Prefix>_GROUPS) and key-value
	// bucket (<Prefix>_STATE); one prefix per training run.
	Prefix string
	// Replicas is the stream and bucket replica count (1, 3 or 5 in a
	// cluster).
	Replicas int
	// Dedup is JetStream's duplicate window for Nats-Msg-Id; the server
	// also drops a group whose id it still stores. Above 0.
	Dedup time.Duration
	// KeepSteps is how many handed-out batches stay stored so that GET
	// /batch?step=N can send them again. At least 1.
	KeepSteps int
	// MaxStaleness, when positive, drops stale groups at batch time. A
	// group is stale when its group_overrides.policy_version is more than
	// this many steps behind the trainer's current step. 0: keep all.
	MaxStaleness int
	// MaxBody bounds a request body as sent, in bytes (413 beyond).
	// At least 1024.
	MaxBody int64
	// MaxDecompressed bounds a gzip request body once decompressed.
	// At least MaxBody.
	MaxDecompressed int64
	// InflateBudget bounds the decompressed bytes held at once by all
	// requests together. A body is charged as it is inflated; one that
	// would pass the budget gets 503 (retrying later may succeed).
	// At least 2 x MaxDecompressed: a buffer grows by copying,
	// so one body alone holds up to twice its bound while it grows.
	InflateBudget int64
	// MaxConcurrent bounds the requests served at once; more wait.
	// At least 1.
	MaxConcurrent int
	// Token, when set, is required as "Authorization: Bearer <Token>" on
	// every request. POST /reset_data is refused without one.
	Token string
	// Hosts lists the host names a request may name when there is no
	// Token. IP addresses and localhost need no entry. Package
	// internal/edge checks them.
	Hosts []string
	// ReadTimeout, WriteTimeout and IdleTimeout bound each connection of
	// the http.Server from HTTPServer. Above 0.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxWait bounds the wait a request may ask for; a longer one is
	// refused. GET /batch?wait=S and GET /status-env?wait=S are held until
	// there is something to answer (see Handler). Below WriteTimeout; 0
	// holds no request.
	MaxWait time.Duration
	// MaxHeld bounds the requests held waiting at once; they do not count
	// against MaxConcurrent while they wait. A request past the bound is
	// answered at once, as without a wait. 0 holds none.
	MaxHeld int
}

// DefaultConfig is the config of the shipped api command.
func DefaultConfig() Config {
	return Config{
		Prefix:          "DELEGATE_API",
		Replicas:        1,
		Dedup:           10 * time.Minute,
		KeepSteps:       16,
		MaxBody:         64 << 20,
		MaxDecompressed: 4 * (64 << 20),
		InflateBudget:   8 * (64 << 20),
		MaxConcurrent:   16,
		ReadTimeout:     2 * time.Minute,
		WriteTimeout:    5 * time.Minute,
		IdleTimeout:     2 * time.Minute,
		MaxWait:         time.Minute,
		MaxHeld:         64,
	}
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	switch {
	case !validPrefix(c.Prefix):
		return fmt.Errorf("api config: prefix %q: letters, digits and _ only", c.Prefix)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("api config: replicas %d: want 1 to 5", c.Replicas)
	case c.Dedup <= 0:
		return fmt.Errorf("api config: dedup window %v: want above 0", c.Dedup)
	case c.KeepSteps < 1:
		return fmt.Errorf("api config: keep steps %d: want at least 1", c.KeepSteps)
	case c.MaxStaleness < 0:
		return fmt.Errorf("api config: max staleness %d is negative", c.MaxStaleness)
	case c.MaxBody < 1024:
		return fmt.Errorf("api config: max body %d bytes: want at least 1024", c.MaxBody)
	case c.MaxDecompressed < c.MaxBody:
		return fmt.Errorf("api config: max decompressed %d bytes is below max body %d", c.MaxDecompressed, c.MaxBody)
	case c.InflateBudget < 2*c.MaxDecompressed:
		return fmt.Errorf("api config: inflate budget %d bytes is below twice max decompressed %d", c.InflateBudget, c.MaxDecompressed)
	case c.MaxConcurrent < 1:
		return fmt.Errorf("api config: max concurrent %d: want at least 1", c.MaxConcurrent)
	case c.ReadTimeout <= 0:
		return fmt.Errorf("api config: read timeout %v: want above 0", c.ReadTimeout)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("api config: write timeout %v: want above 0", c.WriteTimeout)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("api config: idle timeout %v: want above 0", c.IdleTimeout)
	case c.MaxWait < 0 || c.MaxWait >= c.WriteTimeout:
		return fmt.Errorf("api config: max wait %v: want at least 0 and below the write timeout %v", c.MaxWait, c.WriteTimeout)
	case c.MaxHeld < 0:
		return fmt.Errorf("api config: max held %d is negative", c.MaxHeld)
	}
	return nil
}

func validPrefix(p string) bool {
	if p == "" {
		return false
	}
	for _, r := range p {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

const stateVersion = 1

// persisted is the server state kept under the key "state".
type persisted struct {
	Version      int          `json:"version"`
	Registered   bool         `json:"registered"`
	Registration Registration `json:"registration"`
	Started      bool         `json:"started"`
	// Step is Atropos's current_step: starting_step plus the batches
	// assembled. Sent is the last step handed out (Sent <= Step).
	Step         int   `json:"step"`
	Sent         int   `json:"sent"`
	Duplicates   int64 `json:"duplicates"`
	StaleDropped int64 `json:"stale_dropped"`
}

// batchRecord is a batch as recorded under "batch.<step>".
type batchRecord struct {
	Version int          `json:"version"`
	Step    int          `json:"step"`
	Groups  []batchGroup `json:"groups"`
}

type batchGroup struct {
	Seq      uint64 `json:"seq"`
	ID       string `json:"id"`
	Released bool   `json:"released,omitempty"` // came from a buffer
	// Env and Size are the group's environment and sequences; Env -1 is
	// none. With them /status-env counts a batch assembled but not yet
	// fetched as still queued. A record written before they were kept
	// counts 0.
	Env  int `json:"env"`
	Size int `json:"size,omitempty"`
	// Unit is the environment's group_size when the group is larger
	// (oversized): it counts as whole packs of it.
	Unit int `json:"unit,omitempty"`
}

// Server is the trajectory API. Its handler may serve requests
// concurrently. It owns no connection: the caller closes the NATS
// connection (and embedded server) after the HTTP server has stopped.
type Server struct {
	cfg Config
	log *slog.Logger
	st  store
	sem chan struct{}
	// inflating charges the decompressed bytes requests hold
	// (Config.InflateBudget).
	inflating *budget

	handout sync.Mutex // serialises GET /batch

	mu      sync.Mutex
	state   persisted
	envs    []envRecord
	queue   []queued
	buffer  map[int][]queued
	ids     map[string]uint64 // ids of stored groups; 0 while being stored
	pending []batchRecord     // assembled, not yet sent: steps Sent+1..Step
	kept    []batchRecord     // sent, kept for re-fetching
	latest  uint64
	gen     int // bumped by every recover (reset): pushes begun before are void
	// trained is the last step the trainer has finished. Its GET /batch
	// asks tell: asking for step N says steps before N are done. It is not
	// stored: a restarted server learns it from the trainer's next ask.
	trained int
	// changed is closed and replaced when what a held request waits for
	// may have come. That is a group queued, the trainer's step or a reset.
	changed chan struct{}
	held    atomic.Int64 // requests holding now
	// stopping is closed when the HTTP server shuts down. Held requests
	// are then answered at once, so that they do not hold the shutdown.
	stopping chan struct{}
	stopOnce sync.Once
	metrics  *metrics
}

// Option sets up New's connections.
type Option func(*options)

type options struct {
	pub *nats.Conn
}

// WithPublishConn makes pushes publish their groups on pc rather than on
// New's connection. A connection has one outbound queue and one read loop
// each way, so a push's acknowledgement otherwise waits behind the
// megabytes of groups read back for GET /batch (and the server's other
// requests). pc reaches the same NATS server or cluster; the caller closes
// it, after the HTTP server has stopped, as it closes the other.
func WithPublishConn(pc *nats.Conn) Option {
	return func(o *options) { o.pub = pc }
}

// New opens the durable server on the JetStream of nc, rebuilding its
// state from what the stream and bucket hold.
func New(ctx context.Context, nc *nats.Conn, cfg Config, log *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{pub: nc}
	for _, opt := range opts {
		opt(&o)
	}
	if o.pub == nil {
		o.pub = nc
	}
	st, err := openJetStream(ctx, nc, o.pub, cfg.Prefix, cfg.Replicas, cfg.Dedup)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return newServer(ctx, st, cfg, log)
}

// NewInMemory is the server with Atropos's in-memory queue: nothing
// survives the process. It exists to measure the durable one against.
func NewInMemory(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newServer(ctx, newMemStore(), cfg, log)
}

func newServer(ctx context.Context, st store, cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, st: st, sem: make(chan struct{}, cfg.MaxConcurrent), changed: make(chan struct{}),
		stopping: make(chan struct{}), inflating: newBudget(cfg.InflateBudget)}
	m, err := newMetrics(s)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.metrics = m
	if err := s.recover(ctx); err != nil {
		return nil, fmt.Errorf("api: recover state: %w", err)
	}
	return s, nil
}

// recover rebuilds the queue, buffers and pending batches from the store.
func (s *Server) recover(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.state = persisted{Version: stateVersion}
	s.envs, s.queue, s.pending, s.kept, s.latest, s.trained = nil, nil, nil, nil, 0, 0
	s.notify()
	s.buffer, s.ids = map[int][]queued{}, map[string]uint64{}
	if err := s.recoverState(ctx); err != nil {
		return err
	}
	consumed, released, steps, err := s.recoverBatches(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(s.pending, func(a, b batchRecord) int { return a.Step - b.Step })
	slices.SortFunc(s.kept, func(a, b batchRecord) int { return a.Step - b.Step })
	err = s.st.scan(ctx, func(q queued, buffered bool) {
		s.ids[q.id] = q.seq
		// An oversized group is stored as queued; one an older server
		// buffered for good is queued now too.
		oversized := q.env >= 0 && q.env < len(s.envs) && q.size > s.envs[q.env].GroupSize
		switch {
		case consumed[q.seq]:
		case buffered && !released[q.seq] && q.env >= 0 && !oversized:
			s.buffer[q.env] = append(s.buffer[q.env], q)
		default:
			q.released = buffered && !oversized
			if oversized {
				q.unit = s.envs[q.env].GroupSize
			}
			s.queue = append(s.queue, q)
			s.latest = q.seq
		}
	})
	if err != nil {
		return err
	}
	// A crash may have come between storing a group and recording the
	// groups its arrival released: release them now.
	for env := range s.buffer {
		if env < len(s.envs) {
			for s.release(ctx, env) {
			}
		}
	}
	// Prune what a crash left unpruned, oldest first: pruning a step
	// drops every older one from s.kept, where prune finds its record.
	slices.Sort(steps)
	for _, step := range steps {
		if step <= s.state.Sent-s.cfg.KeepSteps {
			if err := s.prune(ctx, step, true); err != nil {
				return err
			}
		}
	}
	s.log.Info("api state recovered", "step", s.state.Step, "sent", s.state.Sent, "queued", len(s.queue), "pending_batches", len(s.pending))
	return nil
}

// recoverState reads the stored state and environments. The caller
// holds s.mu.
func (s *Server) recoverState(ctx context.Context) error {
	if b, err := s.st.get(ctx, "state"); err != nil {
		return err
	} else if b != nil {
		if err := json.Unmarshal(b, &s.state); err != nil {
			return fmt.Errorf("decode state: %w", err)
		}
		if s.state.Version != stateVersion {
			return fmt.Errorf("state has format version %d, this server reads %d: reset it (GET /reset_data) or use the matching delegate", s.state.Version, stateVersion)
		}
	}
	if b, err := s.st.get(ctx, "envs"); err != nil {
		return err
	} else if b != nil {
		if err := json.Unmarshal(b, &s.envs); err != nil {
			return fmt.Errorf("decode envs: %w", err)
		}
	}
	return nil
}

// recoverBatches reads the stored batches into s.pending and s.kept. It
// returns the groups they consumed, the groups recorded as released, and
// their steps. The caller holds s.mu.
func (s *Server) recoverBatches(ctx context.Context) (consumed, released map[uint64]bool, steps []int, err error) {
	keys, err := s.st.keys(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	consumed, released = map[uint64]bool{}, map[uint64]bool{}
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "batch."):
			rec, err := s.loadBatch(ctx, k)
			if err != nil {
				return nil, nil, nil, err
			}
			for _, g := range rec.Groups {
				consumed[g.Seq] = true
			}
			steps = append(steps, rec.Step)
			s.state.Step = max(s.state.Step, rec.Step)
			if rec.Step > s.state.Sent {
				s.pending = append(s.pending, rec)
			} else {
				s.kept = append(s.kept, rec)
			}
		case strings.HasPrefix(k, "released."):
			seq, err := strconv.ParseUint(strings.TrimPrefix(k, "released."), 10, 64)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("key %s: %w", k, err)
			}
			released[seq] = true
		}
	}
	return consumed, released, steps, nil
}

func (s *Server) loadBatch(ctx context.Context, key string) (batchRecord, error) {
	var rec batchRecord
	b, err := s.st.get(ctx, key)
	if err != nil {
		return rec, err
	}
	if b == nil {
		return rec, errGone
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("decode %s: %w", key, err)
	}
	if rec.Version != stateVersion {
		return rec, fmt.Errorf("%s has format version %d, this server reads %d", key, rec.Version, stateVersion)
	}
	return rec, nil
}

func batchKey(step int) string { return "batch." + strconv.Itoa(step) }

// saveState persists s.state; the caller holds s.mu.
func (s *Server) saveState(ctx context.Context) error {
	b, err := json.Marshal(s.state)
	if err != nil {
		return err
	}
	return s.st.put(ctx, "state", b)
}

// putUnlocked writes key to the store without holding s.mu.
// Pushes and status calls go on meanwhile. The caller holds s.mu, and
// holds it again on return. Only a caller holding s.handout may use it,
// and only between steps where nothing it read under s.mu can change but
// by appending to s.queue (pushes) or counting (duplicates).
func (s *Server) putUnlocked(ctx context.Context, key string, val []byte) error {
	s.mu.Unlock()
	defer s.mu.Lock()
	return s.st.put(ctx, key, val)
}

// saveStateUnlocked persists st by putUnlocked. st is a copy of s.state
// with the change to make. The caller sets s.state once it succeeded.
func (s *Server) saveStateUnlocked(ctx context.Context, st persisted) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return s.putUnlocked(ctx, "state", b)
}

// saveEnvs persists s.envs; the caller holds s.mu.
func (s *Server) saveEnvs(ctx context.Context) error {
	b, err := json.Marshal(s.envs)
	if err != nil {
		return err
	}
	return s.st.put(ctx, "envs", b)
}

// release queues buffered groups of env whose sizes sum to its group size.
// It records the release and reports whether it released any. The caller
// holds s.mu.
func (s *Server) release(ctx context.Context, env int) bool {
	buf := s.buffer[env]
	sizes := make([]int, len(buf))
	for i, q := range buf {
		sizes[i] = q.size
	}
	idx := sumToTarget(sizes, s.envs[env].GroupSize)
	if idx == nil {
		return false
	}
	take := map[int]bool{}
	for _, i := range idx {
		take[i] = true
		if err := s.st.put(ctx, "released."+strconv.FormatUint(buf[i].seq, 10), []byte("1")); err != nil {
			// The group stays buffered in the store's view; a restart
			// releases it again.
			s.log.Warn("record release", "seq", buf[i].seq, "err", err)
		}
	}
	var keep []queued
	for i, q := range buf {
		if take[i] {
			q.released = true
			s.queue = append(s.queue, q)
			s.latest = q.seq
			s.notify()
		} else {
			keep = append(keep, q)
		}
	}
	s.buffer[env] = keep
	return true
}

// prune removes a handed-out batch kept for re-fetching. Everything
// stored below the low-water mark (the oldest group still queued,
// buffered or in a batch kept) goes in one purge, which drops whole
// blocks of the stream without reading them; the batch's groups above the
// mark are deleted one by one. The batch's record is the one s.kept
// holds (every recorded step up to Sent is there), so nothing is read
// back from the store. With locked, the caller holds s.mu.
func (s *Server) prune(ctx context.Context, step int, locked bool) error {
	if !locked {
		s.mu.Lock()
	}
	i := slices.IndexFunc(s.kept, func(b batchRecord) bool { return b.Step == step })
	if i < 0 { // pruned already, or reset meanwhile
		if !locked {
			s.mu.Unlock()
		}
		return nil
	}
	rec := s.kept[i]
	s.kept = slices.DeleteFunc(s.kept, func(b batchRecord) bool { return b.Step <= step })
	for _, g := range rec.Groups {
		s.forget(g.ID, g.Seq)
	}
	low := s.lowWater()
	if !locked {
		s.mu.Unlock()
	}
	if low > 0 {
		if err := s.st.removeBelow(ctx, low); err != nil {
			return err
		}
	}
	for _, g := range rec.Groups {
		if low == 0 || g.Seq >= low {
			if err := s.st.remove(ctx, g.Seq); err != nil {
				return err
			}
		}
		if g.Released {
			if err := s.st.del(ctx, "released."+strconv.FormatUint(g.Seq, 10)); err != nil {
				return err
			}
		}
	}
	return s.st.del(ctx, batchKey(step))
}

// lowWater is the smallest sequence of a group still needed, 0 if none;
// the caller holds s.mu. A group being stored gets a larger sequence than
// every group already stored.
func (s *Server) lowWater() uint64 {
	var low uint64
	see := func(seq uint64) {
		if low == 0 || seq < low {
			low = seq
		}
	}
	for _, q := range s.queue {
		see(q.seq)
	}
	for _, b := range s.buffer {
		for _, q := range b {
			see(q.seq)
		}
	}
	for _, recs := range [][]batchRecord{s.pending, s.kept} {
		for _, r := range recs {
			for _, g := range r.Groups {
				see(g.Seq)
			}
		}
	}
	return low
}

// forget drops a removed group from s.ids; the caller holds s.mu.
func (s *Server) forget(id string, seq uint64) {
	if s.ids[id] == seq {
		delete(s.ids, id)
	}
}

// Stats are the server's counters.
type Stats struct {
	Step, Sent, Queued, Buffered int
	Duplicates, StaleDropped     int64
	Held                         int   // requests waiting (wait=S) now
	Inflating                    int64 // decompressed body bytes held now (Config.InflateBudget)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Step: s.state.Step, Sent: s.state.Sent, Queued: len(s.queue), Duplicates: s.state.Duplicates, StaleDropped: s.state.StaleDropped,
		Held: int(s.held.Load()), Inflating: s.inflating.held.Load()}
	for _, b := range s.buffer {
		for _, q := range b {
			st.Buffered += q.size
		}
	}
	return st
}

// HTTPServer returns an http.Server for h with the config's timeouts.
func (s *Server) HTTPServer(h http.Handler) *http.Server {
	hs := edge.Server(h, edge.Timeouts{ReadHeader: 10 * time.Second, Read: s.cfg.ReadTimeout, Write: s.cfg.WriteTimeout, Idle: s.cfg.IdleTimeout},
		s.log, slog.LevelDebug)
	// Shutdown waits for the requests being served: held ones answer now.
	hs.RegisterOnShutdown(func() { s.stopOnce.Do(func() { close(s.stopping) }) })
	return hs
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	if port == 0 {
		port = -1 // nats-server: any free port
	}
	return host, port, nil
}
