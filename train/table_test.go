package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/world"

	"gonum.org/v1/plot/plotter"
)

func TestNewTableFromRecords(t *testing.T) {
	tasks := []delegate.Task{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	rec := func(arm, task string, correct bool, delTok, subCalls, solTok int, cost float64, lat time.Duration) bench.Record {
		return bench.Record{Arm: arm, TaskID: task, Correct: correct, Latency: lat,
			Roles: map[string]delegate.Totals{
				RoleDelegator: {Calls: 1, Usage: delegate.Usage{CompletionTokens: delTok}},
				RoleSubagent:  {Calls: subCalls, Usage: delegate.Usage{CompletionTokens: solTok}},
			},
			Total: delegate.Totals{Cost: cost}}
	}
	records := []bench.Record{
		rec("x", "a", true, 100, 0, 0, 1e-3, time.Second),
		rec("x", "b", false, 200, 2, 30, 2e-3, 2*time.Second),
		rec("x", "c", true, 300, 1, 10, 3e-3, 3*time.Second),
		rec("y", "a", false, 10, 0, 0, 0, 0),
		rec("y", "b", false, 10, 0, 0, 0, 0),
		rec("y", "c", true, 10, 0, 0, 0, 0),
		rec("y", "c", false, 10, 0, 0, 0, 0), // a later record of the same item wins
		rec("z", "a", true, 1, 0, 0, 0, 0),   // an arm not asked for
		rec("f", "a", true, 10, 0, 0, 0, 0),
		rec("f", "b", true, 10, 0, 0, 0, 0),
		rec("f", "c", true, 10, 0, 0, 0, 0),
	}
	records[len(records)-1].Failure = "answer format: no <answer>" // right number, wrong format
	rew := world.DefaultReward()
	// Problems give the steps of each item; x's records say which were
	// delegated.
	problems := map[string]*world.Problem{
		"a": {Steps: []world.Step{{Op: world.Mul}, {Op: world.Sub}}},
		"b": {Steps: []world.Step{{Op: world.Add}, {Op: world.Sub}}},
		"c": {Steps: []world.Step{{Op: world.Mul}}},
	}
	records[1].Labels = map[string]string{LabelDelegated: "+-"}
	records[2].Labels = map[string]string{LabelDelegated: "*"}
	tab, err := NewTable([]string{"x", "y"}, tasks, records, rew, problems)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(tab.Rows))
	}
	x := tab.Row("x")
	rewards := []float64{1 - 0.1, 0 - 0.2 - 0.04, 1 - 0.3 - 0.02}
	mean := (rewards[0] + rewards[1] + rewards[2]) / 3
	var ss float64
	for _, r := range rewards {
		ss += (r - mean) * (r - mean)
	}
	half := 1.96 * math.Sqrt(ss/2/3)
	wilson, _ := bench.Wilson(2, 3)
	tests := []struct {
		name      string
		got, want float64
	}{
		{"accuracy", x.Accuracy, 2.0 / 3},
		{"accuracy lo", x.AccuracyCI.Lo, wilson.Lo},
		{"accuracy hi", x.AccuracyCI.Hi, wilson.Hi},
		{"reward", x.Reward, mean},
		{"reward lo", x.RewardCI.Lo, mean - half},
		{"reward hi", x.RewardCI.Hi, mean + half},
		{"delegator tokens", x.DelegatorTokens, 200},
		{"sub-agent tokens", x.SubagentTokens, 40.0 / 3},
		{"sub-agent calls", x.SubagentCalls, 1},
		{"cost", x.Cost, 2e-3},
		{"latency", x.Latency, 2},
		{"y accuracy", tab.Row("y").Accuracy, 0},
		{"y reward", tab.Row("y").Reward, -0.01},
		// Every y item scored the same: the interval is as wide as
		// correctness estimated with half an item each side, not 0.
		{"y reward hi", tab.Row("y").RewardCI.Hi, -0.01 + 1.96*math.Sqrt(0.125*0.875/3)},
		{"x delegates products", x.rateOf(world.Mul), 0.5},
		{"x delegates sums", x.rateOf(world.Add), 1},
		{"x delegates differences", x.rateOf(world.Sub), 0.5},
		{"x delegation rate", x.DelegationRate(), 3.0 / 5},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	f, err := NewTable([]string{"f"}, tasks, records, rew, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Rows[0]; r.Correct != 2 || r.Failed != 1 || math.Abs(r.Reward-(1+1+0)/3.0+0.01) > 1e-12 {
		t.Errorf("a failed item whose answer verified: %+v, want it counted wrong", r)
	}
	if x.N != 3 || x.Correct != 2 {
		t.Errorf("x: n %d correct %d, want 3 and 2", x.N, x.Correct)
	}
	var b strings.Builder
	if err := tab.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| x | 3 | 0.667 [") || !strings.Contains(b.String(), "| 0.50 / 1.00 / 0.50 |") {
		t.Errorf("markdown lacks x's row:\n%s", b.String())
	}

	if _, err := NewTable([]string{"x", "w"}, tasks, records, rew, problems); err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Errorf("an arm without records: err = %v, want one naming it", err)
	}
}

