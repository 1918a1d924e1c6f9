package wire

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// checkAppendResponse compares AppendResponse with json.Marshal on r: the
// same bytes, or an error from both.
func checkAppendResponse(t *testing.T, r *ChatResponse) {
	t.Helper()
	checkAppend(t, "AppendResponse", r, AppendResponse)
}

func TestAppendResponseMatchesMarshal(t *testing.T) {
	text, empty, odd := "the answer", "", "<b>&</b> \u2028\u2029 \x00\x1f\b\f\n\r\t \"\\ \xff\xfe é 夏 \U0001F600 \x7f"
	version, zero := 7, 0
	full := ChatResponse{
		ID: "chatcmpl-<1>", Object: "chat.completion", Created: -3, Model: "m&",
		Choices: []Choice{
			{Index: 0, FinishReason: "stop", Message: Message{Role: RoleAssistant, Content: Content{Value: &odd}},
				Logprobs: &Logprobs{Content: []Logprob{
					{Token: "<", Logprob: -0.25, Bytes: Bytes{60}, TopLogprobs: []Logprob{{Token: "<", Logprob: -0.25, Bytes: Bytes{60}}, {Token: "\xff", Logprob: -1e-7, Bytes: Bytes{255}}}},
					{Token: "", Logprob: 0, Bytes: Bytes{}},
					{Token: "token_id:42", Logprob: -1e21, Bytes: nil, TopLogprobs: []Logprob{}},
				}}},
			{Index: 1, FinishReason: "tool_calls", Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "c1", Type: "function", Function: Function{Name: "f", Arguments: `{"a": "<1>"}`}},
				{ID: "c2", Type: "function", Function: Function{Name: "g"}},
			}}, Logprobs: &Logprobs{}},
			{Index: 2, Message: Message{Role: RoleAssistant, Content: Content{Value: &empty}}, Logprobs: &Logprobs{Content: []Logprob{}}},
			{Index: 3, Message: Message{Role: RoleAssistant, Content: Content{Value: &text}, Name: "n", ToolCallID: "x"}},
		},
		Usage:          &Usage{PromptTokens: 40, CompletionTokens: 100, TotalTokens: 140, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 3}},
		PromptTokenIDs: []int{1, -2, 300000},
		PolicyVersion:  &version,
		Error:          &ErrorDetail{Message: "m<", Type: "t", Param: "p", Code: "\xff"},
	}
	nan, inf := math.NaN(), math.Inf(-1)
	tests := []struct {
		name string
		r    ChatResponse
	}{
		{"full", full},
		{"zero", ChatResponse{}},
		{"no choices", ChatResponse{Choices: []Choice{}}},
		{"usage without details", ChatResponse{Usage: &Usage{PromptTokens: 1}}},
		{"policy version 0", ChatResponse{PolicyVersion: &zero, PromptTokenIDs: []int{}}},
		{"error with null fields", ChatResponse{Error: &ErrorDetail{}}},
		{"NaN logprob", ChatResponse{Choices: []Choice{{Logprobs: &Logprobs{Content: []Logprob{{Logprob: nan}}}}}}},
		{"infinite top logprob", ChatResponse{Choices: []Choice{{Logprobs: &Logprobs{Content: []Logprob{{TopLogprobs: []Logprob{{Logprob: inf}}}}}}}}},
	}
	for _, f := range []float64{math.Copysign(0, -1), -0.1, -2.5e-7, -1e-6, -123456789, -1e20, -1.5e300, -math.SmallestNonzeroFloat64} {
		tests = append(tests, struct {
			name string
			r    ChatResponse
		}{"logprob " + jsonFloat(f), ChatResponse{Choices: []Choice{{Logprobs: &Logprobs{Content: []Logprob{{Token: "t", Logprob: f}}}}}}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkAppendResponse(t, &tt.r) })
	}
}

// FuzzAppendResponse compares AppendResponse with json.Marshal on any
// response a body decodes to, with s, which may be any bytes, in its
// string fields.
func FuzzAppendResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`,
		`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},"logprobs":{"content":[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[{"token":"b","logprob":-2e-9,"bytes":null}]}]}}],"prompt_token_ids":[1,2],"policy_version":3}`,
		`{"choices":[],"error":{"message":"m","type":"t","param":null,"code":404}}`,
	} {
		f.Add([]byte(s), "plain")
	}
	f.Add([]byte(`{"choices":[{"message":{"content":"x"},"logprobs":{"content":[{"token":"a"}]}}]}`), "\xff<\u2028>\x00")
	f.Fuzz(func(t *testing.T, body []byte, s string) {
		var r ChatResponse
		if json.Unmarshal(body, &r) != nil {
			return
		}
		checkAppendResponse(t, &r)
		r.ID, r.Model = s, s
		for i := range r.Choices {
			c := &r.Choices[i]
			c.FinishReason = s
			if c.Message.Content.Value != nil {
				c.Message.Content.Value = &s
			}
			for j := range c.Message.ToolCalls {
				c.Message.ToolCalls[j].Function.Arguments = Arguments(s)
			}
			if c.Logprobs != nil {
				for j := range c.Logprobs.Content {
					c.Logprobs.Content[j].Token = s
				}
			}
		}
		if r.Error != nil {
			r.Error.Message, r.Error.Code = s, Nullable(s)
		}
		checkAppendResponse(t, &r)
	})
}

// BenchmarkAppendResponse encodes an answer of a few hundred bytes of
// text with usage, as the server sends the stand-in's, with encoding/json
// (the reference) and with AppendResponse.
func BenchmarkAppendResponse(b *testing.B) {
	text := strings.Repeat("The product of the two numbers is worked out digit by digit. ", 7) + `Final answer: \boxed{3719}`
	r := ChatResponse{ID: "chatcmpl-0123456789abcdef01234567", Object: "chat.completion", Created: 1764460000, Model: "standin",
		Choices: []Choice{{Message: Message{Role: RoleAssistant, Content: Content{Value: &text}}, FinishReason: "stop"}},
		Usage:   &Usage{PromptTokens: 40, CompletionTokens: 100, TotalTokens: 140, PromptTokensDetails: &PromptTokensDetails{}}}
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			if _, err := AppendResponse(buf[:0], &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
