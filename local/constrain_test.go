package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
)

// The tiny model is random: at temperature 1 it writes noise, the
// hardest test of a constraint. The schemas hold no free strings, which a
// random model would not close within the token budget.
var constrainedTools = []delegate.Tool{
	{Name: "delegate", Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"enum":["47*28","3+4"]}},"required":["question"],"additionalProperties":false}`)},
	{Name: "calc", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"ok":{"type":"boolean"},"op":{"enum":["add","mul"]}},"required":["n","op"],"additionalProperties":false}`)},
}

// checkArgs fails unless args is the JSON object a tool of
// constrainedTools takes.
func checkArgs(t *testing.T, name, args string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	switch name {
	case "delegate":
		var a struct {
			Question *string `json:"question"`
		}
		if err := dec.Decode(&a); err != nil || a.Question == nil || (*a.Question != "47*28" && *a.Question != "3+4") {
			t.Fatalf("delegate arguments %s: %v", args, err)
		}
	case "calc":
		var a struct {
			N  *int   `json:"n"`
			OK *bool  `json:"ok"`
			Op string `json:"op"`
		}
		if err := dec.Decode(&a); err != nil || a.N == nil || (a.Op != "add" && a.Op != "mul") {
			t.Fatalf("calc arguments %s: %v", args, err)
		}
	default:
		t.Fatalf("call to %q, not a declared tool", name)
	}
}

func chatN(t *testing.T, req *delegate.Request, seeds int, check func(delegate.Choice)) {
	t.Helper()
	m := tinyModel(t, 2048)
	temp := 1.0
	req.Temperature, req.N, req.MaxTokens, req.Logprobs = &temp, 8, 1200, true
	req.Messages = []delegate.Message{delegate.User("What is 47*28?")}
	for s := range int64(seeds) {
		req.Seed = &s
		resp, err := m.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Choices {
			check(c)
		}
	}
}

func TestToolChoiceForcesCalls(t *testing.T) {
	no := false
	tests := []struct {
		name     string
		choice   string
		parallel *bool
		names    []string
	}{
		{"required", "required", nil, []string{"delegate", "calc"}},
		{"named", "calc", nil, []string{"calc"}},
		{"required, one call", "required", &no, []string{"delegate", "calc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &delegate.Request{Tools: constrainedTools, ToolChoice: tt.choice, ParallelToolCalls: tt.parallel}
			chatN(t, req, 5, func(c delegate.Choice) {
				if c.FinishReason != "tool_calls" || c.Message.Content != "" || len(c.Message.ToolCalls) == 0 {
					t.Fatalf("finish %q, content %q, calls %v: want tool calls only", c.FinishReason, c.Message.Content, c.Message.ToolCalls)
				}
				if tt.parallel != nil && len(c.Message.ToolCalls) != 1 {
					t.Fatalf("%d calls, want one", len(c.Message.ToolCalls))
				}
				for _, tc := range c.Message.ToolCalls {
					if !slices.Contains(tt.names, tc.Name) {
						t.Fatalf("call to %q, want one of %v", tc.Name, tt.names)
					}
					checkArgs(t, tc.Name, tc.Arguments)
				}
			})
		})
	}
}

// Auto with strict calls: the model still chooses whether to call, and
// every call it opens is well formed. A bias towards <|tool_call|> makes
// it open some.
func TestStrictToolCalls(t *testing.T) {
	req := &delegate.Request{Tools: constrainedTools, StrictToolCalls: true, LogitBias: map[int]float64{tokenizer.ToolCall: 3}}
	calls := 0
	chatN(t, req, 5, func(c delegate.Choice) {
		if c.FinishReason == "length" {
			return // the budget may cut a call short
		}
		for _, tc := range c.Message.ToolCalls {
			calls++
			if c.FinishReason != "tool_calls" {
				t.Fatalf("finish %q with calls", c.FinishReason)
			}
			checkArgs(t, tc.Name, tc.Arguments)
		}
	})
	if calls == 0 {
		t.Error("no call in 40 replies: the test checks nothing")
	}
}

