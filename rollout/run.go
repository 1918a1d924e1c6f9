package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/store"
)

// Progress is a snapshot of a run, sent after every rollout and group.
type Progress struct {
	Items          int           `json:"items"`
	ItemsDone      int           `json:"items_done"`
	Rollouts       int           `json:"rollouts"` // planned: Items × G
	RolloutsDone   int           `json:"rollouts_done"`
	RolloutsFailed int           `json:"rollouts_failed"`
	MeanReward     float64       `json:"mean_reward"` // over scored rollouts, resumed ones included
	Resumed        int           `json:"resumed"`     // rollouts found done at start
	Elapsed        time.Duration `json:"elapsed_ns"`  // since this Run started
}

// Summary accounts for every rollout and group of the run, resumed work
// included. It is written to summary.json whenever Run returns.
type Summary struct {
	Version   int  `json:"version"`
	Complete  bool `json:"complete"` // every item's group is done
	Items     int  `json:"items"`
	ItemsDone int  `json:"items_done"`
	GroupSize int  `json:"group_size"`

	RolloutsPlanned int `json:"rollouts_planned"`
	Rollouts        int `json:"rollouts"` // recorded in artifacts.jsonl
	RolloutsScored  int `json:"rollouts_scored"`
	RolloutsFailed  int `json:"rollouts_failed"`
	// Failed counts the failed rollouts by reason (see Fail* and callFailure).
	Failed            map[string]int `json:"failed"`
	RolloutsFormat    int            `json:"rollouts_format"`    // scored, reward fixed by a format failure
	RolloutsTruncated int            `json:"rollouts_truncated"` // scored, reward fixed by truncation
	// RolloutsSkipped were never run because their baseline failed.
	RolloutsSkipped int `json:"rollouts_skipped"`

	Groups        int `json:"groups"`         // done: written or dropped
	GroupsWritten int `json:"groups_written"` // in groups.jsonl
	TiesKept      int `json:"ties_kept"`      // written with zero advantages (KeepTies)
	// Splits counts the written sequences marked delegate.Sequence.Split.
	// They continue a conversation but start a new sample, because their prompt ids did not extend the earlier ids.
	Splits int `json:"splits"`
	// Dropped counts the groups not written, by reason (Drop*).
	Dropped map[string]int `json:"dropped"`
	// Ties counts every tied group by reason, kept or dropped.
	Ties map[string]int `json:"ties"`

	MeanReward    float64 `json:"mean_reward"`    // over scored rollouts
	MeanCandidate float64 `json:"mean_candidate"` // the scorer's score of the rollouts
	MeanBaseline  float64 `json:"mean_baseline"`  // the scorer's score of the baselines, per scored rollout

	// Roles is what the rollouts spent, by the policy's roles and the scorer's.
	// Baselines is what the baselines spent.
	Roles     map[string]delegate.Totals `json:"roles"`
	Baselines delegate.Totals            `json:"baselines"`
	// Retries is the number of retried model calls over rollouts, scoring
	// and baselines.
	Retries int `json:"retries"`

	Repairs         []string `json:"repairs,omitempty"` // files repaired at start
	Resumed         int      `json:"resumed"`           // rollouts found done at start
	DroppedProgress int64    `json:"dropped_progress"`  // progress events a slow reader did not take
}

// String renders the summary for a terminal.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "items %d/%d, rollouts %d/%d (scored %d, failed %d, format %d, truncated %d, skipped %d)\n",
		s.ItemsDone, s.Items, s.Rollouts, s.RolloutsPlanned, s.RolloutsScored, s.RolloutsFailed,
		s.RolloutsFormat, s.RolloutsTruncated, s.RolloutsSkipped)
	fmt.Fprintf(&b, "groups %d: written %d (ties kept %d), dropped %s\n", s.Groups, s.GroupsWritten, s.TiesKept, counts(s.Dropped))
	if s.Splits > 0 {
		fmt.Fprintf(&b, "sequences split where a turn's prompt ids did not extend the conversation's: %d\n", s.Splits)
	}
	if len(s.Failed) > 0 {
		fmt.Fprintf(&b, "failed rollouts by reason: %s\n", FailedCounts(s.Failed))
	}
	fmt.Fprintf(&b, "mean reward %.4f, mean score %.2f vs baseline %.2f\n", s.MeanReward, s.MeanCandidate, s.MeanBaseline)
	for _, r := range s.Repairs {
		fmt.Fprintf(&b, "repaired %s\n", r)
	}
	return b.String()
}

