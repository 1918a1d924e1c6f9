package main

import (
	"bytes"
	"context"
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
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// bothRolesConfig writes a process config under dir: the shipped router
// and solver under route, both sampled at temperature 1, the router's
// tool calls strict (one delegator sample per rollout).
func bothRolesConfig(t *testing.T, dir string) (cfg, router, solver string) {
	t.Helper()
	models, err := filepath.Abs("../../models")
	if err != nil {
		t.Fatal(err)
	}
	router, solver = filepath.Join(models, "router"), filepath.Join(models, "solver")
	doc := `preset: world
models:
  delegator: {kind: local, checkpoint: ` + router + `, price: {input: 1, cached_input: 0.1, output: 5}}
  solver: {kind: local, checkpoint: ` + solver + `, price: {input: 0.2, cached_input: 0.02, output: 1}}
roles: {default: delegator, subagent: solver, weak: solver}
strategy:
  strict_tool_calls: true
  single: {temperature: 0}
  strong: {temperature: 1}
  weak: {temperature: 1}
`
	cfg = filepath.Join(dir, "world.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, router, solver
}

// pushBothRoles runs process --push of n world items with both of route's
// roles sampled: the delegator (strong) and the solver (weak).
func pushBothRoles(t *testing.T, url, cfg, out string, n, seed int) {
	t.Helper()
	got, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "world", "-n", strconv.Itoa(n), "-g", "4",
		"--seed", strconv.Itoa(seed), "--strategy", "route", "--train-roles", "strong,weak", "--keep-ties", "--no-baseline",
		"--reward", "world", "--out", out, "--progress", "none", "--push", url, "--push-offpolicy", "64")
	if err != nil {
		t.Fatalf("process --push: %v\n%s", err, got)
	}
}

// bothRolesTrainArgs are train --api's flags for both roles under role
// credit. A batch holds 64 sequences: a group of 4 rollouts brings the
// delegator's 4 and the solver's answers, 16 to 28 in all here.
func bothRolesTrainArgs(url, router, out string, steps int) []string {
	return []string{"train", "--api", url, "--train", "both", "--credit", "role", "--delegator", router, "--strict-tool-calls",
		"--steps", strconv.Itoa(steps), "--items", "16", "--group", "4", "--out", out}
}

// TestTrainAPIBothRoles pushes route rollouts whose delegator and solver
// are both sampled (process --push --train-roles strong,weak) to delegate
// api, on embedded NATS. train --api --train both --credit role trains
// each role's trainer on them. Read again by step, every solver sequence
// carries its answer's own result (sample_correct, the world's check),
// and each role's trainer gets its role's sequences, each with process's
// tokens and the advantage train's in-process rule (train.RoleCredits)
// gives its sample in process's records, exactly.
func TestTrainAPIBothRoles(t *testing.T) {
	endToEnd(t)
	url := startAPI(t)
	dir := t.TempDir()
	cfg, router, _ := bothRolesConfig(t, dir)
	const steps = 2
	trainOut := filepath.Join(dir, "train")
	trained := make(chan error, 1)
	var trainLog string
	go func() {
		var err error
		trainLog, err = execute(t, testEnv, bothRolesTrainArgs(url, router, trainOut, steps)...)
		trained <- err
	}()
	rollouts := filepath.Join(dir, "rollouts")
	pushBothRoles(t, url, cfg, rollouts, 16, 1)
	select {
	case err := <-trained:
		if err != nil {
			t.Fatalf("train --api --train both: %v\n%s", err, trainLog)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("train --api did not finish %d steps", steps)
	}
	for _, sub := range []string{"", train.SolverDir} {
		if ms := readMetrics(t, filepath.Join(trainOut, sub, rl.MetricsFile)); len(ms) != steps {
			t.Errorf("%q: %d steps in the trainer's metrics, want %d\n%s", sub, len(ms), steps, trainLog)
		}
	}

	records := readGroupRecords(t, filepath.Join(rollouts, "groups.jsonl"))
	p, _, err := nn.Load(router)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := atropos.DefaultTrainerClient()
	client.URL, client.Poll = url, 50*time.Millisecond
	src := &atropos.Source{Client: &client, Estimator: reward.GRPO, Credit: reward.CreditRole,
		Vocab: p.Config.Vocab, Context: p.Config.Context, Quarantine: filepath.Join(dir, "quarantine.jsonl")}
	views := []atropos.View{
		{Others: true, Vocab: p.Config.Vocab, Context: p.Config.Context},
		{Roles: train.SolverRoles, Vocab: p.Config.Vocab, Context: p.Config.Context},
	}
	compared := map[string]int{}
	var judged, nonzero int
	for step := 1; step <= steps; step++ {
		client.Last = step - 1
		b, err := client.Next(ctx)
		if err != nil {
			t.Fatalf("batch of step %d: %v", step, err)
		}
		parts, err := src.NextViews(ctx, step, views)
		if err != nil {
			t.Fatalf("the trainers' groups of step %d: %v", step, err)
		}
		next := make([]int, len(views)) // each view's next group
		for _, sd := range b.Batch {
			id, _ := sd.GroupOverrides["group_id"].(string)
			_, gid, _ := strings.Cut(id, "/")
			rec := records[gid]
			if rec == nil {
				t.Fatalf("step %d: group %q is none process wrote", step, id)
			}
			credits, err := train.RoleCredits(reward.GRPO, rec) // judges the solver's samples
			if err != nil {
				t.Fatal(err)
			}
			var roles []string
			var correct []*bool
			var want []float64
			for k, e := range rec.Episodes {
				for j, sm := range e.Samples {
					roles, correct = append(roles, sm.Role), append(correct, sm.Correct)
					want = append(want, credits[k][j].Advantage)
				}
			}
			if len(want) != len(sd.Tokens) || len(sd.Tokens) != len(rec.Tokens) {
				t.Fatalf("group %s: %d sequences from the API, %d samples and %d sequences in process", gid, len(sd.Tokens), len(want), len(rec.Tokens))
			}
			// This group's part of each view, in batch order.
			got := make([][]rl.ScoredRollout, len(views))
			for i := range sd.Tokens {
				v := roleView(roles[i])
				if got[v] == nil {
					if next[v] >= len(parts[v]) {
						t.Fatalf("group %s: view %d has too few groups", gid, v)
					}
					got[v] = parts[v][next[v]].Rollouts
					next[v]++
				}
			}
			seen := make([]int, len(views))
			for i := range sd.Tokens {
				ov := atropos.ReadSequenceOverride(sd.Overrides[i])
				v := roleView(roles[i])
				ro := got[v][seen[v]]
				seen[v]++
				if !slices.Equal(sd.Tokens[i], rec.Tokens[i]) || ov.Role != roles[i] {
					t.Errorf("group %s sequence %d: role %q and tokens not process's (role %q)", gid, i, ov.Role, roles[i])
				}
				if (ov.SampleCorrect == nil) != (correct[i] == nil) || ov.SampleCorrect != nil && *ov.SampleCorrect != *correct[i] {
					t.Errorf("group %s sequence %d (%s): sample_correct %v, the world's check %v", gid, i, roles[i], ov.SampleCorrect, correct[i])
				}
				if ro.Advantage != want[i] || ro.Reward != rec.Scores[i] {
					t.Errorf("group %s sequence %d (%s): advantage %v reward %v from its trainer, %v and %v in process", gid, i, roles[i], ro.Advantage, ro.Reward, want[i], rec.Scores[i])
				}
				compared[roles[i]]++
				if correct[i] != nil {
					judged++
				}
				if want[i] != 0 {
					nonzero++
				}
			}
			for v := range views {
				if got[v] != nil && seen[v] != len(got[v]) {
					t.Errorf("group %s: view %d has %d sequences, want %d", gid, v, len(got[v]), seen[v])
				}
			}
		}
		for v := range views {
			if next[v] != len(parts[v]) {
				t.Errorf("step %d: view %d has %d groups, %d matched", step, v, len(parts[v]), next[v])
			}
		}
	}
	if compared[strategy.RoleStrong] == 0 || compared[strategy.RoleWeak] == 0 || judged == 0 || nonzero == 0 {
		t.Errorf("compared %v sequences by role, %d judged by their own answer, %d with an advantage other than 0: the comparison says too little", compared, judged, nonzero)
	}
}

// roleView is the view of train --api that trains role: 1 the solver's,
// 0 the delegator's.
func roleView(role string) int {
	if slices.Contains(train.SolverRoles, role) {
		return 1
	}
	return 0
}

// TestTrainAPIBothRolesResumesAfterSIGKILL runs train --api --train both
// as a child process on the groups of process --push. Items are pushed a
// few at a time until it has trained a step, fewer than its steps take;
// then it is SIGKILLed, and run again once the rest are pushed. A third
// trainer, never stopped, trains on the same batches, which the API keeps
// by step. Each role ends with that trainer's parameters, bit for bit.
func TestTrainAPIBothRolesResumesAfterSIGKILL(t *testing.T) {
	endToEnd(t)
	exe, err := exec.LookPath("delegate")
	if err != nil {
		t.Fatalf("no delegate command on PATH (TestMain puts it there): %v", err)
	}
	url := startAPI(t)
	dir := t.TempDir()
	cfg, router, _ := bothRolesConfig(t, dir)
	// A group of 4 rollouts brings at most 4 × (1 + 5) sequences, so 4
	// items fill at most one of the 64-sequence batches: rounds of pushes
	// until the trainer steps never let it finish.
	const steps, perRound = 6, 4
	killed, whole := filepath.Join(dir, "killed"), filepath.Join(dir, "whole")
	start := func() (*exec.Cmd, *bytes.Buffer, chan error) {
		cmd := exec.Command(exe, bothRolesTrainArgs(url, router, killed, steps)...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, &out, done
	}
	cmd, out, done := start()
	metrics := filepath.Join(killed, rl.MetricsFile)
	round := 0
	for countLines(metrics) < 1 {
		if round == 3 {
			t.Fatalf("%d items pushed and no batch trained:\n%s", round*perRound, out)
		}
		round++
		pushBothRoles(t, url, cfg, filepath.Join(dir, "env-"+strconv.Itoa(round)), perRound, round)
		deadline := time.Now().Add(30 * time.Second)
		for countLines(metrics) < 1 && time.Now().Before(deadline) {
			select {
			case err := <-done:
				t.Fatalf("the trainer ended (%v) before its first step:\n%s", err, out)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("the trainer finished before SIGKILL reached it:\n%s", out)
	}
	if n := countLines(metrics); n >= steps {
		t.Fatalf("killed with %d metrics lines, want fewer than %d", n, steps)
	}
	_, out, done = start()
	pushBothRoles(t, url, cfg, filepath.Join(dir, "env-last"), 24, 10)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the resumed trainer: %v\n%s", err, out)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the resumed trainer did not finish %d steps:\n%s", steps, out)
	}
	if got, err := execute(t, testEnv, bothRolesTrainArgs(url, router, whole, steps)...); err != nil {
		t.Fatalf("the trainer never stopped: %v\n%s", err, got)
	}
	for _, sub := range []string{"", train.SolverDir} {
		what := map[string]string{"": "delegator", train.SolverDir: "solver"}[sub]
		a, b := policyParams(t, filepath.Join(whole, sub)), policyParams(t, filepath.Join(killed, sub))
		start, _, err := models.Load(map[string]string{"": train.RouterModel, train.SolverDir: "solver"}[sub])
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(a.Data, start.Data) {
			t.Errorf("%s: not trained", what)
		}
		if !slices.Equal(a.Data, b.Data) {
			t.Errorf("%s: killed and resumed, the parameters differ from the trainer's that was not stopped", what)
		}
		if got := countLines(filepath.Join(killed, sub, rl.MetricsFile)); got != steps {
			t.Errorf("%s: %d metrics lines after the resume, want %d", what, got, steps)
		}
	}
}