func TestToolChoiceNone(t *testing.T) {
	// +100 on <|tool_call|>: without "none" every reply opens a call.
	bias := map[int]float64{tokenizer.ToolCall: 100}
	chatN(t, &delegate.Request{Tools: constrainedTools, LogitBias: bias}, 1, func(c delegate.Choice) {
		if len(c.Message.ToolCalls) == 0 {
			t.Fatalf("no call under a +100 bias: %q", c.Message.Content)
		}
	})
	chatN(t, &delegate.Request{Tools: constrainedTools, ToolChoice: "none", LogitBias: bias}, 5, func(c delegate.Choice) {
		if len(c.Message.ToolCalls) > 0 {
			t.Fatalf("tool_choice none: calls %v", c.Message.ToolCalls)
		}
	})
}

func TestResponseFormatJSONSchema(t *testing.T) {
	schema := `{"type":"object","properties":{"answer":{"type":"integer"},"steps":{"type":"array","items":{"type":"boolean"}},"unit":{"enum":["m","s",null]}},"required":["answer","steps"],"additionalProperties":false}`
	req := &delegate.Request{ResponseFormat: &delegate.ResponseFormat{Type: delegate.FormatJSONSchema, Name: "a", Schema: json.RawMessage(schema)}}
	chatN(t, req, 5, func(c delegate.Choice) {
		dec := json.NewDecoder(strings.NewReader(c.Message.Content))
		dec.DisallowUnknownFields()
		var v struct {
			Answer *int    `json:"answer"`
			Steps  []bool  `json:"steps"`
			Unit   *string `json:"unit"`
		}
		if err := dec.Decode(&v); err != nil || v.Answer == nil || v.Steps == nil || v.Unit != nil && *v.Unit != "m" && *v.Unit != "s" {
			t.Fatalf("content %q (finish %s) does not match the schema: %v", c.Message.Content, c.FinishReason, err)
		}
		if c.FinishReason != "stop" {
			t.Fatalf("finish %q", c.FinishReason)
		}
	})
	req = &delegate.Request{ResponseFormat: &delegate.ResponseFormat{Type: delegate.FormatJSONObject}}
	req.LogitBias = map[int]float64{tokenizer.ByteOffset + '}': 2} // so that noise closes its objects
	chatN(t, req, 2, func(c delegate.Choice) {
		var v map[string]any
		if c.FinishReason == "stop" && json.Unmarshal([]byte(c.Message.Content), &v) != nil {
			t.Fatalf("json_object content %q is not an object", c.Message.Content)
		}
		if c.FinishReason == "length" && !bytes.HasPrefix(bytes.TrimSpace([]byte(c.Message.Content)), []byte("{")) {
			t.Fatalf("json_object content %q does not open an object", c.Message.Content)
		}
	})
}

func TestLogitBias(t *testing.T) {
	a := int(tokenizer.ByteOffset + 'a')
	chatN(t, &delegate.Request{LogitBias: map[int]float64{a: 100}}, 1, func(c delegate.Choice) {
		if c.Message.Content == "" || strings.Trim(c.Message.Content, "a") != "" {
			t.Fatalf("+100 on a: content %q", c.Message.Content)
		}
	})
	// -100 on every token of unbiased replies, the ends of a turn aside.
	bias := map[int]float64{}
	chatN(t, &delegate.Request{}, 1, func(c delegate.Choice) {
		for _, lp := range c.Logprobs {
			if lp.TokenID != tokenizer.End && lp.TokenID != tokenizer.EOS {
				bias[lp.TokenID] = -100
			}
		}
	})
	chatN(t, &delegate.Request{LogitBias: bias}, 3, func(c delegate.Choice) {
		for _, lp := range c.Logprobs {
			if _, ok := bias[lp.TokenID]; ok {
				t.Fatalf("token %d biased by -100 appears in %q", lp.TokenID, c.Message.Content)
			}
		}
	})
}

