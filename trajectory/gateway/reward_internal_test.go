package gateway

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// handBuiltCalls is a session of four calls that answers answer. The
// delegator (trained) calls at 0-2 s, two solver calls run side by side
// at 2-3 s and 2-3.5 s, and the delegator answers at 4-5 s. Each call's
// dollars are set by hand: 0.004 in all.
func handBuiltCalls(answer string) []Call {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	call := func(role string, start, latency time.Duration, prompt, completion int, cost float64, content string) Call {
		return Call{Role: role, Trained: role == "delegator", Model: role, Start: t0.Add(start), Latency: latency,
			Usage: delegate.Usage{PromptTokens: prompt, CompletionTokens: completion}, Cost: cost,
			Output: delegate.Message{Role: delegate.RoleAssistant, Content: content}, FinishReason: "stop"}
	}
	calls := []Call{
		call("delegator", 0, 2*time.Second, 100, 40, 0.001, "<delegate>56*23</delegate>"),
		call("solver", 2*time.Second, time.Second, 30, 10, 0.0005, "1288"),
		call("solver", 2*time.Second, 1500*time.Millisecond, 30, 12, 0.0005, "1288"),
		call("delegator", 4*time.Second, time.Second, 200, 20, 0.002, answer),
	}
	for i := range calls {
		calls[i].Index = i
	}
	return calls
}

// kindReward is reward.DefaultConfig's function of kind, with
// per_call's fees set.
func kindReward(t *testing.T, kind string) func(reward.Outcome) float64 {
	t.Helper()
	rc := reward.DefaultConfig()
	rc.Kind = kind
	rc.PerCall.Fees = map[string]float64{"delegator": 0.002, "solver": 0.0005}
	fn, err := rc.Func()
	if err != nil {
		t.Fatal(err)
	}
	return fn
}

// TestVerifiedSessionReward checks a verified session's reward under each
// reward the world trains with, against values worked by hand. The
// session is hand-built, its step 50. Without a reward function it gets
// 1 or 0, as before.
func TestVerifiedSessionReward(t *testing.T) {
	right, wrong := `\boxed{1288}`, `\boxed{1289}`
	tests := []struct {
		name      string
		kind      string // a reward.Kinds name, "world", or "" for none
		answer    string
		want      float64
		wantTerms bool
	}{
		{"no reward function, right", "", right, 1, false},
		{"no reward function, wrong", "", wrong, 0, false},
		// 1 - 0.001·(40+20 generated) - 0.02·2 solver calls
		{"world, right", "world", right, 0.9, true},
		{"world, wrong", "world", wrong, -0.1, true},
		// 1 - 1e-5·(140+220 tokens) - 0.01·2
		{"graded", reward.KindGraded, right, 0.9764, true},
		// 1 - 0.5·(0.004/0.01)
		{"success_gated, right", reward.KindSuccessGated, right, 0.8, true},
		{"success_gated, wrong", reward.KindSuccessGated, wrong, 0, true},
		// 1 - 0.2·(0.004/0.01) - 0.1·(5 s/60 s)
		{"efficiency", reward.KindEfficiency, right, 1 - 0.08 - 0.1*5.0/60, true},
		// critical path 2 + 1.5 + 1 s over 3 of 4 calls; bonus 0.2·(1 - 50/100):
		// 1 - 0.2·(4.5 s/60 s) + 0.1·(1 - 3/4)
		{"critical_path", reward.KindCriticalPath, right, 1.01, true},
		// 1 - 1·(2·0.002 + 2·0.0005)/0.01
		{"per_call, right", reward.KindPerCall, right, 0.5, true},
		{"per_call, wrong", reward.KindPerCall, wrong, -0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Verify = world.Verify
			switch tt.kind {
			case "":
			case "world":
				cfg.Reward, cfg.RewardName, cfg.GeneratedTokens = world.DefaultReward().Reward, "world reward", true
			default:
				cfg.Reward, cfg.RewardName = kindReward(t, tt.kind), tt.kind+" reward"
			}
			g := &Gateway{cfg: cfg}
			g.cfg.Now = time.Now
			step := 50
			s := &session{key: "k", group: "p1", policyVersion: &step,
				task: delegate.Task{ID: "p1", Dataset: world.Dataset, Answer: "1288"}}
			fin, err := g.score(context.Background(), s, handBuiltCalls(tt.answer), RewardRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(fin.Reward-tt.want) > 1e-12 {
				t.Errorf("reward %v, want %v", fin.Reward, tt.want)
			}
			wantCorrect := tt.answer == right
			if fin.Correct == nil || *fin.Correct != wantCorrect {
				t.Errorf("correct %v, want %v", fin.Correct, wantCorrect)
			}
			if !tt.wantTerms {
				if fin.Terms != nil {
					t.Errorf("terms %+v, want none", fin.Terms)
				}
				return
			}
			if fin.Terms == nil {
				t.Fatal("no terms")
			}
			checkTerms(t, fin.Terms, tt.kind, wantCorrect)
		})
	}
}

