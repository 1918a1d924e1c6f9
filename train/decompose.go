package train

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
	"github.com/delegatelab/delegate/world/transcript"
)

// ModeDecompose trains the delegator under decompose, the reference
// environment's loop. The delegator plans subtasks, the solver answers
// each in parallel, and the delegator aggregates their results. Its answer
// is rewarded against the single-agent baseline's on the same problem:
// the delegator alone, greedy, from its starting weights. Config.Parity
// scores a win, a tie or a loss, the reference's buckets. By default the
// graded comparison scores the difference of correctness minus the cost of
// the delegator's tokens and sub-agent calls. The graded
// baseline term is one constant per group, so it leaves the advantages
// those of the world's reward; only the parity buckets change them. Both
// of the delegator's turns, the plan and the aggregation, are trained.
const ModeDecompose = "decompose"

// PlannerModel is the shipped model a decompose run starts from when
// Config.Delegator is "". It is the delegator pretrained further on
// two-part problems (models/README.md).
const PlannerModel = "planner"

// Arm names of the decompose table, in its order.
const (
	ArmSingle         = "delegator alone (single)"
	ArmPlanRule       = "fixed plan" // followed by ": " and scripted.ReadyRuleName
	ArmPlanOracle     = "oracle plan (upper bound)"
	ArmPretrainedPlan = "pretrained delegator under decompose"
	ArmTrainedPlan    = "RL-trained delegator under decompose"
	ArmRandomPlan     = "random plan at the trained rate" // followed by " (q, step s)"
)

// decomposeMode trains the delegator under decompose.
type decomposeMode struct{ r *runner }

func (decomposeMode) startModel() string          { return PlannerModel }
func (decomposeMode) open() error                 { return nil }
func (decomposeMode) startArms() int              { return 1 }
func (decomposeMode) acceptance(t *Table) []Check { return decomposeAcceptance(t) }
func (m decomposeMode) notes() []string           { return m.r.decomposeNotes() }

func (m decomposeMode) source(_ context.Context, cfg rl.Config) (rl.Source, error) {
	return m.r.decomposeEnv(cfg), nil
}

// prepare chooses the best fixed plan on training items.
func (m decomposeMode) prepare(ctx context.Context, phase func(string)) error {
	phase("choose the best fixed rule on training items")
	best, err := m.r.chooseRule(ctx, m.r.planRuleArms())
	if err != nil {
		return err
	}
	m.r.bestRule = best
	return nil
}

// final adds random planning at the trained rate and the comparison with
// the single-agent baseline.
func (m decomposeMode) final(ctx context.Context, _ func(string), arms []bench.Arm, tab *Table, steps int) ([]bench.Arm, *Table, error) {
	arms, tab, err := m.r.decomposeFinal(ctx, arms, tab, steps)
	if err != nil {
		return nil, nil, err
	}
	tab.BestRule = m.r.bestRule
	return arms, tab, nil
}

// settings sets decompose's stages in scfg. The delegator's plan and
// aggregation run at the table's temperature; training samples them at the
// trainer's. The solver is greedy. Every call is capped at
// RL.MaxNewTokens.
func (m decomposeMode) settings(scfg *strategy.Config) {
	cfg := m.r.cfg
	scfg.Plan.Temperature, scfg.Aggregate.Temperature = cfg.EvalTemperature, cfg.EvalTemperature
	scfg.Subagent.Temperature = 0
	for _, g := range []*strategy.Generation{&scfg.Plan, &scfg.Aggregate, &scfg.Subagent} {
		g.MaxTokens = min(g.MaxTokens, cfg.RL.MaxNewTokens)
	}
}

// decompose builds decompose with delegator in the delegator's seat (both
// turns) and solver answering the subtasks.
func (r *runner) decompose(delegator, solver delegate.Model) (delegate.Strategy, error) {
	return r.decomposeAgents(r.seatAgents(delegator, solver))
}

// decomposeAgents builds decompose with the seats' agents (seatAgents).
func (r *runner) decomposeAgents(delegator, solver delegate.Agent) (delegate.Strategy, error) {
	return r.observe(strategy.New(strategy.NameDecompose, strategy.Roles{Delegator: delegator, Subagent: solver}, r.scfg))
}

