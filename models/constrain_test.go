package models

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// TestShippedRouterConstrained samples the router's first turn of route.
// On held-out problems at temperature 1, under tool_choice "required" every
// reply is a call to delegate with a question. Under "none" no reply holds a
// call or its text.
func TestShippedRouterConstrained(t *testing.T) {
	d := load(t, "router", "delegator")
	ps, err := world.Generate(world.DefaultConfig(), 2026, world.Validation, 8)
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"],"additionalProperties":false}`)
	tool := transcript.Tool
	tool.Parameters = schema
	temp := 1.0
	calls, replies := 0, 0
	for i, p := range ps {
		msgs := transcript.Route(p, world.PositionRule(0)).Delegator[0].Messages[:2]
		seed := int64(i)
		for _, choice := range []string{"required", "none"} {
			resp, err := d.Chat(context.Background(), &delegate.Request{Messages: msgs, Tools: []delegate.Tool{tool}, ToolChoice: choice,
				Temperature: &temp, Seed: &seed, N: 4, MaxTokens: 400})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range resp.Choices {
				replies++
				switch {
				case choice == "none" && (len(c.Message.ToolCalls) > 0 || strings.Contains(c.Message.Content, "delegate{")):
					t.Fatalf("none: calls %+v, content %q", c.Message.ToolCalls, c.Message.Content)
				case choice == "required" && c.FinishReason != "length":
					if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) == 0 {
						t.Fatalf("required: finish %q, message %+v", c.FinishReason, c.Message)
					}
					for _, tc := range c.Message.ToolCalls {
						var args struct{ Question *string }
						if tc.Name != "delegate" || json.Unmarshal([]byte(tc.Arguments), &args) != nil || args.Question == nil {
							t.Fatalf("required: call %+v", tc)
						}
						calls++
					}
				}
			}
		}
	}
	t.Logf("%d replies, %d calls under required", replies, calls)
	if calls < 16 {
		t.Errorf("%d calls in 32 replies under required", calls)
	}
}
