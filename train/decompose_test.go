package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
)

// TestVersusScorer checks decompose's graded and parity rewards against
// the single-agent baseline. It covers every outcome of a rollout and of
// the baseline.
func TestVersusScorer(t *testing.T) {
	g := DefaultConfig().Reward
	task := delegate.Task{ID: "p", Prompt: "How many?", Answer: "1953"}
	roles := map[string]delegate.Totals{
		RoleDelegator: {Calls: 2, Usage: delegate.Usage{PromptTokens: 300, CompletionTokens: 40}},
		RoleSubagent:  {Calls: 1, Usage: delegate.Usage{PromptTokens: 20, CompletionTokens: 9}},
	}
	const cost = 0.001*40 + 0.02*1
	planFail := delegate.Failure{Kind: delegate.FailurePlan, Message: (&strategy.PlanError{Reason: strategy.PlanTooFewSubtasks, Count: 0, Min: 1}).Error()}
	answerFail := delegate.Failed(delegate.FailureAnswerFormat, "aggregate gave no \"Final Output:\"")
	baseRight := &delegate.Trace{Strategy: strategy.NameSingle, Answer: `\boxed{1953}`}
	baseWrong := &delegate.Trace{Strategy: strategy.NameSingle, Answer: `\boxed{1952}`}
	baseBad := &delegate.Trace{Strategy: strategy.NameSingle, Answer: `1953`, Failure: "truncated: stopped", FailureKind: delegate.FailureTruncated}
	for _, tt := range []struct {
		name           string
		answer         string
		failure        delegate.Failure
		base           *delegate.Trace
		graded, parity float64
	}{
		{"win", "1953", delegate.Failure{}, baseWrong, 1 - cost, 3},
		{"tie right", "1953", delegate.Failure{}, baseRight, -cost, 0.1},
		{"tie wrong", "1950", delegate.Failure{}, baseWrong, -cost, 0.1},
		{"loss", "1950", delegate.Failure{}, baseRight, -1 - cost, -3},
		{"aggregation format, baseline right", "1953", answerFail, baseRight, -1 - cost, 0},
		{"plan format, baseline wrong", "", planFail, baseWrong, -cost, -10},
		{"baseline format failure counts wrong", "1953", delegate.Failure{}, baseBad, 1 - cost, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := &delegate.Trace{Strategy: strategy.NameDecompose, Answer: tt.answer, Failure: tt.failure.Message, FailureKind: tt.failure.Kind, Roles: roles}
			for _, parity := range []bool{false, true} {
				sc, err := versusScorer{g: g, parity: parity}.Score(context.Background(), nil, task, tt.base, tr)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.graded
				if parity {
					want = tt.parity
				}
				if math.Abs(sc.Reward-want) > 1e-9 {
					t.Errorf("parity %v: reward %v, want %v", parity, sc.Reward, want)
				}
			}
		})
	}
	// With a format penalty, a malformed plan pays less than an attempt
	// that fails, whatever it saved in tokens.
	pg := g
	pg.FormatPenalty = -1
	planOnly := map[string]delegate.Totals{RoleDelegator: {Calls: 1, Usage: delegate.Usage{CompletionTokens: 10}}}
	bad, err := versusScorer{g: pg}.Score(context.Background(), nil, task, baseRight, &delegate.Trace{Strategy: strategy.NameDecompose, Failure: planFail.Message, FailureKind: planFail.Kind, Roles: planOnly})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := versusScorer{g: pg}.Score(context.Background(), nil, task, baseRight, &delegate.Trace{Strategy: strategy.NameDecompose, Answer: "1950", Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(bad.Reward-(-2-0.010)) > 1e-9 || !(bad.Reward < wrong.Reward) {
		t.Errorf("format penalty -1: malformed plan %v (want -2.01), failed attempt %v", bad.Reward, wrong.Reward)
	}
	if _, err := (versusScorer{g: g}).Score(context.Background(), nil, task, nil, baseRight); err == nil {
		t.Error("no error without a baseline")
	}
}

func TestExactVerdict(t *testing.T) {
	for _, tt := range []struct {
		correct, base bool
		outcome       string
		diff          float64
	}{{true, false, "win", 100}, {true, true, "tie", 0}, {false, false, "tie", 0}, {false, true, "loss", -100}} {
		v := exactVerdict(tt.correct, tt.base)
		if v.Outcome != tt.outcome || v.Diff != tt.diff {
			t.Errorf("exactVerdict(%v, %v) = %s %v, want %s %v", tt.correct, tt.base, v.Outcome, v.Diff, tt.outcome, tt.diff)
		}
	}
}

// TestRandomPlanRate checks that the random plan's probability gives the
// trained policy's subtasks per problem. Its two-part problems have two
// ready steps each: k·q + (1−q)^k = target.
func TestRandomPlanRate(t *testing.T) {
	ps, err := world.Generate(world.Levels()[3], 1, world.Validation, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ subtasks, q float64 }{{1, 0}, {2, 1}, {1.5, math.Sqrt(0.5)}, {0.5, 0}, {3, 1}} {
		if got := randomPlanRate(ps, tt.subtasks); math.Abs(got-tt.q) > 1e-6 {
			t.Errorf("randomPlanRate(%v) = %v, want %v", tt.subtasks, got, tt.q)
		}
	}
}

// decomposeRow is a row of n items: the first right ones correct, the
// rewards spread around mean.
func decomposeRow(arm string, n, right int, mean float64) Row {
	r := Row{Arm: arm, N: n, Correct: right, Accuracy: float64(right) / float64(n)}
	for i := range n {
		rew := mean + 0.1*float64(i%5-2)/2
		r.Items = append(r.Items, Item{Correct: i < right, Reward: rew})
		r.Reward += rew / float64(n)
	}
	return r
}

func TestDecomposeAcceptance(t *testing.T) {
	one, every := ArmPlanRule+": hand over ready step 1", ArmPlanRule+": hand over every ready step"
	trained := ArmTrainedPlan + " (step 40)"
	tab := &Table{BestRule: every, Rows: []Row{
		decomposeRow(ArmSingle, 100, 60, 0.30),
		decomposeRow(one, 100, 95, 0.70),
		decomposeRow(every, 100, 95, 0.80),
		decomposeRow(ArmPlanOracle, 100, 98, 0.90),
		decomposeRow(ArmPretrainedPlan, 100, 80, 0.60),
		decomposeRow(trained, 100, 95, 0.85),
		decomposeRow(ArmRandomPlan+" (0.70, step 40)", 100, 90, 0.75),
	}}
	checks := Acceptance(tab, ModeDecompose)
	if len(checks) != 7 {
		t.Fatalf("%d checks, want 7: %+v", len(checks), checks)
	}
	for _, c := range checks {
		if !c.Pass {
			t.Errorf("%s: not met (%s), want met", c.Name, c.Detail)
		}
	}
	if !strings.Contains(checks[1].Detail, "("+every+")") || !strings.Contains(checks[4].Detail, "each of the 2 fixed plans") ||
		!strings.Contains(checks[0].Detail, "difference +0.250") || !strings.Contains(checks[5].Detail, "35 right only by the trained") {
		t.Errorf("details: %q; %q; %q; %q", checks[0].Detail, checks[1].Detail, checks[4].Detail, checks[5].Detail)
	}
	// The best fixed plan as good as the trained delegator, and the
	// trained one less accurate than the pretrained: those checks fail.
	tab.Rows[2] = decomposeRow(every, 100, 95, 0.85)
	tab.Rows[5] = decomposeRow(trained, 100, 60, 0.85)
	got := Acceptance(tab, ModeDecompose)
	if got[1].Pass || got[4].Pass || !strings.Contains(got[4].Detail, every) || got[6].Pass || !got[5].Pass {
		t.Errorf("a fixed plan as good, less accurate than the pretrained: %+v", got)
	}
	if got := Acceptance(&Table{}, ModeDecompose); len(got) != 7 || got[0].Pass || !strings.Contains(got[0].Detail, "no row") || got[1].Pass || got[4].Pass {
		t.Errorf("empty table: %+v", got)
	}
}

// TestVersusTable checks the comparison with the single-agent baseline,
// item by item. It checks wins, ties, losses, the two rewards, and format
// failures by their stage.
func TestVersusTable(t *testing.T) {
	tasks := []delegate.Task{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	base := Row{Arm: ArmSingle, Items: []Item{{Correct: true}, {Correct: false}, {Correct: true}, {Correct: false}}}
	arm := Row{Arm: ArmTrainedPlan + " (step 3)", Items: []Item{
		{Correct: true, Reward: 0.9}, {Correct: true, Reward: 0.8}, {Correct: false, Reward: -0.1}, {Correct: false, Reward: -0.2},
	}}
	stages := map[[2]string]reward.Stage{{arm.Arm, "d"}: reward.StagePlan}
	got, err := versusTable(&Table{Rows: []Row{base, arm}}, stages, tasks)
	if err != nil {
		t.Fatal(err)
	}
	// Parity: tie 0.1, win 3, loss −3, plan failure −10: mean −2.475.
	// Graded against the baseline: −0.1, 0.8, −1.1, −0.2: mean −0.15.
	if !strings.Contains(got, "| "+arm.Arm+" | 1 | 2 | 1 | -2.475 [") || !strings.Contains(got, "| -0.150 [") {
		t.Errorf("versus table:\n%s", got)
	}
	if _, err := versusTable(&Table{Rows: []Row{arm}}, stages, tasks); err == nil {
		t.Error("no error without the baseline's row")
	}
}

// TestPenalize: the table's items that ended without a proper answer get
// the format penalty, and their rows' means follow.
func TestPenalize(t *testing.T) {
	tasks := []delegate.Task{{ID: "a"}, {ID: "b"}}
	tab := &Table{Rows: []Row{{Arm: "x", Correct: 1, Items: []Item{{Correct: true, Reward: 0.8}, {Reward: -0.1}}}}}
	penalize(tab, map[[2]string]reward.Stage{{"x", "b"}: reward.StagePlan}, tasks, -1)
	if r := tab.Rows[0]; math.Abs(r.Items[1].Reward+1.1) > 1e-12 || math.Abs(r.Items[0].Reward-0.8) > 1e-12 || math.Abs(r.Reward+0.15) > 1e-12 {
		t.Errorf("penalized row: items %+v, mean %v; want 0.8, -1.1, mean -0.15", r.Items, r.Reward)
	}
}

func TestFailureStages(t *testing.T) {
	recs := []bench.Record{
		{Arm: "x", TaskID: "1"},
		{Arm: "x", TaskID: "2", Failure: (&strategy.PlanError{Reason: strategy.PlanNoReasoning}).Error()},
		{Arm: "x", TaskID: "3", Failure: "answer format: no marker"},
		{Arm: "x", TaskID: "4", Error: "call failed"},
	}
	got := failureStages(recs)
	want := map[string]reward.Stage{"1": "", "2": reward.StagePlan, "3": reward.StageAnswer, "4": reward.StagePlan}
	for id, w := range want {
		if g := got[[2]string{"x", id}]; g != w {
			t.Errorf("task %s: stage %q, want %q", id, g, w)
		}
	}
}

func TestConfigDecompose(t *testing.T) {
	for _, tt := range []struct {
		name  string
		set   func(*Config)
		wants string
	}{
		{"parity under route", func(c *Config) { c.Parity = true }, "parity: goes with mode decompose"},
		{"solver trained under decompose", func(c *Config) { c.Mode, c.Train = ModeDecompose, TrainSolver }, "mode decompose trains its delegator only"},
		{"unknown mode", func(c *Config) { c.Mode = "plan" }, `"route", "mlpo" or "decompose"`},
		{"format penalty under route", func(c *Config) { c.Reward.FormatPenalty = -1 }, "reward.format_penalty: applies to mode decompose only"},
		{"positive format penalty", func(c *Config) { c.Mode, c.Reward.FormatPenalty = ModeDecompose, 1 }, "reward.format_penalty: must be at most 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.set(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wants) {
				t.Errorf("Validate() = %v, want an error with %q", err, tt.wants)
			}
		})
	}
	c := DefaultConfig()
	c.Mode, c.Parity = ModeDecompose, true
	if err := c.Validate(); err != nil {
		t.Errorf("decompose with parity: %v", err)
	}
}

