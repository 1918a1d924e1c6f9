package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// delegatingPolicy delegates every step of p, one tool call a turn.
// Then it replies with the last result as text and no tool call: the answer.
func delegatingPolicy(p *world.Problem) *modeltest.Model {
	return modeltest.New("policy", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		done := 0
		last := ""
		for _, m := range req.Messages {
			if m.Role == delegate.RoleTool {
				done++
				last = m.Content
			}
		}
		if done < len(p.Steps) {
			args, _ := json.Marshal(map[string]string{"question": p.Steps[done].Expr()}) // strings always encode
			return modeltest.ToolCalls(modeltest.Call(fmt.Sprintf("c%d", done), ToolDelegate, string(args))), nil
		}
		return modeltest.Text(strings.TrimSpace(last)), nil
	})
}

// TestPlay plays episodes over the WebSocket and over HTTP MCP.
// The policy gets the observation's tools, its calls become steps,
// its reply without calls goes to answer, and both transports end alike.
func TestPlay(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	const seed = 4
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	transports := []struct {
		name string
		s    Stepper
	}{{"ws", ws}, {"mcp", c.OpenMCP()}}
	var rewards []float64
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			policy := delegatingPolicy(p)
			pol := Policy{Agent: delegate.Agent{Role: "policy", Model: policy, Price: delegate.Price{Input: 1, Output: 5}}, Messages: transcript.RouteMessages}
			pl, err := pol.Play(ctx, tr.s, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !pl.Done || pl.Reward == nil || pl.Correct == nil || !*pl.Correct || pl.Steps != len(p.Steps)+1 || pl.Task != p.Text {
				t.Fatalf("played %+v; want done, correct, %d steps", pl, len(p.Steps)+1)
			}
			if pl.Spend == nil || pl.Spend.Subagent.Calls != len(p.Steps) || pl.Trace.Total.Calls != len(p.Steps)+1 || pl.Trace.Failure != "" {
				t.Errorf("spend %+v, trace totals %+v (%q)", pl.Spend, pl.Trace.Total, pl.Trace.Failure)
			}
			reqs := policy.Requests()
			if got := reqs[0].Tools; len(got) != 2 || got[0].Name != ToolDelegate || got[1].Name != ToolAnswer {
				t.Errorf("the policy's tools: %+v", got)
			}
			if last := reqs[len(reqs)-1].Messages; last[len(last)-1].Role != delegate.RoleTool || last[len(last)-1].Content != world.Pad(p.Steps[len(p.Steps)-1].Result) {
				t.Errorf("the last tool message: %+v", last[len(last)-1])
			}
			rewards = append(rewards, *pl.Reward)
			if err := tr.s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	if len(rewards) == 2 && rewards[0] != rewards[1] {
		t.Errorf("rewards over ws and mcp: %v, want equal", rewards)
	}
	waitActive(t, srv, 0)
}
