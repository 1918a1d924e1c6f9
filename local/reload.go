package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
)

// Reloading is a local model whose weights follow a checkpoint that a trainer rewrites.
// The checkpoint is an nn checkpoint directory, or a trainer's directory
// holding policy/, such as delegate train's OutDir/checkpoint. The trainer
// writes it whole and swaps it in, so a reader never sees half of one.
// Reloading starts on the newest checkpoint there, else on the weights it
// is given as version 0, the trainer's starting point. So a restarted
// server never serves an older version than it served before. Reload loads
// the checkpoint when it exists and its version differs, and serves new
// requests from it. Requests already in flight finish on the weights they
// started with, whose engine is stopped once they are done. Every response
// carries the version that produced it: the checkpoint's "rl_step", or 0
// without one. It is safe for concurrent use.
//
// A reload that finds no call in flight copies the new weights into the
// model it serves. Its engine takes them before its next forward pass. No
// new model starts, so step-by-step checkpoints allocate no engine, KV
// cache or packed copy of the weights.
type Reloading struct {
	dir string
	cfg Config
	log *slog.Logger

	calls *atomic.Uint64 // every version's request count (Model.calls)

	reload sync.Mutex // one Reload at a time

	mu  sync.RWMutex
	cur *generation
	// changed is closed, and replaced, when cur or its version changes.
	changed chan struct{}
}

// generation is one loaded version and the calls using it.
type generation struct {
	m *Model
	// version is written only under Reloading.mu with no call in flight.
	version int
	calls   sync.WaitGroup
	active  atomic.Int64 // calls in flight, as calls counts them
	// owned: m's weights were loaded by Reloading, which may overwrite
	// them (not the caller's, given to NewReloading).
	owned bool
}

// NewReloading serves the checkpoint at dir, or p as version 0 while dir
// holds none yet. A checkpoint there that cannot be read is an error:
// serving p instead would answer with an older version than the trainer's.
// log may be nil.
func NewReloading(p *nn.Params, dir string, cfg Config, log *slog.Logger) (*Reloading, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloading{dir: dir, cfg: cfg, log: log, changed: make(chan struct{})}
	g := &generation{}
	if _, ok := nn.CurrentDir(dir); ok {
		lp, v, err := r.load()
		if err != nil {
			return nil, fmt.Errorf("load the newest checkpoint before serving: %w", err)
		}
		p, g.version, g.owned = lp, v, true
	}
	m, err := New(p, cfg)
	if err != nil {
		return nil, err
	}
	g.m, r.calls, r.cur = m, m.calls, g
	if g.owned {
		log.Info("policy loaded", "model", cfg.Name, "version", g.version, "dir", dir)
	}
	return r, nil
}

// Name returns the configured name.
func (r *Reloading) Name() string { return r.cfg.Name }

// Version returns the version new requests are served by.
func (r *Reloading) Version() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cur.version
}

// Chat serves req with the current weights and says which.
func (r *Reloading) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	g := r.acquire()
	defer g.done()
	return g.versioned(g.m.Chat(ctx, req))
}

// ChatStream is Model.ChatStream on the current weights, saying which.
func (r *Reloading) ChatStream(ctx context.Context, req *delegate.Request, emit func(choice int, text string)) (*delegate.Response, error) {
	g := r.acquire()
	defer g.done()
	return g.versioned(g.m.ChatStream(ctx, req, emit))
}

// acquire returns the current generation with one more call counted; the
// caller calls g.done when its call is over.
func (r *Reloading) acquire() *generation {
	r.mu.RLock()
	defer r.mu.RUnlock()
	r.cur.calls.Add(1)
	r.cur.active.Add(1)
	return r.cur
}

// done ends a call acquire counted.
func (g *generation) done() {
	g.active.Add(-1)
	g.calls.Done()
}

// versioned marks a response with the generation's version.
func (g *generation) versioned(resp *delegate.Response, err error) (*delegate.Response, error) {
	if resp != nil {
		v := g.version
		resp.PolicyVersion = &v
	}
	return resp, err
}

// Reload loads and swaps in the checkpoint if its version differs from the one served.
// It reports whether it did. No checkpoint yet changes nothing. One that
// cannot be read, bad or being replaced right now, is an error and changes
// nothing.
func (r *Reloading) Reload() (bool, error) {
	r.reload.Lock()
	defer r.reload.Unlock()
	if _, ok := nn.CurrentDir(r.dir); !ok {
		return false, nil
	}
	version, err := r.version()
	if err != nil {
		return false, err
	}
	if version == r.Version() {
		return false, nil
	}
	p, v, err := r.load()
	if err != nil {
		return false, err
	}
	if r.copyIn(p, v) {
		return true, nil
	}
	if err := r.swap(p, v); err != nil {
		return false, err
	}
	return true, nil
}