func TestAcceptance(t *testing.T) {
	// items builds a row of n items: the first right ones correct, every
	// reward drawn around mean, every cost cost.
	items := func(arm string, n, right int, mean, spread, cost float64) Row {
		r := Row{Arm: arm, N: n, Correct: right, Accuracy: float64(right) / float64(n), Cost: cost}
		for i := range n {
			rew := mean + spread*float64(i%5-2)/2
			r.Items = append(r.Items, Item{Correct: i < right, Reward: rew, Cost: cost})
			r.Reward += rew / float64(n)
		}
		return r
	}
	never, always := ruleName(0, 2), ruleName(3, 2)
	keyword := ArmKeyword + ": never delegate"
	tab := &Table{BestRule: never, BestKeyword: keyword, Rows: []Row{
		items(ArmAlone, 100, 90, 0.50, 0.1, 1000e-6),
		items(never, 100, 95, 0.55, 0.1, 1000e-6),
		items(always, 100, 50, 0.40, 0.1, 500e-6),
		items(keyword, 100, 95, 0.56, 0.1, 1000e-6),
		items(ArmPretrained, 100, 80, 0.60, 0.1, 800e-6),
		items(ArmTrained+" (step 200)", 100, 90, 0.70, 0.1, 590e-6),
		items(ArmRandom+" (0.40, step 200)", 100, 60, 0.45, 0.1, 700e-6),
	}}
	const trained, every, cost, accuracy = 5, 4, 5, 6 // the trained row; the checks against every rule, of the cost and of accuracy
	checks := Acceptance(tab, ModeRoute)
	if len(checks) != 7 {
		t.Fatalf("%d checks, want 7: %+v", len(checks), checks)
	}
	for _, c := range checks {
		if !c.Pass {
			t.Errorf("%s: not met (%s), want met", c.Name, c.Detail)
		}
	}
	if !strings.Contains(checks[0].Detail, "difference +0.100") || !strings.Contains(checks[1].Detail, "("+never+")") ||
		!strings.Contains(checks[2].Detail, "("+keyword+")") || !strings.Contains(checks[every].Detail, "each of the 2 rules") ||
		!strings.Contains(checks[cost].Detail, "41.0% less, 95% [41.0%, 41.0%]") || !strings.Contains(checks[accuracy].Detail, "lower bound +0.000") {
		t.Errorf("details: %q; %q; %q; %q; %q; %q", checks[0].Detail, checks[1].Detail, checks[2].Detail, checks[every].Detail, checks[cost].Detail, checks[accuracy].Detail)
	}
	// A keyword rule as good as the trained policy: its check fails.
	tab.Rows[3] = items(keyword, 100, 90, 0.70, 0.1, 590e-6)
	if got := Acceptance(tab, ModeRoute); got[2].Pass || !got[1].Pass {
		t.Errorf("a keyword rule as good as the trained policy: %+v", got[2])
	}
	tab.Rows[3] = items(keyword, 100, 95, 0.56, 0.1, 1000e-6)
	// The same mean reward item by item as the pretrained policy, a cut
	// of 39%: each fails; the best rule is still beaten.
	tab.Rows[trained] = items(ArmTrained, 100, 90, 0.60, 0.1, 610e-6)
	if got := Acceptance(tab, ModeRoute); got[0].Pass || !got[1].Pass || got[cost].Pass {
		t.Errorf("a tie with the pretrained rewards and a 39%% cut: %+v", got)
	}
	// A fixed rule as good as the trained policy: "every rule" fails,
	// naming it, though the best rule on training items was another.
	tab.Rows[2] = items(always, 100, 90, 0.60, 0.1, 500e-6)
	if got := Acceptance(tab, ModeRoute); got[every].Pass || !strings.Contains(got[every].Detail, always) || !got[1].Pass {
		t.Errorf("a rule as good as the trained policy: %+v", got[every])
	}
	// A deep cut but 20 points less accurate: the cut is met, the
	// accuracy check is not.
	tab.Rows[trained] = items(ArmTrained, 100, 70, 0.70, 0.1, 500e-6)
	if got := Acceptance(tab, ModeRoute); !got[cost].Pass || !strings.Contains(got[cost].Detail, "50.0% less") || got[accuracy].Pass || !strings.Contains(got[accuracy].Detail, "difference -0.200") {
		t.Errorf("lower accuracy: %+v; %+v", got[cost], got[accuracy])
	}
	// 2 points less accurate, within the margin: met.
	tab.Rows[trained] = items(ArmTrained, 100, 88, 0.70, 0.1, 500e-6)
	if got := Acceptance(tab, ModeRoute); !got[accuracy].Pass {
		t.Errorf("2 points less accurate: %+v", got[accuracy])
	}
	// Rows over other items cannot be compared.
	tab.Rows[trained] = items(ArmTrained, 50, 45, 0.70, 0.1, 500e-6)
	if got := Acceptance(tab, ModeRoute); got[0].Pass || !strings.Contains(got[0].Detail, "same items") {
		t.Errorf("unpaired rows: %+v", got[0])
	}
	if got := Acceptance(&Table{}, ModeRoute); len(got) != 7 || got[accuracy].Pass || got[0].Pass || !strings.Contains(got[0].Detail, "no row") || got[1].Pass || got[2].Pass || got[every].Pass {
		t.Errorf("empty table: %+v", got)
	}

	acc := func(arm string, right []int) Row {
		r := Row{Arm: arm, N: 40}
		for i := range 40 {
			r.Items = append(r.Items, Item{Correct: slices.Contains(right, i)})
		}
		return r
	}
	span := func(lo, hi int) []int {
		var out []int
		for i := lo; i < hi; i++ {
			out = append(out, i)
		}
		return out
	}
	mlpo := &Table{Rows: []Row{
		acc(ArmTeam, span(0, 30)), acc(ArmMajority, span(0, 10)),
		acc(ArmPeersCost+" (5 answers, step 2)", span(0, 12)), acc(ArmPeerAlone+" (a, greedy)", span(0, 5)),
		acc(ArmPeerAlone+" (b, greedy)", span(0, 8)),
		acc(ArmLeaderAlone, span(0, 20)), acc(ArmUntrained, span(0, 21)),
		acc(ArmOwnMajority+" (3 samples, step 2)", span(0, 30)),
	}}
	got := Acceptance(mlpo, ModeMLPO)
	if len(got) != 6 || !got[0].Pass || !strings.Contains(got[0].Detail, "20 right only by the first, 0 only by the second") ||
		!got[1].Pass || !got[2].Pass || !got[3].Pass || got[4].Pass || got[5].Pass {
		t.Errorf("mlpo: %+v", got)
	}
	if d := got[2].Detail; !strings.Contains(d, "(a, greedy): accuracy") || !strings.Contains(d, "(b, greedy): accuracy") || !strings.Contains(d, "22 right only by the first") {
		t.Errorf("every peer alone: detail %q names not each peer model", d)
	}
	// A team that does not beat one of the peer models fails the check.
	strong := &Table{Rows: append(slices.Clone(mlpo.Rows), acc(ArmPeerAlone+" (c, greedy)", span(0, 29)))}
	if got := Acceptance(strong, ModeMLPO); got[2].Pass || !strings.Contains(got[2].Detail, "1 right only by the first, 0 only by the second") {
		t.Errorf("a peer model as good as the team: %+v", got[2])
	}
	// A few more items right, too few for McNemar, is not a win.
	near := &Table{Rows: []Row{
		acc(ArmTeam, span(0, 13)), acc(ArmMajority, span(0, 10)),
		acc(ArmLeaderAlone, span(0, 30)), acc(ArmUntrained, span(0, 20)),
	}}
	if got := Acceptance(near, ModeMLPO); got[0].Pass || !got[5].Pass || got[1].Pass || !strings.Contains(got[1].Detail, "no row") {
		t.Errorf("mlpo, 3 items more: %+v", got)
	}
	var b strings.Builder
	mlpo.Checks = got
	if err := mlpo.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "- PASS trained leader + peers") || !strings.Contains(b.String(), "- MISS trained leader alone") {
		t.Errorf("markdown lacks the verdicts:\n%s", b.String())
	}
}

