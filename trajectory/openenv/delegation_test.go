package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/world"
)

func TestNewDelegation(t *testing.T) {
	bad := world.DefaultConfig()
	bad.MinSteps = 0
	tests := []struct {
		name string
		cfg  DelegationConfig
		want string // in the error; "" for none
	}{
		{"defaults", DelegationConfig{Subagent: fakeSolver()}, ""},
		{"no sub-agent", DelegationConfig{}, "sub-agent"},
		{"negative steps", DelegationConfig{Subagent: fakeSolver(), MaxSteps: -1}, "negative"},
		{"negative budget", DelegationConfig{Subagent: fakeSolver(), Budget: -1}, "negative"},
		{"bad world", DelegationConfig{Subagent: fakeSolver(), World: &bad}, "delegation environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDelegation(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want == "" && d.MaxSteps() != 8:
				t.Errorf("max steps: got %d, want 8", d.MaxSteps())
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// FuzzAction sends any bytes as an action in an episode: the step either
// answers an observation or fails with a ValidationError, and the episode
// stays usable.
func FuzzAction(f *testing.F) {
	for _, s := range []string{
		`{"type":"call_tool","tool_name":"delegate","arguments":{"question":"12*34"}}`,
		`{"type":"call_tool","tool_name":"answer","arguments":{"answer":7}}`,
		`{"type":"list_tools"}`, `{"tool_name":"x","arguments":null}`, `{"arguments":"{}"}`,
		`{"type":"call_tool","tool_name":"delegate","arguments":{"question":"\"{\\\"question\\\":1}\""}}`, `[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, action []byte) {
		env, _ := d.New() // never fails
		ctx := context.Background()
		if _, err := env.Reset(ctx, ptr[int64](1), ""); err != nil {
			t.Fatal(err)
		}
		obs, err := env.Step(ctx, json.RawMessage(action))
		var verr *ValidationError
		if err != nil && !errors.As(err, &verr) {
			t.Fatalf("step %q: %v, want a ValidationError or none", action, err)
		}
		if err == nil {
			if _, err := obs.Result(); err != nil {
				t.Fatalf("step %q: observation: %v", action, err)
			}
		}
		if _, err := json.Marshal(env.State()); err != nil {
			t.Fatalf("state after %q: %v", action, err)
		}
	})
}
