package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// checkDecodeRequest compares DecodeRequest with json.Unmarshal on body:
// where it takes the body, the same request.
func checkDecodeRequest(t *testing.T, body []byte) (taken bool) {
	t.Helper()
	var want ChatRequest
	werr := json.Unmarshal(body, &want)
	left := "left over"
	got := ChatRequest{Model: "left over", Messages: []Message{{Content: Content{Value: &left}}}, N: 9}
	if !DecodeRequest(body, &got) {
		return false
	}
	if werr != nil {
		t.Fatalf("DecodeRequest took %q, which json.Unmarshal refuses: %v", body, werr)
	}
	if !json.Valid(body) {
		t.Fatalf("DecodeRequest took %q, which is not valid JSON", body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeRequest(%q):\n got %+v\nwant %+v", body, got, want)
	}
	return true
}

func TestDecodeRequestMatchesUnmarshal(t *testing.T) {
	for _, tt := range []struct {
		name  string
		body  string
		taken bool
	}{
		{"agent", agentBody, true},
		{"every field taken", `{"model":"m","messages":[{"role":"user","content":"x","name":"dot"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},` +
			`{"role":"tool","content":"1","tool_call_id":"c"}],"temperature":0.7,"top_p":1,"frequency_penalty":-2,"presence_penalty":1e-7,` +
			`"max_tokens":100,"max_completion_tokens":50,"n":2,"top_logprobs":5,"seed":-42,"logprobs":true,"stream":false,` +
			`"return_tokens_as_token_ids":true,"return_token_ids":false}`, true},
		{"white space", " {\n \"model\" : \"m\" ,\t\"messages\" : [ ] , \"temperature\" : null }\r\n", true},
		{"empty", `{}`, true},
		{"nulls", `{"temperature":null,"top_p":null,"seed":null,"messages":[{"content":null,"tool_calls":null}]}`, true},
		{"negative zero", `{"temperature":-0,"n":-0}`, true},
		{"invalid UTF-8", "{\"model\":\"a\xffb\",\"messages\":[]}", true},
		{"escapes", `{"messages":[{"role":"user","content":"a \"b\" \\ \n \u00e9 \ud83d\ude00 \ud800"}]}`, true},
		{"tools", `{"tools":[{"type":"function","function":{"name":"f"}}]}`, false},
		{"tool choice", `{"tool_choice":"auto"}`, false},
		{"stop", `{"stop":"x"}`, false},
		{"content parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`, false},
		{"object arguments", `{"messages":[{"tool_calls":[{"function":{"arguments":{"a":1}}}]}]}`, false},
		{"null messages", `{"messages":null}`, false},
		{"null model", `{"model":null}`, false},
		{"null n", `{"n":null}`, false},
		{"null stream", `{"stream":null}`, false},
		{"key in capitals", `{"Model":"x"}`, false},
		{"duplicate key", `{"model":"a","model":"b"}`, false},
		{"duplicate name", `{"messages":[{"name":"a","name":"b"}]}`, false},
		{"fraction n", `{"n":1.0}`, false},
		{"exponent seed", `{"seed":1e3}`, false},
		{"overflow seed", `{"seed":9223372036854775808}`, false},
		{"huge temperature", `{"temperature":1e400}`, false},
		{"string temperature", `{"temperature":"1"}`, false},
		{"number stream", `{"stream":1}`, false},
		{"truthy", `{"stream":tru}`, false},
		{"true and more", `{"stream":truex}`, false},
		{"leading zero", `{"max_tokens":01}`, false},
		{"trailing", `{"model":"x"} {}`, false},
		{"cut", `{"model":"x"`, false},
		{"trailing comma", `{"model":"x",}`, false},
		{"array", `[]`, false},
		{"unknown key", `{"user":"u"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkDecodeRequest(t, []byte(tt.body)); got != tt.taken {
				t.Errorf("taken %v, want %v", got, tt.taken)
			}
		})
	}
}

// TestPlainKey checks PlainKey against DecodeRequest: a body of one
// key and a value of the plain shape is taken exactly when PlainKey says
// so.
func TestPlainKey(t *testing.T) {
	for key, value := range map[string]string{
		"model": `"m"`, "messages": `[]`, "temperature": `1`, "top_p": `1`, "frequency_penalty": `1`, "presence_penalty": `1`,
		"max_tokens": `1`, "max_completion_tokens": `1`, "n": `1`, "top_logprobs": `1`, "seed": `1`,
		"logprobs": `true`, "stream": `true`, "return_tokens_as_token_ids": `true`, "return_token_ids": `true`,
		"tools": `[]`, "tool_choice": `"auto"`, "stop": `"x"`, "logit_bias": `{}`, "user": `"u"`, "stream_options": `{}`,
		"parallel_tool_calls": `true`, "response_format": `{"type":"text"}`, "Model": `"m"`,
	} {
		var r ChatRequest
		if got, want := DecodeRequest([]byte(`{"`+key+`":`+value+`}`), &r), PlainKey(key); got != want {
			t.Errorf("%s: DecodeRequest took it %v, PlainKey says %v", key, got, want)
		}
	}
}

// FuzzDecodeRequest compares DecodeRequest with json.Unmarshal on any
// body.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		agentBody, `{}`, `{"messages":[{"content":null}],"temperature":null}`,
		`{"messages":[{"role":"tool","content":"x","tool_call_id":"c","name":"n"}],"seed":3,"stream":true,"logprobs":false,"n":2,"top_p":0.5}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeRequest(t, body) })
}

// BenchmarkDecodeRequest reads an agent's request with encoding/json
// (the reference) and with DecodeRequest.
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(agentBody)
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ChatRequest
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ChatRequest
			if !DecodeRequest(body, &r) {
				b.Fatal("not taken")
			}
		}
	})
}
