package train

import (
	"context"
	"fmt"
	"math"
	"path/filepath"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
	"github.com/delegatelab/delegate/world/transcript"
)

// routeMode trains the delegator, the solver or both under route: the
// delegator hands steps to the solver as tool calls.
type routeMode struct{ r *runner }

func (routeMode) startModel() string          { return RouterModel }
func (routeMode) settings(*strategy.Config)   {}
func (routeMode) open() error                 { return nil }
func (routeMode) startArms() int              { return 1 }
func (routeMode) acceptance(t *Table) []Check { return routeAcceptance(t) }
func (m routeMode) notes() []string           { return m.r.routeNotes() }

// prepare chooses the best fixed rule and the best keyword rule on
// training items.
func (m routeMode) prepare(ctx context.Context, phase func(string)) error {
	r := m.r
	phase("choose the best fixed rule on training items")
	best, err := r.chooseRule(ctx, m.ruleArms())
	if err != nil {
		return err
	}
	r.bestRule = best
	phase("choose the best keyword rule on training items")
	if r.bestKeyword, err = r.chooseKeywordRule(ctx); err != nil {
		return err
	}
	if r.cfg.Coverage.MulFirstBelow > 0 {
		phase("fit the threshold rule on training items")
		if r.threshold, err = r.fitThreshold(ctx); err != nil {
			return err
		}
	}
	return nil
}

// productSaving is the delegator tokens saved by delegating a product of
// two 2-digit numbers. It is the scratchpad's 161 tokens less the compact
// call's 31, as world.WorthDelegating says.
const productSaving = 130

// fitThreshold fits the first-factor threshold rule to the solver's
// answers on the first RuleItems training problems
// (scripted.FitThreshold). A product answered right gains the reward of
// the tokens it saves less a call; one answered wrong, thresholdStakes'
// loss.
func (r *runner) fitThreshold(ctx context.Context) (int64, error) {
	problems := r.trainSet[:min(r.cfg.RuleItems, len(r.trainSet))]
	gain, loss := thresholdStakes(r.cfg.Reward)
	t, err := scripted.FitThreshold(ctx, r.solver, problems, gain, loss)
	if err != nil {
		return 0, fmt.Errorf("train: threshold rule on training items: %w", err)
	}
	r.opt.Log.Info("train: threshold rule on training items", "first factor below", t, "items", len(problems))
	return t, nil
}

// thresholdStakes are what delegating a product earns under rew: gain when
// the solver answers it right, minus loss when wrong. A wrong answer loses
// the item but still saves the tokens, so loss is 1 less the gain. Under
// a gate a wrong answer saves nothing and drops the item from at least
// 1 − Gate to −Gate: loss is 1, the least it can be.
func thresholdStakes(rew reward.Graded) (gain, loss float64) {
	gain = rew.Lambda*productSaving - rew.Mu
	if rew.Gate > 0 {
		return gain, 1
	}
	return gain, 1 - gain
}

// thresholdName is the table's arm of the threshold rule at t.
func thresholdName(t int64) string {
	return fmt.Sprintf("%s: delegate the products whose first factor is below %d", ArmThreshold, t)
}

// baselines are the delegator alone, the fixed rules, the best keyword
// rule, the oracle and the pretrained delegator.
func (m routeMode) baselines() []bench.Arm {
	r := m.r
	arms := []bench.Arm{
		{Name: ArmAlone, Role: bench.RoleStrong, Strategy: perRun{strategy.NameSingle, func(string) (delegate.Strategy, error) {
			return r.single(r.delegatorAgent(newConversation(r.pretrained, r.cfg.CacheMinTokens)))
		}}},
	}
	arms = append(arms, m.ruleArms()...)
	arms = append(arms, r.scriptedArm(keywordName(r.bestKeyword), r.bestKeyword.Decider()))
	if r.threshold > 0 {
		arms = append(arms, r.scriptedArm(thresholdName(r.threshold), scripted.Threshold(r.threshold)))
	}
	arms = append(arms, r.scriptedArm(ArmOracle, scripted.Oracle(r.solver)))
	return append(arms, bench.Arm{Name: ArmPretrained, Strategy: perRun{strategy.NameRoute, func(string) (delegate.Strategy, error) {
		return r.route(r.scfg, r.pretrained, r.solver)
	}}})
}

// ruleArms are the input-independent per-position rules: every subset of
// the positions of the world's longest problem delegated, the others
// computed.
func (m routeMode) ruleArms() []bench.Arm {
	n := m.r.cfg.World.MaxSteps
	arms := make([]bench.Arm, 0, 1<<n)
	for mask := range uint(1) << n {
		arms = append(arms, m.r.scriptedArm(ruleName(mask, n), scripted.FromPolicy(world.PositionRule(mask))))
	}
	return arms
}

