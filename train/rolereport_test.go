package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/reward"
)

// call is a held-out call answered greedy right or not and with k right
// samples, before and after.
func call(q string, gb bool, sb int, ga bool, sa int) SolverCall {
	return SolverCall{Question: q, Before: SolverAnswers{Greedy: gb, Sampled: sb}, After: SolverAnswers{Greedy: ga, Sampled: sa}}
}

func TestSolverTests(t *testing.T) {
	// Four products, each wrong greedy before and right after, 4 of 16
	// samples right before and 8 after: every paired difference is
	// +0.25, so the bootstrap interval is that point.
	gains := []SolverCall{
		call("12*34", false, 4, true, 8), call("56*78", false, 4, true, 8),
		call("11*22", false, 4, true, 8), call("91*23", false, 4, true, 8),
	}
	mixed := []SolverCall{
		call("12*34", true, 8, true, 12),
		call("56*78", false, 2, true, 6),
		call("11*22", true, 16, false, 12),
		call("1234+5678", true, 16, true, 16),
		call("100-7", false, 0, false, 0),
	}
	tests := []struct {
		name  string
		calls []SolverCall
		k     int
		want  []SolverTest
	}{
		{"every product gained", gains, 16, []SolverTest{
			// McNemar exact: 2·P(X ≤ 0), X ~ Binomial(4, 1/2) = 2/16.
			{Calls: "products", N: 4, GreedyBefore: 0, GreedyAfter: 4, Lost: 0, Gained: 4, P: 0.125,
				SampledBefore: 0.25, SampledAfter: 0.5, SampledDiff: 0.25, SampledCI: bench.Interval{Lo: 0.25, Hi: 0.25}},
			{Calls: "all", N: 4, GreedyBefore: 0, GreedyAfter: 4, Lost: 0, Gained: 4, P: 0.125,
				SampledBefore: 0.25, SampledAfter: 0.5, SampledDiff: 0.25, SampledCI: bench.Interval{Lo: 0.25, Hi: 0.25}},
		}},
		{"each kind apart", mixed, 16, []SolverTest{
			// One lost, one gained: 2·P(X ≤ 1), X ~ Binomial(2, 1/2), capped at 1.
			// Sampled: (8+2+16)/48 before, (12+6+12)/48 after.
			{Calls: "products", N: 3, GreedyBefore: 2, GreedyAfter: 2, Lost: 1, Gained: 1, P: 1,
				SampledBefore: 26.0 / 48, SampledAfter: 30.0 / 48, SampledDiff: 4.0 / 48},
			{Calls: "sums", N: 1, GreedyBefore: 1, GreedyAfter: 1, P: 1,
				SampledBefore: 1, SampledAfter: 1, SampledDiff: 0, SampledCI: bench.Interval{}},
			{Calls: "differences", N: 1, P: 1, SampledCI: bench.Interval{}},
			{Calls: "all", N: 5, GreedyBefore: 3, GreedyAfter: 3, Lost: 1, Gained: 1, P: 1,
				SampledBefore: 42.0 / 80, SampledAfter: 46.0 / 80, SampledDiff: 4.0 / 80},
		}},
		{"greedy only", gains[:2], 0, []SolverTest{
			{Calls: "products", N: 2, GreedyAfter: 2, Gained: 2, P: 0.5},
			{Calls: "all", N: 2, GreedyAfter: 2, Gained: 2, P: 0.5},
		}},
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SolverTests(tt.calls, tt.k)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d tests %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				ci := g.SampledCI
				if tt.name == "each kind apart" && (w.Calls == "products" || w.Calls == "all") {
					// A spread of differences: the interval holds the mean,
					// inside the smallest and largest difference.
					if !(ci.Lo <= g.SampledDiff && g.SampledDiff <= ci.Hi && ci.Lo >= -0.25 && ci.Hi <= 0.25) {
						t.Errorf("%s: interval %+v does not hold %v inside [−0.25, +0.25]", w.Calls, ci, g.SampledDiff)
					}
					g.SampledCI, w.SampledCI = bench.Interval{}, bench.Interval{}
				}
				if g.Calls != w.Calls || g.N != w.N || g.GreedyBefore != w.GreedyBefore || g.GreedyAfter != w.GreedyAfter ||
					g.Lost != w.Lost || g.Gained != w.Gained || !near(g.P, w.P) || !near(g.SampledBefore, w.SampledBefore) ||
					!near(g.SampledAfter, w.SampledAfter) || !near(g.SampledDiff, w.SampledDiff) ||
					!near(g.SampledCI.Lo, w.SampledCI.Lo) || !near(g.SampledCI.Hi, w.SampledCI.Hi) {
					t.Errorf("test %d:\ngot  %+v\nwant %+v", i, g, w)
				}
			}
		})
	}
}