// Set serves p's values as version from the next call on, as Reload
// serves a checkpoint, but from memory. It copies them: the caller, a
// trainer in the same process, may change p once Set returns, and must
// not while it runs. Calls in flight finish on the weights they started
// with.
func (r *Reloading) Set(p *nn.Params, version int) error {
	r.reload.Lock()
	defer r.reload.Unlock()
	if r.copyIn(p, version) {
		return nil
	}
	c, err := nn.NewParams(p.Config, slices.Clone(p.Data))
	if err != nil {
		return fmt.Errorf("local model %s: %w", r.cfg.Name, err)
	}
	return r.swap(c, version)
}

// copyIn copies p's values into the served weights when no call is in
// flight and the weights are the Reloading's own. It reports whether it
// did. The caller holds r.reload.
func (r *Reloading) copyIn(p *nn.Params, v int) bool {
	r.mu.Lock()
	old := r.cur
	if !old.owned || old.active.Load() != 0 || old.m.params.Config != p.Config {
		r.mu.Unlock()
		return false
	}
	// No call in flight, and none can start while r.mu is held: the
	// engine takes the new values before its next forward pass.
	copy(old.m.params.Data, p.Data)
	from := old.version
	old.version = v
	r.notify()
	r.mu.Unlock()
	r.log.Info("policy reloaded in place", "model", r.cfg.Name, "from", from, "to", v)
	return true
}

// swap serves p, which the Reloading then owns, as version v on a new
// engine. The old one is closed once its calls are done. The caller
// holds r.reload.
func (r *Reloading) swap(p *nn.Params, v int) error {
	m, err := New(p, r.cfg)
	if err != nil {
		return err
	}
	// The model's life goes on across versions: a request without a seed
	// gets the next one, not again the first version's first seeds.
	m.calls = r.calls
	g := &generation{m: m, version: v, owned: true}
	r.mu.Lock()
	old := r.cur
	r.cur = g
	r.notify()
	r.mu.Unlock()
	r.log.Info("policy reloaded", "model", r.cfg.Name, "from", old.version, "to", g.version)
	go func() {
		old.calls.Wait() // no call can start on old now: it left r.cur under the lock
		if err := old.m.Close(); err != nil {
			r.log.Warn("closing the replaced weights", "model", r.cfg.Name, "version", old.version, "err", err)
		}
	}()
	return nil
}

// Watch reloads every interval until ctx is done, logging failures at a limited rate.
// A checkpoint being written is skipped until the next look.
func (r *Reloading) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.Reload(); err != nil && time.Since(last) > time.Minute {
			last = time.Now()
			r.log.Warn("policy reload failed; serving the previous weights", "model", r.cfg.Name, "err", err)
		}
	}
}

// Close stops the current weights' engine; calls in flight fail.
func (r *Reloading) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.m.Close()
}

// weightsDir is the nn checkpoint inside dir: dir itself, or its policy/
// (with nn.CurrentDir's view of a directory being replaced).
func (r *Reloading) weightsDir() (string, error) {
	d, ok := nn.CurrentDir(r.dir)
	if !ok {
		return "", fmt.Errorf("local model %s: no checkpoint at %s", r.cfg.Name, r.dir)
	}
	if _, err := os.Stat(filepath.Join(d, "policy", "config.json")); err == nil {
		return filepath.Join(d, "policy"), nil
	}
	return d, nil
}

// version reads the checkpoint's version without loading its weights.
func (r *Reloading) version() (int, error) {
	d, err := r.weightsDir()
	if err != nil {
		return 0, err
	}
	meta, err := nn.ReadMeta(d)
	if err != nil {
		return 0, fmt.Errorf("local model %s: %w", r.cfg.Name, err)
	}
	return metaVersion(meta)
}

// load reads the checkpoint's weights and version.
func (r *Reloading) load() (*nn.Params, int, error) {
	d, err := r.weightsDir()
	if err != nil {
		return nil, 0, err
	}
	p, meta, err := nn.Load(d)
	if err != nil {
		return nil, 0, fmt.Errorf("local model %s: %w", r.cfg.Name, err)
	}
	v, err := metaVersion(meta)
	if err != nil {
		return nil, 0, fmt.Errorf("local model %s: checkpoint %s: %w", r.cfg.Name, d, err)
	}
	return p, v, nil
}

// notify wakes WaitVersion's waiters. The caller holds r.mu.
func (r *Reloading) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// WaitVersion returns the version new requests are served by, once it is v or later.
// It looks at the checkpoint at once, so a trainer that just wrote step v
// need not wait for Watch's next look. When ctx ends first, it returns the
// version then and ctx's error.
func (r *Reloading) WaitVersion(ctx context.Context, v int) (int, error) {
	looked := false
	for {
		r.mu.RLock()
		cur, changed := r.cur.version, r.changed
		r.mu.RUnlock()
		if cur >= v {
			return cur, nil
		}
		if !looked {
			looked = true
			if _, err := r.Reload(); err == nil {
				continue
			}
			// Being written, or bad: Watch looks again.
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return cur, ctx.Err()
		}
	}
}

// metaVersion is a checkpoint's "rl_step", 0 when it has none.
func metaVersion(meta map[string]string) (int, error) {
	s, ok := meta["rl_step"]
	if !ok {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("rl_step %q is not a step", s)
	}
	return v, nil
}