// singleStrategy is the delegator's weights m alone under single, the
// baseline every decompose answer is compared with.
func (r *runner) singleStrategy(m delegate.Model) delegate.Strategy {
	return perRun{strategy.NameSingle, func(string) (delegate.Strategy, error) {
		return r.single(r.delegatorAgent(newConversation(m, r.cfg.CacheMinTokens)))
	}}
}

// plannerArm is a planning policy run by a program in decompose's
// delegator seat (scripted.Planner). It runs on the training and held-out
// problems.
func (r *runner) plannerArm(name string, decide scripted.Decider) bench.Arm {
	prog := scripted.NewPlanner(name, append(append([]*world.Problem(nil), r.trainSet...), r.testSet...), decide)
	return bench.Arm{Name: name, Strategy: perRun{strategy.NameDecompose, func(string) (delegate.Strategy, error) {
		return r.decompose(prog, r.solver)
	}}}
}

// readyPositions is the most ready steps a training problem has, at most
// transcript.MaxSubtasks. The fixed plans choose among these positions.
func (r *runner) readyPositions() int {
	n := 1
	for _, p := range r.trainSet {
		n = max(n, scripted.ReadySteps(p))
	}
	return min(n, transcript.MaxSubtasks)
}

// planRuleArms are the fixed plans: each hands over a non-empty subset of
// the ready positions. A plan needs a subtask, so a problem without the
// positions a rule names hands over its first ready step.
func (r *runner) planRuleArms() []bench.Arm {
	n := r.readyPositions()
	arms := make([]bench.Arm, 0, 1<<n-1)
	for mask := uint(1); mask < 1<<n; mask++ {
		arms = append(arms, r.plannerArm(ArmPlanRule+": "+scripted.ReadyRuleName(mask, n), scripted.ReadyRule(mask)))
	}
	return arms
}

// baselines are the delegator alone, the fixed plans, the oracle plan and
// the pretrained delegator under decompose.
func (m decomposeMode) baselines() []bench.Arm {
	r := m.r
	arms := []bench.Arm{{Name: ArmSingle, Role: bench.RoleStrong, Strategy: r.singleStrategy(r.pretrained)}}
	arms = append(arms, r.planRuleArms()...)
	arms = append(arms, r.plannerArm(ArmPlanOracle, scripted.Oracle(r.solver)))
	return append(arms, bench.Arm{Name: ArmPretrainedPlan, Strategy: perRun{strategy.NameDecompose, func(string) (delegate.Strategy, error) {
		return r.decompose(r.pretrained, r.solver)
	}}})
}

// trainedArms are the trained delegator under decompose.
func (m decomposeMode) trainedArms(steps int) []bench.Arm {
	r := m.r
	return []bench.Arm{{Name: trainedName(ArmTrainedPlan, steps), Strategy: perRun{strategy.NameDecompose, func(string) (delegate.Strategy, error) {
		return r.decompose(r.policy, r.solver)
	}}}}
}

// decomposeEnv trains the delegator under decompose on the training
// problems. Each rollout is scored against the single-agent baseline. The
// baseline is the starting weights alone, greedy, played once per problem
// and shared by the group, as the reference plays it once per group.
func (r *runner) decomposeEnv(cfg rl.Config) rl.Source {
	s := r.problemEnv(cfg, r.trainSet, func(_ *world.Problem, delegator, solver delegate.Agent) (delegate.Strategy, error) {
		return r.decomposeAgents(delegator, solver)
	})
	s.baseline = r.singleStrategy(r.pretrained.Memoized())
	s.scorer = versusScorer{g: r.cfg.Reward, parity: r.cfg.Parity}
	return s
}

// versusScorer scores a decompose rollout against the single-agent
// baseline's answer. The reference environment does so with its judge;
// here the verifier is exact. The rollout's answer wins, right where the
// baseline is wrong, ties or loses. With parity the reward is the
// reference's bucket (reward.Parity over an exact verdict: +3, +0.1, −3;
// −10 for a plan that fails its format, 0 for an aggregation that does,
// or for a baseline that does); otherwise versusGraded. The rollout's own
// correctness, its cost and format are read as Scorer reads them. Safe
// for concurrent use.
type versusScorer struct {
	g      reward.Graded
	parity bool
}