// FailedCounts renders failure counts by reason, most frequent first.
func FailedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range []string{DropEqual, DropFormat, DropTruncation, DropErrors} {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// rolloutState is what the state database keeps of a finished rollout:
// enough to build its group's record after a resume.
type rolloutState struct {
	rolloutTally
	Index     int                 `json:"index"`
	Sequences []delegate.Sequence `json:"sequences,omitempty"`
	// Episode is the rollout per role, when it has a trace.
	Episode *delegate.Episode `json:"episode,omitempty"`
}

// groupState is what the state database keeps of a finished group.
type groupState struct {
	Status   string `json:"status"` // "written" or "dropped"
	Reason   string `json:"reason,omitempty"`
	Skipped  int    `json:"skipped,omitempty"` // rollouts never run (baseline failed)
	TiesKept bool   `json:"ties_kept,omitempty"`
	Splits   int    `json:"splits,omitempty"` // sequences started at a token discontinuity
}

// identity is what makes two runs the same run: a resume must match it.
type identity struct {
	Format      int      `json:"format"`
	Dataset     string   `json:"dataset"`
	Items       int      `json:"items"`
	GroupSize   int      `json:"group_size"`
	Baseline    string   `json:"baseline"`
	Policy      string   `json:"policy"`
	Estimator   string   `json:"estimator"`
	KeepTies    bool     `json:"keep_ties"`
	Seed        int64    `json:"seed"`
	TrainRoles  []string `json:"train_roles"`
	Fingerprint string   `json:"fingerprint"`
}

// diff names every field that differs, stored value first.
func (a identity) diff(b identity) []string {
	var out []string
	add := func(name string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			out = append(out, fmt.Sprintf("%s %v there, %v now", name, x, y))
		}
	}
	add("record format", a.Format, b.Format)
	add("dataset (hash of the tasks)", a.Dataset, b.Dataset)
	add("items", a.Items, b.Items)
	add("group_size", a.GroupSize, b.GroupSize)
	add("baseline strategy", a.Baseline, b.Baseline)
	add("strategy", a.Policy, b.Policy)
	add("estimator", a.Estimator, b.Estimator)
	add("keep_ties", a.KeepTies, b.KeepTies)
	add("seed", a.Seed, b.Seed)
	add("train_roles", a.TrainRoles, b.TrainRoles)
	return append(out, fingerprintDiff(a.Fingerprint, b.Fingerprint)...)
}

// fingerprintDiff names what differs between the fingerprint stored and the current one.
// It goes key by key when both are JSON, as process gives its settings.
// A run recorded by an earlier version holds the first 8 bytes of the settings' SHA-256 in hex.
func fingerprintDiff(old, now string) []string {
	if old == now {
		return nil
	}
	if h := sha256.Sum256([]byte(now)); len(old) == 16 && old == hex.EncodeToString(h[:8]) {
		return nil
	}
	if d, err := store.DiffJSON([]byte(old), []byte(now)); err == nil {
		for i := range d {
			d[i] = "settings " + d[i]
		}
		return d
	}
	return []string{fmt.Sprintf("fingerprint (strategies, models, judge, reward) %v there, %v now", old, now)}
}

// item is the in-memory state of one item's group.
type item struct {
	index     int
	task      delegate.Task
	baseline  *delegate.Trace
	mu        sync.Mutex
	results   []*rolloutState // by rollout index; nil until done
	remaining int
	version   int // the policy version the sink gave at the item's start
}

type runner struct {
	cfg      Config
	tasks    []delegate.Task
	baseline delegate.Strategy
	policies Policies
	policy   string // the policy strategy's name
	scorer   Scorer
	db       *store.DB
	start    time.Time

	wmu   sync.Mutex // serialises appends and their state commits
	files map[string]*appendFile

	pmu        sync.Mutex // guards the progress counters
	prog       Progress
	rewardSum  float64
	rewardN    int
	progress   chan<- Progress
	droppedEvs atomic.Int64

	items []*item
	done  []bool // group committed, by item

	sendq *sendQueue // written groups on their way to cfg.Sink; nil without one
	runID string     // the run's random identifier (store.DB.RunID)
}

// Policies gives the strategy that runs rollout k of the task at index item.
// Same gives one strategy for every rollout.
// Otherwise each rollout gets one built around a policy agent seeded for it by Sampling.Seed.
// The rollout then depends on its seed alone, so a run redone, resumed or made by Groups samples the same.
// Every strategy it gives must have the same name.
// Run and Groups call it from one goroutine, once per rollout.
// Run calls it once more at the start for the strategy's name, and runs nothing with that one.
type Policies func(item, k int) (delegate.Strategy, error)

// Same is the Policies of one strategy for every rollout.
func Same(s delegate.Strategy) Policies {
	return func(int, int) (delegate.Strategy, error) { return s, nil }
}

