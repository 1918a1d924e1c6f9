package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// RecordFeed hands a trainer group records in the same process, oldest
// first. The gateway's Feed is one.
type RecordFeed interface {
	// Next removes and returns the oldest record, waiting for one.
	Next(ctx context.Context) (*rollout.GroupRecord, error)
	// SetVersion says which trainer step the served policy now holds:
	// the version of the sessions that start from then on.
	SetVersion(v int)
}

// GatewayConfig is what a GatewayRun needs besides Config.
type GatewayConfig struct {
	// Model names the served policy and sets its batch and tools.
	Model local.Config
	// Feed gives the group records of the sessions, the policy's role only.
	Feed RecordFeed
	// Recovered are the records the feed gave a run before this one, in
	// order (gateway.ReadSent). Those no step up to the checkpoint took
	// are trained first.
	Recovered []*rollout.GroupRecord
	// MaxStaleness, when positive, drops a group sampled more than this
	// many steps before the step that takes it, as delegate api's
	// --max-staleness does. 0 keeps all.
	MaxStaleness int
	// Log may be nil.
	Log *slog.Logger
}

// GatewaySteps is the log, in OutDir, of the group records each step of a
// GatewayRun took: one GatewayStep per line.
const GatewaySteps = "gateway-steps.jsonl"

// GatewayStepVersion is the format version of a GatewayStep.
const GatewayStepVersion = 1

// GatewayStep is the group records one step of a GatewayRun took, by id.
// A step redone after a crash is logged again; the last line of a step
// holds.
type GatewayStep struct {
	Version int `json:"version"`
	Step    int `json:"step"`
	// Groups are the records the step trained on, in order, quarantined
	// ones included.
	Groups []string `json:"groups"`
	// Stale are the records dropped as older than MaxStaleness.
	Stale []string `json:"stale,omitempty"`
}

// GatewayRun trains the delegator on the sessions of a gateway in the
// same process, and serves the policy it trains. Model is the policy for
// the gateway to serve under the trained role. Before each step it serves
// the trainer's current weights from memory, as version step-1: sessions
// and calls that start after it are sampled by the last update, with no
// checkpoint between. A call already running finishes on the weights it
// started with; a session that spans an update has calls of both
// versions, and its group counts as sampled by the older.
//
// Each step takes Config.RL.ItemsPerStep records from the feed, oldest
// first, and converts each as train --api converts a batch's group
// (atropos.RecordGroup): the record's per-role samples and advantages, the
// same rl.Group. A group sampled before the last update is trained
// off-policy with truncated importance weights; one staler than
// MaxStaleness is dropped. A group the policy cannot train on is
// quarantined (QuarantineFile) and counts as one of the step's.
// Checkpoints, metrics and resuming are train --api's. Which records a
// step took goes to GatewaySteps before it trains, so that a resumed run
// trains the records no finished step took, and none twice.
//
// Run is called once. Model is safe for concurrent use with it.
type GatewayRun struct {
	cfg     Config
	gc      GatewayConfig
	log     *slog.Logger
	policy  *nn.Params
	served  *local.Reloading
	trainer *rl.Trainer
	steps   *os.File
	// start is the step of the checkpoint the run resumes: the served
	// version at start.
	start int
	// logged is the last GatewayStep of each step up to start.
	logged map[int]GatewayStep
	// pool is the recovered records no step up to start took, taken
	// before the feed's.
	pool    []*rollout.GroupRecord
	started bool
}

