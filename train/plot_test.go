package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/world"
)

func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	var log []byte
	for step := 1; step <= 3; step++ {
		m := rl.Metrics{Version: rl.MetricsVersion, Step: step, Reward: float64(step) / 3, Accuracy: 0.5,
			Scalars: map[string]float64{DelegatedMetric(world.Mul): 1, StepsMetric(world.Mul): 2}}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		log = append(append(log, b...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, rl.MetricsFile), log, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"reward.png", "reward.svg", "accuracy.png", "accuracy.svg", "delegator_tokens.png", "delegator_tokens.svg",
		"delegation_rate.png", "delegation_rate.svg", "delegation_by_kind.png", "delegation_by_kind.svg"}
	if len(files) != len(want) {
		t.Fatalf("wrote %q, want %q", files, want)
	}
	for i, f := range files {
		if got := filepath.Base(f); got != want[i] {
			t.Errorf("file %d: %s, want %s", i, got, want[i])
		}
		if fi, err := os.Stat(f); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, %v; want a drawn plot", f, fi, err)
		}
	}
	// No log, no plots.
	if files, err := WritePlots(t.TempDir()); err != nil || len(files) != 0 {
		t.Errorf("without a log: %q, %v; want none", files, err)
	}
}