// Run runs `delegate process` on the first cfg.Items tasks.
// Each task gets the baseline once and cfg.GroupSize rollouts of the strategies policies gives.
// A nil baseline runs none, and the scorer then gets a nil baseline trace.
// At most cfg.Concurrency rollouts are in flight.
// Each rollout is scored by scorer and recorded in artifacts.jsonl.
// Each group's rewards become advantages, recorded in groups.jsonl, or the group is counted as dropped.
// summary.json is written whenever Run returns, interrupted or not.
//
// A rollout that fails is recorded as failed and its siblings go on.
// It fails when a call it needs fails, the scorer fails or it panics.
// Run returns an error for what stops the run itself: a cancelled ctx,
// a file or state database that cannot be written, a failing advantage function,
// or a policy that cannot be built.
//
// Run resumes the run found in cfg.OutDir; work recorded in its state is not redone.
// Bytes written after the last recorded record are truncated away and their work redone;
// Summary.Repairs says so.
// A different configuration, such as dataset, G or strategies, is an error naming the difference.
// One Run at a time may use an output directory.
// A second, in this process or another, fails while the first holds the state.
//
// Progress snapshots go to progress, which may be nil, by non-blocking sends.
// Run never closes it.
func Run(ctx context.Context, cfg Config, tasks []delegate.Task, baseline delegate.Strategy, policies Policies, scorer Scorer, progress chan<- Progress) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, fmt.Errorf("process: config: %w", err)
	}
	if policies == nil || scorer == nil {
		return Summary{}, errors.New("process: a policy strategy and a scorer are required")
	}
	cfg, tasks, policy, err := runConfig(cfg, tasks, policies)
	if err != nil {
		return Summary{}, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("process: %w", err)
	}
	db, err := store.OpenExclusive(ctx, filepath.Join(cfg.OutDir, StateFile))
	if err != nil {
		return Summary{}, fmt.Errorf("process: %w", err)
	}
	defer db.Close()

	r := &runner{cfg: cfg, tasks: tasks, baseline: baseline, policies: policies, policy: policy.Name(), scorer: scorer, db: db,
		start: time.Now(), progress: progress}
	fresh, err := r.checkIdentity(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("process %s: %w", cfg.OutDir, err)
	}
	if r.runID, err = db.RunID(ctx); err != nil {
		return Summary{}, fmt.Errorf("process %s: %w", cfg.OutDir, err)
	}
	files, repairs, err := openFiles(ctx, cfg.OutDir, db, fresh, ArtifactsFile, GroupsFile)
	if err != nil {
		return Summary{}, fmt.Errorf("process: %w", err)
	}
	r.files = files
	defer func() {
		for _, af := range files {
			// Every record was synced when written; a close error loses nothing.
			_ = af.f.Close()
		}
	}()
	if err := r.load(ctx); err != nil {
		return Summary{}, fmt.Errorf("process %s: %w", cfg.OutDir, err)
	}
	r.send()

	if cfg.Sink != nil {
		if r.sendq, err = r.unsent(ctx); err != nil {
			return Summary{}, fmt.Errorf("process %s: %w", cfg.OutDir, err)
		}
	}
	runErr := r.processSinking(ctx)
	sum, err := r.summary(context.WithoutCancel(ctx), repairs)
	if err != nil {
		return sum, errors.Join(runErr, err)
	}
	return sum, runErr
}

// runConfig is cfg with its defaults for policies' strategy, the tasks it
// processes, and the strategy of the first rollout.
func runConfig(cfg Config, tasks []delegate.Task, policies Policies) (Config, []delegate.Task, delegate.Strategy, error) {
	policy, err := policies(0, 0)
	if err == nil && policy == nil {
		err = errors.New("nil strategy")
	}
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("process: policy: %w", err)
	}
	cfg, err = cfg.resolve(policy.Name())
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("process: config: %w", err)
	}
	if cfg.Items == 0 {
		cfg.Items = len(tasks)
	}
	if cfg.Items > len(tasks) {
		return cfg, nil, nil, fmt.Errorf("process: config: items: %d, but the dataset has %d tasks", cfg.Items, len(tasks))
	}
	if cfg.Items == 0 {
		return cfg, nil, nil, errors.New("process: the dataset has no tasks")
	}
	tasks = tasks[:cfg.Items]
	seen := map[string]int{}
	for i, t := range tasks {
		if j, ok := seen[t.ID]; ok {
			return cfg, nil, nil, fmt.Errorf("process: tasks %d and %d have the same id %q: rollout ids would collide", j, i, t.ID)
		}
		seen[t.ID] = i
	}
	return cfg, tasks, policy, nil
}

// processSinking processes the run's items.
// Meanwhile its sink, when there is one, takes the groups of r.sendq as they are written.
func (r *runner) processSinking(ctx context.Context) error {
	var sinkDone chan error
	sctx, stopSink := context.WithCancel(ctx)
	defer stopSink()
	if r.cfg.Sink != nil {
		sinkDone = make(chan error, 1)
		go func() { sinkDone <- r.sendGroups(sctx, stopSink) }()
	}
	runErr := r.process(sctx)
	if sinkDone != nil {
		r.sendq.close()
		if err := <-sinkDone; err != nil && ctx.Err() == nil {
			runErr = err // the sink failed and stopped the run: its error says why
		}
	}
	if runErr != nil && ctx.Err() != nil {
		runErr = fmt.Errorf("process interrupted: %w", ctx.Err())
	}
	return runErr
}

// checkIdentity stores the run's identity, or compares it with the stored
// one. fresh reports that none was stored.
func (r *runner) checkIdentity(ctx context.Context) (fresh bool, err error) {
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(r.tasks); err != nil {
		return false, fmt.Errorf("hash tasks: %w", err)
	}
	roles := slices.Clone(r.cfg.TrainRoles)
	slices.Sort(roles)
	now := identity{
		Format: ArtifactVersion*1000 + GroupVersion, Dataset: hex.EncodeToString(h.Sum(nil))[:16],
		Items: r.cfg.Items, GroupSize: r.cfg.GroupSize, Baseline: r.baselineName(), Policy: r.policy,
		Estimator: r.cfg.Estimator, KeepTies: r.cfg.KeepTies, Seed: r.cfg.Seed, TrainRoles: roles,
		Fingerprint: r.cfg.Fingerprint,
	}
	data, err := json.Marshal(now)
	if err != nil {
		return false, fmt.Errorf("encode run identity: %w", err)
	}
	stored, ok, err := r.db.Identity(ctx)
	if err != nil {
		return false, err
	}
	if !ok {
		return true, r.db.SetIdentity(ctx, data)
	}
	var old identity
	if err := json.Unmarshal(stored, &old); err != nil {
		return false, fmt.Errorf("decode stored run identity: %w", err)
	}
	if d := old.diff(now); len(d) > 0 {
		return false, fmt.Errorf("the output directory holds another run (%s): use another output directory or the same settings", strings.Join(d, "; "))
	}
	return false, nil
}

