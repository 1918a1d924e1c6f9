package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/reward"
)

// rewardConfig parses a config whose two models a decompose rollout
// calls. It leaves out the line drop, unless "", and appends extra.
func rewardConfig(t *testing.T, drop, extra string) (*Config, error) {
	t.Helper()
	doc := `models:
  big:
    base_url: http://127.0.0.1:1/v1
    model: big-1
    price: {input: 1, output: 5}
  small:
    base_url: http://127.0.0.1:1/v1
    model: small-1
    price: {input: 0.1, output: 0.4}
roles:
  delegator: big
  subagent: small
`
	if drop != "" {
		doc = strings.Replace(doc, drop, "", 1)
	}
	return ParseConfig([]byte(doc + extra))
}

// TestProcessRewardFromConfig checks that the config's reward section
// selects and tunes the reward, and --reward overrides its kind. It checks
// the rewards' values on one outcome, worked by hand.
func TestProcessRewardFromConfig(t *testing.T) {
	right := true
	o := reward.Outcome{FormatOK: true, Correct: &right, Cost: 0.004, Tokens: 1000, Calls: 3,
		Latency: 30 * time.Second, CriticalPath: 20 * time.Second, AllCalls: 5, CriticalCalls: 3,
		ModelCalls: map[string]int{"big-1": 2, "small-1": 3}}
	tests := []struct {
		name     string
		yaml     string
		f        processFlags
		want     float64
		wantDesc string
	}{
		// DefaultGraded: 1 - 1e-5·1000 - 0.01·3
		{"no section", "", processFlags{reward: rewardGraded}, 0.96, "graded reward (λ 1e-05 per token"},
		// The config's graded section: 1 - 1·0.004 - 0
		{"graded section", "reward:\n  graded: {lambda: 1, cost_unit: dollars, mu: 0, format_penalty: -1}\n", processFlags{reward: rewardGraded}, 0.996, "graded reward (λ 1 per dollar"},
		// 1 - 0.5·(0.004/0.01)
		{"success gated", "reward:\n  kind: success_gated\n", processFlags{reward: rewardGraded}, 0.8, "success_gated reward"},
		// 1 - 0.2·0.4 - 0.1·(30s/60s)
		{"efficiency", "reward:\n  kind: efficiency\n", processFlags{reward: rewardGraded}, 0.87, "efficiency reward"},
		// 1 - 0.5·(20s/40s) + 0.3·(1 - 3/5)
		{"critical path", "reward:\n  kind: critical_path\n  critical_path: {latency_weight: 0.5, latency_scale: 40s, bonus: 0.3, anneal_steps: 10}\n",
			processFlags{reward: rewardGraded}, 0.87, "critical_path reward"},
		// fees by config name, charged by the traced name: 1 - 1·(2·0.002 +
		// 3·0.0005)/0.01
		{"per call", "reward:\n  kind: per_call\n  per_call: {fees: {big: 0.002, small: 0.0005}, lambda: 1, cost_scale: 0.01}\n",
			processFlags{reward: rewardGraded}, 0.45, "per_call reward"},
		// --reward overrides the config's kind.
		{"flag overrides", "reward:\n  kind: efficiency\n", processFlags{reward: reward.KindSuccessGated, rewardSet: true}, 0.8, "success_gated reward"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rewardConfig(t, "", tt.yaml)
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			tt.f.strategy = "decompose"
			sc, desc, err := newScorer(tt.f, false, cfg)
			if err != nil {
				t.Fatalf("newScorer: %v", err)
			}
			if got := sc.Reward(o); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("reward %v, want %v", got, tt.want)
			}
			if !strings.HasPrefix(desc, tt.wantDesc) {
				t.Errorf("description %q, want it to start %q", desc, tt.wantDesc)
			}
		})
	}
}

// TestProcessRewardConfigErrors checks what a cost-aware reward refuses.
// Bad settings and prices are refused naming the config key, and so are
// the flags that do not apply to it.
func TestProcessRewardConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		drop string // a line of rewardConfig to leave out
		f    processFlags
		want string
	}{
		{"unknown kind", "reward:\n  kind: cheapest\n", "", processFlags{reward: rewardGraded}, `reward: kind "cheapest"`},
		{"bad scale", "reward:\n  kind: efficiency\n  efficiency: {cost_scale: 0}\n", "", processFlags{reward: rewardGraded}, "efficiency.cost_scale 0"},
		{"unknown key", "reward:\n  success_gated: {scale: 1}\n", "", processFlags{reward: rewardGraded}, "scale"},
		{"unpriced model", "reward:\n  kind: success_gated\n", "    price: {input: 0.1, output: 0.4}\n", processFlags{reward: rewardGraded},
			"models.small: reward success_gated charges dollars: write this model's price"},
		{"no fee", "reward:\n  kind: per_call\n  per_call: {fees: {big: 0.002}}\n", "", processFlags{reward: rewardGraded}, "no fee for model small"},
		{"fee for no model", "reward:\n  kind: per_call\n  per_call: {fees: {big: 0.002, small: 0.001, huge: 1}}\n", "", processFlags{reward: rewardGraded},
			"reward.per_call.fees.huge: names no model"},
		{"lambda with a cost kind", "", "", processFlags{reward: reward.KindEfficiency, rewardSet: true, costUnit: reward.CostDollars}, "--reward efficiency takes its settings from the config's reward.efficiency section"},
		{"cost unit with the config's kind", "reward:\n  kind: critical_path\n", "", processFlags{reward: rewardGraded, costUnit: reward.CostTokens}, "the config's reward.kind critical_path takes its settings"},
		{"parity and a config kind", "reward:\n  kind: efficiency\n", "", processFlags{reward: rewardGraded, parity: true}, "--parity and the config's reward.kind efficiency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rewardConfig(t, tt.drop, tt.yaml)
			if err == nil {
				tt.f.strategy = "decompose"
				_, _, err = newScorer(tt.f, false, cfg)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestProcessPerCallRewardEndToEnd runs process with the config's per_call
// reward over HTTP. Every rollout's reward, read back from the artifacts,
// must be its correctness minus its calls at the config's fees.
func TestProcessPerCallRewardEndToEnd(t *testing.T) {
	srv := newGraderServer(t)
	path := writeTestConfig(t, srv.URL)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc = append(doc, "reward:\n  kind: per_call\n  per_call: {fees: {big: 0.002, small: 0.0005}, lambda: 1, cost_scale: 0.01}\n"...)
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	out, err := execute(t, testEnv, "process", "--config", path, "--dataset", "gsm8k", "--data", writeProcessGSM8K(t, 4),
		"-n", "2", "-g", "2", "--out", dir, "--progress", "none")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, out)
	}
	if !strings.Contains(out, "per_call reward") {
		t.Errorf("output does not name the reward:\n%s", out)
	}
	o := readOutputs(t, dir)
	checkExact(t, o, 2, 2)
	for _, a := range o.arts {
		q := 0.0
		if a.Score != nil && a.Score.Outcome == "correct" {
			q = 1
		}
		spent := float64(a.Roles["delegator"].Calls)*0.002 + float64(a.Roles["subagent"].Calls)*0.0005
		if a.Roles["delegator"].Calls == 0 || a.Roles["subagent"].Calls == 0 {
			t.Errorf("rollout %s: roles %v, want calls of both the delegator and the sub-agents", a.ID, a.Roles)
		}
		if want := q - spent/0.01; math.Abs(a.Reward-want) > 1e-9 {
			t.Errorf("rollout %s: reward %v, want %v (quality %v, roles %v)", a.ID, a.Reward, want, q, a.Roles)
		}
	}
}
