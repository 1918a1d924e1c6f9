package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/train"
)

// TestTrainCredit checks that --credit role trains both roles to the end
// and is the run's identity. An unknown rule is refused with its name.
func TestTrainCredit(t *testing.T) {
	raceCovered(t, "train's TestRoleCreditAdvantages and TestTrainBothTrainsEachPolicyOnItsOwnSamples")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--train", "both", "--credit", "role")...)
	if err != nil || !strings.Contains(got, "3 RL steps (all steps done") {
		t.Fatalf("role credit run: %v\n%s", err, got)
	}
	for _, want := range []string{"Each trained role's own reward on held-out items", "- delegator (the task's reward;", "- solver (its own answer right", "| all | "} {
		if !strings.Contains(got, want) {
			t.Errorf("the role report lacks %q:\n%s", want, got)
		}
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

// TestTrainCreditResumesAfterSIGKILL runs `delegate train --train both
// --credit role` as a child process. It SIGKILLs it past its step-10
// checkpoint and runs the same command again. Each role ends with the
// parameters, bit for bit, and the metrics of a run never stopped.
func TestTrainCreditResumesAfterSIGKILL(t *testing.T) {
	endToEnd(t)
	exe, err := exec.LookPath("delegate")
	if err != nil {
		t.Fatalf("no delegate command on PATH (TestMain puts it there): %v", err)
	}
	dir := t.TempDir()
	// 13 steps, as the trainer checkpoints every 10. The kill after step
	// 11 leaves a checkpoint to resume from and a step to redo. The
	// shipped models, since a random delegator never calls the solver,
	// which then has no sample to train on.
	const steps, killAfter = 13, 11
	args := func(out string) []string {
		return []string{"train", "--train", "both", "--credit", "role", "--out", out,
			"--steps", strconv.Itoa(steps), "--group", "4", "--items", "2", "--lr", "1e-3",
			"--train-problems", "12", "--eval-items", "2", "--eval-concurrency", "4", "-q"}
	}
	run := func(out string) {
		t.Helper()
		cmd := exec.Command(exe, args(out)...)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("delegate train --out %s: %v\n%s", out, err, b)
		}
	}
	whole, killed := filepath.Join(dir, "whole"), filepath.Join(dir, "killed")
	run(whole)

	cmd := exec.Command(exe, args(killed)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	metrics := filepath.Join(killed, "metrics.jsonl")
	for lines := 0; lines < killAfter; lines = countLines(metrics) {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before step %d, so it was never killed:\n%s", err, killAfter, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("the run finished before SIGKILL reached it:\n%s", out.String())
	}
	if n := countLines(metrics); n >= steps {
		t.Fatalf("killed with %d metrics lines, want fewer than %d", n, steps)
	}
	run(killed)

	for _, sub := range []string{"", train.SolverDir} {
		what := map[string]string{"": "delegator", train.SolverDir: "solver"}[sub]
		a := policyParams(t, filepath.Join(whole, sub))
		b := policyParams(t, filepath.Join(killed, sub))
		start, _, err := models.Load(map[string]string{"": train.RouterModel, train.SolverDir: "solver"}[sub])
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(a.Data, start.Data) {
			t.Errorf("%s: not trained", what)
		}
		if !slices.Equal(a.Data, b.Data) {
			t.Errorf("%s: killed and resumed, the parameters differ from the run's that was not stopped", what)
		}
		if got := countLines(filepath.Join(killed, sub, "metrics.jsonl")); got != steps {
			t.Errorf("%s: %d metrics lines after the resume, want %d", what, got, steps)
		}
	}
}

// countLines is the number of lines in the file at path; 0 when it is
// not there yet.
func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// policyParams loads the trained policy from the checkpoint of the
// trainer whose output directory is dir.
func policyParams(t *testing.T, dir string) *nn.Params {
	t.Helper()
	p, _, err := nn.Load(filepath.Join(rl.CheckpointDir(dir), "policy"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
