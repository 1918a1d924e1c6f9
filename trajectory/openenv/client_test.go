package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// recorder records the actions an environment receives.
type recorder struct {
	Environment
	mu      *sync.Mutex
	actions *[]string
}

func (r recorder) Step(ctx context.Context, action json.RawMessage) (Observation, error) {
	r.mu.Lock()
	*r.actions = append(*r.actions, string(action))
	r.mu.Unlock()
	return r.Environment.Step(ctx, action)
}

// TestClientsSendUnescaped: every Go client sends <, > and & in a call's arguments as written.
func TestClientsSendUnescaped(t *testing.T) {
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var actions []string
	cfg := DefaultConfig()
	cfg.New = func() (Environment, error) {
		env, err := d.New()
		return recorder{Environment: env, mu: &mu, actions: &actions}, err
	}
	cfg.Name, cfg.Metadata, cfg.Schema, cfg.Tools = "delegation", d.Metadata(), d.Schema(), d.Tools()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, srv, "")
	ctx := context.Background()
	const q = "3<4 & 4>2"
	args := json.RawMessage(`{"question":"` + q + `"}`)
	params := map[string]any{"name": ToolDelegate, "arguments": map[string]string{"question": q}}
	ws, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	m := c.OpenMCP()
	defer m.Close()
	if _, err := m.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	sends := []struct {
		name string
		send func() error
	}{
		{"Session.Step", func() error {
			_, err := ws.Step(ctx, ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: args})
			return err
		}},
		{"Session.MCP", func() error { return ws.MCP(ctx, MethodToolsCall, params, nil) }},
		{"MCPSession.Step", func() error {
			_, err := m.Step(ctx, ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: args})
			return err
		}},
		{"Client.MCP", func() error {
			return c.MCP(ctx, MethodToolsCall, map[string]any{"name": ToolDelegate, "arguments": params["arguments"], "session_id": m.id}, nil)
		}},
		// A fresh environment refuses the step after reading it.
		{"Client.Step", func() error {
			action := json.RawMessage(`{"type":"call_tool","tool_name":"delegate","arguments":` + string(args) + `}`)
			_, err := c.Step(ctx, StepRequest{Action: action})
			if err == nil {
				return fmt.Errorf("a step on a fresh environment: no error")
			}
			return nil
		}},
	}
	for _, s := range sends {
		t.Run(s.name, func(t *testing.T) {
			mu.Lock()
			n := len(actions)
			mu.Unlock()
			if err := s.send(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(actions) != n+1 {
				t.Fatalf("the environment got %d actions, want 1", len(actions)-n)
			}
			if got := actions[n]; !strings.Contains(got, `"question":"`+q+`"`) {
				t.Errorf("the environment got %s, want the question as written", got)
			}
		})
	}
}