// load reads the finished work from the state.
func (r *runner) load(ctx context.Context) error {
	G := r.cfg.GroupSize
	r.items = make([]*item, len(r.tasks))
	r.done = make([]bool, len(r.tasks))
	for i, t := range r.tasks {
		r.items[i] = &item{index: i, task: t, results: make([]*rolloutState, G)}
	}
	r.prog = Progress{Items: len(r.tasks), Rollouts: len(r.tasks) * G}
	groups, err := r.db.Groups(ctx)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g.Item >= len(r.tasks) {
			return fmt.Errorf("state holds group %d outside this run", g.Item)
		}
		r.done[g.Item] = true
		r.prog.ItemsDone++
	}
	// Only the rollouts of unfinished groups are kept in memory, so that a
	// resumed run holds no more than a fresh one.
	return r.db.EachRollout(ctx, func(ro store.Rollout) error {
		if ro.Item >= len(r.tasks) || ro.Index >= G || ro.Group != 0 {
			return fmt.Errorf("state holds rollout %s (item %d, index %d) outside this run", ro.ID, ro.Item, ro.Index)
		}
		r.prog.Resumed++
		if r.done[ro.Item] {
			var st rolloutTally
			if err := json.Unmarshal(ro.Data, &st); err != nil {
				return fmt.Errorf("decode state of rollout %s: %w", ro.ID, err)
			}
			r.count(st.Status, st.Reward)
			return nil
		}
		st := new(rolloutState)
		if err := json.Unmarshal(ro.Data, st); err != nil {
			return fmt.Errorf("decode state of rollout %s: %w", ro.ID, err)
		}
		r.items[ro.Item].results[ro.Index] = st
		r.count(st.Status, st.Reward)
		return nil
	})
}

// rolloutTally is the part of a rolloutState the counters and the summary
// read; decoding into it skips the sequences.
type rolloutTally struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Error     string  `json:"error,omitempty"`
	Reason    string  `json:"reason,omitempty"` // why it failed, see Fail*
	Reward    float64 `json:"reward"`
	Candidate float64 `json:"candidate"`
	Baseline  float64 `json:"baseline"`
	Fixed     string  `json:"fixed,omitempty"`
	// Roles is what the rollout spent, by role, failed rollouts included.
	// It counts the policy's calls and the scorer's, under the judge's role.
	Roles map[string]delegate.Totals `json:"roles,omitempty"`
	// Outcome is what the score was computed from, when the scorer says.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// count adds a finished rollout to the progress counters.
func (r *runner) count(status string, reward float64) {
	r.prog.RolloutsDone++
	if status != StatusScored {
		r.prog.RolloutsFailed++
		return
	}
	r.rewardSum += reward
	r.rewardN++
	r.prog.MeanReward = r.rewardSum / float64(r.rewardN)
}

// send reports progress without blocking.
func (r *runner) send() {
	if r.progress == nil {
		return
	}
	r.pmu.Lock()
	p := r.prog
	r.pmu.Unlock()
	p.Elapsed = time.Since(r.start)
	select {
	case r.progress <- p:
	default:
		r.droppedEvs.Add(1)
	}
}

// process runs what is left. Baselines run in this goroutine, one item
// ahead of the rollouts it feeds to the bounded group.
func (r *runner) process(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.cfg.Concurrency)
	var feedErr error
	for i, it := range r.items {
		if r.done[i] {
			continue
		}
		if err := gctx.Err(); err != nil {
			feedErr = err
			break
		}
		var need []int
		for k, res := range it.results {
			if res == nil {
				need = append(need, k)
			}
		}
		var err error
		if r.cfg.Sink != nil {
			if it.version, err = r.cfg.Sink.Wait(gctx); err != nil {
				feedErr = fmt.Errorf("wait for the sink: %w", err)
				break
			}
		}
		if r.baseline != nil {
			base, err := r.runBaseline(gctx, it)
			if err != nil {
				feedErr = err
				break
			}
			if base == nil {
				continue // the baseline failed; its group was dropped
			}
			it.baseline = base
		}
		if len(need) == 0 {
			// Every rollout was recorded but the group was not: finish it.
			if err := r.finish(gctx, it); err != nil {
				feedErr = err
				break
			}
			continue
		}
		strats := make([]delegate.Strategy, len(need))
		for j, k := range need {
			if strats[j], err = r.policies(i, k); err == nil && strats[j] == nil {
				err = errors.New("nil strategy")
			}
			if err != nil {
				err = fmt.Errorf("policy of item %d rollout %d: %w", i, k, err)
				break
			}
		}
		if err != nil {
			feedErr = err
			break
		}
		it.remaining = len(need)
		for j, k := range need {
			g.Go(func() error { return r.rollout(gctx, it, k, strats[j]) })
		}
	}
	return errors.Join(feedErr, g.Wait())
}

// baselineName is the baseline strategy's name, "" for a run without one.
func (r *runner) baselineName() string {
	if r.baseline == nil {
		return ""
	}
	return r.baseline.Name()
}

