package rollout

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
)

// Group is one task's group as Groups gives it.
type Group struct {
	// Record is the group as Run writes it to groups.jsonl (without a run
	// identifier); nil when the group was dropped.
	Record *GroupRecord
	// Dropped is why the group was dropped (Drop*), "" when it was not.
	Dropped string
	// Rollouts are all the task's rollouts, by index; Record.Rollouts
	// names the scored ones that made the group by their Index.
	Rollouts []Result
}

// Result is one rollout of a Group.
type Result struct {
	Index int
	// Trace is the rollout's run; nil when the run gave none.
	Trace *delegate.Trace
	// Score is the scorer's word; nil when the rollout failed.
	Score *Score
	// Reason and Error say why the rollout failed; both are "" when it was scored.
	// Reason is one of Fail* or a call failure's kind.
	Reason, Error string
}

// Groups is Run in memory, for a trainer in the same process.
// Each task gets cfg.GroupSize rollouts, launched in order, at most cfg.Concurrency in flight over all tasks.
// Rollout k of task i runs the strategy policy(i, k) gives.
// scorer scores it against the task's baseline when baseline is not nil.
// Each group is decided as Run decides it, into the same GroupRecord, and nothing is written.
// Of cfg it uses GroupSize, Concurrency, Estimator, Advantages, KeepTies and TrainRoles.
// done, when not nil, is called after every rollout, from many goroutines at once.
//
// A failed rollout is recorded in its group, and its siblings go on.
// A baseline that failed drops its group as DropErrors without running its rollouts.
// Groups returns an error for a policy it cannot build, a failing advantage function,
// or a cancelled ctx, and then no groups.
func Groups(ctx context.Context, cfg Config, tasks []delegate.Task, policy Policies, baseline delegate.Strategy, scorer Scorer, done func()) ([]Group, error) {
	if errs := cfg.validateGroups(); len(errs) > 0 {
		return nil, fmt.Errorf("groups: config: %w", errors.Join(errs...))
	}
	if policy == nil || scorer == nil {
		return nil, errors.New("groups: a policy and a scorer are required")
	}
	if len(tasks) == 0 {
		return nil, errors.New("groups: no tasks")
	}
	G := cfg.GroupSize
	strats, err := groupStrategies(tasks, G, policy)
	if err != nil {
		return nil, err
	}
	if cfg, err = cfg.resolve(strats[0].Name()); err != nil {
		return nil, fmt.Errorf("groups: config: %w", err)
	}
	bases, err := playBaselines(ctx, cfg.Concurrency, tasks, baseline)
	if err != nil {
		return nil, err
	}
	plays, err := playGroups(ctx, cfg, tasks, strats, bases, scorer, done)
	if err != nil {
		return nil, err
	}
	return groupsOf(cfg, tasks, strats, bases, plays)
}

// groupStrategies are policy's strategies, G per task, rollout k of task
// i at i*G+k.
func groupStrategies(tasks []delegate.Task, G int, policy Policies) ([]delegate.Strategy, error) {
	strats := make([]delegate.Strategy, len(tasks)*G)
	for i := range tasks {
		for k := range G {
			s, err := policy(i, k)
			if err == nil && s == nil {
				err = errors.New("nil strategy")
			}
			if err != nil {
				return nil, fmt.Errorf("groups: policy of task %q rollout %d: %w", tasks[i].ID, k, err)
			}
			strats[i*G+k] = s
		}
	}
	return strats, nil
}

// playBaselines plays baseline once per task, when there is one; a
// failed baseline is in its trace.
func playBaselines(ctx context.Context, concurrency int, tasks []delegate.Task, baseline delegate.Strategy) ([]*delegate.Trace, error) {
	bases := make([]*delegate.Trace, len(tasks))
	if baseline == nil {
		return bases, nil
	}
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(concurrency)
	for i, t := range tasks {
		eg.Go(func() error {
			bases[i] = playBaseline(gctx, baseline, t)
			return nil
		})
	}
	_ = eg.Wait() // every goroutine returns nil; a failed baseline is in its trace
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return bases, nil
}

// playGroups plays and scores every rollout whose task's baseline did not
// fail, calling done after each.
func playGroups(ctx context.Context, cfg Config, tasks []delegate.Task, strats []delegate.Strategy, bases []*delegate.Trace, scorer Scorer, done func()) ([]played, error) {
	G := cfg.GroupSize
	plays := make([]played, len(strats))
	var eg errgroup.Group
	eg.SetLimit(cfg.Concurrency)
	for j := range strats {
		i, k := j/G, j%G
		if ctx.Err() != nil {
			break
		}
		if bases[i] != nil && baselineFailed(bases[i]) {
			continue
		}
		eg.Go(func() error {
			plays[j] = play(ctx, strats[j], scorer, tasks[i], bases[i], cfg.TrainRoles, k)
			if done != nil {
				done()
			}
			return nil
		})
	}
	_ = eg.Wait() // every goroutine returns nil; failures are in the plays
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return plays, nil
}

// groupsOf makes each task's group of its plays: decided, with its
// record, or dropped with the reason.
func groupsOf(cfg Config, tasks []delegate.Task, strats []delegate.Strategy, bases []*delegate.Trace, plays []played) ([]Group, error) {
	G := cfg.GroupSize
	out := make([]Group, len(tasks))
	for i, t := range tasks {
		g := &out[i]
		if bases[i] != nil && baselineFailed(bases[i]) {
			g.Dropped = DropErrors
			continue
		}
		results := make([]*rolloutState, G)
		g.Rollouts = make([]Result, G)
		for k := range G {
			p := plays[i*G+k]
			results[k] = p.st
			g.Rollouts[k] = Result{Index: k, Trace: p.tr, Score: p.sc, Reason: p.st.Reason, Error: p.st.Error}
		}
		rec := &GroupRecord{Version: GroupVersion, ID: groupID(t.ID, 0), Item: i, TaskID: t.ID, Strategy: strats[i*G].Name()}
		st, rec, err := decide(results, cfg.KeepTies, cfg.Advantages, rec)
		if err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
		g.Record = rec
		if rec == nil {
			g.Dropped = st.Reason
		}
	}
	return out, nil
}
