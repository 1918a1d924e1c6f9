package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/reward"
)

// TestLabelHanded: the questions label lists the solver's parseable
// questions in call order, beside the operations label.
func TestLabelHanded(t *testing.T) {
	tests := []struct {
		name          string
		questions     []string
		wantOps, want string
	}{
		{"two calls", []string{"47*28", " 1234+56 "}, "*+", "47*28\n1234+56"},
		{"a malformed call left out", []string{"47*28", "what is 3?"}, "*", "47*28"},
		{"no call", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := labelHanded(solverTrace(tt.questions, make([]string, len(tt.questions))))
			if got[LabelDelegated] != tt.wantOps || got[LabelQuestions] != tt.want {
				t.Errorf("labels %q, want ops %q and questions %q", got, tt.wantOps, tt.want)
			}
		})
	}
}

// TestHandedQuestions reads the handed arm's calls off hand-made records,
// item by item, the last record of an item counting.
func TestHandedQuestions(t *testing.T) {
	arm := handedArm(TrainBoth, 200)
	tasks := []delegate.Task{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	rec := func(arm, id, questions string) bench.Record {
		return bench.Record{Arm: arm, TaskID: id, Labels: map[string]string{LabelQuestions: questions}}
	}
	records := []bench.Record{
		rec(arm, "a", "12*34"),
		rec(trainedName(ArmTrained, 200), "a", "99*99"), // another arm
		rec(arm, "b", ""),                               // handed nothing
		rec(arm, "c", "56*78"),
		rec(arm, "c", "56*78\n111+222"), // a later record of c replaces the first
	}
	got, err := HandedQuestions(records, arm, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"12*34", "56*78", "111+222"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := HandedQuestions(records[:3], arm, tasks); err == nil || !strings.Contains(err.Error(), "item c") {
		t.Errorf("a missing item: error %v, want one naming item c", err)
	}
	bare := []bench.Record{{Arm: arm, TaskID: "a"}}
	if _, err := HandedQuestions(bare, arm, tasks[:1]); err == nil || !strings.Contains(err.Error(), LabelQuestions) {
		t.Errorf("a record without the label: error %v, want one naming it", err)
	}
	if got, want := handedArm(TrainSolver, 3), trainedName(ArmTrainedSolver, 3); got != want {
		t.Errorf("solver alone: handed arm %q, want %q", got, want)
	}
}

// TestHandedFigure: on hand-made handed calls the report writes the
// figure's table and its check, and the seeds' summary counts its rises.
// Without handed calls nothing of it is written.
func TestHandedFigure(t *testing.T) {
	// Three products handed, each 4 of 16 samples right before and 8
	// after: every paired difference is +0.25. One sum, unchanged.
	handed := []SolverCall{
		call("12*34", false, 4, true, 8), call("56*78", false, 4, true, 8),
		call("11*22", true, 4, true, 8), call("1234+5678", true, 16, true, 16),
	}
	arm := handedArm(TrainBoth, 200)
	rep := &RoleReport{Samples: 16, Temperature: 1, HandedArm: arm, HandedCalls: handed, Handed: SolverTests(handed, 16)}
	var b strings.Builder
	rep.writeHanded(&b)
	want := `
- solver on the calls it is handed: those ` + arm + ` made on the held-out items (4), asked alike of the pretrained and the RL-trained solver:

| handed calls | n | greedy right: before → after (lost / gained, McNemar p) | sampled right: before → after | paired difference [95% CI] |
|---|---:|---|---|---|
| products | 3 | 1 → 3 (0 / 2, p 0.5) | 0.250 → 0.500 | +0.250 [+0.250, +0.250] |
| sums | 1 | 1 → 1 (0 / 0, p 1) | 1.000 → 1.000 | +0.000 [+0.000, +0.000] |
`
	// The "all" row's interval comes from a bootstrap over two values;
	// it is checked apart.
	got := b.String()
	if !strings.HasPrefix(got, want) {
		t.Errorf("got\n%s\nwant it to begin\n%s", got, want)
	}
	if !strings.Contains(got, "| all | 4 | 2 → 4 (0 / 2, p 0.5) | 0.438 → 0.625 | +0.188 [") {
		t.Errorf("no all-calls row of +0.188 in\n%s", got)
	}
	checks := rep.handedCheck()
	if len(checks) != 1 || !checks[0].Pass || !strings.Contains(checks[0].Detail, "difference +0.188") || !strings.Contains(checks[0].Detail, "over 4 calls of "+arm) {
		t.Errorf("checks %+v, want one met on +0.188 over 4 calls", checks)
	}

	var none RoleReport
	none.Samples = 16
	b.Reset()
	none.writeHanded(&b)
	if b.Len() != 0 || none.handedCheck() != nil {
		t.Errorf("without handed calls: wrote %q and checks %+v, want nothing", b.String(), none.handedCheck())
	}

	all := SolverTests(handed, 16)[2]
	flat := SolverTests([]SolverCall{call("12*34", true, 8, true, 8)}, 16)[1]
	rows := []RoleSeedRow{{Seed: 4, Steps: 200, Handed: &all}, {Seed: 5, Steps: 200, Handed: &flat}, {Seed: 6, Steps: 200}}
	s := SummarizeRoles(rows, 16, 1)
	if s.Handed == nil || s.Handed.Of != 2 || s.Handed.SampledRises != 1 || s.Handed.GreedyRises != 0 {
		t.Fatalf("handed summary %+v, want 1 sampled rise and no greedy one of 2 seeds", s.Handed)
	}
	if got, want := s.Handed.SampledDiff.Mean, 0.1875/2; math.Abs(got-want) > 1e-12 {
		t.Errorf("mean sampled difference %v, want %v", got, want)
	}
	b.Reset()
	s.writeHanded(&b)
	for _, want := range []string{
		"| 4 | 200 | 2 → 4 of 4 (0 / 2, p 0.5) | +0.500 | 0.438 → 0.625 | +0.188 [",
		"| 5 | 200 | 1 → 1 of 1 (0 / 0, p 1) | +0.000 | 0.500 → 0.500 | +0.000 [+0.000, +0.000] |",
		"- 1 of 2 seeds: the solver's sampled share right on its handed calls rises",
		"- 0 of 2 seeds: the solver's greedy accuracy on its handed calls rises",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("seeds' figure lacks %q:\n%s", want, b.String())
		}
	}
	if s := SummarizeRoles(rows[2:], 16, 1); s.Handed != nil {
		t.Errorf("no seed with the figure: summary %+v, want none", s.Handed)
	}
}

// TestRunHandedCalls trains both roles a step on tiny models with the
// figure on. The tiny delegator hands nothing over, so the test then
// rewrites the handed arm's records to list hand-made calls, and runs
// again: the finished run asks both solvers those calls. RolesFile holds
// them, and the table prints the figure and its check.
func TestRunHandedCalls(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Train, cfg.Credit = TrainBoth, reward.CreditRole
	cfg.RL.Steps, cfg.RL.Schedule.Total = 1, 1
	cfg.SolverSamples, cfg.HandedCalls = 4, true
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.OutDir, EvalFile)
	records, _, err := bench.ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	arm := handedArm(TrainBoth, res.Steps)
	r := &runner{cfg: cfg}
	if err := r.generate(); err != nil {
		t.Fatal(err)
	}
	tasks := tasksOf(r.testSet)
	if _, err := HandedQuestions(records, arm, tasks); err != nil {
		t.Fatalf("the run's own records: %v", err)
	}
	// The handed arm's records now hand over "12*34" and "1234+5678".
	var out []byte
	for _, rec := range records {
		if rec.Arm == arm {
			rec.Labels[LabelQuestions] = "12*34\n1234+5678"
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, RolesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep RoleReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	n := 2 * len(tasks)
	if rep.HandedArm != arm || len(rep.HandedCalls) != n || len(rep.Handed) != 3 || rep.Handed[2].N != n {
		t.Fatalf("roles file: handed arm %q, %d calls, %d tests; want arm %q, %d calls and tests of products, sums and all", rep.HandedArm, len(rep.HandedCalls), len(rep.Handed), arm, n)
	}
	for i, c := range rep.HandedCalls {
		if want := []string{"12*34", "1234+5678"}[i%2]; c.Question != want || c.Before.Sampled > 4 || c.After.Sampled > 4 {
			t.Errorf("handed call %d: %+v, want question %q with at most 4 right samples", i, c, want)
		}
	}
	md, err := os.ReadFile(filepath.Join(cfg.OutDir, TableFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"- solver on the calls it is handed: those " + arm, "| all | " + fmt.Sprint(n) + " | ", "own reward on the calls it is handed"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("table.md lacks %q:\n%s", w, md)
		}
	}
}

// TestConfigHandedCalls: the figure needs route with the solver trained.
func TestConfigHandedCalls(t *testing.T) {
	for _, tc := range []struct {
		train string
		ok    bool
	}{{TrainBoth, true}, {TrainSolver, true}, {TrainDelegator, false}} {
		t.Run(tc.train, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Train, cfg.HandedCalls = tc.train, true
			err := cfg.Validate()
			if got := err == nil; got != tc.ok {
				t.Errorf("valid %v (err %v), want %v", got, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "handed_calls") {
				t.Errorf("err %v does not name handed_calls", err)
			}
		})
	}
}