func ruleName(mask uint, steps int) string {
	return ArmRule + ": " + world.PositionRuleName(mask, steps)
}

// trainedArms are the arms Config.Train gives. They pair the trained
// delegator with the pretrained solver, the pretrained delegator with the
// trained solver, and the two trained.
func (m routeMode) trainedArms(steps int) []bench.Arm {
	r := m.r
	arm := func(name string, delegator, solver delegate.Model) bench.Arm {
		return bench.Arm{Name: trainedName(name, steps), Strategy: perRun{strategy.NameRoute, func(string) (delegate.Strategy, error) {
			return r.route(r.scfg, delegator, solver)
		}}}
	}
	var arms []bench.Arm
	if r.cfg.trainsDelegator() {
		arms = append(arms, arm(ArmTrained, r.policy, r.solver))
	}
	if r.cfg.trainsSolver() {
		arms = append(arms, arm(ArmTrainedSolver, r.pretrained, r.trainedSolver))
	}
	if r.cfg.Train == TrainBoth {
		arms = append(arms, arm(ArmTrainedBoth, r.policy, r.trainedSolver))
	}
	return arms
}

// source rolls out route on the training problems with each trained seat
// sampled as its policy.
func (m routeMode) source(_ context.Context, cfg rl.Config) (rl.Source, error) {
	r := m.r
	s := r.problemEnv(cfg, r.trainSet, func(_ *world.Problem, delegator, solver delegate.Agent) (delegate.Strategy, error) {
		return r.routeAgents(r.scfg, delegator, solver)
	})
	// A seat not trained plays as in the table: the pretrained delegator
	// at the table's temperature, the pretrained solver greedy.
	s.delegator = seat{m: r.pretrained}
	s.roles = nil
	if r.cfg.trainsDelegator() {
		s.delegator = seat{m: r.policy, trained: true, maxNew: cfg.MaxNewTokens}
		s.roles = append(s.roles, trainedRole{RoleDelegator, r.policyP.Config.Context})
	}
	if r.cfg.trainsSolver() {
		s.solver = seat{m: r.trainedSolver, trained: true, maxNew: r.scfg.Weak.MaxTokens, salt: SolverSalt}
		s.roles = append(s.roles, trainedRole{RoleSubagent, r.solverP.Config.Context})
	}
	s.credit = r.cfg.roleCredit()
	sc := r.cfg.trainScorer()
	s.scorer = sc
	switch r.cfg.Credit {
	case reward.CreditStep:
		s.scorer = stepScorer{sc}
	case reward.CreditDecision, reward.CreditCounterfactual:
		rew := r.cfg.Reward
		s.decision = &rew
	}
	return s, nil
}

// final adds the arms that follow a trained delegator. They are random
// delegation at its rate and, delegator only, the SFT arm. It adds the
// design cut and the cost under other prices.
func (m routeMode) final(ctx context.Context, phase func(string), arms []bench.Arm, tab *Table, steps int) ([]bench.Arm, *Table, error) {
	r, cfg := m.r, m.r.cfg
	if cfg.trainsDelegator() {
		// Random delegation at the rate the trained policy delegates.
		rate := tab.Row(ArmTrained).DelegationRate()
		name := fmt.Sprintf("%s (%.2f, step %d)", ArmRandom, rate, steps)
		arms = append(arms, r.scriptedArm(name, scripted.FromPolicy(world.RandomRate(rate, cfg.Seed))))
		if cfg.Train == TrainDelegator {
			phase("SFT on the oracle's transcripts")
			sft, err := r.sftArm(ctx)
			if err != nil {
				return nil, nil, err
			}
			arms = append(arms, sft)
		}
		var err error
		if tab, err = r.evaluate(ctx, arms); err != nil {
			return nil, nil, err
		}
	}
	tab.BestRule = r.bestRule
	tab.BestKeyword = keywordName(r.bestKeyword)
	if r.threshold > 0 {
		tab.BestThreshold = thresholdName(r.threshold)
	}
	if cfg.trainsDelegator() {
		tab.DesignCut = r.designCut()
		if ps := tab.PriceSensitivity(PriceCases(cfg.Prices),
			[]string{ArmAlone, tab.BestRule, tab.BestKeyword, ArmPretrained, ArmTrained, ArmOracle},
			ArmTrained, []string{ArmAlone, tab.BestRule, tab.BestKeyword}); ps != "" {
			tab.Appendix = "Cost (µ$ per item) under other prices, from the stored items:\n\n" + ps
		}
	}
	return arms, tab, nil
}

