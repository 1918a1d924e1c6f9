package train

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
)

// rollouts is the trainer's in-process rl.Source. rl.Items draws each
// step's items from problems, and GroupSize rollouts of each run. The
// rollout pipeline scores, groups and gives them advantages
// (rollout.Groups), as `delegate process` does, keeping tied groups at
// zero advantage. A trained policy samples at the trainer's temperature
// and token cap, seeded per rollout (rl.RolloutSeed) by its agent's
// delegate.Sampler. The groups' training sequences are read from the
// rollouts' traces (rl.Episodes).
//
// With several trained policies (roles) one step's rollouts feed them
// all: each role's view (View) gets its own groups, one per item, holding
// every scored rollout of the item with that rollout's reward and
// advantage and the role's calls only as its sequences (a rollout in
// which the role made no call has none and trains nothing). The step's
// rollouts are made on the first view's Next of the step and kept until
// every view has taken its part, so the trainers of rl.Lockstep, which
// update one after the other, each get groups sampled by the parameters
// it updates.
type rollouts struct {
	r        *runner
	cfg      rl.Config // the lead trainer's: items, group size, temperature, seed
	problems []*world.Problem
	// build makes the strategy of one rollout on p around the agents of
	// the two seats (seatAgents).
	build func(p *world.Problem, delegator, solver delegate.Agent) (delegate.Strategy, error)
	// delegator and solver are the models of the two seats, sampled as
	// policies when trained.
	delegator, solver seat
	roles             []trainedRole
	// credit, when set, gives each role's samples advantages against its
	// own (reward.RoleCredit) instead of their rollout's.
	credit bool
	// decision, when set, gives the delegator's delegate calls advantages
	// from their own values under this reward (creditDecisions).
	decision *reward.Graded
	items    *rl.Items
	scorer   rollout.Scorer
	dropped  atomic.Int64 // rollout progress events the observer did not take

	// baseline, when set, is played once per item of a step. It goes to
	// the scorer with each rollout, as decompose's single-agent answer.
	baseline delegate.Strategy

	mu     sync.Mutex
	step   int          // the step of groups
	groups [][]rl.Group // the step's groups of each role; nil once every view took its part
	taken  []bool       // which views took their part of groups
}

// trainedRole is a policy the source makes groups for: the trace role of
// its calls and its model's context.
type trainedRole struct {
	role    string
	context int
}

// seat is a model in a strategy's seat. A trained one is sampled as the
// policy by its agent's delegate.Sampler: logprobs, the trainer's
// temperature, at most maxNew tokens a call, seeded per rollout by
// rl.RolloutSeed under the run's seed xor salt. An untrained one is used
// as it is.
type seat struct {
	m       delegate.Model
	trained bool
	maxNew  int
	salt    uint64
}

// SolverSalt separates the solver's sampling seeds from the delegator's: its
// rollouts are seeded under the trainer's seed xor SolverSalt.
const SolverSalt = 0x736f6c766572