// TestScorerFailedIsWrong checks that a rollout flagged as failed is wrong
// in training, even when its answer holds the right number. So RL cannot
// learn to drop the protocol's answer format. Training's scorer and the
// table's rule must give the same correctness and reward.
func TestScorerFailedIsWrong(t *testing.T) {
	g := DefaultConfig().Reward
	task := delegate.Task{ID: "p", Prompt: "What is it?", Answer: "1953"}
	roles := map[string]delegate.Totals{
		RoleDelegator: {Calls: 2, Usage: delegate.Usage{PromptTokens: 300, CompletionTokens: 40}},
		RoleSubagent:  {Calls: 1, Usage: delegate.Usage{PromptTokens: 20, CompletionTokens: 9}},
	}
	ok := &delegate.Trace{Strategy: "route", Answer: "<answer>1953</answer>", Roles: roles}
	bad := &delegate.Trace{Strategy: "lead", Answer: "=1953\n<answer>1953}", Failure: "answer format: leader in round 0 gave no <answer>", FailureKind: delegate.FailureAnswerFormat, Roles: roles}
	if !world.Correct(bad.Answer, 1953) {
		t.Fatal("the malformed answer does not verify: the case tests nothing")
	}
	for _, tt := range []struct {
		tr   *delegate.Trace
		want bool
	}{{ok, true}, {bad, false}} {
		sc, err := Scorer(g).Score(context.Background(), nil, task, nil, tt.tr)
		if err != nil {
			t.Fatal(err)
		}
		correct := sc.Inputs.Correct != nil && *sc.Inputs.Correct
		wantCorrect, wantReward := scored(g, true, tt.tr.Failure != "", roles)
		if correct != tt.want || correct != wantCorrect {
			t.Errorf("failure %q: correct %v, want %v", tt.tr.Failure, correct, tt.want)
		}
		if math.Abs(sc.Reward-wantReward) > 1e-12 {
			t.Errorf("failure %q: reward %v, the table's %v", tt.tr.Failure, sc.Reward, wantReward)
		}
	}
}

