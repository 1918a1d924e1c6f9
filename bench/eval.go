// Package bench runs delegation strategies side by side on a dataset and measures them.
// It is the library behind `delegate bench`.
//
// Run gives every arm, a named delegate.Strategy, the same tasks in the same order with the same seeds.
// Items run concurrently up to Config.Concurrency. A failing item is recorded, never fatal.
// Each finished item is appended at once to a versioned JSONL results file.
// A rerun with the same file skips the items it holds, so an interrupted benchmark resumes.
// A last line cut short by a kill is removed and reported.
// A delegate.Verifier checks answers; a Grader does so through RunGraded when grading makes calls of its own.
// A grader's calls and scores are saved apart from the arm's.
//
// Summarize turns records into a Report offline, printed as Markdown and CSV and plotted per arm.
// A value that does not exist prints as "n/a".
// docs/bench.md lists the report's columns and the statistics behind them.
package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
)

// Role marks an arm for the routing metrics.
type Role string

// Arm roles. PGR and the oracle router need exactly one RoleWeak and one
// RoleStrong arm: the weak and the strong model each alone.
const (
	RoleNone   Role = ""
	RoleWeak   Role = "weak"
	RoleStrong Role = "strong"
)

// Arm is one contestant: a strategy under a name unique in the run.
type Arm struct {
	Name     string
	Strategy delegate.Strategy // may be nil for Summarize
	Role     Role
}

// Config holds the knobs of a run. DefaultConfig holds the defaults; a zero
// field means zero.
type Config struct {
	// Results is the path of the JSONL results file.
	// Records are appended to it and a rerun skips the items it holds.
	// Empty means no file: the records live only in the returned report,
	// and a rerun does every item again.
	// That suits a caller grading in passing, as pretraining's periodic evaluation does.
	Results string
	// Concurrency bounds the items run at once, at least 1.
	Concurrency int
	// Baseline names the arm the others are tested against. Default: the
	// first arm.
	Baseline string
	// ItemTimeout bounds one item's run; an item that runs out is recorded
	// as failed. 0: no limit besides the run's context.
	ItemTimeout time.Duration
	// Trace saves each item's whole trace in its record.
	Trace bool
	// Label, when set, reads labels off each item's trace into Record.Labels.
	// A caller keeps what it needs of the trace without keeping the whole trace.
	Label func(*delegate.Trace) map[string]string
}

const maxConcurrency = 1024

// DefaultConfig returns the defaults: 4 items at once and no results file.
// The first arm is the baseline, and items have no time limit.
func DefaultConfig() Config {
	return Config{Concurrency: 4}
}