// checkTerms checks the hand-built session's terms.
func checkTerms(t *testing.T, got *Terms, kind string, correct bool) {
	t.Helper()
	wantTokens := 360 // the delegator's whole usage
	if kind == "world" {
		wantTokens = 60 // its generated tokens
	}
	quality := 0.0
	if correct {
		quality = 1
	}
	if got.Quality != quality || got.Tokens != wantTokens || got.Calls != 2 || math.Abs(got.Cost-0.004) > 1e-15 {
		t.Errorf("terms: quality %v, tokens %d, calls %d, dollars %v; want %v, %d, 2, 0.004",
			got.Quality, got.Tokens, got.Calls, got.Cost, quality, wantTokens)
	}
	if got.Latency != 5*time.Second || got.CriticalPath != 4500*time.Millisecond || got.AllCalls != 4 || got.CriticalCalls != 3 || got.Step != 50 {
		t.Errorf("terms: latency %v, critical path %v over %d of %d calls, step %d; want 5s, 4.5s over 3 of 4, step 50",
			got.Latency, got.CriticalPath, got.CriticalCalls, got.AllCalls, got.Step)
	}
	if got.ModelCalls["delegator"] != 2 || got.ModelCalls["solver"] != 2 || len(got.ModelCalls) != 2 {
		t.Errorf("terms: calls by model %v, want 2 each of delegator and solver", got.ModelCalls)
	}
	if got.Reward == "" {
		t.Error("terms name no reward")
	}
}

// TestVerifiedSessionRewardRefusesNaN checks that a reward function with
// no basis for a session (per_call without the solver's fee) is refused,
// not stored: the session goes on.
func TestVerifiedSessionRewardRefusesNaN(t *testing.T) {
	rc := reward.DefaultConfig()
	rc.Kind = reward.KindPerCall
	rc.PerCall.Fees = map[string]float64{"delegator": 0.002}
	fn, err := rc.Func()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Verify, cfg.Reward, cfg.RewardName, cfg.Now = world.Verify, fn, "per_call reward", time.Now
	g := &Gateway{cfg: cfg}
	s := &session{key: "k", group: "p1", task: delegate.Task{ID: "p1", Dataset: world.Dataset, Answer: "1288"}}
	if fin, err := g.score(context.Background(), s, handBuiltCalls(`\boxed{1288}`), RewardRequest{}); err == nil {
		t.Errorf("reward %v, want an error", fin.Reward)
	}
}

// TestFailedCallsAreNotCharged checks that a failed call, which has no
// answer and no usage, leaves a session's trace as it would be without it.
func TestFailedCallsAreNotCharged(t *testing.T) {
	calls := handBuiltCalls(`\boxed{1288}`)
	want := sessionTrace(calls, "1288")
	failed := Call{Role: "solver", Model: "solver", Start: calls[1].Start, Latency: 10 * time.Second, Failed: true, Status: 502}
	withFailed := append(append(append([]Call{}, calls[:2]...), failed), calls[2:]...)
	got := sessionTrace(withFailed, "1288")
	if len(got.Root.Children) != len(want.Root.Children) || got.Latency != want.Latency || got.Total != want.Total {
		t.Errorf("with a failed call: %d calls, latency %v, total %+v; want %d, %v, %+v",
			len(got.Root.Children), got.Latency, got.Total, len(want.Root.Children), want.Latency, want.Total)
	}
}
