package main

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/world"
)

// TestProcessWorldRewardIsTrainsReward rolls route out with the shipped
// models on world problems. It scores each trace as `process --reward world`
// does, and as `delegate train` does (train.Scorer, without a baseline). The
// two rewards must be equal, for the rollouts as they came and for the same
// rollouts marked as a format failure. Process's trace names the seats strong
// and weak, the trainer's delegator and subagent; the rollout is otherwise
// the same.
func TestProcessWorldRewardIsTrainsReward(t *testing.T) {
	cfg, err := LoadConfig("../../examples/world.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Strategy.Strong.Temperature = 1
	models, closeModels, err := cfg.openModels(testEnv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeModels()
	route, err := strategy.New(strategy.NameRoute, cfg.strategyRoles(models), cfg.Strategy)
	if err != nil {
		t.Fatal(err)
	}
	f := processFlags{datasetFlags: datasetFlags{dataset: datasetWorld}, reward: rewardWorld, costUnit: reward.CostTokens}
	sc, _, err := newScorer(f, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks, _, err := worldTasks(worldFlags{level: world.DefaultLevel, distractors: -1}, "train", 3, 6)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	delegated := 0
	for _, task := range tasks {
		tr, err := route.Run(ctx, task.Prompt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Roles[strategy.RoleWeak].Calls > 0 {
			delegated++
		}
		failed := *tr
		failed.Failure, failed.FailureKind = "max turns: still calling", delegate.FailureMaxTurns
		for _, tr := range []*delegate.Trace{tr, &failed} {
			got, err := sc.Score(ctx, nil, task, tr, tr)
			if err != nil {
				t.Fatal(err)
			}
			// Without a baseline (process --no-baseline, as train
			// --processes runs it): the same reward.
			alone, err := sc.Score(ctx, nil, task, nil, tr)
			if err != nil {
				t.Fatal(err)
			}
			if alone.Reward != got.Reward {
				t.Errorf("task %s: reward %v without a baseline, %v with one", task.ID, alone.Reward, got.Reward)
			}
			// The trainer's seats.
			renamed := *tr
			renamed.Roles = maps.Clone(tr.Roles)
			renamed.Roles[train.RoleDelegator] = tr.Roles[strategy.RoleStrong]
			renamed.Roles[train.RoleSubagent] = tr.Roles[strategy.RoleWeak]
			delete(renamed.Roles, strategy.RoleStrong)
			delete(renamed.Roles, strategy.RoleWeak)
			tsc, err := train.Scorer(world.DefaultReward()).Score(ctx, nil, task, nil, &renamed)
			if err != nil {
				t.Fatal(err)
			}
			want := tsc.Reward
			if math.Abs(got.Reward-want) > 1e-12 || math.IsNaN(got.Reward) {
				t.Errorf("task %s (failure %q, %d delegator tokens generated, %d calls): process reward %v, train reward %v",
					task.ID, tr.Failure, tr.Roles[strategy.RoleStrong].Usage.CompletionTokens, tr.Roles[strategy.RoleWeak].Calls, got.Reward, want)
			}
		}
	}
	t.Logf("%d of %d rollouts delegated", delegated, len(tasks))
}

// TestProcessRewardFlags checks --reward's presets and the combinations
// it refuses.
func TestProcessRewardFlags(t *testing.T) {
	tests := []struct {
		name      string
		f         processFlags
		lambdaSet bool
		want      reward.Graded // Reward of a wrong answer with 100 policy tokens and 2 calls: -(λ·100 + μ·2)
		wantErr   bool
	}{
		{"graded", processFlags{reward: rewardGraded, costUnit: reward.CostTokens}, false, reward.DefaultGraded(), false},
		{"world", processFlags{reward: rewardWorld, costUnit: reward.CostTokens}, false, world.DefaultReward(), false},
		{"world with lambda", processFlags{reward: rewardWorld, costUnit: reward.CostTokens, lambda: 0.01}, true, reward.Graded{Lambda: 0.01, CostUnit: reward.CostTokens, Mu: world.DefaultReward().Mu}, false},
		{"world in dollars", processFlags{reward: rewardWorld, costUnit: reward.CostDollars}, false, reward.Graded{}, true},
		{"world and parity", processFlags{reward: rewardWorld, parity: true, costUnit: reward.CostTokens}, false, reward.Graded{}, true},
		{"unknown", processFlags{reward: "bonus", costUnit: reward.CostTokens}, false, reward.Graded{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, _, err := newScorer(tt.f, tt.lambdaSet, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			wrong := false
			o := reward.Outcome{FormatOK: true, Correct: &wrong, Tokens: 100, Calls: 2}
			if got, want := sc.Reward(o), tt.want.Reward(o); got != want {
				t.Errorf("reward %v, want %v", got, want)
			}
		})
	}
}
