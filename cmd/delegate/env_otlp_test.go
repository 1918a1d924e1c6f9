package main

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world"
)

// env --otlp exports a delegate step with several questions with every
// sub-agent call: an invoke_agent span and its chat span per question,
// under the step's span, each with its tokens, dollars, model and role
// and its own times. The step's dollars are their total.
func TestEnvOTLPParallel(t *testing.T) {
	g, err := world.NewGenerator(world.DefaultConfig(), 3, world.Test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Next() // the problem a reset with seed 3 draws
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, s := range p.Steps {
		qs = append(qs, s.Expr())
	}
	if len(qs) < 2 {
		t.Fatalf("problem %s has %d steps, want two or more to ask at once", p.ID, len(qs))
	}
	rcv := newOTLPReceiver(t, 0)
	s := startServer(t, testEnv, regexp.MustCompile(`serving OpenEnv on (http://\S+) `),
		"env", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--split", "test", "--otlp", rcv.URL)
	ctx := context.Background()
	ws, err := (&openenv.Client{BaseURL: s.base}).Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(3)
	if _, err := ws.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
		t.Fatal(err)
	}
	q, err := json.Marshal(map[string][]string{"questions": qs})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ws.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolDelegate, Arguments: q})
	if err != nil {
		t.Fatal(err)
	}
	var obs struct {
		Result string `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	var answers []string
	if err := json.Unmarshal(res.Observation, &obs); err != nil || obs.Error != nil || json.Unmarshal([]byte(obs.Result), &answers) != nil || len(answers) != len(qs) {
		t.Fatalf("delegate %v: observation %s, %v; want %d answers", qs, res.Observation, err, len(qs))
	}
	a, err := json.Marshal(map[string]any{"answer": p.Answer})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ws.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a}); err != nil || !res.Done {
		t.Fatalf("answer: %+v, %v", res, err)
	}
	if err := ws.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	s.stop(t)

	spans := rcv.received()
	byID := map[string]*tracepb.Span{}
	var step *tracepb.Span
	var agents, chats []*tracepb.Span
	for _, sp := range spans {
		byID[string(sp.SpanId)] = sp
		switch sp.Name {
		case "execute_tool delegate":
			step = sp
		case "invoke_agent subagent":
			agents = append(agents, sp)
		case "chat solver":
			chats = append(chats, sp)
		}
	}
	if step == nil || len(agents) != len(qs) || len(chats) != len(qs) || len(spans) != 3+2*len(qs) {
		t.Fatalf("%d spans, %d invoke_agent, %d chat: want the episode, two tools, and an invoke_agent and a chat for each of %d questions",
			len(spans), len(agents), len(chats), len(qs))
	}
	var cost float64
	for i, ag := range agents {
		if byID[string(ag.ParentSpanId)] != step {
			t.Errorf("invoke_agent %d is not under the delegate step", i)
		}
		if ag.StartTimeUnixNano < step.StartTimeUnixNano || ag.EndTimeUnixNano > step.EndTimeUnixNano || ag.EndTimeUnixNano <= ag.StartTimeUnixNano {
			t.Errorf("invoke_agent %d runs from %d to %d, outside the step's %d to %d", i,
				ag.StartTimeUnixNano, ag.EndTimeUnixNano, step.StartTimeUnixNano, step.EndTimeUnixNano)
		}
		wantAttrs(t, ag, map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "subagent",
			"gen_ai.request.model": "solver", "delegate.role": "subagent", "gen_ai.usage.input_tokens": positive,
			"gen_ai.usage.output_tokens": positive, "delegate.cost.usd": positive})
		c, _ := spanAttr(ag, "delegate.cost.usd").(float64) // wantAttrs checked it is a number
		cost += c
	}
	for i, ch := range chats {
		parent := byID[string(ch.ParentSpanId)]
		if parent == nil || parent.Name != "invoke_agent subagent" {
			t.Errorf("chat %d is not under an invoke_agent span", i)
		} else if ch.StartTimeUnixNano != parent.StartTimeUnixNano || ch.EndTimeUnixNano != parent.EndTimeUnixNano {
			t.Errorf("chat %d runs from %d to %d, its invoke_agent from %d to %d: want the call's times on both", i,
				ch.StartTimeUnixNano, ch.EndTimeUnixNano, parent.StartTimeUnixNano, parent.EndTimeUnixNano)
		}
		wantAttrs(t, ch, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "delegate",
			"gen_ai.request.model": "solver", "delegate.role": "subagent", "gen_ai.usage.input_tokens": positive,
			"gen_ai.usage.output_tokens": positive, "delegate.cost.usd": positive})
	}
	// The step adds in the calls' order, the receiver's order may differ.
	if got, _ := spanAttr(step, "delegate.cost.usd").(float64); math.Abs(got-cost) > 1e-12*cost {
		t.Errorf("the step's delegate.cost.usd = %v, want its calls' total %v", got, cost)
	}
}
