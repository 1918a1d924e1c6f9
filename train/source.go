package train

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/world"
)

// rollouts is the trainer's in-process rl.Source: each step's items drawn
// from problems by rl.Items, and GroupSize rollouts of each run, scored,
// grouped and given advantages by the rollout pipeline (rollout.Groups,
// as `delegate process` does, with tied groups kept at zero advantage),
// the policy sampled at the trainer's temperature and token cap and
// seeded per rollout (rl.RolloutSeed) through rollout.Policy. The groups'
// training sequences are read from the rollouts' traces (rl.Episodes).
type rollouts struct {
	r        *runner
	cfg      rl.Config
	problems []*world.Problem
	build    func(*world.Problem, delegate.Model) (delegate.Strategy, error)
	items    *rl.Items
	scorer   rollout.Scorer
	dropped  atomic.Int64 // rollout progress events the observer did not take
}

// emit sends a rollout progress event without blocking.
func (s *rollouts) emit(p rl.Progress) {
	if s.r.opt.TrainProgress == nil {
		return
	}
	select {
	case s.r.opt.TrainProgress <- p:
	default:
		s.dropped.Add(1)
	}
}

// Next runs step's rollouts; rollout progress goes to the run's
// TrainProgress.
func (s *rollouts) Next(ctx context.Context, step int) ([]rl.Group, error) {
	cfg := s.cfg
	G := cfg.GroupSize
	items := s.items.Step(step)
	problems := make([]*world.Problem, len(items))
	for i, it := range items {
		problems[i] = s.problems[it]
	}
	var done atomic.Int64
	report := func() {
		s.emit(rl.Progress{Step: step, Steps: cfg.Steps, RolloutsDone: int(done.Add(1)), Rollouts: len(items) * G})
	}
	rcfg := rollout.Config{GroupSize: G, Concurrency: cfg.Concurrency, Estimator: string(cfg.Estimator),
		KeepTies: true, TrainRoles: []string{cfg.PolicyRole}}
	groups, err := rollout.Groups(ctx, rcfg, tasksOf(problems), s.policies(step, problems), nil, s.scorer, report)
	if err != nil {
		return nil, err
	}
	out := make([]rl.Group, len(groups))
	for i, g := range groups {
		rg := &out[i]
		for _, res := range g.Rollouts {
			if res.Score == nil {
				if rg.Failed == 0 {
					rg.FirstFailure = fmt.Sprintf("item %d rollout %d: %s", items[i], res.Index, res.Error)
				}
				rg.Failed++
			}
		}
		if g.Record == nil {
			continue // dropped: too few rollouts scored
		}
		for _, m := range g.Record.Rollouts {
			res := g.Rollouts[m.Index]
			eps, err := rl.Episodes(res.Trace, cfg.PolicyRole, s.r.policyP.Config.Context)
			if err != nil {
				return nil, fmt.Errorf("item %d rollout %d: %w", items[i], m.Index, err)
			}
			in := res.Score.Inputs
			rg.Rollouts = append(rg.Rollouts, rl.ScoredRollout{
				Episodes: eps, Reward: m.Reward, Advantage: m.Advantage, HasAdvantage: true,
				Correct:   in != nil && in.Correct != nil && *in.Correct,
				Delegated: res.Trace.Roles[RoleSubagent].Calls > 0,
				Scalars:   scalars(res.Trace, problems[i]),
			})
		}
	}
	return out, nil
}

// policies builds rollout k of the step's problem i: the strategy around
// the policy sampled at the trainer's temperature and token cap, seeded
// with the rollout's seed.
func (s *rollouts) policies(step int, problems []*world.Problem) rollout.Policies {
	cfg := s.cfg
	temp := cfg.Temperature
	return func(i, k int) (delegate.Strategy, error) {
		seed := int64(rl.RolloutSeed(cfg.Seed, step, i*cfg.GroupSize+k) & (1<<62 - 1))
		m := rollout.Policy(s.r.policy, rollout.Sampling{Temperature: &temp, MaxTokens: cfg.MaxNewTokens, Seed: &seed})
		return s.build(problems[i], m)
	}
}