// runBaseline returns the item's baseline trace, from the state or by
// running it. A baseline whose run failed drops the group (counted under
// DropErrors) and returns nil.
func (r *runner) runBaseline(ctx context.Context, it *item) (*delegate.Trace, error) {
	data, ok, err := r.db.Baseline(ctx, it.index, 0)
	if err != nil {
		return nil, err
	}
	var tr *delegate.Trace
	if ok {
		tr = new(delegate.Trace)
		if err := json.Unmarshal(data, tr); err != nil {
			return nil, fmt.Errorf("decode baseline of item %d: %w", it.index, err)
		}
		if tr.Version != delegate.TraceVersion {
			return nil, fmt.Errorf("baseline of item %d: trace version %d, this build reads %d", it.index, tr.Version, delegate.TraceVersion)
		}
	} else {
		tr = playBaseline(ctx, r.baseline, it.task)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := json.Marshal(tr)
		if err != nil {
			return nil, fmt.Errorf("encode baseline of item %d: %w", it.index, err)
		}
		if err := r.db.PutBaseline(context.WithoutCancel(ctx), it.index, 0, data); err != nil {
			return nil, err
		}
	}
	if baselineFailed(tr) {
		skipped := 0
		for _, res := range it.results {
			if res == nil {
				skipped++
			}
		}
		st := groupState{Status: "dropped", Reason: DropErrors, Skipped: skipped}
		if err := r.commitGroup(ctx, it, st, nil); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return tr, nil
}

// rollout runs, scores and records rollout k of an item; the last of the
// group to finish finishes the group. Its error is fatal to the run.
func (r *runner) rollout(ctx context.Context, it *item, k int, policy delegate.Strategy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st, art, err := r.runOne(ctx, it, k, policy)
	if err != nil {
		return err
	}
	if err := r.commitRollout(ctx, it, st, art); err != nil {
		return err
	}
	it.mu.Lock()
	it.results[k] = st
	it.remaining--
	last := it.remaining == 0
	it.mu.Unlock()
	if last {
		return r.finish(ctx, it)
	}
	return nil
}

// runOne runs the policy and the scorer (play) and builds the rollout's
// artifact.
func (r *runner) runOne(ctx context.Context, it *item, k int, policy delegate.Strategy) (*rolloutState, *Artifact, error) {
	p := play(ctx, policy, r.scorer, it.task, it.baseline, r.cfg.TrainRoles, k)
	if p.st == nil {
		// Only a cancelled context leaves no state.
		return nil, nil, fmt.Errorf("rollout %s: %w", rolloutID(it.task.ID, 0, k), ctx.Err())
	}
	return p.st, r.artifact(it, p.st, p.tr, p.strace, p.sc), nil
}

// played is one rollout run and scored.
type played struct {
	st     *rolloutState   // nil only when ctx ended first
	tr     *delegate.Trace // the rollout's trace; nil when its run gave none
	strace *delegate.Trace // the scorer's calls
	sc     *Score          // nil when the rollout failed
}

// play runs rollout k of task with policy and scores it against base, which may be nil.
// It is the one rollout of Run and of Groups.
// A rollout is failed, its reason classified, when its run failed,
// it could not be scored, or its reward is not finite.
// A rollout cut short by ctx leaves p.st nil, so that a resume redoes it.
// roles are the policy's trained roles, whose calls make the rollout's sequences.
func play(ctx context.Context, policy delegate.Strategy, scorer Scorer, task delegate.Task, base *delegate.Trace, roles []string, k int) (p played) {
	id := rolloutID(task.ID, 0, k)
	fail := func(reason, msg string) {
		p.st = &rolloutState{rolloutTally: rolloutTally{ID: id, Status: StatusFailed, Error: msg, Reason: reason}, Index: k}
	}
	func() {
		defer func() {
			if x := recover(); x != nil {
				fail(FailPanic, fmt.Sprintf("panic: %v\n%s", x, debug.Stack()))
			}
		}()
		var runErr error
		p.tr, runErr = policy.Run(ctx, task.Prompt, nil)
		if ctx.Err() != nil {
			return
		}
		switch {
		case runErr != nil:
			fail(FailRun, fmt.Sprintf("run %s: %v", policy.Name(), runErr))
			return
		case p.tr == nil:
			fail(FailNoTrace, fmt.Sprintf("run %s: no trace", policy.Name()))
			return
		case isCallFailure(p.tr):
			fail(traceCallFailure(p.tr), p.tr.Failure)
			return
		}
		rec := delegate.NewRecorder("score", task.Prompt, nil)
		s, scErr := scorer.Score(ctx, rec, task, base, p.tr)
		p.strace = rec.Finish("", delegate.Failure{})
		if ctx.Err() != nil {
			return
		}
		if scErr != nil {
			fail(scoreFailure(scErr), fmt.Sprintf("score: %v", scErr))
			return
		}
		if math.IsNaN(s.Reward) || math.IsInf(s.Reward, 0) {
			fail(FailNonFinite, fmt.Sprintf("score: reward %v is not a finite number", s.Reward))
			return
		}
		p.sc = &s
		p.st = &rolloutState{rolloutTally: rolloutTally{ID: id, Status: StatusScored, Reward: s.Reward, Candidate: s.Candidate,
			Baseline: s.Baseline, Fixed: s.Fixed}, Index: k, Sequences: delegate.Sequences(p.tr, roles...)}
		if in := s.Inputs; in != nil {
			p.st.Outcome = &Outcome{Correct: in.Correct, Calls: in.Calls, Tokens: in.Tokens, Cost: in.Cost}
		}
	}()
	if p.st != nil {
		p.st.Roles = spent(p.tr, p.strace)
		if p.tr != nil {
			p.st.Episode = episodeOf(p.tr, task.ID, roles, p.sc)
		}
	}
	return p
}

// episodeOf is a rollout's trace per role, its outcome the scorer's word
// where it gave one. roles are the trained roles; the first is the
// policy whose tokens the outcome counts.
func episodeOf(tr *delegate.Trace, taskID string, roles []string, sc *Score) *delegate.Episode {
	policy := ""
	if len(roles) > 0 {
		policy = roles[0]
	}
	e := delegate.NewEpisode(tr, taskID, policy, roles)
	if sc != nil {
		e.Outcome.Reward = sc.Reward
		if in := sc.Inputs; in != nil {
			e.Outcome.Correct = in.Correct
		}
	}
	return e
}

// playBaseline runs the baseline strategy on task.
// A run that returned an error is recorded in the trace's failure, which baselineFailed reads.
func playBaseline(ctx context.Context, baseline delegate.Strategy, task delegate.Task) *delegate.Trace {
	tr, runErr := baseline.Run(ctx, task.Prompt, nil)
	if tr == nil {
		return delegate.NewRecorder(baseline.Name(), task.Prompt, nil).Finish("", delegate.Failed(delegate.FailureCall, "%v", runErr))
	}
	if runErr != nil && tr.Failure == "" {
		f := delegate.Failed(delegate.FailurePanic, "%v", runErr)
		tr.Failure, tr.FailureKind = f.Message, f.Kind
	}
	return tr
}

// baselineFailed reports whether a baseline failed so that its group cannot be scored.
// That is when a call it needed failed, or it panicked.
// Such a group is dropped as DropErrors.
func baselineFailed(tr *delegate.Trace) bool {
	return tr.FailureKind == delegate.FailureCall || tr.FailureKind == delegate.FailurePanic
}

// spent merges what a rollout's trace and its scoring trace spent, by role.
func spent(traces ...*delegate.Trace) map[string]delegate.Totals {
	out := map[string]delegate.Totals{}
	for _, t := range traces {
		if t == nil {
			continue
		}
		for role, x := range t.Roles {
			out[role] = out[role].Add(x)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// artifact builds the record of a rollout.
func (r *runner) artifact(it *item, st *rolloutState, tr, strace *delegate.Trace, sc *Score) *Artifact {
	a := &Artifact{
		Version: ArtifactVersion, ID: st.ID, Item: it.index, TaskID: it.task.ID, Dataset: it.task.Dataset,
		Index: st.Index, Seed: r.cfg.Seed, Strategy: r.policy, Status: st.Status, Error: st.Error, Reason: st.Reason,
		Prompt: it.task.Prompt, Reference: it.task.Answer, Score: sc, Reward: st.Reward,
		BaselineStrategy: r.baselineName(), Episode: st.Episode,
	}
	if b := it.baseline; b != nil {
		a.BaselineRaw = lastOutput(b)
		a.BaselineOutput = b.Answer
		a.BaselineFailure = b.Failure
		if !r.cfg.OmitTraces {
			a.BaselineTrace = b
		}
	}
	if tr != nil {
		a.Stage1Raw = firstOutput(tr, r.cfg.TrainRoles)
		a.Subtasks = subtasks(tr, a.Stage1Raw)
		a.SubagentOutputs = subagentOutputs(tr)
		a.FinalOutput = tr.Answer
		a.Failure = tr.Failure
		a.Roles, a.Total = tr.Roles, tr.Total
		a.Latency = tr.Latency
		a.Calls = callInfos(tr)
		if !r.cfg.OmitTraces {
			a.Trace = tr
		}
	}
	if strace != nil {
		a.ScoreTotals = strace.Total
		if !r.cfg.OmitTraces && len(strace.Calls()) > 0 {
			a.ScoreTrace = strace
		}
	}
	return a
}

// lastOutput is the output of a trace's last call that produced one.
func lastOutput(t *delegate.Trace) string {
	calls := t.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Output != nil {
			return calls[i].Output.Content
		}
	}
	return ""
}

// commitRollout appends the artifact and records the rollout with the
// file's new length in one transaction. Once the line is written the work
// is kept even if ctx ends now.
func (r *runner) commitRollout(ctx context.Context, it *item, st *rolloutState, a *Artifact) error {
	line, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode artifact %s: %w", a.ID, err)
	}
	line = append(line, '\n')
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state of %s: %w", a.ID, err)
	}
	r.wmu.Lock()
	af := r.files[ArtifactsFile]
	off, err := af.write(line)
	if err == nil {
		err = r.db.CommitRollout(context.WithoutCancel(ctx), ArtifactsFile, store.Rollout{
			Item: it.index, Index: st.Index, ID: st.ID, Offset: off, Length: int64(len(line)), Data: data})
	}
	if err == nil {
		af.size = off + int64(len(line))
	}
	r.wmu.Unlock()
	if err != nil {
		return err
	}
	r.pmu.Lock()
	r.count(st.Status, st.Reward)
	r.pmu.Unlock()
	r.send()
	return nil
}

// finish decides what becomes of a group whose rollouts are all done and
// records it.
func (r *runner) finish(ctx context.Context, it *item) error {
	rec := &GroupRecord{
		Version: GroupVersion, ID: groupID(it.task.ID, 0), Run: r.runID, Item: it.index, TaskID: it.task.ID,
		Strategy: r.policy, PolicyVersion: it.version,
	}
	st, rec, err := decide(it.results, r.cfg.KeepTies, r.cfg.Advantages, rec)
	if err != nil {
		return err
	}
	return r.commitGroup(ctx, it, st, rec)
}

// decide makes a finished group's record from its rollouts, all done and in index order.
// It fills rec, which carries the group's identity. It is the one rule of Run and of Groups.
// A group with fewer than two scored rollouts is dropped as DropErrors.
// A tied group is dropped, or with keepTies written with zero advantages and set_advantage_to_zero overrides.
// Any other group gets the advantages of its rewards.
// The record is nil when the group is dropped; the state says why.
func decide(results []*rolloutState, keepTies bool, advantages Advantages, rec *GroupRecord) (groupState, *GroupRecord, error) {
	var members []*rolloutState
	var missing []MissedMember
	for _, st := range results {
		if st.Status == StatusScored {
			members = append(members, st)
		} else {
			missing = append(missing, MissedMember{ID: st.ID, Index: st.Index, Error: st.Error})
		}
	}
	if len(members) < 2 {
		return groupState{Status: "dropped", Reason: DropErrors}, nil, nil
	}
	rewards := make([]float64, len(members))
	for i, m := range members {
		rewards[i] = m.Reward
	}
	rec.Missing, rec.GroupOverrides = missing, GroupOverride{GroupSize: len(members)}
	for _, m := range members {
		if m.Episode != nil {
			rec.GroupOverrides.Roles = delegate.MergePolicies(rec.GroupOverrides.Roles, m.Episode.Policies())
		}
	}
	// The backend's own word on the weights that sampled the group (the
	// oldest of its calls), when it says, beats the sink's step at start.
	oldest := -1
	for _, m := range members {
		for _, sq := range m.Sequences {
			if v := sq.PolicyVersion; v != nil && (oldest < 0 || *v < oldest) {
				oldest = *v
			}
		}
	}
	if oldest >= 0 {
		rec.PolicyVersion = oldest
	}
	adv := make([]float64, len(members))
	zero := false
	if reason, tied := tie(members, rewards); tied {
		if !keepTies {
			return groupState{Status: "dropped", Reason: reason}, nil, nil
		}
		rec.Reason, zero = reason, true
	} else {
		a, err := advantages(rewards)
		if err != nil {
			return groupState{}, nil, fmt.Errorf("advantages of group %s: %w", rec.ID, err)
		}
		if len(a) != len(rewards) {
			return groupState{}, nil, fmt.Errorf("advantages of group %s: %d values for %d rewards", rec.ID, len(a), len(rewards))
		}
		adv = a
	}
	splits := 0
	for i, m := range members {
		rec.Rollouts = append(rec.Rollouts, Member{ID: m.ID, Index: m.Index, Reward: m.Reward, Advantage: adv[i], Fixed: m.Fixed, Outcome: m.Outcome})
		rec.Episodes = append(rec.Episodes, m.Episode)
		for _, s := range m.Sequences {
			if s.Split {
				splits++
			}
			rec.Tokens = append(rec.Tokens, s.Tokens)
			rec.Masks = append(rec.Masks, s.Masks)
			rec.InferenceLogprobs = append(rec.InferenceLogprobs, s.Logprobs)
			rec.Messages = append(rec.Messages, s.Messages)
			rec.Scores = append(rec.Scores, m.Reward)
			rec.Advantages = append(rec.Advantages, adv[i])
			rec.SequenceRollout = append(rec.SequenceRollout, m.Index)
			rec.NoTokens = append(rec.NoTokens, s.NoTokens)
			rec.Overrides = append(rec.Overrides, Override{SetAdvantageToZero: zero})
		}
	}
	if slices.Contains(rec.Episodes, nil) {
		rec.Episodes = nil // a state kept before episodes were: none, or all
	}
	return groupState{Status: "written", Reason: rec.Reason, TiesKept: zero, Splits: splits}, rec, nil
}

func allEqual(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// tie reports whether a group carries no learning signal, and why.
// A group ties when every rollout failed the format, DropFormat,
// or every rollout was cut at max_tokens, DropTruncation, whatever their rewards.
// Those rewards differ by token costs alone, which advantages would blow up to full size.
// A group also ties when every reward is equal, DropEqual.
func tie(members []*rolloutState, rewards []float64) (reason string, tied bool) {
	format, trunc := true, true
	for _, m := range members {
		format = format && m.Fixed == FixedFormat
		trunc = trunc && m.Fixed == FixedTruncated
	}
	switch {
	case format:
		return DropFormat, true
	case trunc:
		return DropTruncation, true
	case allEqual(rewards):
		return DropEqual, true
	}
	return "", false
}

// commitGroup appends the group's record (when rec is not nil) and records
// the group in one transaction.
func (r *runner) commitGroup(ctx context.Context, it *item, st groupState, rec *GroupRecord) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state of group %d: %w", it.index, err)
	}
	var line []byte
	if rec != nil {
		if line, err = json.Marshal(rec); err != nil {
			return fmt.Errorf("encode group %s: %w", rec.ID, err)
		}
		line = append(line, '\n')
	}
	r.wmu.Lock()
	af := r.files[GroupsFile]
	g := store.Group{Item: it.index, Status: st.Status, Offset: af.size, Data: data}
	if line != nil {
		g.Length = int64(len(line))
		_, err = af.write(line)
	}
	if err == nil {
		err = r.db.CommitGroup(context.WithoutCancel(ctx), GroupsFile, g)
	}
	if err == nil {
		af.size += g.Length
		if r.sendq != nil && g.Length > 0 {
			r.sendq.push(g)
		}
	}
	r.wmu.Unlock()
	if err != nil {
		return err
	}
	// The group is recorded: its rollouts' sequences and its baseline are
	// no longer needed, and keeping them would grow the run's memory with
	// every item. Every rollout of the item has finished by now.
	it.mu.Lock()
	it.results, it.baseline = nil, nil
	it.mu.Unlock()
	r.pmu.Lock()
	r.prog.ItemsDone++
	r.pmu.Unlock()
	r.send()
	return nil
}

