package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/world"
)

// The shipped local models score on --dataset world. Bench and process run
// them on the problems they were trained on, graded on the integer answer.
func TestBenchWorldDataset(t *testing.T) {
	dir := t.TempDir()
	out, err := execute(t, testEnv, "bench", "--config", "../../examples/world.yaml", "--dataset", "world", "--level", "3",
		"--strategies", "single,route", "--n", "2", "--out", dir, "--progress", "none")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	rows := readCSV(t, filepath.Join(dir, "table.csv"))
	if acc := num(t, rows["single"]["accuracy"]); !(acc > 0) {
		t.Errorf("single's accuracy on level-3 world problems = %v, want above 0 (the shipped router solves most alone)\n%s", acc, out)
	}
	// The solver alone cannot hold a whole problem: the table says why
	// its row is all zeros.
	if !strings.Contains(out, `Arm "weak" failed on every item`) || !strings.Contains(out, "the context holds 80") {
		t.Errorf("no note on the weak arm's failures:\n%s", out)
	}
	if !strings.Contains(out, "Dataset: world level 3") || !strings.Contains(out, "2 validation problems drawn with seed 1") {
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
	if err == nil || !strings.Contains(err.Error(), "dataset.level: 3 there, 1 now") {
		t.Errorf("resume at another level: %v", err)
	}
}

func TestProcessWorldDataset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, err := execute(t, testEnv, "process", "--config", "../../examples/world.yaml", "--dataset", "world", "--level", "3",
		"-n", "2", "-g", "2", "--strategy", "single", "--keep-ties", "--out", dir, "--progress", "none")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, out)
	}
	o := readOutputs(t, dir)
	checkExact(t, o, 2, 2)
	if len(o.groups) != 2 {
		t.Fatalf("%d groups written, want 2 (ties kept)", len(o.groups))
	}
	if !strings.Contains(out, "dataset world level 3") || !(o.summary.MeanCandidate > 0) {
		t.Errorf("mean score %v, want above 0 on level-3 problems:\n%s", o.summary.MeanCandidate, out)
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
		{"process", []string{"-g", "2", "-n", "2", "--train-pool", "10"}, "--step-items 0: want 1 to --train-pool (10)"},
		{"process", []string{"-g", "2", "-n", "2", "--train-pool", "10", "--step-items", "11"}, "--step-items 11: want 1 to --train-pool (10)"},
		{"process", []string{"-g", "2", "-n", "2", "--train-pool", "10", "--step-items", "2", "--step-share", "3/2"}, `--step-share "3/2": want i/n`},
		{"process", []string{"-g", "2", "-n", "2", "--train-pool", "10", "--step-items", "2", "--step-share", "half"}, `--step-share "half": want i/n`},
		{"process", []string{"-g", "2", "-n", "2", "--train-pool", "10", "--step-items", "2", "--step-share", "1/3"}, "3 environments share a step's 2 items"},
		{"process", []string{"-g", "2", "-n", "2", "--train-pool", "10", "--step-items", "2", "--split", "test"}, "--split test does not apply"},
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

// TestTrainOrderTasks checks the environments of --step-share 1/n to n/n.
// Together, step by step, they draw exactly the items delegate train
// draws: its training pool under --seed, its item order under
// --train-seed. Each draws its contiguous part of every step; a problem
// drawn again is another task. Each seeds rollout k of a step's item j as
// train does.
func TestTrainOrderTasks(t *testing.T) {
	// A small pool, so that later steps draw problems again.
	const pool, steps, group, seed, trainSeed = 12, 6, 3, 5, 7
	w := worldFlags{level: world.DefaultLevel, distractors: -1}
	cfg, err := w.config()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := world.Generate(cfg, seed, world.Train, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ items, envs int }{{1, 1}, {4, 2}, {3, 2}, {5, 3}} {
		t.Run(fmt.Sprintf("%d items, %d environments", tt.items, tt.envs), func(t *testing.T) {
			want := rl.NewItems(trainSeed, pool, tt.items)
			got := make([][]string, steps+1) // task IDs by step, the environments' in order
			for i := 1; i <= tt.envs; i++ {
				lo, hi := shareOf(tt.items, i, tt.envs)
				o := trainOrder{pool: pool, items: tt.items, share: fmt.Sprintf("%d/%d", i, tt.envs), seed: trainSeed}
				tasks, at, _, err := o.tasks(w, "train", seed, steps*(hi-lo))
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for q, task := range tasks {
					s := at[q]
					if seen[task.ID] {
						t.Fatalf("environment %d: task %d's id %s again: rollout ids would collide", i, q, task.ID)
					}
					seen[task.ID] = true
					if s.index < lo || s.index >= hi || s.step < 1 || s.step > steps {
						t.Fatalf("environment %d: task %d at step %d, position %d; want a step of 1 to %d, positions %d to %d", i, q, s.step, s.index, steps, lo, hi-1)
					}
					got[s.step] = append(got[s.step], task.ID)
					if k := group - 1; s.seed(trainSeed, group, k) != int64(rl.RolloutSeed(trainSeed, s.step, s.index*group+k)&(1<<62-1)) {
						t.Errorf("environment %d task %d: rollout %d's seed is not train's", i, q, k)
					}
				}
			}
			for step := 1; step <= steps; step++ {
				var ids []string
				for _, it := range want.Step(step) {
					ids = append(ids, fmt.Sprintf("%s@%d", problems[it].Task().ID, step))
				}
				if !slices.Equal(got[step], ids) {
					t.Errorf("step %d: the environments drew %v, train draws %v", step, got[step], ids)
				}
			}
		})
	}
}
