package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai/wire"
)

func ptr[T any](v T) *T { return &v }

func TestEncodeRequest(t *testing.T) {
	req := &delegate.Request{
		Messages: []delegate.Message{
			delegate.System("be brief"),
			delegate.User("what is 2+3?"),
			{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":2,"b":3}`}}},
			delegate.ToolResult("call_1", "5"),
		},
		Tools: []delegate.Tool{{
			Name:        "add",
			Description: "adds two numbers",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		}},
		ToolChoice:  "auto",
		Temperature: ptr(0.0),
		TopP:        ptr(0.9),
		MaxTokens:   64,
		Stop:        []string{"</answer>"},
		Seed:        ptr(int64(7)),
		N:           2,
		TopLogprobs: 3,
	}
	body, err := encodeRequest("gpt-test", req, true)
	if err != nil {
		t.Fatalf("encodeRequest: %v", err)
	}
	want := `{"model":"gpt-test","messages":[` +
		`{"role":"system","content":"be brief"},` +
		`{"role":"user","content":"what is 2+3?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}]},` +
		`{"role":"tool","content":"5","tool_call_id":"call_1"}],` +
		`"tools":[{"type":"function","function":{"name":"add","description":"adds two numbers","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}}],` +
		`"tool_choice":"auto","temperature":0,"top_p":0.9,"max_tokens":64,"stop":["\u003c/answer\u003e"],"seed":7,"n":2,` +
		`"logprobs":true,"top_logprobs":3,"return_tokens_as_token_ids":true}`
	if got := string(body); got != want {
		t.Errorf("body:\n got %s\nwant %s", got, want)
	}
}

func TestEncodeRequestOptionalFields(t *testing.T) {
	tests := []struct {
		name     string
		req      delegate.Request
		tokenIDs bool
		want     string
	}{
		{
			name: "minimal",
			req:  delegate.Request{Messages: []delegate.Message{delegate.User("hi")}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty user content is sent as a string",
			req:  delegate.Request{Messages: []delegate.Message{delegate.User("")}, N: 1},
			want: `{"model":"m","messages":[{"role":"user","content":""}]}`,
		},
		{
			name:     "token ids need logprobs",
			req:      delegate.Request{Messages: []delegate.Message{delegate.User("hi")}},
			tokenIDs: true,
			want:     `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name:     "logprobs with token ids",
			req:      delegate.Request{Messages: []delegate.Message{delegate.User("hi")}, Logprobs: true},
			tokenIDs: true,
			want:     `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true,"return_tokens_as_token_ids":true}`,
		},
		{
			name: "named tool choice",
			req:  delegate.Request{Messages: []delegate.Message{delegate.User("hi")}, Tools: []delegate.Tool{{Name: "f"}}, ToolChoice: "f"},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "sampling constraints pass through",
			req: delegate.Request{Messages: []delegate.Message{delegate.User("hi")}, Tools: []delegate.Tool{{Name: "f"}}, StrictToolCalls: true,
				ParallelToolCalls: new(false), FrequencyPenalty: new(0.5), PresencePenalty: new(-1.0), LogitBias: map[int]float64{42: -100},
				ResponseFormat: &delegate.ResponseFormat{Type: delegate.FormatJSONSchema, Name: "a", Schema: json.RawMessage(`{"type":"object"}`)}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true}}],` +
				`"frequency_penalty":0.5,"presence_penalty":-1,"logit_bias":{"42":-100},"parallel_tool_calls":false,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}}`,
		},
		{
			name: "assistant with text and tool calls keeps the text",
			req: delegate.Request{Messages: []delegate.Message{{Role: delegate.RoleAssistant, Content: "let me add", Name: "lead",
				ToolCalls: []delegate.ToolCall{{ID: "c", Name: "add", Arguments: "{}"}}}}},
			want: `{"model":"m","messages":[{"role":"assistant","content":"let me add","name":"lead","tool_calls":[{"id":"c","type":"function","function":{"name":"add","arguments":"{}"}}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := encodeRequest("m", &tt.req, tt.tokenIDs)
			if err != nil {
				t.Fatalf("encodeRequest: %v", err)
			}
			if got := string(body); got != tt.want {
				t.Errorf("body:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestEncodeRequestRejects(t *testing.T) {
	tests := []struct {
		name string
		req  *delegate.Request
		want string
	}{
		{"nil", nil, "request is nil"},
		{"no messages", &delegate.Request{}, "messages: at least one message is required"},
		{"negative n", &delegate.Request{Messages: []delegate.Message{delegate.User("x")}, N: -1}, "n: -1 is outside 1..128"},
		{"tool message without id", &delegate.Request{Messages: []delegate.Message{{Role: delegate.RoleTool, Content: "5"}}}, "messages[0].tool_call_id: required on a tool message"},
		{"tool without name", &delegate.Request{Messages: []delegate.Message{delegate.User("x")}, Tools: []delegate.Tool{{}}}, "tools[0].function.name: required"},
		{"bad parameters", &delegate.Request{Messages: []delegate.Message{delegate.User("x")}, Tools: []delegate.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":`)}}}, `tools[0].function.parameters: tool "f": not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encodeRequest("m", tt.req, false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

const toolCallResponse = `{
  "id": "chatcmpl-1",
  "object": "chat.completion",
  "created": 1700000000,
  "model": "gpt-test-2024",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": null,
      "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "delegate", "arguments": "{\"question\":\"2+3?\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "delegate", "arguments": "{\"question\":"}}
      ]
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}},
  "system_fingerprint": "fp_x"
}`

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		tokenIDs bool
		want     *delegate.Response
	}{
		{
			name: "tool calls and cached usage",
			body: toolCallResponse,
			want: &delegate.Response{
				ID: "chatcmpl-1", Model: "gpt-test-2024",
				Choices: []delegate.Choice{{
					Message: delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{
						{ID: "call_a", Name: "delegate", Arguments: `{"question":"2+3?"}`},
						{ID: "call_b", Name: "delegate", Arguments: `{"question":`},
					}},
					FinishReason: "tool_calls",
				}},
				Usage: delegate.Usage{PromptTokens: 120, CompletionTokens: 30, CachedTokens: 64},
			},
		},
		{
			name: "logprobs without token ids",
			body: `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop",
				"logprobs":{"content":[{"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.25,"bytes":[72,105]},{"token":"Hello","logprob":-1.5,"bytes":null}]}]}}],
				"usage":{"prompt_tokens":5,"completion_tokens":1}}`,
			want: &delegate.Response{
				ID: "x", Model: "m",
				Choices: []delegate.Choice{{
					Message:      delegate.Assistant("Hi"),
					FinishReason: "stop",
					Logprobs: []delegate.TokenLogprob{{Token: "Hi", TokenID: -1, Logprob: -0.25, Top: []delegate.TopLogprob{
						{Token: "Hi", TokenID: -1, Logprob: -0.25}, {Token: "Hello", TokenID: -1, Logprob: -1.5},
					}}},
				}},
				Usage: delegate.Usage{PromptTokens: 5, CompletionTokens: 1},
			},
		},
		{
			name:     "vLLM token ids and prompt token ids",
			tokenIDs: true,
			body: `{"id":"cmpl-v","object":"chat.completion","model":"Qwen/Qwen2.5-0.5B-Instruct","prompt_token_ids":[151644,872,198],
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hi!","tool_calls":[]},"finish_reason":"length","stop_reason":null,
				"logprobs":{"content":[
				  {"token":"token_id:13048","logprob":-0.01,"bytes":[72,105],"top_logprobs":[{"token":"token_id:13048","logprob":-0.01,"bytes":[72,105]},{"token":"token_id:9707","logprob":-4.6,"bytes":[72,101,108,108,111]}]},
				  {"token":"token_id:0","logprob":-0.5,"bytes":[116,111,107,101,110,95,105,100,58,48],"top_logprobs":[]}]}}],
				"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":null}}`,
			want: &delegate.Response{
				ID: "cmpl-v", Model: "Qwen/Qwen2.5-0.5B-Instruct", PromptTokenIDs: []int{151644, 872, 198},
				Choices: []delegate.Choice{{
					Message:      delegate.Assistant("Hi!"),
					FinishReason: "length",
					Logprobs: []delegate.TokenLogprob{
						{Token: "Hi", TokenID: 13048, Logprob: -0.01, Top: []delegate.TopLogprob{{Token: "Hi", TokenID: 13048, Logprob: -0.01}, {Token: "Hello", TokenID: 9707, Logprob: -4.6}}},
						{Token: "", TokenID: 0, Logprob: -0.5},
					},
				}},
				Usage: delegate.Usage{PromptTokens: 3, CompletionTokens: 2},
			},
		},
		{
			name: "token_id text without TokenIDs stays text",
			body: `{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"token":"token_id:5","logprob":-1}]}}]}`,
			want: &delegate.Response{Model: "fallback", Choices: []delegate.Choice{{
				Message:  delegate.Assistant("a"),
				Logprobs: []delegate.TokenLogprob{{Token: "token_id:5", TokenID: -1, Logprob: -1}},
			}}},
		},
		{
			name: "choices sorted by index, missing tool call ids made up, object arguments kept",
			body: `{"model":"m","choices":[
				{"index":1,"message":{"role":"assistant","content":"second"},"finish_reason":"stop"},
				{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]},"finish_reason":"tool_calls"}]}`,
			want: &delegate.Response{Model: "m", Choices: []delegate.Choice{
				{Message: delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0_0", Name: "f", Arguments: `{"x":1}`}}}, FinishReason: "tool_calls"},
				{Message: delegate.Assistant("second"), FinishReason: "stop"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeResponse(strings.NewReader(tt.body), "fallback", tt.tokenIDs)
			if err != nil {
				t.Fatalf("decodeResponse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeResponseRejects(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"empty", ``, "decode body: EOF"},
		{"truncated", `{"choices":[{"message":`, "decode body"},
		{"not an object", `[1,2]`, "decode body"},
		{"no choices", `{"id":"x","choices":[]}`, "no choices"},
		{"negative usage", `{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":-1}}`, "negative usage"},
		{"bad token id", `{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"token":"token_id:x","logprob":-1}]}}]}`, `choice 0: logprob 0: token "token_id:x": bad token id`},
		{"bad byte", `{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-1,"bytes":[300]}]}}]}`, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeResponse(strings.NewReader(tt.body), "m", true)
			var de *decodeError
			if !errors.As(err, &de) || de.readErr {
				t.Fatalf("error = %#v, want a *decodeError from the JSON", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDecodeResponseTooLarge(t *testing.T) {
	body := `{"choices":[{"message":{"content":"` + strings.Repeat("a", 1000) + `"}}]}`
	_, err := decodeResponseLimit(strings.NewReader(body), -1, 500, "m", false)
	var de *decodeError
	if !errors.As(err, &de) || de.readErr || !errors.Is(err, errTooLarge) {
		t.Fatalf("error = %v, want a decode error for a body over the limit", err)
	}
	if _, err := decodeResponseLimit(strings.NewReader(body), -1, int64(len(body)), "m", false); err != nil {
		t.Errorf("body of exactly the limit: %v", err)
	}
}

func TestDecodeResponseErrorObject(t *testing.T) {
	_, err := decodeResponse(strings.NewReader(`{"error":{"message":"upstream overloaded","type":"server_error","code":502}}`), "m", false)
	var se *serverError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v, want *serverError", err)
	}
	if got, want := se.detail, (wire.ErrorDetail{Message: "upstream overloaded", Type: "server_error", Code: "502"}); got != want {
		t.Errorf("detail = %+v, want %+v", got, want)
	}
}

func TestParseErrorBody(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	tests := []struct {
		name string
		body string
		want wire.ErrorDetail
	}{
		{"openai", `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			wire.ErrorDetail{Message: "Rate limit reached", Type: "requests", Code: "rate_limit_exceeded"}},
		{"vllm flat", `{"object":"error","message":"The model x does not exist.","type":"NotFoundError","param":null,"code":404}`,
			wire.ErrorDetail{Message: "The model x does not exist.", Type: "NotFoundError", Code: "404"}},
		{"vllm nested", `{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}`,
			wire.ErrorDetail{Message: "bad", Type: "BadRequestError", Code: "400"}},
		{"llama.cpp", `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			wire.ErrorDetail{Message: "Loading model", Type: "unavailable_error", Code: "503"}},
		{"bare string", `{"error":"model 'x' not found"}`, wire.ErrorDetail{Message: "model 'x' not found"}},
		{"html", "<html><body>502 Bad Gateway</body></html>\n", wire.ErrorDetail{Message: "<html><body>502 Bad Gateway</body></html>"}},
		{"empty", ``, wire.ErrorDetail{}},
		{"unrelated json", `{"detail":"Not Found"}`, wire.ErrorDetail{Message: `{"detail":"Not Found"}`}},
		{"long text truncated on a rune boundary", long, wire.ErrorDetail{Message: strings.Repeat("é", 256) + "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseErrorBody([]byte(tt.body)); got != tt.want {
				t.Errorf("parseErrorBody:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		hdr  map[string]string
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"milliseconds win", map[string]string{"Retry-After": "3", "retry-after-ms": "250"}, 250 * time.Millisecond},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-4"}, 0},
		{"huge", map[string]string{"Retry-After": "1e300"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.hdr {
				h.Set(k, v)
			}
			if got := retryAfter(h, now); got != tt.want {
				t.Errorf("retryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzDecodeResponse checks that no 200 body makes the client panic.
// Every failure is an *APIError of type decode, or one carrying the type of an error object in the body.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(toolCallResponse), true)
	f.Add([]byte(`{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"token":"token_id:12","logprob":-1,"bytes":[1,2],"top_logprobs":[{"token":"token_id:3","logprob":-2}]}]}}],"prompt_token_ids":[1,2]}`), true)
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":{"a":[1]}}}]}}]}`), false)
	f.Add([]byte(`{"error":{"message":"x","code":500}}`), false)
	f.Add([]byte(`{"error":"plain"}`), false)
	f.Add([]byte(`{"choices":[{"index":-3}],"usage":{"prompt_tokens_details":{"cached_tokens":-1}}}`), false)
	f.Add([]byte(`{"choices":`), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, body []byte, tokenIDs bool) {
		c := &Client{cfg: Config{Model: "m", TokenIDs: tokenIDs}}
		ctx := context.Background()
		hr := &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body))}
		resp, ae := c.readResponse(ctx, ctx, hr)
		if ae != nil {
			if resp != nil {
				t.Fatalf("both a response and an error")
			}
			var se *serverError
			_, err := decodeResponse(bytes.NewReader(body), "m", tokenIDs)
			if !errors.As(err, &se) && (ae.Type != delegate.ErrKindDecode || ae.Status != 200) {
				t.Fatalf("error %+v: want type decode with status 200", ae)
			}
			if len(ae.Message) > maxErrorMessage+len("…") {
				t.Fatalf("message of %d bytes, want at most %d", len(ae.Message), maxErrorMessage)
			}
			return
		}
		if len(resp.Choices) == 0 {
			t.Fatalf("success without choices: %+v", resp)
		}
		u := resp.Usage
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 {
			t.Fatalf("negative usage accepted: %+v", u)
		}
		for _, ch := range resp.Choices {
			for _, lp := range ch.Logprobs {
				if lp.TokenID < -1 || !tokenIDs && lp.TokenID != -1 {
					t.Fatalf("token id %d with tokenIDs %v", lp.TokenID, tokenIDs)
				}
			}
		}
	})
}

// FuzzParseErrorBody checks that no error body makes the parser panic and
// that messages stay bounded.
func FuzzParseErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
	f.Add([]byte(`{"object":"error","message":"bad","type":"BadRequestError","code":400}`))
	f.Add([]byte(`{"error":"x"}`))
	f.Add([]byte(`{"error":{"code":{"nested":true}}}`))
	f.Add([]byte("<html>502</html>"))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := parseErrorBody(body)
		if len(d.Message) > maxErrorMessage+len("…") || len(d.Code) > maxErrorCode+len("…") {
			t.Fatalf("message of %d bytes, code of %d, want at most %d and %d", len(d.Message), len(d.Code), maxErrorMessage, maxErrorCode)
		}
	})
}

func TestDecodeResponsePolicyVersion(t *testing.T) {
	body := `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"5"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1},"policy_version":4}`
	resp, err := decodeResponse(strings.NewReader(body), "m", false)
	if err != nil {
		t.Fatal(err)
	}
	if resp.PolicyVersion == nil || *resp.PolicyVersion != 4 {
		t.Errorf("policy version %v, want 4", resp.PolicyVersion)
	}
	resp, err = decodeResponse(strings.NewReader(strings.Replace(body, `,"policy_version":4`, "", 1)), "m", false)
	if err != nil || resp.PolicyVersion != nil {
		t.Errorf("without the field: %v, %v; want no version", resp.PolicyVersion, err)
	}
}
