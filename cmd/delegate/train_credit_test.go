package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/train"
)

// TestTrainCredit: --credit role trains both roles to the end and is the
// run's identity; an unknown rule is refused with its name.
func TestTrainCredit(t *testing.T) {
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--train", "both", "--credit", "role")...)
	if err != nil || !strings.Contains(got, "3 RL steps (all steps done") {
		t.Fatalf("role credit run: %v\n%s", err, got)
	}
	run, err := os.ReadFile(filepath.Join(out, train.RunFile))
	if err != nil || !strings.Contains(string(run), `"credit": "role"`) {
		t.Errorf("run file: %v\n%s", err, run)
	}
	if _, err := os.Stat(filepath.Join(out, train.SolverDir, "metrics.jsonl")); err != nil {
		t.Errorf("the solver's metrics: %v", err)
	}
	if _, err := execute(t, testEnv, "train", "--credit", "sample", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), `credit "sample"`) {
		t.Errorf("--credit sample: err = %v, want one naming it", err)
	}
}