func TestNewDelegatorTest(t *testing.T) {
	row := func(arm string, correct []bool, rewards []float64) Row {
		r := Row{Arm: arm, N: len(correct)}
		for i, c := range correct {
			if c {
				r.Correct++
			}
			r.Reward += rewards[i] / float64(len(rewards))
			r.Items = append(r.Items, Item{Correct: c, Reward: rewards[i]})
		}
		return r
	}
	after := trainedName(ArmTrained, 3)
	tab := &Table{Rows: []Row{
		row(ArmPretrained, []bool{false, true, true, false}, []float64{0.2, 0.5, 0.5, 0.1}),
		row(after, []bool{true, true, true, true}, []float64{0.7, 1.0, 1.0, 0.6}),
	}}
	got := NewDelegatorTest(tab, ArmPretrained, after)
	// Every item gains 0.5; two right only after: 2·P(X ≤ 0), X ~ Binomial(2, 1/2).
	want := DelegatorTest{Before: ArmPretrained, After: after, N: 4, RightBefore: 2, RightAfter: 4, Lost: 0, Gained: 2, P: 0.5,
		RewardBefore: 0.325, RewardAfter: 0.825, RewardDiff: 0.5, RewardCI: bench.Interval{Lo: 0.5, Hi: 0.5}}
	if got == nil {
		t.Fatal("no test")
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if got.Before != want.Before || got.After != want.After || got.N != want.N || got.RightBefore != want.RightBefore ||
		got.RightAfter != want.RightAfter || got.Lost != want.Lost || got.Gained != want.Gained || !near(got.P, want.P) ||
		!near(got.RewardBefore, want.RewardBefore) || !near(got.RewardAfter, want.RewardAfter) || !near(got.RewardDiff, want.RewardDiff) ||
		!near(got.RewardCI.Lo, want.RewardCI.Lo) || !near(got.RewardCI.Hi, want.RewardCI.Hi) {
		t.Errorf("got  %+v\nwant %+v", *got, want)
	}
	if d := NewDelegatorTest(tab, ArmPretrained, trainedName(ArmTrained, 4)); d != nil {
		t.Errorf("a missing arm gave %+v, want none", *d)
	}
}

func TestRoleReportMarkdown(t *testing.T) {
	calls := []SolverCall{
		call("12*34", false, 4, true, 8), call("56*78", false, 4, true, 8),
		call("11*22", false, 4, true, 8), call("91*23", false, 4, true, 8),
	}
	rep := &RoleReport{Samples: 16, Temperature: 1, Calls: calls, Solver: SolverTests(calls, 16),
		Delegator: &DelegatorTest{Before: ArmPretrained, After: "RL-trained delegator (step 3)", N: 4, RightBefore: 2, RightAfter: 4,
			Gained: 2, P: 0.5, RewardBefore: 0.325, RewardAfter: 0.825, RewardDiff: 0.5, RewardCI: bench.Interval{Lo: 0.5, Hi: 0.5}}}
	var b strings.Builder
	rep.writeMarkdown(&b)
	want := `
Each trained role's own reward on held-out items, before → after training, paired:

- delegator (the task's reward; RL-trained delegator (step 3) against pretrained delegator, each with the pretrained solver): reward 0.325 → 0.825, difference +0.500, 95% [+0.500, +0.500] over 4 items; right 2 → 4 (lost 0 / gained 2, McNemar p 0.5).
- solver (its own answer right, on every operation of the held-out problems, asked of the pretrained and the RL-trained solver: greedy, and 16 samples a call at temperature 1, seeded alike before and after):

| solver's calls | n | greedy right: before → after (lost / gained, McNemar p) | sampled right: before → after | paired difference [95% CI] |
|---|---:|---|---|---|
| products | 4 | 0 → 4 (0 / 4, p 0.12) | 0.250 → 0.500 | +0.250 [+0.250, +0.250] |
| all | 4 | 0 → 4 (0 / 4, p 0.12) | 0.250 → 0.500 | +0.250 [+0.250, +0.250] |
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	checks := rep.checks()
	if len(checks) != 1 || !checks[0].Pass || !strings.Contains(checks[0].Detail, "difference +0.250, 95% [+0.250, +0.250] over 4 calls") {
		t.Errorf("checks %+v, want one met on +0.250", checks)
	}
	rep.Solver = SolverTests([]SolverCall{call("12*34", true, 8, true, 8)}, 16)
	if checks := rep.checks(); len(checks) != 1 || checks[0].Pass {
		t.Errorf("no change: checks %+v, want one not met", checks)
	}
	rep.Samples = 0
	if checks := rep.checks(); len(checks) != 0 {
		t.Errorf("greedy only: checks %+v, want none", checks)
	}
}

// TestRunRoleReport trains both roles a step on tiny models. The table
// prints each role's paired test, and RolesFile holds every operation of
// the held-out problems, asked of both solvers.
func TestRunRoleReport(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Train, cfg.Credit = TrainBoth, reward.CreditRole
	cfg.RL.Steps, cfg.RL.Schedule.Total = 1, 1
	cfg.SolverSamples = 4
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(cfg.OutDir, TableFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- delegator (the task's reward; RL-trained delegator (step 1) against pretrained delegator", "- solver (its own answer right", "| all | ", "RL-trained solver's own reward on held-out calls beats"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("table.md lacks %q:\n%s", want, md)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, RolesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep RoleReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var ops int
	r := &runner{cfg: cfg}
	if err := r.generate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range r.testSet {
		ops += len(p.Steps)
	}
	if rep.Version != rolesVersion || rep.Samples != 4 || len(rep.Calls) != ops || rep.Delegator == nil || len(rep.Solver) == 0 || rep.Solver[len(rep.Solver)-1].N != ops {
		t.Errorf("roles file: version %d, %d samples, %d calls (want %d), delegator %v, %d solver tests", rep.Version, rep.Samples, len(rep.Calls), ops, rep.Delegator, len(rep.Solver))
	}
	for _, c := range rep.Calls {
		if c.Before.Sampled > 4 || c.After.Sampled > 4 {
			t.Errorf("call %+v: more right samples than 4", c)
		}
	}
	if res.Table.Roles == nil || res.Table.Roles.Delegator == nil || res.Table.Roles.Delegator.N != cfg.EvalItems {
		t.Errorf("table's role report %+v, want the delegator's over %d items", res.Table.Roles, cfg.EvalItems)
	}
}