// TestRunDecompose runs decompose mode end to end on tiny random models.
// It checks the steps and the fixed plans chosen on training items. It
// checks the table's rows in order, the comparison against the baseline,
// and the checks.
func TestRunDecompose(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Mode = ModeDecompose
	cfg.World = world.Levels()[3]
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.RL.Steps {
		t.Errorf("steps %d, want %d", res.Steps, cfg.RL.Steps)
	}
	for _, m := range readMetrics(t, cfg.OutDir) {
		if math.IsNaN(m.Loss) || math.IsNaN(m.Reward) || m.Rollouts != cfg.RL.GroupSize*cfg.RL.ItemsPerStep {
			t.Errorf("step %d: loss %v reward %v, %d rollouts", m.Step, m.Loss, m.Reward, m.Rollouts)
		}
	}
	want := []string{ArmSingle, ArmPlanRule + ": hand over ready step 1", ArmPlanRule + ": hand over ready step 2",
		ArmPlanRule + ": hand over every ready step", ArmPlanOracle, ArmPretrainedPlan, trainedName(ArmTrainedPlan, cfg.RL.Steps)}
	var names []string
	for _, r := range res.Table.Rows {
		names = append(names, r.Arm)
	}
	if len(names) != len(want)+1 || strings.Join(names[:len(want)], "|") != strings.Join(want, "|") || !strings.HasPrefix(names[len(want)], ArmRandomPlan+" (") {
		t.Errorf("arms %q, want %q then %s", names, want, ArmRandomPlan)
	}
	if !strings.HasPrefix(res.Table.BestRule, ArmPlanRule+": ") {
		t.Errorf("best fixed plan %q", res.Table.BestRule)
	}
	rules, _, err := bench.ReadResults(filepath.Join(cfg.OutDir, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 3*cfg.RuleItems {
		t.Errorf("%d records of the fixed plans on training items, want %d", len(rules), 3*cfg.RuleItems)
	}
	for _, r := range res.Table.Rows[1:4] {
		if r.SubagentCalls < 1 || r.SubagentCalls > 2 {
			t.Errorf("%s: %v subtasks per item, want 1 to 2", r.Arm, r.SubagentCalls)
		}
	}
	if len(res.Table.Checks) != 7 || !strings.Contains(res.Table.Appendix, "| "+ArmPretrainedPlan+" |") {
		t.Errorf("%d checks; appendix:\n%s", len(res.Table.Checks), res.Table.Appendix)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, TableFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b)
}

// TestVersusBaselineAdvantages checks what the single-agent baseline does
// to a group's update. Under the graded reward its term is one constant per
// group, so every estimator gives the same advantages whichever answer the
// baseline gave. Only the parity buckets, which are not a shift, change them.
func TestVersusBaselineAdvantages(t *testing.T) {
	task := delegate.Task{ID: "p", Prompt: "How many?", Answer: "1953"}
	roles := map[string]delegate.Totals{RoleDelegator: {Calls: 2, Usage: delegate.Usage{CompletionTokens: 40}}}
	answerFail := delegate.Failed(delegate.FailureAnswerFormat, "aggregate gave no \"Final Output:\"")
	// A group of three rollouts: right, wrong, and an aggregation without
	// a proper answer.
	group := []*delegate.Trace{
		{Strategy: strategy.NameDecompose, Answer: "1953", Roles: roles},
		{Strategy: strategy.NameDecompose, Answer: "1950", Roles: roles},
		{Strategy: strategy.NameDecompose, Answer: "1953", Failure: answerFail.Message, FailureKind: answerFail.Kind, Roles: roles},
	}
	baseRight := &delegate.Trace{Strategy: strategy.NameSingle, Answer: `\boxed{1953}`}
	baseWrong := &delegate.Trace{Strategy: strategy.NameSingle, Answer: `\boxed{1952}`}
	advantages := func(t *testing.T, s versusScorer, est reward.Estimator, base *delegate.Trace) []float64 {
		t.Helper()
		rewards := make([]float64, len(group))
		for i, tr := range group {
			sc, err := s.Score(context.Background(), nil, task, base, tr)
			if err != nil {
				t.Fatal(err)
			}
			rewards[i] = sc.Reward
		}
		adv, err := reward.Advantages(est, rewards)
		if err != nil {
			t.Fatal(err)
		}
		return adv
	}
	g := DefaultConfig().Reward
	g.FormatPenalty = -1
	for _, tt := range []struct {
		name     string
		parity   bool
		est      reward.Estimator
		wantSame bool
	}{
		{"graded grpo", false, reward.GRPO, true},
		{"graded drgrpo", false, reward.DrGRPO, true},
		{"graded rloo", false, reward.RLOO, true},
		{"parity grpo", true, reward.GRPO, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := versusScorer{g: g, parity: tt.parity}
			right := advantages(t, s, tt.est, baseRight)
			wrong := advantages(t, s, tt.est, baseWrong)
			same := true
			for i := range right {
				if math.Abs(right[i]-wrong[i]) > 1e-9 {
					same = false
				}
			}
			if same != tt.wantSame {
				t.Errorf("advantages with the baseline right %v and wrong %v: same %v, want %v", right, wrong, same, tt.wantSame)
			}
		})
	}
}
