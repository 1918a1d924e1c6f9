package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/train"
)

// TestTrainRewardFlag checks that --reward and --reward-config select the
// training reward. The run file records it, so a resume with another
// reward is refused. What the trainer does not score is refused.
func TestTrainRewardFlag(t *testing.T) {
	raceCovered(t, "train's TestTrainCriticalPathReward")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	rc := filepath.Join(dir, "reward.yaml")
	doc := "models: {}\nreward:\n  kind: critical_path\n  critical_path: {latency_weight: 0.1, latency_scale: 30s, bonus: 0.3, anneal_steps: 10}\n"
	if err := os.WriteFile(rc, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--reward-config", rc, "--steps", "1", "-q")...)
	if err != nil {
		t.Fatalf("train --reward-config: %v\n%s", err, got)
	}
	run, err := os.ReadFile(filepath.Join(out, train.RunFile))
	if err != nil || !strings.Contains(string(run), `"training_reward": "critical_path reward {\"latency_weight\":0.1,\"latency_scale\":30000000000,\"bonus\":0.3,\"anneal_steps\":10`) {
		t.Errorf("run file: %v\n%s", err, run)
	}
	table, err := os.ReadFile(filepath.Join(out, train.TableFile))
	if err != nil || !strings.Contains(string(table), "Training rewarded rollouts with the critical_path reward") {
		t.Errorf("table: %v\n%s", err, table)
	}
	if got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, "--reward", "efficiency", "--steps", "1", "-q")...); err == nil || !strings.Contains(err.Error(), "training_reward") {
		t.Errorf("resume with another reward: %v, want training_reward named\n%s", err, got)
	}

	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "reward:\n  critical_path: {bonnus: 1}\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown kind", []string{"--reward", "cheap"}, `reward_kind: want one of`},
		{"api", []string{"--reward", "critical_path", "--api", "http://127.0.0.1:1"}, "the environments score the rollouts"},
		{"processes", []string{"--reward", "efficiency", "--processes", "2"}, "the environments score the rollouts"},
		{"unknown key", []string{"--reward-config", bad}, "bonnus"},
		{"step credit over the api", []string{"--credit", "step", "--api", "http://127.0.0.1:1"}, "--credit step: with --api or --processes"},
		{"decision credit with processes", []string{"--credit", "decision", "--processes", "2"}, "--credit decision: with --api or --processes"},
		{"counterfactual credit over the api", []string{"--credit", "counterfactual", "--api", "http://127.0.0.1:1"}, "--credit counterfactual: with --api or --processes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := execute(t, testEnv, append([]string{"train", "--out", t.TempDir()}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q\n%s", err, tc.want, got)
			}
		})
	}
}