func (s versusScorer) Score(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (rollout.Score, error) {
	if base == nil {
		return rollout.Score{}, fmt.Errorf("score task %q: no single-agent baseline", task.ID)
	}
	sc, err := Scorer(s.g).Score(ctx, rec, task, base, tr)
	if err != nil {
		return sc, err
	}
	v, err := world.Verify(task, base.Answer)
	if err != nil {
		return rollout.Score{}, fmt.Errorf("score task %q: baseline: %w", task.ID, err)
	}
	baseOK := v.Correct && base.Failure == ""
	o := *sc.Inputs
	if o.Correct != nil {
		verdict := exactVerdict(*o.Correct, baseOK)
		o.Verdict = &verdict
	}
	sc.Baseline = 0
	if baseOK {
		sc.Baseline = 1
	}
	if s.parity {
		sc.Reward = reward.Parity(o)
	} else {
		sc.Reward = versusGraded(s.g, o, baseOK)
	}
	sc.Inputs = &o
	return sc, nil
}

// exactVerdict is the verdict of an exact comparison of two answers'
// correctness on the judge's 0-100 scale.
func exactVerdict(correct, baseOK bool) judge.Verdict {
	v := judge.Verdict{Mode: "exact", Outcome: judge.Tie}
	if correct {
		v.Candidate = 100
	}
	if baseOK {
		v.Baseline = 100
	}
	v.Diff = v.Candidate - v.Baseline
	switch {
	case v.Diff > 0:
		v.Outcome = judge.Win
	case v.Diff < 0:
		v.Outcome = judge.Loss
	}
	return v
}

// versusGraded is the graded reward of a decompose rollout against the
// baseline. It is the rollout's correctness minus the baseline's, minus
// g's cost of its tokens and calls. That is 1 a win, 0 a tie, −1 a loss. A
// rollout without a proper answer counts wrong, and also gets
// g.FormatPenalty. Within a group
// the baseline's term is the same for every rollout, so the advantages
// are those of the world's reward; the term puts the reward on the
// reference's scale, above 0 exactly when the rollout beats the baseline
// net of its cost. NaN when the rollout has no result.
func versusGraded(g reward.Graded, o reward.Outcome, baseOK bool) float64 {
	if o.Error != "" {
		return math.NaN()
	}
	q := 0.0
	if o.Correct != nil && *o.Correct && o.FormatOK && !o.Truncated {
		q = 1
	}
	if baseOK {
		q--
	}
	if !o.FormatOK || o.Truncated {
		q += g.FormatPenalty
	}
	return q - g.CostTerm(o)
}

// decomposeFinal adds random planning at the trained policy's rate to the
// table. It adds every arm's comparison with the single-agent baseline.
func (r *runner) decomposeFinal(ctx context.Context, arms []bench.Arm, tab *Table, steps int) ([]bench.Arm, *Table, error) {
	trained := tab.Row(ArmTrainedPlan)
	if trained == nil {
		return nil, nil, fmt.Errorf("train: decompose table: no row %s", ArmTrainedPlan)
	}
	q := randomPlanRate(r.testSet, trained.SubagentCalls)
	name := fmt.Sprintf("%s (%.2f, step %d)", ArmRandomPlan, q, steps)
	arms = append(arms, r.plannerArm(name, scripted.FromPolicy(world.RandomRate(q, r.cfg.Seed))))
	tab, err := r.evaluate(ctx, arms)
	if err != nil {
		return nil, nil, err
	}
	records, _, err := bench.ReadResults(filepath.Join(r.cfg.OutDir, EvalFile))
	if err != nil {
		return nil, nil, fmt.Errorf("train: decompose table: %w", err)
	}
	stages := failureStages(records)
	tasks := tasksOf(r.testSet)
	penalize(tab, stages, tasks, r.cfg.Reward.FormatPenalty)
	tab.Appendix, err = versusTable(tab, stages, tasks)
	if err != nil {
		return nil, nil, err
	}
	return arms, tab, nil
}

// penalize adds penalty to the reward of each item of tab that failed. Such
// an item ended without a proper answer, at a stage in stages. Training's
// reward does the same (versusGraded). It recomputes the rows' means and
// intervals.
func penalize(tab *Table, stages map[[2]string]reward.Stage, tasks []delegate.Task, penalty float64) {
	if penalty == 0 {
		return
	}
	for i := range tab.Rows {
		row := &tab.Rows[i]
		rewards := make([]float64, len(row.Items))
		for j := range row.Items {
			if j < len(tasks) && stages[[2]string{row.Arm, tasks[j].ID}] != "" {
				row.Items[j].Reward += penalty
			}
			rewards[j] = row.Items[j].Reward
		}
		row.Reward, row.RewardCI = rewardCI(rewards, row.Correct)
	}
}

// randomPlanRate is the probability q that makes a random plan hand over
// subtasks per problem on average. The plan hands over each ready step
// with probability q, and the first when it draws none. So a problem of k
// ready steps gets k·q + (1−q)^k of them. Found by bisection; the count
// grows with q.
func randomPlanRate(problems []*world.Problem, subtasks float64) float64 {
	mean := func(q float64) float64 {
		var s float64
		for _, p := range problems {
			k := float64(min(scripted.ReadySteps(p), transcript.MaxSubtasks))
			s += k*q + math.Pow(1-q, k)
		}
		return s / float64(max(len(problems), 1))
	}
	lo, hi := 0.0, 1.0
	for range 50 {
		mid := (lo + hi) / 2
		if mean(mid) < subtasks {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// failureStages returns, per arm and task ID, the reward stage of a
// record's own failure, or "" for none. reward.StagePlan is a plan that
// failed its format or a run cut short by its calls. reward.StageAnswer is
// an aggregation or a single answer that failed its format. The last
// record of each wins, as in NewTable.
func failureStages(records []bench.Record) map[[2]string]reward.Stage {
	out := make(map[[2]string]reward.Stage, len(records))
	for _, rec := range records {
		var st reward.Stage
		switch kind := delegate.ParseFailureKind(rec.Failure); {
		case rec.Failure == "" && rec.Error == "":
		case kind == delegate.FailureAnswerFormat, kind == delegate.FailureTruncated:
			st = reward.StageAnswer
		default:
			st = reward.StagePlan
		}
		out[[2]string{rec.Arm, rec.TaskID}] = st
	}
	return out
}

// versusTable compares every arm but the baseline with the single-agent
// baseline (ArmSingle), item by item. It counts wins, ties and losses,
// the reference's parity reward (reward.Parity on the exact verdict) and
// the graded reward against the baseline (the table's reward, format
// penalty included, minus the baseline's correctness), each a mean with
// its normal 95% interval.
func versusTable(t *Table, stages map[[2]string]reward.Stage, tasks []delegate.Task) (string, error) {
	base := t.Row(ArmSingle)
	if base == nil {
		return "", fmt.Errorf("train: decompose table: no row %s", ArmSingle)
	}
	var b strings.Builder
	b.WriteString("Against the single-agent baseline (" + ArmSingle + "), item by item, as the rollouts are rewarded:\n\n")
	b.WriteString("| arm | wins | ties | losses | parity reward [95% CI] | graded reward against the baseline [95% CI] |\n")
	b.WriteString("|---|---:|---:|---:|---|---|\n")
	for i := range t.Rows {
		row := &t.Rows[i]
		if row.Arm == ArmSingle {
			continue
		}
		if len(row.Items) != len(base.Items) || len(row.Items) != len(tasks) {
			return "", fmt.Errorf("train: decompose table: rows %s and %s do not hold the same items", row.Arm, base.Arm)
		}
		var win, tie, loss int
		parity := make([]float64, len(row.Items))
		graded := make([]float64, len(row.Items))
		for j, it := range row.Items {
			baseOK := base.Items[j].Correct
			v := exactVerdict(it.Correct, baseOK)
			switch v.Outcome {
			case judge.Win:
				win++
			case judge.Loss:
				loss++
			default:
				tie++
			}
			o := reward.Outcome{FormatOK: true, Verdict: &v}
			if st := stages[[2]string{row.Arm, tasks[j].ID}]; st != "" {
				o.FormatOK, o.FailedStage = false, st
			}
			if stages[[2]string{base.Arm, tasks[j].ID}] != "" {
				o.BaselineFailure = "format"
			}
			parity[j] = reward.Parity(o)
			graded[j] = it.Reward - b2f(baseOK)
		}
		pm, pci := bench.MeanCI(parity)
		gm, gci := bench.MeanCI(graded)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %+.3f [%+.3f, %+.3f] | %+.3f [%+.3f, %+.3f] |\n",
			row.Arm, win, tie, loss, pm, pci.Lo, pci.Hi, gm, gci.Lo, gci.Hi)
	}
	return b.String(), nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// decomposeAcceptance decides a decompose run's criteria. Each is paired on
// the shared items. The RL-trained delegator's reward under decompose beats
// the pretrained delegator's under decompose, the best fixed plan's (chosen
// on training items, Table.BestRule), every fixed plan's, random planning's
// at its rate, and the delegator alone's (the single-agent baseline: the
// graded reward against it is above 0) by the paired bootstrap 95% interval
// of the mean difference; and its accuracy is not lower than the delegator
// alone's nor the pretrained delegator's under decompose (McNemar's test,
// exact below 25 discordant items, does not find it less accurate at p <
// 0.05). A criterion whose arms are missing is not met.
func decomposeAcceptance(t *Table) []Check {
	out := t.beatsEach(ArmTrainedPlan, "no best fixed plan was chosen", []baseArm{
		{"RL-trained reward beats the pretrained delegator under decompose" + paired, ArmPretrainedPlan},
		{"RL-trained reward beats the best fixed plan chosen on training items" + paired, t.BestRule},
		{"RL-trained reward beats random planning at its own rate" + paired, ArmRandomPlan},
		{"RL-trained reward beats the delegator alone, the single-agent baseline" + paired, ArmSingle},
	})
	out = append(out, t.beatsEvery("RL-trained reward beats every fixed plan"+paired, ArmTrainedPlan, ArmPlanRule, "fixed plans"))
	for _, arm := range []string{ArmSingle, ArmPretrainedPlan} {
		name := "RL-trained accuracy not lower than the " + arm + "'s (McNemar's test, exact below 25 discordant items: not less accurate at p < 0.05)"
		rs, c, ok := t.pairedRows(name, ArmTrainedPlan, arm)
		if !ok {
			out = append(out, c)
			continue
		}
		x, y := rs[0], rs[1]
		m := mcnemar(x, y)
		out = append(out, Check{Name: name, Pass: !(m.B > m.C && m.P < 0.05),
			Detail: fmt.Sprintf("accuracy %.3f against %.3f on %d shared items: %d right only by the trained, %d only by the other, McNemar p %.3g (%s)",
				x.Accuracy, y.Accuracy, len(x.Items), m.C, m.B, m.P, m.Method)})
	}
	return out
}

// decomposeNotes say how a decompose table was made.
func (r *runner) decomposeNotes() []string {
	c := r.cfg
	start := c.Delegator
	if start == "" {
		start = "the shipped " + PlannerModel + " (embedded)"
	}
	rew := fmt.Sprintf("the graded comparison: its correctness minus the baseline's (+1 a win, 0 a tie, −1 a loss) − %g·delegator generated tokens − %g·sub-agent calls", c.Reward.Lambda, c.Reward.Mu)
	if c.Parity {
		rew = "the reference's parity buckets (reward.Parity on the exact verdict: +3 a win, +0.1 a tie, −3 a loss, −10 a plan that fails its format, 0 an aggregation that does)"
	}
	return []string{
		fmt.Sprintf("Decompose: the delegator (starting from %s) plans %d-%d subtasks, the solver answers each, greedy and without the problem, and the delegator aggregates; both of its turns are trained. A rollout's reward is %s, against the single-agent baseline: the starting weights alone under single, greedy, once per problem.",
			start, transcript.MinSubtasks, transcript.MaxSubtasks, rew),
		fmt.Sprintf("The reward column above is each arm's own reward (correct − λ·tokens − μ·calls, plus the format penalty %g for an item that ended without a proper answer); the graded reward against the baseline is it minus the baseline's correctness, item by item, so every paired reward comparison between arms is the same on either scale.", c.Reward.FormatPenalty),
		"Fixed plans hand over the steps computable from the text at the given ready positions (in step order) and compute the others; the oracle plan hands over a ready step worth delegating exactly when the solver answers it right; random planning hands over each ready step with the probability q that matches the trained delegator's subtasks per item. A plan needs a subtask, so each of them hands over the first ready step when it picks none; there is no plan that hands over nothing (that is the delegator alone). They are programs in the delegator's seat that never slip (scripted.Planner): they measure the plan, not a model executing it.",
	}
}