// sampler is the seat's Sampler for rollout n of step; nil when the seat
// is not trained.
func (st seat) sampler(cfg rl.Config, step, n int) *delegate.Sampler {
	if !st.trained {
		return nil
	}
	temp := cfg.Temperature
	seed := int64(rl.RolloutSeed(cfg.Seed^st.salt, step, n) & (1<<62 - 1))
	return delegate.NewSampler(delegate.Sampling{Temperature: &temp, MaxTokens: st.maxNew, Seed: &seed, Logprobs: true})
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

// Next is the first role's view.
func (s *rollouts) Next(ctx context.Context, step int) ([]rl.Group, error) {
	return s.next(ctx, step, 0)
}

// view is one role's part of the source.
type view struct {
	s *rollouts
	i int
}

func (v view) Next(ctx context.Context, step int) ([]rl.Group, error) {
	return v.s.next(ctx, step, v.i)
}

// View returns the source of role i's groups.
func (s *rollouts) View(i int) rl.Source { return view{s, i} }

// next returns role i's groups of step. It runs the step's rollouts
// unless they are kept and role i has not taken them yet. A view asking
// for a step again, as a trainer redoing a failed step does, gets them
// made again.
func (s *rollouts) next(ctx context.Context, step, i int) ([]rl.Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil || s.step != step || s.taken[i] {
		groups, err := s.run(ctx, step)
		if err != nil {
			return nil, err
		}
		s.step, s.groups, s.taken = step, groups, make([]bool, len(s.roles))
	}
	out := s.groups[i]
	s.taken[i] = true
	all := true
	for _, t := range s.taken {
		all = all && t
	}
	if all {
		s.groups = nil
	}
	return out, nil
}

// run makes step's rollouts and returns each role's groups; rollout
// progress goes to the run's TrainProgress.
func (s *rollouts) run(ctx context.Context, step int) ([][]rl.Group, error) {
	groups, items, problems, err := s.play(ctx, step)
	if err != nil {
		return nil, err
	}
	return s.split(groups, items, problems)
}

// play makes step's rollouts, grouped by the rollout pipeline, with the
// step's items and their problems.
func (s *rollouts) play(ctx context.Context, step int) ([]rollout.Group, []int, []*world.Problem, error) {
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
	roles := make([]string, len(s.roles))
	for i, tr := range s.roles {
		roles[i] = tr.role
	}
	rcfg := rollout.DefaultConfig()
	rcfg.GroupSize, rcfg.Concurrency, rcfg.Estimator, rcfg.KeepTies, rcfg.TrainRoles = G, cfg.Concurrency, string(cfg.Estimator), true, roles
	groups, err := rollout.Groups(ctx, rcfg, tasksOf(problems), s.policies(step, problems), s.baseline, s.scorerAt(step), report)
	if err != nil {
		return nil, nil, nil, err
	}
	return groups, items, problems, nil
}

// scorerAt is the scorer of step's rollouts. The rollout pipeline's
// scorer learns the step, so that a reward annealed over training
// (reward.CriticalPath's bonus) anneals; another scorer has no step.
func (s *rollouts) scorerAt(step int) rollout.Scorer {
	switch sc := s.scorer.(type) {
	case *rollout.RewardScorer:
		return sc.At(step)
	case stepScorer:
		return sc.At(step)
	}
	return s.scorer
}

// split gives each role its groups of the step's rollouts. A group holds
// the role's sequences of every scored rollout, with the rollout's reward
// and advantage. Under role credit each sequence has its own advantage.
// Under decision credit the delegator's delegate calls have their own,
// among the step's decisions.
func (s *rollouts) split(groups []rollout.Group, items []int, problems []*world.Problem) ([][]rl.Group, error) {
	cfg := s.cfg
	out := make([][]rl.Group, len(s.roles))
	for v := range out {
		out[v] = make([]rl.Group, len(groups))
	}
	type at struct{ v, i, k int }
	var decided []at
	var ds [][]decision
	var skips [][]int
	var inline [][][]int
	for i, g := range groups {
		failed, first := failures(g, items[i])
		for v := range out {
			out[v][i].Failed, out[v][i].FirstFailure = failed, first
		}
		if g.Record == nil {
			continue // dropped: too few rollouts scored
		}
		var credits [][]reward.SampleCredit
		if s.credit {
			var err error
			if credits, err = RoleCredits(cfg.Estimator, g.Record); err != nil {
				return nil, fmt.Errorf("item %d: %w", items[i], err)
			}
		}
		for k, m := range g.Record.Rollouts {
			res := g.Rollouts[m.Index]
			in := res.Score.Inputs
			for v, tr := range s.roles {
				eps, err := rl.Episodes(res.Trace, tr.role, tr.context)
				if err != nil {
					return nil, fmt.Errorf("item %d rollout %d: %s: %w", items[i], m.Index, tr.role, err)
				}
				sr := rl.ScoredRollout{
					Episodes: eps, Reward: m.Reward, Advantage: m.Advantage, HasAdvantage: true,
					Correct:   in != nil && in.Correct != nil && *in.Correct,
					Delegated: res.Trace.Roles[RoleSubagent].Calls > 0,
					Scalars:   scalars(res.Trace, problems[i], s.r.cfg.Coverage),
				}
				if credits != nil {
					if sr.EpisodeAdvantages, err = episodeAdvantages(eps, g.Record.Episodes[k], credits[k]); err != nil {
						return nil, fmt.Errorf("item %d rollout %d: %s: %w", items[i], m.Index, tr.role, err)
					}
				}
				rg := &out[v][i]
				if s.decision != nil && tr.role == RoleDelegator {
					decided = append(decided, at{v, i, len(rg.Rollouts)})
					d := decisions(eps, res.Trace, *s.decision)
					ds = append(ds, d)
					if s.r.cfg.SkipCredit {
						skips = append(skips, skipTokens(eps, d, problems[i]))
					}
					if s.r.cfg.InlineCredit {
						inline = append(inline, inlineTokens(eps, problems[i]))
					}
				}
				rg.Rollouts = append(rg.Rollouts, sr)
			}
		}
	}
	if s.decision != nil {
		rs := make([]*rl.ScoredRollout, len(decided))
		for n, a := range decided {
			rs[n] = &out[a.v][a.i].Rollouts[a.k]
		}
		if err := s.creditSpans(rs, ds, skips, inline); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// creditSpans gives the delegator's rollouts rs of a step the advantages
// of their delegate calls ds, under decision or counterfactual credit,
// then of the skips and inline blocks the run asks to credit.
func (s *rollouts) creditSpans(rs []*rl.ScoredRollout, ds [][]decision, skips [][]int, inline [][][]int) error {
	cfg := s.r.cfg
	credit := func() error { return creditDecisions(s.cfg.Estimator, rs, ds) }
	switch {
	case cfg.Credit == reward.CreditCounterfactual && cfg.CentreCalls:
		credit = func() error { return creditCentred(rs, ds) }
	case cfg.Credit == reward.CreditCounterfactual:
		credit = func() error { return creditCounterfactual(rs, ds) }
	}
	if err := credit(); err != nil {
		return err
	}
	if cfg.SkipCredit {
		if err := creditSkips(rs, ds, skips); err != nil {
			return err
		}
	}
	if cfg.InlineCredit {
		if err := creditInline(rs, inline); err != nil {
			return err
		}
	}
	return nil
}

// failures counts the rollouts of g that were not scored and describes
// the first.
func failures(g rollout.Group, item int) (failed int, first string) {
	for _, res := range g.Rollouts {
		if res.Score == nil {
			if failed == 0 {
				first = fmt.Sprintf("item %d rollout %d: %s", item, res.Index, res.Error)
			}
			failed++
		}
	}
	return failed, first
}

// policies builds rollout k of the step's problem i: the strategy around
// the seats' agents. A trained agent samples at the trainer's temperature
// and token cap, seeded with the rollout's seed.
func (s *rollouts) policies(step int, problems []*world.Problem) rollout.Policies {
	cfg := s.cfg
	return func(i, k int) (delegate.Strategy, error) {
		n := i*cfg.GroupSize + k
		delegator, solver := s.r.seatAgents(s.delegator.m, s.solver.m)
		delegator.Sampler, solver.Sampler = s.delegator.sampler(cfg, step, n), s.solver.sampler(cfg, step, n)
		return s.build(problems[i], delegator, solver)
	}
}

// RoleCredits gives the samples of a group's episodes their advantages
// per role (reward.RoleCredit). First the world says which of the
// solver's answers are right (checkSubtasks). In a tied group (every
// reward equal, or every rollout a format failure) a sample judged by
// the task's outcome gets 0, as under task credit. It is train --credit
// role's rule in process; it sets the Correct of rec's solver samples.
func RoleCredits(est reward.Estimator, rec *rollout.GroupRecord) ([][]reward.SampleCredit, error) {
	if len(rec.Episodes) != len(rec.Rollouts) {
		return nil, fmt.Errorf("role credit: %d episodes for %d rollouts", len(rec.Episodes), len(rec.Rollouts))
	}
	for _, e := range rec.Episodes {
		checkSubtasks(e)
	}
	credits, err := reward.RoleCredit(est, rec.Episodes)
	if err != nil {
		return nil, err
	}
	if rec.Reason != "" {
		for i, e := range rec.Episodes {
			for j, sm := range e.Samples {
				if sm.Correct == nil {
					credits[i][j].Advantage = 0
				}
			}
		}
	}
	return credits, nil
}

// SolverRoles are the trace roles of route's solver: the sub-agent as
// train names it, and as process names it (strategy.RoleWeak).
var SolverRoles = []string{RoleSubagent, strategy.RoleWeak}

// checkSubtasks sets Correct on each solver sample (SolverRoles) whose
// question is a world operation (SubtaskCorrect).
func checkSubtasks(e *delegate.Episode) {
	for j := range e.Samples {
		sm := &e.Samples[j]
		if !slices.Contains(SolverRoles, sm.Role) {
			continue
		}
		if ok := SubtaskCorrect(sm.Question, sm.Answer); ok != nil {
			sm.Correct = ok
		}
	}
}

// SubtaskCorrect is the world's check of a sub-agent's answer. When
// question is a world operation, such as "47*28", it says whether answer
// is the exact result. A question in any other form has no verifiable
// result: nil.
func SubtaskCorrect(question, answer string) *bool {
	op, x, y, err := world.ParseExpr(strings.TrimSpace(question))
	if err != nil {
		return nil
	}
	ok := world.Correct(answer, op.Apply(x, y))
	return &ok
}

// episodeAdvantages matches a role's training sequences to the samples
// of their episode by their first call and returns their advantages.
func episodeAdvantages(eps []rl.Episode, e *delegate.Episode, credits []reward.SampleCredit) ([]float64, error) {
	at := make(map[int]int, len(e.Samples))
	for j, sm := range e.Samples {
		at[sm.Calls[0]] = j
	}
	out := make([]float64, len(eps))
	for n, ep := range eps {
		if len(ep.IDs) == 0 {
			return nil, fmt.Errorf("sequence %s names no call", ep.Node)
		}
		j, ok := at[ep.IDs[0]]
		if !ok {
			return nil, fmt.Errorf("sequence %s is no sample of the episode", ep.Node)
		}
		out[n] = credits[j].Advantage
	}
	return out, nil
}