// Validate checks the config's own fields; Run checks Baseline against
// the arms.
func (c Config) Validate() error {
	var errs []error
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		errs = append(errs, fmt.Errorf("concurrency: %d is outside [1, %d]", c.Concurrency, maxConcurrency))
	}
	if c.ItemTimeout < 0 {
		errs = append(errs, fmt.Errorf("item_timeout: %v is negative", c.ItemTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("eval config: %w", errors.Join(errs...))
	}
	return nil
}

// checkArms checks the arms' names, roles and baseline.
// Names must be unique and non-empty, and roles known.
// There is at most one weak and one strong arm. A named baseline must be one of the arms.
func checkArms(arms []Arm, baseline string) error {
	if len(arms) == 0 {
		return errors.New("arms: none given")
	}
	seen := map[string]bool{}
	roles := map[Role]string{}
	for i, a := range arms {
		switch {
		case strings.TrimSpace(a.Name) == "":
			return fmt.Errorf("arms[%d]: empty name", i)
		case seen[a.Name]:
			return fmt.Errorf("arms[%d]: name %q used twice", i, a.Name)
		case a.Name == OracleArm:
			return fmt.Errorf("arms[%d]: name %q is reserved for the oracle router", i, a.Name)
		}
		seen[a.Name] = true
		switch a.Role {
		case RoleNone:
		case RoleWeak, RoleStrong:
			if prev, ok := roles[a.Role]; ok {
				return fmt.Errorf("arms[%d] %q: role %s already given to %q", i, a.Name, a.Role, prev)
			}
			roles[a.Role] = a.Name
		default:
			return fmt.Errorf("arms[%d] %q: unknown role %q (known: weak, strong)", i, a.Name, a.Role)
		}
	}
	if baseline != "" && !seen[baseline] {
		return fmt.Errorf("baseline: no arm named %q", baseline)
	}
	return nil
}

// Progress reports one finished item to an observer.
type Progress struct {
	Arm, TaskID string
	// Done counts the items finished so far, those taken from the results
	// file included, out of Total (arms × tasks).
	Done, Total int
	// Resumed says the item was already in the results file.
	Resumed bool
	Correct bool
	// Failed says the item ended without a proper answer (Record.Failed):
	// a strategy failure or an error.
	Failed bool
}

// Run runs every arm on every task and returns the report over all tasks and arms.
// Items already in cfg.Results are skipped. Each new one is appended to it as soon as it finishes,
// or, with no results file, only kept for the report. Tasks must have unique IDs.
//
// A failing item is recorded and counted wrong, and the run goes on.
// It fails by a model error, a format failure, a panic, a timeout or a verifier error.
// When ctx ends, items in flight are abandoned unrecorded for a rerun to do,
// finished ones are kept, and Run returns ctx's error.
// A results file that cannot be written stops the run with that error.
//
// progress, when not nil, receives one value per item by non-blocking
// sends; values a slow observer does not take are counted in
// Report.DroppedProgress. The caller owns the channel and closes it after
// Run returns.
func Run(ctx context.Context, cfg Config, tasks []delegate.Task, arms []Arm, verify delegate.Verifier, progress chan<- Progress) (*Report, error) {
	if verify == nil {
		return nil, errors.New("eval: no verifier")
	}
	return RunGraded(ctx, cfg, tasks, arms, Verified(verify), progress)
}

// RunGraded is Run with a Grader, for answers whose grading makes calls of its own.
// An LLM judge on open-ended requests is such a grader.
// When ctx ends during grading the item is abandoned like one still running.
func RunGraded(ctx context.Context, cfg Config, tasks []delegate.Task, arms []Arm, grade Grader, progress chan<- Progress) (*Report, error) {
	if err := checkRun(cfg, tasks, arms, grade); err != nil {
		return nil, err
	}
	conc := cfg.Concurrency
	var (
		prev   []Record
		repair *Repair
		done   map[itemKey]*Record
		w      *resultsWriter // nil: no results file
	)
	if cfg.Results != "" {
		var err error
		if prev, repair, err = ReadResults(cfg.Results); err != nil {
			return nil, err
		}
		if done, err = priorResults(cfg.Results, prev, tasks); err != nil {
			return nil, err
		}
		if w, err = openResults(cfg.Results); err != nil {
			return nil, err
		}
	}
	tally := &runTally{records: append([]Record(nil), prev...), total: len(tasks) * len(arms), progress: progress}

	// Task-major order: every arm gets task i before any gets task i+1, so
	// an interrupted run leaves paired results behind.
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(conc)
	skipped := 0
schedule:
	for _, t := range tasks {
		for _, a := range arms {
			if r, ok := done[itemKey{a.Name, t.ID}]; ok {
				skipped++
				tally.report(r, true)
				continue
			}
			if gctx.Err() != nil {
				break schedule
			}
			eg.Go(func() error {
				rec, ok := runItem(gctx, cfg, a, t, grade)
				if !ok {
					return nil // abandoned: ctx ended; a rerun does it
				}
				if err := w.write(rec); err != nil {
					return err
				}
				tally.report(rec, false)
				return nil
			})
		}
	}
	werr := eg.Wait()
	cerr := w.close()
	for _, err := range []error{werr, cerr, ctx.Err()} {
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
	}
	rep, err := Summarize(cfg.Baseline, tasks, arms, tally.records)
	if err != nil {
		return nil, err
	}
	rep.Resumed = skipped
	rep.Repair = repair
	rep.DroppedProgress = tally.dropped
	return rep, nil
}

// checkRun checks RunGraded's arguments.
func checkRun(cfg Config, tasks []delegate.Task, arms []Arm, grade Grader) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := checkArms(arms, cfg.Baseline); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	for i, a := range arms {
		if a.Strategy == nil {
			return fmt.Errorf("eval arm %q: arms[%d] has no strategy", a.Name, i)
		}
	}
	if grade == nil {
		return errors.New("eval: no grader")
	}
	return checkTasks(tasks)
}

// runTally collects a run's records and reports its progress. Safe for
// concurrent use.
type runTally struct {
	mu       sync.Mutex
	records  []Record
	count    int
	total    int
	dropped  int64
	progress chan<- Progress // nil: none
}

