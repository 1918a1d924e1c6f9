package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/world"
)

// The shipped local models score on --dataset world: bench and process run
// them on the problems they were trained on, graded on the integer answer.
func TestBenchWorldDataset(t *testing.T) {
	dir := t.TempDir()
	out, err := execute(t, testEnv, "bench", "--config", "../../examples/world.yaml", "--dataset", "world", "--level", "2",
		"--strategies", "single,route", "--n", "2", "--out", dir, "--progress", "none")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	rows := readCSV(t, filepath.Join(dir, "table.csv"))
	if acc := num(t, rows["single"]["accuracy"]); !(acc > 0) {
		t.Errorf("single's accuracy on level-2 world problems = %v, want above 0 (the shipped delegator solves most alone)\n%s", acc, out)
	}
	// The solver alone cannot hold a whole problem: the table says why
	// its row is all zeros.
	if !strings.Contains(out, `Arm "weak" failed on every item`) || !strings.Contains(out, "the context holds 80") {
		t.Errorf("no note on the weak arm's failures:\n%s", out)
	}
	if !strings.Contains(out, "Dataset: world level 2") || !strings.Contains(out, "2 test problems drawn with seed 1") {
		t.Errorf("the notes do not say which problems:\n%s", out)
	}
	for _, r := range byArm(t, filepath.Join(dir, benchResults))["single"] {
		if r.Error != "" || (r.Correct && r.Extracted != r.Reference) {
			t.Errorf("task %s: error %q, correct %v, extracted %q, reference %q", r.TaskID, r.Error, r.Correct, r.Extracted, r.Reference)
		}
	}
	// Another level is another benchmark: the resume is refused.
	_, err = execute(t, testEnv, "bench", "--config", "../../examples/world.yaml", "--dataset", "world", "--level", "1",
		"--strategies", "single,route", "--n", "2", "--out", dir, "--progress", "none")
	if err == nil || !strings.Contains(err.Error(), "dataset.level: 2 there, 1 now") {
		t.Errorf("resume at another level: %v", err)
	}
}

func TestProcessWorldDataset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, err := execute(t, testEnv, "process", "--config", "../../examples/world.yaml", "--dataset", "world", "--level", "1",
		"-n", "2", "-g", "2", "--strategy", "single", "--keep-ties", "--out", dir, "--progress", "none")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, out)
	}
	o := readOutputs(t, dir)
	checkExact(t, o, 2, 2)
	if len(o.groups) != 2 {
		t.Fatalf("%d groups written, want 2 (ties kept)", len(o.groups))
	}
	if !strings.Contains(out, "dataset world level 1") || !(o.summary.MeanCandidate > 0) {
		t.Errorf("mean score %v, want above 0 on level-1 problems:\n%s", o.summary.MeanCandidate, out)
	}
}

func TestWorldDatasetFlagErrors(t *testing.T) {
	base := []string{"--config", "../../examples/world.yaml", "--dataset", "world", "--out", t.TempDir(), "--progress", "none"}
	tests := []struct {
		cmd   string
		extra []string
		want  string
	}{
		{"bench", []string{"--strategies", "single"}, "--n is required with --dataset world"},
		{"bench", []string{"--strategies", "single", "--n", "2", "--level", "9"}, fmt.Sprintf("--level 9: the world has levels 1 to %d", len(world.Levels()))},
		{"bench", []string{"--strategies", "single", "--n", "2", "--data", "x.jsonl"}, "--data is not used with --dataset world"},
		{"bench", []string{"--strategies", "single", "--n", "2", "--split", "dev"}, `--split: split "dev": want train, validation or test`},
		{"process", []string{"-g", "2"}, "--n is required with --dataset world"},
		{"process", []string{"-g", "2", "-n", "2", "--level", "0"}, "--level 0"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd+" "+strings.Join(tt.extra, " "), func(t *testing.T) {
			_, err := execute(t, testEnv, append(append([]string{tt.cmd}, base...), tt.extra...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