func TestBudgetCount(t *testing.T) {
	for _, tt := range []struct {
		budget, one float64
		want        int
	}{{2958, 1174, 2}, {2958, 588, 5}, {3522, 1174, 3}, {100, 300, 1}, {0, 10, 1}, {10, 0, 1}, {math.NaN(), 1, 1}} {
		if got := budgetCount(tt.budget, tt.one); got != tt.want {
			t.Errorf("budgetCount(%v, %v) = %d, want %d", tt.budget, tt.one, got, tt.want)
		}
	}
}

// TestSolverAcceptance checks a trained solver against the pretrained one
// under each delegator, paired. With both trained, it checks the trained
// delegator against the pretrained one under the trained solver.
func TestSolverAcceptance(t *testing.T) {
	row := func(arm string, rewards ...float64) Row {
		r := Row{Arm: arm, N: len(rewards)}
		for _, x := range rewards {
			r.Items = append(r.Items, Item{Reward: x})
			r.Reward += x / float64(len(rewards))
		}
		return r
	}
	low, high := []float64{0.2, 0.4, 0.3, 0.5, 0.2, 0.4}, []float64{0.3, 0.5, 0.4, 0.6, 0.3, 0.5}
	tab := &Table{Rows: []Row{
		row(ArmPretrained, low...),
		row(ArmTrained+" (step 9)", low...),
		row(ArmTrainedSolver+" (step 9)", high...),
		row(ArmTrainedBoth+" (step 9)", high...),
	}}
	for _, tc := range []struct {
		train string
		pass  []bool
	}{
		{TrainSolver, []bool{true}},
		{TrainBoth, []bool{true, true, false}}, // both trained ties the pretrained delegator with the trained solver
	} {
		checks := SolverAcceptance(tab, tc.train)
		if len(checks) != len(tc.pass) {
			t.Fatalf("%s: %d checks, want %d: %+v", tc.train, len(checks), len(tc.pass), checks)
		}
		for i, c := range checks {
			if c.Pass != tc.pass[i] {
				t.Errorf("%s: %s: pass %v (%s), want %v", tc.train, c.Name, c.Pass, c.Detail, tc.pass[i])
			}
		}
	}
	// A missing arm is not met, and says so.
	tab.Rows = tab.Rows[:3]
	if c := SolverAcceptance(tab, TrainBoth); c[1].Pass || !strings.Contains(c[1].Detail, "no row "+ArmTrainedBoth) {
		t.Errorf("without the arm of both trained: %+v", c[1])
	}
}

