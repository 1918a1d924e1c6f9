package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world"
)

// TestEnvLimitFlags refuses bad limits, naming the flag.
func TestEnvLimitFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"negative budget", []string{"--budget", "-1"}, "--budget"},
		{"budget not a number", []string{"--budget", "NaN"}, "--budget"},
		{"infinite budget", []string{"--budget", "+Inf"}, "--budget"},
		{"negative episode time", []string{"--episode-time", "-1s"}, "--episode-time"},
		{"episode time without a unit", []string{"--episode-time", "30"}, "--episode-time"},
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

// TestEnvLimits serves the world with a budget below one sub-agent call
// and an episode time. A delegate call spends the budget; an answer past
// the time limit comes too late. Both episodes end unanswered.
func TestEnvLimits(t *testing.T) {
	const limit = 300 * time.Millisecond
	base, _ := startEnvOut(t, "--split", "test", "--budget", "0.000001", "--episode-time", limit.String())
	ctx := context.Background()
	g, err := world.NewGenerator(world.DefaultConfig(), 5, world.Test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(map[string]string{"question": p.Steps[0].Expr()}) // strings always encode
	a, _ := json.Marshal(map[string]any{"answer": p.Answer})
	tests := []struct {
		name       string
		wait       time.Duration
		action     openenv.ToolAction
		wantResult string
	}{
		{"budget", 0, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolDelegate, Arguments: q}, "reached the budget $0.000001"},
		{"episode time", limit + 100*time.Millisecond, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a}, "300ms passed without an answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := (&openenv.Client{BaseURL: base}).Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			seed := int64(5)
			if _, err := s.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tt.wait)
			res, err := s.Step(ctx, tt.action)
			if err != nil {
				t.Fatal(err)
			}
			var o openenv.DelegationObservation
			if err := json.Unmarshal(res.Observation, &o); err != nil || !res.Done || !strings.Contains(o.Result, tt.wantResult) {
				t.Errorf("got done %v, result %q (%v); want done with %q", res.Done, o.Result, err, tt.wantResult)
			}
			raw, err := s.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var st openenv.DelegationState
			if err := json.Unmarshal(raw, &st); err != nil || st.Correct == nil || *st.Correct {
				t.Errorf("state %s (%v); want the episode ended wrong", raw, err)
			}
		})
	}
}
