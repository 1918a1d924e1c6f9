package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world"
)

// startEnvOut runs delegate env with args on the shipped solver and returns
// its base URL and startup output; the server stops when the test ends.
func startEnvOut(t *testing.T, args ...string) (string, string) {
	t.Helper()
	return startEnvOutWith(t, func(string) string { return "" }, append([]string{"--config", "../../examples/world.yaml"}, args...)...)
}

// startEnvOutWith is startEnvOut with getenv and without a config.
func startEnvOutWith(t *testing.T, getenv env, args ...string) (string, string) {
	t.Helper()
	var out syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"env", "--addr", "127.0.0.1:0"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := awaitListening(t, &out, done, regexp.MustCompile(`serving OpenEnv on (http://\S+) `), "env")
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("env: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("env did not stop")
		}
	})
	return base, out.String()
}

// TestEnvRewardFlags refuses rewards that gateway's --reward refuses,
// with the flag or the config key named.
func TestEnvRewardFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown kind", []string{"--reward", "best"}, `--reward "best"`},
		{"lambda without a reward", []string{"--lambda", "0.1"}, "no reward is chosen"},
		{"cost unit with world", []string{"--reward", "world", "--cost-unit", "dollars"}, "--reward world charges per token"},
		{"lambda with a config kind", []string{"--reward", "efficiency", "--lambda", "0.1"}, "--lambda and --cost-unit tune graded and world"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"env", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0"}, tt.args...)
			_, err := execute(t, func(string) string { return "" }, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestEnvReward serves the world under --reward world --lambda 0.01. An
// answered episode's reward is that reward of its outcome, and the state
// names it and shows its terms.
func TestEnvReward(t *testing.T) {
	base, out := startEnvOut(t, "--split", "test", "--reward", "world", "--lambda", "0.01")
	const name = "world reward (λ 0.01 per generated token, μ 0.02 per call, format 0)"
	if !strings.Contains(out, "reward: "+name) {
		t.Errorf("startup output lacks the reward:\n%s", out)
	}
	ctx := context.Background()
	s, err := (&openenv.Client{BaseURL: base}).Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed := int64(2)
	if _, err := s.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
		t.Fatal(err)
	}
	g, err := world.NewGenerator(world.DefaultConfig(), uint64(seed), world.Test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(map[string]string{"question": p.Steps[0].Expr()}) // strings always encode
	if _, err := s.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolDelegate, Arguments: q}); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(map[string]any{"answer": p.Answer})
	res, err := s.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a})
	if err != nil || !res.Done || res.Reward == nil {
		t.Fatalf("answer: %+v, %v", res, err)
	}
	raw, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st openenv.DelegationState
	if err := json.Unmarshal(raw, &st); err != nil || st.Terms == nil {
		t.Fatalf("state %s (%v) has no terms", raw, err)
	}
	w := world.DefaultReward()
	w.Lambda = 0.01
	o := st.Terms.Outcome
	if got, want := *res.Reward, w.Reward(o); got != want || st.Reward == nil || *st.Reward != got {
		t.Errorf("reward: got %v (state %v), want %v of %+v", got, st.Reward, want, o)
	}
	if st.Terms.Reward != name || o.Calls != 1 || o.Tokens != st.Spend.Delegator.CompletionTokens || o.Correct == nil || !*o.Correct {
		t.Errorf("terms: got %+v, want %q, 1 call, %d tokens", st.Terms, name, st.Spend.Delegator.CompletionTokens)
	}
}