// summary accounts for the run from the state and writes summary.json.
func (r *runner) summary(ctx context.Context, repairs []string) (Summary, error) {
	s := Summary{
		Version: SummaryVersion, Items: len(r.tasks), GroupSize: r.cfg.GroupSize,
		RolloutsPlanned: len(r.tasks) * r.cfg.GroupSize, Repairs: repairs,
		Dropped: map[string]int{DropEqual: 0, DropFormat: 0, DropTruncation: 0, DropErrors: 0},
		Ties:    map[string]int{DropEqual: 0, DropFormat: 0, DropTruncation: 0},
		Failed:  map[string]int{}, Roles: map[string]delegate.Totals{},
	}
	r.pmu.Lock()
	s.Resumed = r.prog.Resumed
	r.pmu.Unlock()
	s.DroppedProgress = r.droppedEvs.Load()
	if err := r.tallyRollouts(ctx, &s); err != nil {
		return s, err
	}
	if err := r.tallyGroups(ctx, &s); err != nil {
		return s, err
	}
	s.ItemsDone = s.Groups
	if err := r.tallyBaselines(ctx, &s); err != nil {
		return s, err
	}
	s.Complete = s.Groups == len(r.tasks)
	return s, writeSummary(filepath.Join(r.cfg.OutDir, SummaryFile), s)
}

