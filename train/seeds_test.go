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
)

func TestRunSeedsSharesTheBaselines(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.RL.Steps, cfg.RL.Schedule.Total = 2, 2
	seeds := []uint64{1, 2}
	runs, sum, err := RunSeeds(context.Background(), cfg, seeds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || len(sum.Rows) != 2 || sum.Rows[1].Seed != 2 {
		t.Fatalf("runs %d, summary rows %+v, want one per seed", len(runs), sum.Rows)
	}
	count := func(seed uint64) map[string]int {
		recs, _, err := bench.ReadResults(filepath.Join(SeedDir(cfg.OutDir, seed), EvalFile))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, r := range recs {
			m[r.Arm]++
		}
		return m
	}
	one, two := count(1), count(2)
	// Each seed's directory holds every arm of its table once per item:
	// the second's baselines are the first's records, not run again.
	for _, arm := range routeArms(cfg, cfg.RL.Steps, runs[1].Result.Table.BestKeyword) {
		if two[arm] != cfg.EvalItems || one[arm] != cfg.EvalItems {
			t.Errorf("%s: %d and %d records, want %d in each seed", arm, one[arm], two[arm], cfg.EvalItems)
		}
	}
	for arm, n := range two {
		if seedArm(arm) {
			continue
		}
		a := runs[0].Result.Table.Row(arm)
		b := runs[1].Result.Table.Row(arm)
		if a == nil || b == nil || a.Reward != b.Reward || n != cfg.EvalItems {
			t.Errorf("baseline %s differs between seeds", arm)
		}
	}
	// Each seed trained its own SFT arm, seeded by its RL seed.
	for _, seed := range seeds {
		if _, err := os.Stat(filepath.Join(SeedDir(cfg.OutDir, seed), SFTDir, "policy")); err != nil {
			t.Errorf("seed %d's SFT checkpoint: %v", seed, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, SeedsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "mean over 2 seeds") || !strings.Contains(string(b), "of 2 seeds: RL-trained reward beats the pretrained delegator") {
		t.Errorf("seeds summary:\n%s", b)
	}
	// A second call resumes: nothing runs again.
	if _, _, err := RunSeeds(context.Background(), cfg, seeds, Options{}); err != nil {
		t.Fatal(err)
	}
	if again := count(2); len(again) != len(two) || again[runs[1].Result.Table.BestKeyword] != cfg.EvalItems {
		t.Errorf("resumed: %v, want %v", again, two)
	}
}

func TestCheckSeeds(t *testing.T) {
	route := DefaultConfig()
	mlpo := DefaultConfig()
	mlpo.Mode = ModeMLPO
	solver, both := DefaultConfig(), DefaultConfig()
	solver.Train, both.Train = TrainSolver, TrainBoth
	tests := []struct {
		name  string
		cfg   Config
		seeds []uint64
		want  string // in the error; "" none
	}{
		{"three", route, []uint64{1, 2, 3}, ""},
		{"solver", solver, []uint64{1, 2}, ""},
		{"both", both, []uint64{1, 2}, ""},
		{"none", route, nil, "none given"},
		{"zero", route, []uint64{0, 1}, "seed 0"},
		{"repeat", route, []uint64{1, 2, 1}, "seed 1 given twice"},
		{"mlpo", mlpo, []uint64{1, 2}, "only route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSeeds(tt.cfg, tt.seeds)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSummarizeSeeds(t *testing.T) {
	table := func(reward, cost float64, pass ...bool) *Table {
		t := &Table{BestRule: ruleName(1, 2), Rows: []Row{
			{Arm: ArmAlone, Cost: 2000e-6},
			{Arm: ruleName(1, 2), Reward: 0.7},
			{Arm: ArmTrained + " (step 9)", Accuracy: 0.9, Reward: reward, Cost: cost},
		}}
		for i, p := range pass {
			t.Checks = append(t.Checks, Check{Name: string(rune('a' + i)), Pass: p})
		}
		return t
	}
	runs := []SeedRun{
		{1, &Result{Steps: 9, Table: table(0.80, 1000e-6, true, true)}},
		{2, &Result{Steps: 9, Table: table(0.70, 1200e-6, true, false)}},
		{3, &Result{Steps: 9, Table: table(0.75, 1400e-6, false, false)}},
	}
	s := SummarizeSeeds(runs)
	_, rew, _, cut := s.Spreads()
	tests := []struct {
		name      string
		got, want float64
	}{
		{"mean reward", rew.Mean, 0.75},
		{"sd reward", rew.SD, 0.05},
		{"min reward", rew.Min, 0.70},
		{"max reward", rew.Max, 0.80},
		{"mean cut", cut.Mean, 0.4},
		{"sd cut", cut.SD, 0.1},
		{"check a", float64(s.Checks[0].Met), 2},
		{"check b", float64(s.Checks[1].Met), 1},
		{"seed 2's checks", float64(s.Rows[1].Met), 1},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	var b strings.Builder
	if err := s.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 2 | 9 | 0.900 | 0.700 | 1200 | 40.0% | 1 of 2 |", "0.750 (0.050; 0.700–0.800)", "- 2 of 3 seeds: a", "- 1 of 3 seeds: b"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSeedArm(t *testing.T) {
	tests := []struct {
		arm  string
		want bool
	}{
		{trainedName(ArmTrained, 9), true},
		{trainedName(ArmTrainedSolver, 9), true},
		{trainedName(ArmTrainedBoth, 9), true},
		{"random at the trained rate (0.50, step 9)", true},
		{ArmAlone, false},
		{ArmPretrained, false},
		{ArmOracle, false},
		{ruleName(1, 2), false},
	}
	for _, tt := range tests {
		if got := seedArm(tt.arm); got != tt.want {
			t.Errorf("seedArm(%q) = %v, want %v", tt.arm, got, tt.want)
		}
	}
}

// solverAll is a solver's test over all of 300 calls: greedy right before
// and after with the calls lost and gained, and the sampled share's paired
// difference with its interval.
func solverAll(before, after, lost, gained int, p, diff, lo, hi float64) SolverTest {
	return SolverTest{Calls: "all", N: 300, GreedyBefore: before, GreedyAfter: after, Lost: lost, Gained: gained, P: p,
		SampledBefore: 0.297, SampledAfter: 0.297 + diff, SampledDiff: diff, SampledCI: bench.Interval{Lo: lo, Hi: hi}}
}

// TestSummarizeSeedsRoles summarizes hand-made role reports of three
// seeds. The first two are the docs' seeds 1 and 2 of the weak solver;
// the third's greedy answers gain 20 calls and lose 5.
func TestSummarizeSeedsRoles(t *testing.T) {
	table := func(d *DelegatorTest, s SolverTest) *Table {
		return &Table{Rows: []Row{{Arm: ArmAlone, Cost: 2000e-6}}, Roles: &RoleReport{
			Samples: 16, Temperature: 1, Delegator: d,
			Solver: []SolverTest{{Calls: "products", N: s.N}, s},
		}}
	}
	del := func(diff, lo float64) *DelegatorTest {
		return &DelegatorTest{N: 100, RewardBefore: 0.5, RewardAfter: 0.5 + diff, RewardDiff: diff, RewardCI: bench.Interval{Lo: lo, Hi: diff + 0.05}}
	}
	runs := []SeedRun{
		{1, &Result{Steps: 300, Table: table(del(0.10, 0.04), solverAll(128, 127, 24, 23, 1, 0.040, 0.021, 0.059))}},
		{2, &Result{Steps: 300, Table: table(del(0.02, -0.01), solverAll(128, 129, 22, 23, 1, 0.043, 0.022, 0.063))}},
		{3, &Result{Steps: 300, Table: table(del(0.06, 0.01), solverAll(128, 143, 5, 20, 0.004, 0.016, -0.006, 0.037))}},
	}
	s := SummarizeSeeds(runs)
	if len(s.Rows) != 0 || s.Roles == nil || s.Roles.Solver == nil || s.Roles.Delegator == nil || len(s.Roles.Rows) != 3 {
		t.Fatalf("summary %+v, roles %+v: want no delegator row and both roles over 3 seeds", s.Rows, s.Roles)
	}
	r := s.Roles
	tests := []struct {
		name      string
		got, want float64
	}{
		// Sampled: 0.040, 0.043, 0.016; deviations +0.007, +0.010,
		// −0.017; sd √(0.000438 / 2).
		{"sampled mean", r.Solver.SampledDiff.Mean, 0.033},
		{"sampled sd", r.Solver.SampledDiff.SD, math.Sqrt(0.000438 / 2)},
		{"sampled min", r.Solver.SampledDiff.Min, 0.016},
		{"sampled max", r.Solver.SampledDiff.Max, 0.043},
		{"sampled rises", float64(r.Solver.SampledRises), 2},
		// Greedy: −1, +1 and +15 calls of 300; deviations −6, −4 and +10
		// of 300; sd √(152 / 2) / 300.
		{"greedy mean", r.Solver.GreedyDiff.Mean, 5.0 / 300},
		{"greedy sd", r.Solver.GreedyDiff.SD, math.Sqrt(152.0/2) / 300},
		{"greedy min", r.Solver.GreedyDiff.Min, -1.0 / 300},
		{"greedy max", r.Solver.GreedyDiff.Max, 15.0 / 300},
		{"greedy rises", float64(r.Solver.GreedyRises), 1},
		{"solver seeds", float64(r.Solver.Of), 3},
		// The delegator: 0.10, 0.02, 0.06, sd 0.04; two intervals above 0.
		{"delegator mean", r.Delegator.RewardDiff.Mean, 0.06},
		{"delegator sd", r.Delegator.RewardDiff.SD, 0.04},
		{"delegator rises", float64(r.Delegator.Rises), 2},
		{"samples", float64(r.Samples), 16},
		{"temperature", r.Temperature, 1},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if got := r.Rows[2].Solver; got == nil || got.Calls != "all" || got.Gained != 20 {
		t.Errorf("seed 3's solver test %+v, want the test over all calls", got)
	}
	var b strings.Builder
	if err := s.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 1 | 300 | 128 → 127 of 300 (24 / 23, p 1) | -0.003 | 0.297 → 0.337 | +0.040 [+0.021, +0.059] |",
		"| 3 | 300 | 128 → 143 of 300 (5 / 20, p 0.004) | +0.050 | 0.297 → 0.313 | +0.016 [-0.006, +0.037] |",
		"| **mean over 3 seeds** (sd; min–max) | | | +0.017 (0.029; -0.003 to +0.050) | | +0.033 (0.015; +0.016 to +0.043) |",
		"- 2 of 3 seeds: the solver's sampled share right rises",
		"- 1 of 3 seeds: the solver's greedy accuracy rises",
		"| 2 | 300 | 0.500 → 0.520 | +0.020 [-0.010, +0.070] |",
		"| **mean over 3 seeds** (sd; min–max) | | | +0.060 (0.040; +0.020 to +0.100) | |",
		"- 2 of 3 seeds: the delegator's reward rises",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "| RL seed | steps | accuracy |") {
		t.Errorf("a table of the trained delegator's rows without any:\n%s", b.String())
	}
	// The files hold the same: the markdown, and the role reports' summary
	// as JSON.
	dir := t.TempDir()
	if err := s.write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, SeedsFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(md) != b.String() {
		t.Errorf("%s:\n%s\nwant:\n%s", SeedsFile, md, b.String())
	}
	j, err := os.ReadFile(filepath.Join(dir, SeedRolesFile))
	if err != nil {
		t.Fatal(err)
	}
	var got SeedRoles
	if err := json.Unmarshal(j, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != seedRolesVersion || len(got.Rows) != 3 || got.Rows[2].Seed != 3 || got.Rows[2].Solver.Gained != 20 ||
		got.Solver.SampledDiff.Mean != r.Solver.SampledDiff.Mean || got.Solver.GreedyRises != 1 || got.Delegator.Rises != 2 {
		t.Errorf("%s: %s", SeedRolesFile, j)
	}
}

// TestSummarizeSeedsGreedyOnly leaves the sampled figures out when the
// solver was asked greedy only, and the delegator's when it was frozen.
func TestSummarizeSeedsGreedyOnly(t *testing.T) {
	r := SummarizeRoles([]RoleSeedRow{{Seed: 1, Steps: 5, Solver: &SolverTest{Calls: "all", N: 4, GreedyBefore: 1, GreedyAfter: 3, Gained: 2, P: 0.5}}}, 0, 1)
	if r.Delegator != nil || r.Solver == nil || r.Solver.SampledDiff != nil || r.Solver.GreedyDiff.Mean != 0.5 || r.Solver.GreedyDiff.SD != 0 || r.Solver.GreedyRises != 0 {
		t.Errorf("greedy only: %+v, solver %+v", r, r.Solver)
	}
	var b strings.Builder
	r.writeMarkdown(&b)
	for _, want := range []string{"| 1 | 5 | 1 → 3 of 4 (0 / 2, p 0.5) | +0.500 | – | – |", "- 0 of 1 seeds: the solver's greedy accuracy rises"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "sampled share") || strings.Contains(b.String(), "Delegator") {
		t.Errorf("sampled or delegator figures without them:\n%s", b.String())
	}
}
