package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/world"
)

// tinyModels writes two tiny random checkpoints and returns their paths.
func tinyModels(t *testing.T, dir string) (solver, delegator string) {
	t.Helper()
	c := nn.Config{Vocab: tokenizer.VocabSize, Dim: 16, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 32, Context: 1024}.WithDefaults()
	var paths []string
	for i, name := range []string{"solver", "delegator"} {
		p, err := nn.Alloc(c)
		if err != nil {
			t.Fatal(err)
		}
		p.Init(uint64(i + 1))
		path := filepath.Join(dir, name)
		if err := nn.Save(path, p, nil); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths[0], paths[1]
}

// tinyTrainArgs are the flags of a few quick steps on tiny models.
func tinyTrainArgs(solver, delegator, out string, extra ...string) []string {
	return append([]string{"train", "--solver", solver, "--delegator", delegator, "--out", out,
		"--steps", "3", "--group", "4", "--items", "2", "--max-new-tokens", "6", "--lr", "1e-2",
		"--train-problems", "12", "--eval-items", "4", "--eval-concurrency", "4"}, extra...)
}

func TestTrainEndToEnd(t *testing.T) {
	endToEnd(t)
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	tests := []struct {
		est         string
		steps       int
		distractors string
	}{{"grpo", 3, ""}, {"drgrpo", 1, "3"}, {"rloo", 1, ""}}
	for _, tt := range tests {
		est := tt.est
		t.Run(est, func(t *testing.T) {
			out := out + "-" + est
			steps := strconv.Itoa(tt.steps)
			args := []string{"--estimator", est, "--kl", "0.05", "--steps", steps, "--eval-items", "2"}
			if tt.distractors != "" {
				args = append(args, "--distractors", tt.distractors)
			}
			got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, args...)...)
			if err != nil {
				t.Fatalf("train: %v\n%s", err, got)
			}
			var id struct{ World world.Config }
			readRunFile(t, out, &id)
			if want := world.Levels()[world.DefaultLevel].Distractors; tt.distractors != "" {
				if got := strconv.Itoa(id.World.Distractors); got != tt.distractors {
					t.Errorf("run's world has %s distractors, want --distractors %s", got, tt.distractors)
				}
			} else if id.World.Distractors != want {
				t.Errorf("run's world has %d distractors, want the level's %d", id.World.Distractors, want)
			}
			for _, want := range []string{"| arm |", train.ArmAlone, train.ArmRule + ": always delegate", train.ArmOracle, train.ArmPretrained, train.ArmRandom, "RL-trained delegator (step " + steps + ")", steps + " RL steps"} {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			f, err := os.Open(filepath.Join(out, rl.MetricsFile))
			if err != nil {
				t.Fatal(err)
			}
			ms, err := rl.ReadMetrics(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != tt.steps {
				t.Fatalf("%d metrics lines, want %d", len(ms), tt.steps)
			}
			for _, m := range ms {
				if m.Estimator != est || math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) {
					t.Errorf("step %d: estimator %q loss %v", m.Step, m.Estimator, m.Loss)
				}
			}
			for _, name := range []string{"reward.png", "reward.svg", "accuracy.png", "accuracy.svg", "delegator_tokens.png", "delegator_tokens.svg", "delegation_rate.png", "delegation_rate.svg", "delegation_by_kind.png", "delegation_by_kind.svg", train.TableFile, train.EvalFile, "checkpoint/policy"} {
				if _, err := os.Stat(filepath.Join(out, name)); err != nil {
					t.Errorf("missing %s: %v", name, err)
				}
			}
		})
	}
}

func TestTrainProgressBar(t *testing.T) {
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd(testEnv, slog.New(slog.DiscardHandler))
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(tinyTrainArgs(solver, delegator, filepath.Join(dir, "run")))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr.String())
	}
	// The baselines that do not run the policy in its training seat are 4
	// items under each arm: the delegator alone, every position rule of
	// the world's longest problem, the best keyword rule and the oracle.
	arms := 3 + 1<<world.DefaultConfig().MaxSteps
	baselines := fmt.Sprintf("evaluate baselines %d/%d items (100%%)", 4*arms, 4*arms)
	for _, want := range []string{baselines, "train 3/3 steps (100%)  reward", "acc", "delegation", "evaluate trained"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "| arm |") {
		t.Errorf("stdout lacks the table:\n%s", stdout.String())
	}
}

