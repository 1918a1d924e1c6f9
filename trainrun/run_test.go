package trainrun

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/eval"
	"github.com/delegatelab/delegate/rl"
)

func readMetrics(t *testing.T, dir string) []rl.Metrics {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, rl.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := rl.ReadMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestRunRoute(t *testing.T) {
	cfg := tinyConfig(t)
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.RL.Steps || res.StoppedBy != "steps" {
		t.Errorf("steps %d stopped by %q, want %d by steps", res.Steps, res.StoppedBy, cfg.RL.Steps)
	}
	ms := readMetrics(t, cfg.OutDir)
	if len(ms) != cfg.RL.Steps {
		t.Fatalf("metrics lines = %d, want %d", len(ms), cfg.RL.Steps)
	}
	for _, m := range ms {
		if math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) || math.IsNaN(m.Reward) {
			t.Errorf("step %d: loss %v reward %v", m.Step, m.Loss, m.Reward)
		}
		if m.Rollouts != cfg.RL.GroupSize*cfg.RL.ItemsPerStep {
			t.Errorf("step %d: %d rollouts, want %d", m.Step, m.Rollouts, cfg.RL.GroupSize*cfg.RL.ItemsPerStep)
		}
	}
	var names []string
	for _, r := range res.Table.Rows {
		names = append(names, r.Arm)
		if r.N != cfg.EvalItems {
			t.Errorf("%s: n = %d, want %d", r.Arm, r.N, cfg.EvalItems)
		}
	}
	want := []string{ArmSolver, ArmAlone, ArmAlways, ArmPretrained, trainedName(ArmTrained, cfg.RL.Steps)}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("arms %q, want %q", names, want)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, TableFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b)
	records, _, err := eval.ReadResults(filepath.Join(cfg.OutDir, EvalFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != len(want)*cfg.EvalItems {
		t.Errorf("%d records, want %d", len(records), len(want)*cfg.EvalItems)
	}
}
