package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func decodeRequest(t *testing.T, body string) (*ChatRequest, error) {
	t.Helper()
	var r ChatRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, err
	}
	return &r, r.Validate()
}

func TestValidate(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, body string
		param      string // "" when the request is valid
	}{
		{"minimal", `{"model":"m",` + user + `}`, ""},
		{"no messages", `{"model":"m","messages":[]}`, "messages"},
		{"n absent is one", `{` + user + `,"n":0}`, ""},
		{"n at OpenAI's bound", `{` + user + `,"n":128}`, ""},
		{"n over OpenAI's bound", `{` + user + `,"n":129}`, "n"},
		{"negative n", `{` + user + `,"n":-1}`, "n"},
		{"top_logprobs over 20", `{` + user + `,"top_logprobs":21}`, "top_logprobs"},
		{"temperature over 2", `{` + user + `,"temperature":2.5}`, "temperature"},
		{"negative top_p", `{` + user + `,"top_p":-0.1}`, "top_p"},
		{"negative max_tokens", `{` + user + `,"max_tokens":-1}`, "max_tokens"},
		{"negative max_completion_tokens", `{` + user + `,"max_completion_tokens":-1}`, "max_completion_tokens"},
		{"stream_options without stream", `{` + user + `,"stream_options":{"include_usage":true}}`, "stream_options"},
		{"stream_options with stream", `{` + user + `,"stream":true,"stream_options":{"include_usage":true}}`, ""},
		{"unknown role", `{"messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{"developer role", `{"messages":[{"role":"developer","content":"x"}]}`, ""},
		{"tool message without id", `{"messages":[{"role":"user","content":"x"},{"role":"tool","content":"5"}]}`, "messages[1].tool_call_id"},
		{"tool message answering no call", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c","content":"5"}]}`, "messages[1].tool_call_id"},
		{"tool message answering a later call", `{"messages":[{"role":"tool","tool_call_id":"c","content":"5"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_call_id"},
		{"tool message answering a call", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"5"}]}`, ""},
		{"four stops", `{` + user + `,"stop":["a","b","c","d"]}`, ""},
		{"five stops", `{` + user + `,"stop":["a","b","c","d","e"]}`, "stop"},
		{"top_logprobs without logprobs", `{` + user + `,"top_logprobs":2}`, "top_logprobs"},
		{"top_logprobs with logprobs", `{` + user + `,"logprobs":true,"top_logprobs":2}`, ""},
		{"129 tools", `{` + user + `,"tools":[` + strings.Repeat(`{"type":"function","function":{"name":"f"}},`, 128) + `{"type":"function","function":{"name":"f"}}]}`, "tools"},
		{"text parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, ""},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content"},
		{"number content", `{"messages":[{"role":"user","content":3}]}`, "messages[0].content"},
		{"object content", `{"messages":[{"role":"user","content":{"text":"x"}}]}`, "messages[0].content"},
		{"array of numbers content", `{"messages":[{"role":"user","content":[1,2]}]}`, "messages[0].content"},
		{"null content", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, ""},
		{"non-function tool", `{` + user + `,"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, "tools[0].type"},
		{"tool without name", `{` + user + `,"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{"required without tools", `{` + user + `,"tool_choice":"required"}`, "tool_choice"},
		{"none without tools", `{` + user + `,"tool_choice":"none"}`, ""},
		{"named tool not declared", `{` + user + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice"},
		{"named tool declared", `{` + user + `,"tools":[{"type":"function","function":{"name":"f","strict":true}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`, ""},
		{"presence penalty over 2", `{` + user + `,"presence_penalty":2.1}`, "presence_penalty"},
		{"frequency penalty at -2", `{` + user + `,"frequency_penalty":-2}`, ""},
		{"logit bias key", `{` + user + `,"logit_bias":{"-1":1}}`, "logit_bias"},
		{"logit bias value", `{` + user + `,"logit_bias":{"1":-100.5}}`, "logit_bias"},
		{"logit bias", `{` + user + `,"logit_bias":{"1":-100,"2":100}}`, ""},
		{"response format type", `{` + user + `,"response_format":{"type":"yaml"}}`, "response_format.type"},
		{"json_schema without a name", `{` + user + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name"},
		{"json_schema", `{` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"},"strict":true}}}`, ""},
		{"json_object", `{` + user + `,"response_format":{"type":"json_object"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeRequest(t, tt.body)
			if tt.param == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate: %v, want a *FieldError", err)
			}
			if fe.Param != tt.param || !strings.HasPrefix(fe.Message, tt.param+": ") {
				t.Errorf("error param %q message %q, want param %q and a message naming it", fe.Param, fe.Message, tt.param)
			}
		})
	}
}

func TestDecodeFieldErrors(t *testing.T) {
	tests := []struct{ name, body, param string }{
		{"stop of numbers", `{"stop":[1,2]}`, "stop"},
		{"tool_choice unknown mode", `{"tool_choice":"sometimes"}`, "tool_choice"},
		{"tool_choice object without name", `{"tool_choice":{"type":"function","function":{}}}`, "tool_choice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r ChatRequest
			err := json.Unmarshal([]byte(tt.body), &r)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Param != tt.param {
				t.Errorf("Unmarshal: %v, want a *FieldError for %q", err, tt.param)
			}
		})
	}
}

func TestContentText(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"string", `"hi"`, "hi"},
		{"null", `null`, ""},
		{"one part", `[{"type":"text","text":"hi"}]`, "hi"},
		{"parts are joined with nothing between", `[{"type":"text","text":"a"},{"type":"text","text":"b\n"},{"type":"text","text":"c"}]`, "ab\nc"},
		{"empty array", `[]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Content
			if err := json.Unmarshal([]byte(tt.json), &c); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			got, err := c.Text()
			if err != nil || got != tt.want {
				t.Errorf("Text() = %q, %v; want %q, nil", got, err, tt.want)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	temp, seed := 0.5, int64(3)
	text := "the question"
	in := ChatRequest{
		Model: "m",
		Messages: []Message{
			{Role: RoleUser, Content: Content{Value: &text}},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: Function{Name: "f", Arguments: `{"a":1}`}}}},
			{Role: RoleTool, Content: Content{Parts: []ContentPart{{Type: "text", Text: "1"}}}, ToolCallID: "c1"},
		},
		Tools:       []Tool{{Type: "function", Function: FunctionDef{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		ToolChoice:  "f",
		Temperature: &temp,
		Seed:        &seed,
		Stop:        Stop{"x"},
		N:           3,
	}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"content":null`) || !strings.Contains(string(b), `"tool_choice":{"type":"function","function":{"name":"f"}}`) {
		t.Errorf("encoded %s: want a null content and the object form of a named tool choice", b)
	}
	var out ChatRequest
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("Unmarshal %s: %v", b, err)
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b2, err := json.Marshal(&out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b2) != string(b) {
		t.Errorf("round trip:\n got %s\nwant %s", b2, b)
	}
}

func TestArgumentsReadAnyJSON(t *testing.T) {
	tests := []struct{ json, want string }{
		{`"{\"a\":1}"`, `{"a":1}`},
		{`{"a":1}`, `{"a":1}`},
		{`null`, ``},
	}
	for _, tt := range tests {
		var a Arguments
		if err := json.Unmarshal([]byte(tt.json), &a); err != nil || string(a) != tt.want {
			t.Errorf("Unmarshal(%s) = %q, %v; want %q", tt.json, a, err, tt.want)
		}
	}
}

func TestBytes(t *testing.T) {
	b, err := json.Marshal(Logprob{Token: "hé", Bytes: Bytes("hé")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"token":"hé","logprob":0,"bytes":[104,195,169]}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var lp Logprob
	if err := json.Unmarshal(b, &lp); err != nil || string(lp.Bytes) != "hé" {
		t.Errorf("Unmarshal = %q, %v; want %q", lp.Bytes, err, "hé")
	}
	if err := json.Unmarshal([]byte(`{"bytes":[256]}`), &lp); err == nil {
		t.Error("a byte of 256 was accepted")
	}
}

func TestErrorBody(t *testing.T) {
	b, err := json.Marshal(ErrorBody{Error: ErrorDetail{Message: "no", Type: "invalid_request_error", Param: "n"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":{"message":"no","type":"invalid_request_error","param":"n","code":null}}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	tests := []struct {
		name, body string
		want       ErrorDetail
	}{
		{"openai", string(b), ErrorDetail{Message: "no", Type: "invalid_request_error", Param: "n"}},
		{"numeric code", `{"error":{"message":"m","code":404}}`, ErrorDetail{Message: "m", Code: "404"}},
		{"bare string", `{"error":"gone"}`, ErrorDetail{Message: "gone"}},
		{"vllm flat", `{"object":"error","message":"m","type":"t","code":400}`, ErrorDetail{Message: "m", Type: "t", Code: "400"}},
		{"not json", " <html>502</html>\n", ErrorDetail{Message: "<html>502</html>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseError([]byte(tt.body)); got != tt.want {
				t.Errorf("ParseError = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzRequest checks that any body decodes into a checkable request or fails.
// A decoded request's Validate returns nil or a *FieldError, without
// panicking. A valid request encodes and decodes to the same request.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":"x","tool_choice":"auto","n":2}`,
		`{"messages":[{"role":"tool","content":3}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":{"a":1}}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ChatRequest
		if json.Unmarshal(body, &r) != nil {
			return
		}
		err := r.Validate()
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("Validate: %v is not a *FieldError", err)
		}
		if err != nil {
			return
		}
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatalf("Marshal a valid request: %v", err)
		}
		var again ChatRequest
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("Unmarshal %s: %v", b, err)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("re-decoded request: %v", err)
		}
	})
}