// route builds route with the delegator in the strong seat and the solver
// answering what it delegates. The delegator sees the tool declared as in
// its pretraining transcripts.
func (r *runner) route(scfg strategy.Config, delegator, solver delegate.Model) (delegate.Strategy, error) {
	d, s := r.seatAgents(delegator, solver)
	return r.routeAgents(scfg, d, s)
}

// routeAgents builds route with the seats' agents (seatAgents).
func (r *runner) routeAgents(scfg strategy.Config, delegator, solver delegate.Agent) (delegate.Strategy, error) {
	return r.observe(strategy.New(strategy.NameRoute, strategy.Roles{Strong: delegator, Weak: solver}, scfg))
}

// scriptedArm is a policy run by a program in route's delegator seat
// (scripted.Delegator). It runs on the training and held-out problems.
func (r *runner) scriptedArm(name string, decide scripted.Decider) bench.Arm {
	prog := scripted.New(name, append(append([]*world.Problem(nil), r.trainSet...), r.testSet...), decide)
	return bench.Arm{Name: name, Strategy: perRun{strategy.NameRoute, func(string) (delegate.Strategy, error) {
		return r.route(r.scfg, prog, r.solver)
	}}}
}

// chooseKeywordRule runs scripted.KeywordRules on the first RuleItems
// training problems and returns the one of highest mean reward. It is the
// best rule reading a step's sentence and operands, chosen without the
// held-out items. Rules that decide alike on every step of
// those problems run once (scripted.Distinct); the solver's answers are
// memoized, as it answers greedily.
func (r *runner) chooseKeywordRule(ctx context.Context) (scripted.KeywordRule, error) {
	problems := r.trainSet[:min(r.cfg.RuleItems, len(r.trainSet))]
	rules := scripted.Distinct(scripted.KeywordRules(), problems)
	r.keywordRules = len(rules)
	solver := r.solver.Memoized()
	arms := make([]bench.Arm, len(rules))
	names := make([]string, len(rules))
	for i, k := range rules {
		prog := scripted.New(k.Name(), problems, k.Decider())
		names[i] = keywordName(k)
		arms[i] = bench.Arm{Name: names[i], Strategy: perRun{strategy.NameRoute, func(string) (delegate.Strategy, error) {
			return r.route(r.scfg, prog, solver)
		}}}
	}
	path := filepath.Join(r.cfg.OutDir, KeywordsFile)
	ecfg := bench.DefaultConfig()
	ecfg.Results, ecfg.Concurrency, ecfg.Label = path, r.cfg.EvalConcurrency, labelDelegated
	if _, err := bench.Run(ctx, ecfg, tasksOf(problems), arms, world.Verify, r.opt.EvalProgress); err != nil {
		return scripted.KeywordRule{}, fmt.Errorf("train: keyword rules on training items: %w", err)
	}
	records, _, err := bench.ReadResults(path)
	if err != nil {
		return scripted.KeywordRule{}, fmt.Errorf("train: keyword rules on training items: %w", err)
	}
	tab, err := NewTable(names, tasksOf(problems), records, r.cfg.Reward, r.byID)
	if err != nil {
		return scripted.KeywordRule{}, fmt.Errorf("train: keyword rules on training items: %w", err)
	}
	rewards := make([]float64, len(tab.Rows))
	for i := range tab.Rows {
		rewards[i] = tab.Rows[i].Reward
	}
	best, reward, _ := scripted.Best(rules, rewards)
	r.opt.Log.Info("train: best keyword rule on training items", "rule", best.Name(), "reward", reward, "items", len(problems), "rules run", len(rules))
	return best, nil
}

// designCut is the cost cut per item of the world's optimal policy, against
// solving alone. The policy is the coverage's selective one, world.Selective
// in the default world. The cut is computed on the held-out problems'
// transcripts (transcript.Measure) at the run's prices. It is what the
// world's design allows, beside the measured cut. Earlier turns count as
// cached only with Config.CacheMinTokens 0, as the problems' prompts are
// shorter than any real API's cache minimum.
func (r *runner) designCut() float64 {
	acc := transcript.DesignAccuracy()
	alone := transcript.Measure("single", r.testSet, transcript.Single, r.cfg.Prices, r.cfg.Reward, acc)
	best := transcript.Measure("selective", r.testSet, func(p *world.Problem) transcript.Episode { return transcript.Route(p, r.cfg.Coverage.Selective) }, r.cfg.Prices, r.cfg.Reward, acc)
	a, b := alone.CostUncached, best.CostUncached
	if r.cfg.CacheMinTokens == 0 {
		a, b = alone.Cost, best.Cost
	}
	if a == 0 {
		return math.NaN()
	}
	return 1 - b/a
}

// keywordName is the table's arm of a keyword rule.
func keywordName(k scripted.KeywordRule) string { return ArmKeyword + ": " + k.Name() }
