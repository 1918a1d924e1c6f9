package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// standinBody is a response of the shape the stand-in and most servers
// send: a tool call turn.
const standinBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"standin","system_fingerprint":"fp_standin",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
	`{"id":"call_a","type":"function","function":{"name":"delegate","arguments":"{\"question\":\"Part 1 of \\\"x\\\": what is 6 times 7?\"}"}},` +
	`{"id":"call_b","type":"function","function":{"name":"delegate","arguments":"{\"question\":\"é \u00e9 \ud83d\ude00\"}"}}]},` +
	`"logprobs":null,"finish_reason":"tool_calls"}],` +
	`"usage":{"prompt_tokens":40,"completion_tokens":100,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":0}}}`

// checkDecodeResponse compares DecodeResponse with json.Unmarshal on body:
// where it takes the body, the same response.
func checkDecodeResponse(t *testing.T, body []byte) (taken bool) {
	t.Helper()
	var want ChatResponse
	werr := json.Unmarshal(body, &want)
	got := ChatResponse{ID: "left over", Choices: []Choice{{Index: 9}}}
	if !DecodeResponse(body, &got) {
		return false
	}
	if werr != nil {
		t.Fatalf("DecodeResponse took %q, which json.Unmarshal refuses: %v", body, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeResponse(%q):\n got %+v\nwant %+v", body, got, want)
	}
	return true
}

func TestDecodeResponseMatchesUnmarshal(t *testing.T) {
	for _, tt := range []struct {
		name  string
		body  string
		taken bool
	}{
		{"stand-in", standinBody, true},
		{"text", `{"choices":[{"index":0,"message":{"role":"assistant","content":"a \"b\" \\ \n c"},"finish_reason":"stop"}]}`, true},
		{"white space", " {\n \"id\" : \"x\" ,\t\"choices\" : [ ] , \"usage\" : null }\r\n", true},
		{"empty", `{}`, true},
		{"nulls", `{"choices":[{"message":{"content":null,"tool_calls":null},"finish_reason":null,"logprobs":null}],"usage":{"prompt_tokens_details":null}}`, true},
		{"negative zero", `{"created":-0,"choices":[{"index":-0}]}`, true},
		{"invalid UTF-8", "{\"id\":\"a\xffb\",\"choices\":[]}", true},
		{"ignored keys", `{"choices":[{"message":{"refusal":null,"reasoning_content":"r\u00e9"}}],"system_fingerprint":null,"service_tier":"default"}`, true},
		{"ignored key not a string", `{"system_fingerprint":1}`, false},
		{"unknown key", `{"choices":[],"fingerprint":"fp"}`, false},
		{"key in capitals", `{"ID":"x"}`, false},
		{"duplicate key", `{"id":"a","id":"b"}`, false},
		{"duplicate content", `{"choices":[{"message":{"content":"a","content":null}}]}`, false},
		{"fraction", `{"created":1.0}`, false},
		{"exponent", `{"created":1e3}`, false},
		{"overflow", `{"created":9223372036854775808}`, false},
		{"leading zero", `{"created":01}`, false},
		{"content parts", `{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}`, false},
		{"object arguments", `{"choices":[{"message":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}`, false},
		{"logprobs", `{"choices":[{"logprobs":{"content":[]}}]}`, false},
		{"error", `{"error":{"message":"x"}}`, false},
		{"trailing", `{"id":"x"} {}`, false},
		{"cut", `{"id":"x"`, false},
		{"bad escape", `{"id":"\x"}`, false},
		{"control byte", "{\"id\":\"a\x01\"}", false},
		{"null choices", `{"choices":null}`, false},
		{"trailing comma", `{"id":"x",}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkDecodeResponse(t, []byte(tt.body)); got != tt.taken {
				t.Errorf("taken %v, want %v", got, tt.taken)
			}
		})
	}
}

// FuzzDecodeResponse compares DecodeResponse with json.Unmarshal on any
// body.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		standinBody, `{}`, `{"choices":[{"message":{"content":null}}],"usage":null}`,
		`{"choices":[{"index":1,"message":{"role":"assistant","content":"x"},"finish_reason":"length"},{"index":0}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeResponse(t, body) })
}

// BenchmarkDecodeResponse reads a response of a few hundred bytes of text
// with encoding/json (the reference) and with DecodeResponse.
func BenchmarkDecodeResponse(b *testing.B) {
	text := strings.Repeat("The product of the two numbers is worked out digit by digit. ", 7)
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"standin","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		text + `Final answer: \\boxed{3719}"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":100,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":0}}}`)
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ChatResponse
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ChatResponse
			if !DecodeResponse(body, &r) {
				b.Fatal("not taken")
			}
		}
	})
}
