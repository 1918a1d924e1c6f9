package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// agentBody is an agent's short conversation, the body perf/gateway
// sends.
const agentBody = `{"model":"standin","messages":[{"role":"system","content":"Solve or delegate."},{"role":"user","content":"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"}],"temperature":0}`

// BenchmarkRequest decodes and validates an agent's request, as the
// server does with each.
func BenchmarkRequest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var r ChatRequest
		if err := json.Unmarshal([]byte(agentBody), &r); err != nil {
			b.Fatal(err)
		}
		if err := r.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResponse decodes a response of a few hundred bytes of text,
// as the stand-in answers, with usage.
func BenchmarkResponse(b *testing.B) {
	text := strings.Repeat("The product of the two numbers is worked out digit by digit. ", 7)
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"standin","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		text + `Final answer: \\boxed{3719}"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":100,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":0}}}`)
	b.ReportAllocs()
	for b.Loop() {
		var r ChatResponse
		if err := json.Unmarshal(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}