// tallyRollouts adds the stored rollouts' counts, usage and mean scores
// to s.
func (r *runner) tallyRollouts(ctx context.Context, s *Summary) error {
	var sumR, sumC, sumB float64
	err := r.db.EachRollout(ctx, func(ro store.Rollout) error {
		var st rolloutTally
		if err := json.Unmarshal(ro.Data, &st); err != nil {
			return fmt.Errorf("decode state of rollout %s: %w", ro.ID, err)
		}
		s.Rollouts++
		for role, x := range st.Roles {
			s.Roles[role] = s.Roles[role].Add(x)
			s.Retries += x.Retries
		}
		if st.Status != StatusScored {
			s.RolloutsFailed++
			s.Failed[reasonOf(st.Reason, st.Error)]++
			return nil
		}
		s.RolloutsScored++
		switch st.Fixed {
		case FixedFormat:
			s.RolloutsFormat++
		case FixedTruncated:
			s.RolloutsTruncated++
		}
		sumR, sumC, sumB = sumR+st.Reward, sumC+st.Candidate, sumB+st.Baseline
		return nil
	})
	if err != nil {
		return err
	}
	if s.RolloutsScored > 0 {
		n := float64(s.RolloutsScored)
		s.MeanReward, s.MeanCandidate, s.MeanBaseline = sumR/n, sumC/n, sumB/n
	}
	return nil
}

