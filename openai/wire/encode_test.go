package wire

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// checkAppendRequest compares AppendRequest with json.Marshal on r: the
// same bytes, or an error from both.
func checkAppendRequest(t *testing.T, r *ChatRequest) {
	t.Helper()
	checkAppend(t, "AppendRequest", r, AppendRequest)
}

// checkAppend compares appendFn, named name, with json.Marshal on v: the
// same bytes after what dst held, or an error from both and dst as it
// was.
func checkAppend[T any](t *testing.T, name string, v *T, appendFn func([]byte, *T) ([]byte, error)) {
	t.Helper()
	want, werr := json.Marshal(v)
	prefix := []byte("prefix")
	got, err := appendFn(prefix, v)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%s error %v, json.Marshal error %v", name, err, werr)
	}
	if string(got[:len(prefix)]) != "prefix" {
		t.Fatalf("%s changed what dst held: %q", name, got)
	}
	if err != nil {
		if len(got) != len(prefix) {
			t.Errorf("%s failed but returned %q, want dst as it was", name, got)
		}
		return
	}
	if g := got[len(prefix):]; string(g) != string(want) {
		t.Errorf("%s:\n got %s\nwant %s", name, g, want)
	}
}

func TestAppendRequestMatchesMarshal(t *testing.T) {
	text, empty, odd := "the question", "", "<b>&</b> \u2028\u2029 \x00\x1f\b\f\n\r\t \"\\ \xff\xfe é 夏 \U0001F600 \x7f"
	temp, top, small, big, neg := 0.7, 1.0, 1e-7, 1e21, -2.0
	seed, yes, no := int64(-42), true, false
	params := json.RawMessage(" {\"type\" : \"object\",\n \"properties\": {\"q\": {\"type\": \"string\", \"description\": \"<&>\u2028\"}}} ")
	full := ChatRequest{
		Model: "m<1>",
		Messages: []Message{
			{Role: RoleSystem, Content: Content{Value: &odd}},
			{Role: RoleUser, Content: Content{Value: &text}, Name: "dot"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "c1", Type: "function", Function: Function{Name: "f", Arguments: `{"a": "<1>"}`}},
				{ID: "c2", Type: "function", Function: Function{Name: "g", Arguments: ""}},
			}},
			{Role: RoleTool, Content: Content{Parts: []ContentPart{{Type: "text", Text: "1"}, {Type: "image_url"}}}, ToolCallID: "c1"},
			{Role: RoleTool, Content: Content{Parts: []ContentPart{}}, ToolCallID: "c2"},
			{Role: RoleUser, Content: Content{Value: &empty}},
		},
		Tools: []Tool{
			{Type: "function", Function: FunctionDef{Name: "f", Description: "does <f>", Parameters: params, Strict: &yes}},
			{Function: FunctionDef{Name: "g"}},
		},
		ToolChoice: "f", Temperature: &temp, TopP: &top, MaxTokens: 100, MaxCompletionTokens: 50,
		Stop: Stop{"x", "<y>"}, Seed: &seed, N: 3, Logprobs: true, TopLogprobs: 5,
		Stream: true, StreamOptions: &StreamOptions{IncludeUsage: true},
		ReturnTokensAsTokenIDs: true, ReturnTokenIDs: true,
		FrequencyPenalty: &small, PresencePenalty: &neg,
		LogitBias:         map[string]float64{"50256": -100, "7": 1e-9, "13": 0.5, "<": big},
		ParallelToolCalls: &no,
		ResponseFormat:    &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "s", Description: "d&", Schema: params, Strict: &no}},
	}
	nan, inf := math.NaN(), math.Inf(-1)
	tests := []struct {
		name string
		r    ChatRequest
	}{
		{"full", full},
		{"zero", ChatRequest{}},
		{"empty messages", ChatRequest{Messages: []Message{}}},
		{"null content", ChatRequest{Model: "m", Messages: []Message{{Role: RoleUser}}}},
		{"modes", ChatRequest{ToolChoice: ToolChoiceRequired, StreamOptions: &StreamOptions{}, ResponseFormat: &ResponseFormat{Type: FormatText}}},
		{"schema without fields", ChatRequest{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{}}}},
		{"NaN temperature", ChatRequest{Temperature: &nan}},
		{"infinite penalty", ChatRequest{PresencePenalty: &inf}},
		{"NaN bias", ChatRequest{LogitBias: map[string]float64{"1": nan}}},
		{"invalid parameters", ChatRequest{Tools: []Tool{{Function: FunctionDef{Name: "f", Parameters: json.RawMessage(`{"a":`)}}}}},
		{"invalid schema", ChatRequest{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "s", Schema: json.RawMessage(`[1,]`)}}}},
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, 0.1, 2.5e-7, 1e-6, 123456789, 1e20, 1e21, 1.5e300, -3e-10, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		tests = append(tests, struct {
			name string
			r    ChatRequest
		}{"float " + jsonFloat(f), ChatRequest{Temperature: &f}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkAppendRequest(t, &tt.r) })
	}
}

