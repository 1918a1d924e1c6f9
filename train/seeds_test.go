package train

import (
	"context"
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
	tests := []struct {
		name  string
		cfg   Config
		seeds []uint64
		want  string // in the error; "" none
	}{
		{"three", route, []uint64{1, 2, 3}, ""},
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
