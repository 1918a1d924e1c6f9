package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
)

// TestGatewayRewardIsTrainsReward runs route over real loopback HTTP
// through `delegate gateway --reward world --train delegator`, one
// session per world problem, and ends each session with {} to verify it.
// The session's reward must be the one `delegate train` gives route's
// trace of the same run (train.Scorer, and world.RewardOf as the table
// does), from the same tokens, sub-agent calls and dollars.
func TestGatewayRewardIsTrainsReward(t *testing.T) {
	const token = "gateway-reward-test-token"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := LoadConfig("../../examples/world.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Strategy.Strong.Temperature = 1 // so that some runs delegate
	base, stop := startGatewayIn(t, ctx, token, "--config", "../../examples/world.yaml", "--out", t.TempDir(),
		"--train", "delegator", "--reward", "world")
	defer stop()
	tasks, _, err := worldTasks(worldFlags{level: world.DefaultLevel, distractors: -1}, "train", 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	admin := gateway.Admin{Base: base, Token: token}
	delegated := 0
	for _, task := range tasks {
		body, err := json.Marshal(gateway.CreateRequest{Task: &task})
		if err != nil {
			t.Fatal(err)
		}
		var cr gateway.CreateResponse
		if err := admin.Post(ctx, "/sessions", string(body), &cr); err != nil {
			t.Fatal(err)
		}
		route, err := strategy.New(strategy.NameRoute, cfg.strategyRoles(remoteModels(t, cr.BaseURL)), cfg.Strategy)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := route.Run(ctx, task.Prompt, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rr gateway.RewardResponse
		if err := admin.Post(ctx, "/sessions/"+cr.SessionID+"/reward", `{}`, &rr); err != nil {
			t.Fatal(err)
		}
		strong, weak := tr.Roles[strategy.RoleStrong], tr.Roles[strategy.RoleWeak]
		if weak.Calls > 0 {
			delegated++
		}

		// The trainer's seats.
		renamed := *tr
		renamed.Roles = maps.Clone(tr.Roles)
		renamed.Roles[train.RoleDelegator], renamed.Roles[train.RoleSubagent] = strong, weak
		delete(renamed.Roles, strategy.RoleStrong)
		delete(renamed.Roles, strategy.RoleWeak)
		want, err := train.Scorer(world.DefaultReward()).Score(ctx, nil, task, nil, &renamed)
		if err != nil {
			t.Fatal(err)
		}
		correct := want.Outcome == "correct"
		table := world.RewardOf(world.DefaultReward(), correct, world.Account{Delegator: strong.Usage, SubagentCalls: weak.Calls})
		what := fmt.Sprintf("task %s (%d delegator tokens generated, %d solver calls, answer %q)", task.ID, strong.Usage.CompletionTokens, weak.Calls, tr.Answer)
		if math.Abs(rr.Reward-want.Reward) > 1e-12 || math.Abs(rr.Reward-table) > 1e-12 {
			t.Errorf("%s: gateway reward %v, train's %v, the table's %v", what, rr.Reward, want.Reward, table)
		}
		if rr.Correct == nil || *rr.Correct != correct {
			t.Errorf("%s: gateway correct %v, train's %v", what, rr.Correct, correct)
		}
		switch tm := rr.Terms; {
		case tm == nil:
			t.Errorf("%s: no terms in the reward response", what)
		case tm.Tokens != strong.Usage.CompletionTokens || tm.Calls != weak.Calls || math.Abs(tm.Cost-tr.Total.Cost) > 1e-12:
			t.Errorf("%s: terms of %d tokens, %d calls, $%v; route's trace %d, %d, $%v",
				what, tm.Tokens, tm.Calls, tm.Cost, strong.Usage.CompletionTokens, weak.Calls, tr.Total.Cost)
		case !strings.HasPrefix(tm.Reward, "world reward"):
			t.Errorf("%s: terms name the reward %q, want the world's", what, tm.Reward)
		}
	}
	if delegated == 0 {
		t.Errorf("none of %d runs delegated: the sub-agent calls went untested", len(tasks))
	}
	t.Logf("%d of %d runs delegated", delegated, len(tasks))
}

// remoteModels are examples/world.yaml's two models as OpenAI clients of
// a gateway session's base URL.
func remoteModels(t *testing.T, base string) map[string]delegate.Model {
	t.Helper()
	models := map[string]delegate.Model{}
	for _, name := range []string{"delegator", "solver"} {
		oc := openai.DefaultConfig()
		oc.BaseURL, oc.Model, oc.MaxRetries = base, name, 0
		m, err := openai.New(oc)
		if err != nil {
			t.Fatal(err)
		}
		models[name] = m
	}
	return models
}

// TestGatewayRewardFlags checks how --reward, --lambda, --cost-unit and
// the config's reward section choose the reward of verified sessions, and
// what they refuse. The reward is read on one outcome, worked by hand.
func TestGatewayRewardFlags(t *testing.T) {
	right := true
	o := reward.Outcome{FormatOK: true, Correct: &right, Cost: 0.004, Tokens: 100, Calls: 2}
	tests := []struct {
		name      string
		yaml      string
		f         gatewayFlags
		want      float64 // NaN: no reward function, 1 or 0
		wantName  string
		generated bool
		wantErr   string
	}{
		{"none", "", gatewayFlags{}, math.NaN(), "", false, ""},
		// 1 - 0.001·100 - 0.02·2
		{"world", "", gatewayFlags{reward: rewardWorld}, 0.86, "world reward", true, ""},
		// 1 - 0.01·100 - 0.02·2
		{"world with lambda", "", gatewayFlags{reward: rewardWorld, lambda: 0.01, lambdaSet: true}, -0.04, "world reward (λ 0.01", true, ""},
		// 1 - 1e-5·100 - 0.01·2
		{"graded", "", gatewayFlags{reward: rewardGraded}, 0.979, "graded reward", false, ""},
		// 1 - 2·0.004 - 0.01·2
		{"graded in dollars", "", gatewayFlags{reward: rewardGraded, lambda: 2, lambdaSet: true, costUnit: reward.CostDollars}, 0.972, "graded reward (λ 2 per dollar", false, ""},
		// 1 - 0.5·(0.004/0.01)
		{"the config's kind", "reward:\n  kind: success_gated\n", gatewayFlags{}, 0.8, "success_gated reward", false, ""},
		{"a graded section alone chooses nothing", "reward:\n  graded: {lambda: 1, cost_unit: dollars, mu: 0, format_penalty: -1}\n", gatewayFlags{}, math.NaN(), "", false, ""},
		// --reward overrides the config's kind: 1 - 0.2·0.4 - 0
		{"the flag overrides", "reward:\n  kind: success_gated\n", gatewayFlags{reward: reward.KindEfficiency}, 0.92, "efficiency reward", false, ""},
		{"lambda without a reward", "", gatewayFlags{lambda: 0.1, lambdaSet: true}, 0, "", false, "no reward is chosen"},
		{"cost unit with a cost kind", "", gatewayFlags{reward: reward.KindEfficiency, costUnit: reward.CostDollars}, 0, "", false, "takes its settings from the config's reward.efficiency section"},
		{"unknown", "", gatewayFlags{reward: "cheapest"}, 0, "", false, `--reward "cheapest"`},
		{"no fee for a served model", "reward:\n  per_call: {fees: {big: 0.002}}\n", gatewayFlags{reward: reward.KindPerCall}, 0, "", false, "no fee for model small, which the gateway serves"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rewardConfig(t, "", tt.yaml)
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			var gcfg gateway.Config
			err = gatewayReward(&gcfg, cfg, []string{"big", "small"}, tt.f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(tt.want) {
				if gcfg.Reward != nil {
					t.Errorf("a reward function %q, want none", gcfg.RewardName)
				}
				return
			}
			if gcfg.Reward == nil {
				t.Fatal("no reward function")
			}
			if got := gcfg.Reward(o); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("reward %v, want %v", got, tt.want)
			}
			if !strings.HasPrefix(gcfg.RewardName, tt.wantName) || gcfg.GeneratedTokens != tt.generated {
				t.Errorf("reward %q, generated tokens only %v; want %q…, %v", gcfg.RewardName, gcfg.GeneratedTokens, tt.wantName, tt.generated)
			}
		})
	}
}