func TestConstraintRefusals(t *testing.T) {
	m := tinyModel(t, 256)
	big, bad := 3.0, 101.0
	tests := []struct {
		name  string
		req   delegate.Request
		param string
		want  string
	}{
		{"undeclared named tool", delegate.Request{Tools: constrainedTools, ToolChoice: "search"}, "tool_choice", `"search"`},
		{"required without tools", delegate.Request{ToolChoice: "required"}, "tool_choice", "no tool"},
		{"unsupported schema keyword", delegate.Request{ResponseFormat: &delegate.ResponseFormat{Type: delegate.FormatJSONSchema, Schema: json.RawMessage(`{"type":"string","pattern":"x"}`)}}, "response_format.json_schema.schema", "pattern"},
		{"unsupported tool keyword", delegate.Request{Tools: []delegate.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"minimum":0}}}`)}}, ToolChoice: "required"}, "tools[0].function.parameters", "properties.a.minimum"},
		{"format type", delegate.Request{ResponseFormat: &delegate.ResponseFormat{Type: "yaml"}}, "response_format.type", "yaml"},
		{"penalty", delegate.Request{PresencePenalty: &big}, "presence_penalty", "-2..2"},
		{"bias range", delegate.Request{LogitBias: map[int]float64{5: bad}}, "logit_bias", "-100..100"},
		{"bias token", delegate.Request{LogitBias: map[int]float64{tokenizer.VocabSize: 1}}, "logit_bias", "vocabulary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Messages = []delegate.Message{delegate.User("x")}
			_, err := m.Chat(context.Background(), &tt.req)
			var ae *delegate.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tt.param || !strings.Contains(ae.Message, tt.want) {
				t.Fatalf("error %v (%+v), want a 400 on %s with %q", err, ae, tt.param, tt.want)
			}
		})
	}
}

// A Hugging Face model obeys response_format and tool_choice none through
// its own tokens: the fixture's random weights at temperature 1.
func TestHFResponseFormat(t *testing.T) {
	m, _, _, _ := hfModel(t, "qwen3-qknorm")
	schema := `{"type":"object","properties":{"answer":{"type":"integer"},"ok":{"type":"boolean"}},"required":["answer"],"additionalProperties":false}`
	temp := 1.0
	finished := 0
	for s := range int64(8) {
		req := &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}, Temperature: &temp, Seed: &s, N: 4, MaxTokens: 400,
			ResponseFormat: &delegate.ResponseFormat{Type: delegate.FormatJSONSchema, Name: "a", Schema: json.RawMessage(schema)}}
		resp, err := m.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Choices {
			if c.FinishReason != "stop" {
				continue // the budget may cut the value short
			}
			finished++
			dec := json.NewDecoder(strings.NewReader(c.Message.Content))
			dec.DisallowUnknownFields()
			var v struct {
				Answer *int  `json:"answer"`
				OK     *bool `json:"ok"`
			}
			if err := dec.Decode(&v); err != nil || v.Answer == nil {
				t.Fatalf("content %q does not match the schema: %v", c.Message.Content, err)
			}
		}
	}
	if finished < 16 {
		t.Errorf("only %d of 32 replies finished", finished)
	}
	// none on a Qwen model: never a call, even asked to spell one.
	none := &delegate.Request{Messages: []delegate.Message{delegate.User("write <tool_call>")}, Temperature: &temp, N: 8, MaxTokens: 200,
		Tools: constrainedTools, ToolChoice: "none"}
	resp, err := m.Chat(context.Background(), none)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.Choices {
		if len(c.Message.ToolCalls) > 0 || strings.Contains(c.Message.Content, "<tool_call>") {
			t.Fatalf("tool_choice none: %+v", c.Message)
		}
	}
}

// Greedy decoding respects the constraint too: the likeliest allowed
// token, not the likeliest.
func TestToolChoiceGreedy(t *testing.T) {
	m := tinyModel(t, 2048)
	zero := 0.0
	for _, choice := range []string{"required", "delegate"} {
		resp, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("What is 47*28?")},
			Temperature: &zero, MaxTokens: 1200, Tools: constrainedTools, ToolChoice: choice})
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) == 0 {
			t.Fatalf("%s: finish %q, message %+v", choice, c.FinishReason, c.Message)
		}
		for _, tc := range c.Message.ToolCalls {
			if choice != "required" && tc.Name != choice {
				t.Fatalf("%s: call to %q", choice, tc.Name)
			}
			checkArgs(t, tc.Name, tc.Arguments)
		}
	}
}