func TestTrainResumes(t *testing.T) {
	raceCovered(t, "train's TestRunResumesAnInterruptedRun")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	// A run whose time budget ends it before any step, then the same run
	// with time: it goes on from there and finishes.
	// It prints its table but fails: the table is not the full run's.
	if got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--time", "1ns")...); err == nil || !strings.Contains(err.Error(), "after 0 of 3 steps") || !strings.Contains(got, "0 RL steps (stopped by --time") {
		t.Fatalf("first run: %v\n%s", err, got)
	}
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out)...)
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, got)
	}
	if !strings.Contains(got, "3 RL steps (all steps done") {
		t.Errorf("resumed run did not finish:\n%s", got)
	}
}

// TestTrainRLSeedIsTheRunsIdentity resumes a run only with its own
// trainer seed: two seeds' steps never mix in one checkpoint.
func TestTrainRLSeedIsTheRunsIdentity(t *testing.T) {
	raceCovered(t, "train's TestRunRoute")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	if _, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--rl-seed", "2", "--time", "1ns")...); err == nil {
		t.Fatal("a run stopped by its time budget exited 0")
	}
	run, err := os.ReadFile(filepath.Join(out, train.RunFile))
	if err != nil || !strings.Contains(string(run), `"rl_seed": 2`) {
		t.Fatalf("run file: %v\n%s", err, run)
	}
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--time", "1ns")...)
	if err == nil || !strings.Contains(err.Error(), "rl_seed 2 there, 1 now") {
		t.Errorf("resumed with another RL seed: %v\n%s", err, got)
	}
}

// TestTrainLRIsTheRunsIdentity resumes a run only with its own learning
// rate: the trainer's state is never updated at another one.
func TestTrainLRIsTheRunsIdentity(t *testing.T) {
	raceCovered(t, "train's TestIdentityTrainerSettings")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	if _, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--time", "1ns")...); err == nil {
		t.Fatal("a run stopped by its time budget exited 0")
	}
	run, err := os.ReadFile(filepath.Join(out, train.RunFile))
	if err != nil || !strings.Contains(string(run), `"lr": 0.01,`) {
		t.Fatalf("run file: %v\n%s", err, run)
	}
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--time", "1ns", "--lr", "1e-3")...)
	if err == nil || !strings.Contains(err.Error(), "lr 0.01 there, 0.001 now") {
		t.Errorf("resumed with another --lr: %v\n%s", err, got)
	}
}

// TestTrainRLSeeds trains two RL seeds from one command. Each seed's run
// has its directory and table, and the summary counts the seeds meeting
// each check. --rl-seeds refuses --rl-seed beside it.
func TestTrainRLSeeds(t *testing.T) {
	raceCovered(t, "train's TestRunSeedsSharesTheBaselines")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--rl-seeds", "1,2")...)
	if err != nil || !strings.Contains(got, "2 RL seeds") || !strings.Contains(got, "mean over 2 seeds") {
		t.Fatalf("two seeds: %v\n%s", err, got)
	}
	for _, seed := range []uint64{1, 2} {
		run, err := os.ReadFile(filepath.Join(train.SeedDir(out, seed), train.RunFile))
		if err != nil || !strings.Contains(string(run), fmt.Sprintf(`"rl_seed": %d`, seed)) {
			t.Errorf("seed %d's run file: %v\n%s", seed, err, run)
		}
		if _, err := os.Stat(filepath.Join(train.SeedDir(out, seed), train.TableFile)); err != nil {
			t.Errorf("seed %d's table: %v", seed, err)
		}
	}
	if _, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--rl-seeds", "1,2", "--rl-seed", "3")...); err == nil || !strings.Contains(err.Error(), "in place of --rl-seed") {
		t.Errorf("--rl-seeds with --rl-seed: %v", err)
	}
}