// NewGatewayRun loads the starting delegator (cfg.Delegator) and serves
// it, or the newest checkpoint in cfg.OutDir, as the policy. It reads the
// step log to know which recovered records are left. It trains nothing
// until Run.
func NewGatewayRun(cfg Config, gc GatewayConfig, progress chan<- rl.Progress) (*GatewayRun, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("train --gateway: %w", err)
	}
	switch {
	case cfg.Mode != ModeRoute || cfg.Train != TrainDelegator:
		return nil, fmt.Errorf("train --gateway: trains the delegator under route, not %s's %s", cfg.Mode, cfg.Train)
	case gc.Feed == nil:
		return nil, errors.New("train --gateway: no feed of group records")
	case gc.MaxStaleness < 0:
		return nil, fmt.Errorf("train --gateway: max staleness %d is negative", gc.MaxStaleness)
	}
	if gc.Log == nil {
		gc.Log = slog.New(slog.DiscardHandler)
	}
	policy, err := loadCheckpoint(cfg.StartModel(), cfg.Delegator)
	if err != nil {
		return nil, fmt.Errorf("train --gateway: %w", err)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("train --gateway: %w", err)
	}
	start, err := cloneParams(policy)
	if err != nil {
		return nil, fmt.Errorf("train --gateway: %w", err)
	}
	served, err := local.NewReloading(start, rl.CheckpointDir(cfg.OutDir), gc.Model, gc.Log)
	if err != nil {
		return nil, fmt.Errorf("train --gateway: serve the policy: %w", err)
	}
	run := &GatewayRun{cfg: cfg, gc: gc, log: gc.Log, policy: policy, served: served, start: served.Version()}
	if err := run.open(progress); err != nil {
		// The open error is what matters.
		_ = served.Close()
		return nil, fmt.Errorf("train --gateway: %w", err)
	}
	return run, nil
}

// open makes the trainer, reads the step log and leaves in the pool the
// recovered records no step up to the checkpoint took.
func (g *GatewayRun) open(progress chan<- rl.Progress) error {
	r := g.cfg.RL
	r.PolicyRole, r.OutDir, r.CheckpointEvery = RoleDelegator, g.cfg.OutDir, 1
	t, err := rl.New(r, g.policy, gatewaySource{g}, progress)
	if err != nil {
		return err
	}
	g.trainer = t
	path := filepath.Join(g.cfg.OutDir, GatewaySteps)
	logged, f, err := openStepLog(path)
	if err != nil {
		return err
	}
	g.steps, g.logged = f, map[int]GatewayStep{}
	taken := map[string]bool{}
	for _, e := range logged {
		if e.Step <= g.start {
			g.logged[e.Step] = e // a later line of a step replaces an earlier one
		}
	}
	for _, e := range g.logged {
		for _, id := range slices.Concat(e.Groups, e.Stale) {
			taken[id] = true
		}
	}
	for _, rec := range g.gc.Recovered {
		if !taken[rec.ID] {
			g.pool = append(g.pool, rec)
		}
	}
	if n := len(g.gc.Recovered) - len(g.pool); n > 0 || len(g.pool) > 0 {
		g.log.Info("gateway groups of the last run", "trained", n, "to_train", len(g.pool), "checkpoint_step", g.start)
	}
	return nil
}

// Model is the policy the gateway serves for the trained role. Its
// version is the trainer's steps done.
func (g *GatewayRun) Model() *local.Reloading { return g.served }

// Start is the step of the checkpoint the run resumed from; 0 for a new
// run.
func (g *GatewayRun) Start() int { return g.start }

// Pending is the recovered records still to train.
func (g *GatewayRun) Pending() int { return len(g.pool) }

// Run trains until Config.RL.Steps, checkpointing every step. Cancelled,
// it checkpoints the last finished step and returns an error wrapping
// the cause.
func (g *GatewayRun) Run(ctx context.Context) error {
	if err := g.trainer.Run(ctx); err != nil {
		return fmt.Errorf("train --gateway: %w", err)
	}
	return nil
}

// StepsDone is the trainer's steps done, a resumed run's included.
func (g *GatewayRun) StepsDone() int { return g.trainer.StepsDone() }

// Close stops serving the policy and closes the step log.
func (g *GatewayRun) Close() error {
	return errors.Join(g.served.Close(), g.steps.Close())
}

// gatewaySource is a GatewayRun as its trainer's rl.Source.
type gatewaySource struct{ g *GatewayRun }

func (s gatewaySource) Next(ctx context.Context, step int) ([]rl.Group, error) {
	return s.g.next(ctx, step)
}