// tallyGroups adds the stored groups' counts to s.
func (r *runner) tallyGroups(ctx context.Context, s *Summary) error {
	groups, err := r.db.Groups(ctx)
	if err != nil {
		return err
	}
	for _, g := range groups {
		var st groupState
		if err := json.Unmarshal(g.Data, &st); err != nil {
			return fmt.Errorf("decode state of group %d: %w", g.Item, err)
		}
		s.Groups++
		s.RolloutsSkipped += st.Skipped
		if st.Reason != "" && st.Reason != DropErrors {
			s.Ties[st.Reason]++
		}
		if st.Status == "written" {
			s.GroupsWritten++
			s.Splits += st.Splits
			if st.TiesKept {
				s.TiesKept++
			}
			continue
		}
		s.Dropped[st.Reason]++
	}
	return nil
}

// tallyBaselines adds the usage of the stored baselines to s.
func (r *runner) tallyBaselines(ctx context.Context, s *Summary) error {
	return r.db.EachBaseline(ctx, func(i, group int, data []byte) error {
		if group != 0 || i >= len(r.tasks) {
			return nil
		}
		var tr struct {
			Total delegate.Totals `json:"total"`
		}
		if err := json.Unmarshal(data, &tr); err != nil {
			return fmt.Errorf("decode baseline of item %d: %w", i, err)
		}
		s.Baselines = s.Baselines.Add(tr.Total)
		s.Retries += tr.Total.Retries
		return nil
	})
}

// writeSummary writes s to path through a temporary file.
func writeSummary(path string, s Summary) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