// report counts r, keeping it unless it was resumed, and sends progress without blocking.
// A full channel drops the progress value, counted.
func (t *runTally) report(r *Record, resumed bool) {
	t.mu.Lock()
	defer t.mu.Unlock() // held over the send, so that Done arrives in order
	t.count++
	if !resumed {
		t.records = append(t.records, *r)
	}
	if t.progress == nil {
		return
	}
	select {
	case t.progress <- Progress{Arm: r.Arm, TaskID: r.TaskID, Done: t.count, Total: t.total, Resumed: resumed, Correct: r.Correct, Failed: r.Failed()}:
	default:
		t.dropped++
	}
}

// checkTasks rejects an empty task list and duplicate or empty IDs.
func checkTasks(tasks []delegate.Task) error {
	if len(tasks) == 0 {
		return errors.New("eval: no tasks")
	}
	seen := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if t.ID == "" {
			return fmt.Errorf("eval task %d: empty id", i)
		}
		if j, ok := seen[t.ID]; ok {
			return fmt.Errorf("eval task %d: id %q already used by task %d", i, t.ID, j)
		}
		seen[t.ID] = i
	}
	return nil
}

type itemKey struct{ arm, task string }

// priorResults indexes the records of a results file by item. A record
// whose task has another prompt now, or a second record of one item, is an
// error: the file belongs to another benchmark.
func priorResults(path string, recs []Record, tasks []delegate.Task) (map[itemKey]*Record, error) {
	hashes := make(map[string]string, len(tasks))
	for _, t := range tasks {
		hashes[t.ID] = promptHash(t.Prompt)
	}
	done := make(map[itemKey]*Record, len(recs))
	for i := range recs {
		r := &recs[i]
		k := itemKey{r.Arm, r.TaskID}
		if _, dup := done[k]; dup {
			return nil, fmt.Errorf("eval results %s: arm %q task %q recorded twice", path, r.Arm, r.TaskID)
		}
		if h, ok := hashes[r.TaskID]; ok && h != r.PromptHash {
			return nil, fmt.Errorf("eval results %s: task %q has another prompt than when it was recorded: use a new results file", path, r.TaskID)
		}
		done[k] = r
	}
	return done, nil
}

// runItem runs arm a on task t and grades the answer. ok is false when
// the run's context ended, so the item must not be recorded.
func runItem(ctx context.Context, cfg Config, a Arm, t delegate.Task, grade Grader) (rec *Record, ok bool) {
	rec = &Record{
		Version:    RecordVersion,
		Arm:        a.Name,
		Strategy:   a.Strategy.Name(),
		TaskID:     t.ID,
		PromptHash: promptHash(t.Prompt),
		Reference:  t.Answer,
		Roles:      map[string]delegate.Totals{},
		Time:       time.Now().UTC(),
	}
	ictx := ctx
	if cfg.ItemTimeout > 0 {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, cfg.ItemTimeout)
		defer cancel()
	}
	start := time.Now()
	tr, err := protectRun(ictx, a.Strategy, t.Prompt)
	rec.Latency = time.Since(start)
	if ctx.Err() != nil {
		return nil, false
	}
	if err != nil {
		rec.Error = fmt.Sprintf("run: %v", err)
	}
	if tr != nil {
		rec.Answer = tr.Answer
		rec.Failure, rec.FailureKind = tr.Failure, tr.FailureKind
		if tr.Roles != nil {
			rec.Roles = tr.Roles
		}
		rec.Total = tr.Total
		if cfg.Trace {
			rec.Trace = tr
		}
		if cfg.Label != nil {
			rec.Labels = cfg.Label(tr)
		}
	}
	if err == nil {
		g, gerr := protectGrade(ictx, grade, t, rec.Answer)
		if ctx.Err() != nil {
			return nil, false
		}
		if len(g.Grading) > 0 {
			rec.Grading = g.Grading
		}
		if gerr != nil {
			rec.Error = fmt.Sprintf("verify: %v", gerr)
		} else {
			rec.Correct, rec.Extracted, rec.Score = g.Correct, g.Extracted, g.Score
		}
	}
	return rec, true
}

// protectRun runs the strategy, turning a panic into an error carrying the
// stack.
func protectRun(ctx context.Context, s delegate.Strategy, prompt string) (tr *delegate.Trace, err error) {
	defer func() {
		if p := recover(); p != nil {
			tr, err = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return s.Run(ctx, prompt, nil)
}