// next gives step's groups. It first serves the weights the trainer
// holds, version step-1. Then it takes the step's records, the recovered
// ones first, and logs which before it returns their groups.
func (g *GatewayRun) next(ctx context.Context, step int) ([]rl.Group, error) {
	if !g.started {
		if step-1 != g.start {
			return nil, fmt.Errorf("the trainer resumed at step %d but the served checkpoint is step %d", step-1, g.start)
		}
		g.started = true
	}
	if err := g.served.Set(g.policy, step-1); err != nil {
		return nil, fmt.Errorf("serve step %d's policy: %w", step-1, err)
	}
	g.gc.Feed.SetVersion(step - 1)
	entry := GatewayStep{Version: GatewayStepVersion, Step: step}
	var groups []rl.Group
	quarantine := filepath.Join(g.cfg.OutDir, QuarantineFile)
	for len(groups) < g.cfg.RL.ItemsPerStep {
		rec, err := g.take(ctx)
		if err != nil {
			return nil, fmt.Errorf("groups of step %d (%d of %d taken): %w", step, len(groups), g.cfg.RL.ItemsPerStep, err)
		}
		gr, sd, err := atropos.RecordGroup(rec, step, g.cfg.RL.Estimator, g.cfg.Credit, g.policy.Config.Vocab, g.policy.Config.Context)
		if err != nil {
			q := atropos.QuarantineRecord{Step: step, Group: len(groups), Reason: err.Error(), Data: sd}
			if werr := atropos.AppendQuarantine(quarantine, q); werr != nil {
				return nil, fmt.Errorf("step %d: group %s: quarantine (%v): %w", step, rec.ID, err, werr)
			}
			gr = rl.Group{Quarantined: err.Error()}
		} else if g.gc.MaxStaleness > 0 && gr.Staleness > g.gc.MaxStaleness {
			g.log.Warn("a stale gateway group is dropped", "group", rec.ID, "step", step, "staleness", gr.Staleness, "max", g.gc.MaxStaleness)
			entry.Stale = append(entry.Stale, rec.ID)
			continue
		}
		groups = append(groups, gr)
		entry.Groups = append(entry.Groups, rec.ID)
	}
	if err := g.logStep(entry); err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	return groups, nil
}

// take returns the next record: the pool's, then the feed's.
func (g *GatewayRun) take(ctx context.Context) (*rollout.GroupRecord, error) {
	if len(g.pool) > 0 {
		rec := g.pool[0]
		g.pool = g.pool[1:]
		return rec, nil
	}
	return g.gc.Feed.Next(ctx)
}

// logStep appends e to the step log and syncs it.
func (g *GatewayRun) logStep(e GatewayStep) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode %s: %w", GatewaySteps, err)
	}
	if _, err := g.steps.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", GatewaySteps, err)
	}
	if err := g.steps.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", GatewaySteps, err)
	}
	return nil
}

// openStepLog reads the step log at path and opens it for appending. A
// last line a crash cut short is removed.
func openStepLog(path string) ([]GatewayStep, *os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	steps, good, err := readStepLog(f)
	if err == nil {
		err = f.Truncate(good)
	}
	if err == nil {
		_, err = f.Seek(good, io.SeekStart)
	}
	if err != nil {
		_ = f.Close() // the read error is what matters
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return steps, f, nil
}

// readStepLog decodes a step log. It returns the steps and the length of
// its whole lines; a last line without its newline is a crash's and is
// left out.
func readStepLog(r io.Reader) ([]GatewayStep, int64, error) {
	br := bufio.NewReader(r)
	var out []GatewayStep
	var good int64
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, good, nil // a line without its newline: cut short
		}
		if err != nil {
			return nil, 0, err
		}
		var e GatewayStep
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, 0, fmt.Errorf("line at byte %d: %w", good, err)
		}
		if e.Version != GatewayStepVersion {
			return nil, 0, fmt.Errorf("line at byte %d: version %d, this build reads version %d: start a new --out", good, e.Version, GatewayStepVersion)
		}
		out = append(out, e)
		good += int64(len(line))
	}
}

// cloneParams is a copy of p with its own values.
func cloneParams(p *nn.Params) (*nn.Params, error) {
	c, err := nn.NewParams(p.Config, slices.Clone(p.Data))
	if err != nil {
		return nil, fmt.Errorf("copy the policy: %w", err)
	}
	return c, nil
}