func TestMovingMean(t *testing.T) {
	xys := plotter.XYs{{X: 1, Y: 1}, {X: 2, Y: 3}, {X: 3, Y: 5}, {X: 4, Y: 7}}
	got := movingMean(xys, 2)
	want := []float64{1, 2, 4, 6}
	for i, w := range want {
		if got[i].Y != w || got[i].X != xys[i].X {
			t.Errorf("point %d = %+v, want (%v, %v)", i, got[i], xys[i].X, w)
		}
	}
}

// TestCostOfPass checks the table's cost of pass on hand-made items:
// dollars over correct answers, and its cell in µ$.
func TestCostOfPass(t *testing.T) {
	items := []Item{{Correct: true, Cost: 1e-6}, {Correct: false, Cost: 3e-6}, {Correct: true, Cost: 2e-6}}
	v, iv := costOfPass(items)
	if math.Abs(v-3e-6) > 1e-18 {
		t.Errorf("cost of pass %v, want 3e-6 (6 µ$ over 2 right)", v)
	}
	if !(iv.Lo <= v && v <= iv.Hi) {
		t.Errorf("interval %v does not hold %v", iv, v)
	}
	if got := microPerCorrect(v, bench.Interval{Lo: 2e-6, Hi: 5e-6}); got != "3 [2, 5]" {
		t.Errorf("cell %q, want %q", got, "3 [2, 5]")
	}
	none, ivNone := costOfPass([]Item{{Cost: 1e-6}, {Cost: 1e-6}})
	if got := microPerCorrect(none, ivNone); !strings.Contains(got, "none correct") {
		t.Errorf("no item right: cell %q, want it to say none correct", got)
	}
	if got := microPerCorrect(2e-6, bench.Interval{Lo: 1e-6, Hi: math.Inf(1)}); got != "2 [1, ∞]" {
		t.Errorf("open interval: cell %q", got)
	}
}