// TestTrainStrictToolCalls trains with well-formed calls enforced while
// sampling. The run finishes, and its run file says how it sampled, so a
// resumed run samples the same way.
func TestTrainStrictToolCalls(t *testing.T) {
	raceCovered(t, "local's TestStrictToolCalls and train's TestRunRoute")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	out := filepath.Join(dir, "run")
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--strict-tool-calls")...)
	if err != nil || !strings.Contains(got, "3 RL steps (all steps done") {
		t.Fatalf("strict run: %v\n%s", err, got)
	}
	run, err := os.ReadFile(filepath.Join(out, train.RunFile))
	if err != nil || !strings.Contains(string(run), `"strict_tool_calls": true`) {
		t.Errorf("run file: %v\n%s", err, run)
	}
}

func TestTrainRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"train", "--estimator", "ppo"}, "--estimator"},
		{[]string{"train", "--mode", "nope", "--solver", "x"}, "mode"},
		{[]string{"train", "--solver", "/nonexistent/solver", "--delegator", "/nonexistent/delegator", "--out", "OUT"}, "/nonexistent/solver"},
		{[]string{"train", "extra"}, "unknown command"},
		{[]string{"train", "--level", "9"}, "--level 9"},
		{[]string{"train", "--distractors", "9"}, "distractors: 9 is outside"},
		{[]string{"train", "--world", "nowhere"}, `world "nowhere"`},
		{[]string{"train", "--world", "digits", "--level", "2"}, "--world goes without --level"},
		{[]string{"train", "--world", "digits", "--mode", "mlpo"}, "--world goes with --mode route"},
		{[]string{"train", "--world", "digits", "--solver", "shipped:nothing", "--out", "OUT"}, `no shipped model "nothing"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			args := tt.args
			for i, a := range args {
				if a == "OUT" {
					args[i] = t.TempDir()
				}
			}
			_, err := execute(t, testEnv, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestSelectWorld checks what --world digits picks. It takes the default
// world's problems and the solver's coverage. It takes the shipped
// solver-digits unless --solver is given.
func TestSelectWorld(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		wantSolver string
		wantCov    world.Coverage
		wantLambda float64
	}{
		{[]string{"--world", "digits"}, train.ShippedPrefix + "solver-digits", world.DigitsCoverage(), 0.001},
		{[]string{"--world", "digits", "--solver", "mine"}, "", world.DigitsCoverage(), 0.001}, // the flag sets the solver
		{[]string{"--world", "default"}, "", world.Coverage{}, 0.001},
		{[]string{"--world", "band"}, train.ShippedPrefix + "solver-band", world.BandCoverage(), world.BandLambda},
		{[]string{"--world", "band", "--lambda", "0.002"}, train.ShippedPrefix + "solver-band", world.BandCoverage(), 0.001}, // the flag sets λ
	} {
		cmd := newTrainCmd(testEnv, slog.New(slog.DiscardHandler))
		if err := cmd.Flags().Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		cfg := train.DefaultConfig()
		cfg.World.Distractors = 3
		f := trainFlags{world: tt.args[1]}
		if err := selectWorld(cmd.Flags(), &cfg, f); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if cfg.Solver != tt.wantSolver {
			t.Errorf("%v: solver %q, want %q", tt.args, cfg.Solver, tt.wantSolver)
		}
		if cfg.Reward.Lambda != tt.wantLambda {
			t.Errorf("%v: λ %v, want %v", tt.args, cfg.Reward.Lambda, tt.wantLambda)
		}
		if cfg.Coverage != tt.wantCov {
			t.Errorf("%v: coverage %+v, want %+v", tt.args, cfg.Coverage, tt.wantCov)
		}
		if got, want := cfg.World.Summary(), world.DefaultConfig().Summary(); got != want {
			t.Errorf("%v: world %s, want the default world %s", tt.args, got, want)
		}
	}
}

// delegate train's progress is the shared view's. Under bar its phases
// are bars with the step's figures. Under plain, lines name each phase,
// its items or steps, and the figures.
func TestTrainProgressShowsFigures(t *testing.T) {
	for _, mode := range []string{progressBar, progressPlain} {
		t.Run(mode, func(t *testing.T) {
			var buf bytes.Buffer
			p := newTrainProgress(&buf, mode, 2)
			trainCh := make(chan rl.Progress, 4)
			evalCh := make(chan bench.Progress, 4)
			phases := make(chan string, 4)
			done := make(chan struct{})
			go func() { p.observe(trainCh, evalCh, phases); close(done) }()
			phases <- "evaluate baselines"
			time.Sleep(50 * time.Millisecond)
			evalCh <- bench.Progress{Done: 1, Total: 1, Correct: true}
			time.Sleep(50 * time.Millisecond)
			phases <- "train"
			time.Sleep(50 * time.Millisecond)
			trainCh <- rl.Progress{Step: 1, Steps: 2, RolloutsDone: 3, Rollouts: 8}
			trainCh <- rl.Progress{Step: 1, Steps: 2, Metrics: &rl.Metrics{Step: 1, Reward: 0.625, Accuracy: 0.75, DelegationRate: 0.5}}
			trainCh <- rl.Progress{Step: 2, Steps: 2, Metrics: &rl.Metrics{Step: 2, Reward: 0.5, Accuracy: 0.75, DelegationRate: 0.5}}
			time.Sleep(600 * time.Millisecond) // two refreshes
			close(trainCh)
			close(evalCh)
			close(phases)
			<-done
			p.finish()
			wants := []string{"evaluate baselines", "1/1 correct", "2/2 steps", "reward 0.500", "acc 0.75", "delegation 0.50"}
			if mode == progressPlain {
				wants = []string{"evaluate baselines 1/1 items (100%)  1/1 correct, 0 failed", "train 2/2 steps (100%)  reward 0.500 acc 0.75 delegation 0.50"}
			}
			for _, want := range wants {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("progress lacks %q:\n%s", want, buf.String())
				}
			}
		})
	}
}

// TestTrainMLPODefaults: --mode mlpo starts from the MLPO recipe and its
// world (Dr. GRPO, correctness only, up to 4 distractors) unless a flag
// says otherwise, and the run records what it ran.
func TestTrainMLPODefaults(t *testing.T) {
	raceCovered(t, "train's TestRunMLPO")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	for _, tt := range []struct {
		name        string
		extra       []string
		est         string
		lambda      float64
		distractors int
	}{
		{"defaults", nil, "drgrpo", 0, 4},
		{"flags win", []string{"--estimator", "grpo", "--lambda", "0.002", "--distractors", "2"}, "grpo", 0.002, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name)
			args := append([]string{"--mode", "mlpo", "--steps", "1"}, tt.extra...)
			got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, args...)...)
			if err != nil {
				t.Fatalf("train: %v\n%s", err, got)
			}
			var id struct {
				Mode      string
				Estimator string
				World     world.Config
				Reward    struct{ Lambda, Mu float64 }
			}
			b := readRunFile(t, out, &id)
			if id.Mode != train.ModeMLPO || id.Estimator != tt.est || id.Reward.Lambda != tt.lambda || id.Reward.Mu != 0 || id.World.Distractors != tt.distractors {
				t.Errorf("run.json = %s\nwant mode mlpo, estimator %s, lambda %v, mu 0, %d distractors", b, tt.est, tt.lambda, tt.distractors)
			}
			if !strings.Contains(got, train.ArmMajority) {
				t.Errorf("the table lacks the peers' majority vote:\n%s", got)
			}
		})
	}
}

// readRunFile decodes the run's train.RunFile in out into v and returns
// its text.
func readRunFile(t *testing.T, out string, v any) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, train.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", train.RunFile, err)
	}
	return b
}