// jsonFloat is f as encoding/json writes it, for a test name.
func jsonFloat(f float64) string {
	b, err := json.Marshal(f)
	if err != nil {
		return "error"
	}
	return string(b)
}

// FuzzAppendRequest compares AppendRequest with json.Marshal on any
// request a body decodes to, with s, which may be any bytes, in its
// string fields: decoding never leaves invalid UTF-8 there.
func FuzzAppendRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":"x","tool_choice":"auto","n":2}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":{"a":1}}}]}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"tools":[{"type":"function","function":{"name":"f","parameters":{ "a" : [1, 2.50, "<>"] }}}],"temperature":1e-7,"logit_bias":{"3":1,"1":-1e25}}`,
		`{"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}},"seed":-1,"stream":true,"stream_options":{"include_usage":false}}`,
	} {
		f.Add([]byte(s), "plain")
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}]}`), "\xff<\u2028>\x00")
	f.Fuzz(func(t *testing.T, body []byte, s string) {
		var r ChatRequest
		if json.Unmarshal(body, &r) != nil {
			return
		}
		checkAppendRequest(t, &r)
		r.Model = s
		for i := range r.Messages {
			m := &r.Messages[i]
			if m.Content.Value != nil {
				m.Content.Value = &s
			}
			for j := range m.ToolCalls {
				m.ToolCalls[j].Function.Arguments = Arguments(s)
			}
		}
		if r.ToolChoice != "" {
			r.ToolChoice = ToolChoice(s)
		}
		for i := range r.Stop {
			r.Stop[i] = s
		}
		checkAppendRequest(t, &r)
	})
}

// BenchmarkAppendRequest encodes the route strategy's final turn, with
// encoding/json (the reference) and with AppendRequest.
func BenchmarkAppendRequest(b *testing.B) {
	sys := strings.Repeat("You can hand self-contained questions to a cheaper assistant. ", 7)
	user := "Task 1: a shop sells 21 pencils a day for 4 days, then 12 a day for 3 days. How many pencils does it sell in all?"
	answer := strings.Repeat("The product is worked out digit by digit. ", 6) + `Final answer: \boxed{84}`
	temp := 0.0
	r := ChatRequest{Model: "standin", Temperature: &temp, MaxTokens: 1024, ToolChoice: ToolChoiceAuto,
		Messages: []Message{{Role: RoleSystem, Content: Content{Value: &sys}}, {Role: RoleUser, Content: Content{Value: &user}}, {Role: RoleAssistant}},
		Tools: []Tool{{Type: "function", Function: FunctionDef{Name: "delegate", Description: "Send one self-contained question to a cheaper assistant.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"The complete question."}},"required":["question"],"additionalProperties":false}`)}}}}
	for i := range 4 {
		id := "call_" + string(rune('a'+i))
		r.Messages[2].ToolCalls = append(r.Messages[2].ToolCalls, ToolCall{ID: id, Type: "function", Function: Function{Name: "delegate", Arguments: `{"question":"What is 21 * 4?"}`}})
		r.Messages = append(r.Messages, Message{Role: RoleTool, Content: Content{Value: &answer}, ToolCallID: id})
	}
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
		for b.Loop() {
			if _, err := AppendRequest(make([]byte, 0, 4096), &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
