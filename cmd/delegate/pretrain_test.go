package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

func TestPretrainRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown model", []string{"--model", "oracle"}, "--model"},
		{"steps and time", []string{"--model", "solver", "--steps", "3", "--time", "1m"}, "not both"},
		{"negative steps", []string{"--steps", "-1"}, "negative"},
		{"no eval items", []string{"--eval", "0"}, "positive"},
		{"init with two models", []string{"--init", "somewhere"}, "--init"},
		{"init missing", []string{"--model", "solver", "--init", "/nonexistent/ckpt", "--steps", "1"}, "--init"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"pretrain", "--out", t.TempDir()}, tt.args...)
			_, err := execute(t, func(string) string { return "" }, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("pretrain %v: %v, want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestPretrainSolverWritesCheckpoint runs two steps of the solver's
// pretraining and checks the checkpoint it leaves, its metadata and that
// the resumable state is gone.
func TestPretrainSolverWritesCheckpoint(t *testing.T) {
	out := t.TempDir()
	got, err := execute(t, func(string) string { return "" }, "pretrain", "--model", "solver", "--steps", "2", "--batch", "2", "--eval", "1", "--eval-every", "0", "--out", out, "--seed", "7")
	if err != nil {
		t.Fatalf("pretrain: %v\n%s", err, got)
	}
	for _, want := range []string{"solver step 2/2", "solver held-out 2d*2d", "inside its coverage"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	p, meta, err := nn.Load(filepath.Join(out, "solver"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Config != solverShape || meta["model"] != "solver" || meta["seed"] != "7" || meta["steps"] != "2" {
		t.Errorf("checkpoint config %+v, meta %v", p.Config, meta)
	}
	if _, err := os.Stat(filepath.Join(out, "solver.state")); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}
}
