package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/tokenizer"
)

// client is go-openai, a third-party OpenAI client library.
// The server is then checked against someone else's reading of the wire format.
func client(t *testing.T, h http.Handler) *goopenai.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := goopenai.DefaultConfig("test-key-not-secret")
	cfg.BaseURL = srv.URL + "/v1"
	return goopenai.NewClientWithConfig(cfg)
}

func TestThirdPartyClientToolCalls(t *testing.T) {
	fake := modeltest.New("scripted", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == delegate.RoleTool {
			return modeltest.Text("The answer is \\boxed{12}."), nil
		}
		if len(req.Tools) != 1 || req.Tools[0].Name != "delegate" {
			return nil, errors.New("tool not offered")
		}
		return modeltest.ToolCalls(
			delegate.ToolCall{ID: "call_a", Name: "delegate", Arguments: `{"question":"3*4?"}`},
			delegate.ToolCall{ID: "call_b", Name: "delegate", Arguments: `{"question":"2+2?"}`},
		), nil
	})
	s, err := server.New(nil, fake)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	tools := []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
		Name: "delegate", Description: "ask a small model", Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`),
	}}}
	msgs := []goopenai.ChatCompletionMessage{{Role: "user", Content: "What is 3*4?"}}
	resp, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "scripted", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != goopenai.FinishReasonToolCalls || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("choice = %+v, want two tool calls", ch)
	}
	if got := ch.Message.ToolCalls[0].Function.Arguments; got != `{"question":"3*4?"}` {
		t.Errorf("arguments = %q", got)
	}
	if resp.Usage.PromptTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage = %+v", resp.Usage)
	}
	msgs = append(msgs, ch.Message,
		goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_a", Content: "12"},
		goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_b", Content: "4"})
	resp, err = c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "scripted", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; !strings.Contains(got, `\boxed{12}`) {
		t.Errorf("final content = %q", got)
	}
	got := fake.Requests()[1].Messages
	if len(got) != 4 || got[1].ToolCalls[1].ID != "call_b" || got[3].ToolCallID != "call_b" || got[3].Content != "4" {
		t.Errorf("tool turn reached the model as %+v", got)
	}
	models, err := c.ListModels(context.Background())
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "scripted" {
		t.Errorf("models = %+v, %v", models, err)
	}
	_, err = c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "nope", Messages: msgs})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 {
		t.Errorf("unknown model: err = %v, want a 404 API error", err)
	}
}

func TestLocalModelLogprobsAndBatching(t *testing.T) {
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, Context: 256}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(3)
	m, err := local.New(p, local.Config{Name: "tiny", MaxNew: 12, MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := server.New(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	// 16 requests at once, again while the engine never ran two together:
	// on a loaded machine one burst can arrive one request at a time.
	for burst := 0; burst < 5 && m.Stats().MaxActive < 2; burst++ {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seed := i
				resp, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
					Model: "tiny", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hello"}},
					LogProbs: true, TopLogProbs: 2, MaxCompletionTokens: 12, Seed: &seed,
				})
				if err != nil {
					errs <- err
					return
				}
				lp := resp.Choices[0].LogProbs
				if lp == nil || len(lp.Content) != resp.Usage.CompletionTokens {
					errs <- errors.New("logprobs do not cover every completion token")
					return
				}
				for _, tok := range lp.Content {
					if tok.LogProb > 0 || len(tok.TopLogProbs) != 2 || tok.TopLogProbs[0].LogProb < tok.TopLogProbs[1].LogProb {
						errs <- errors.New("bad logprob entry")
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if st := m.Stats(); st.MaxActive < 2 {
		t.Errorf("engine never batched concurrent requests: %+v", st)
	}
}

func TestBadRequests(t *testing.T) {
	srv := serve(t, modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("ok"), nil
	}))
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"not json", `{"model":`, 400, "not a chat completion request"},
		{"no messages", `{"model":"m","messages":[]}`, 400, "messages"},
		{"bad role", `{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, 400, "unknown role"},
		{"stream options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"stream_options"`},
		{"negative max_tokens", `{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"max_tokens"`},
		{"negative max_completion_tokens", `{"model":"m","max_completion_tokens":-5,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"max_completion_tokens"`},
		{"negative temperature", `{"model":"m","temperature":-1,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"temperature"`},
		{"top_p over 1", `{"model":"m","top_p":1.5,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"top_p"`},
		{"trailing garbage", `{"model":"m","messages":[{"role":"user","content":"x"}]}garbage`, 400, "data after the JSON object"},
		{"second object", `{"model":"m","messages":[{"role":"user","content":"x"}]} {}`, 400, "data after the JSON object"},
		{"trailing space is fine", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}\n  ", 200, `"content":"ok"`},
		{"unknown model", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404, `"code":"model_not_found"`},
		{"image part", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "text parts"},
		{"n over the server's limit", `{"model":"m","n":65,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"n"`},
		{"n over the format's limit", `{"model":"m","n":129,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"n"`},
		{"tool message without id", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"5"}]}`, 400, `"param":"messages[1].tool_call_id"`},
		{"stop of numbers", `{"model":"m","stop":[1],"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"stop"`},
		{"unknown tool_choice", `{"model":"m","tool_choice":"sometimes","messages":[{"role":"user","content":"x"}]}`, 400, `"param":"tool_choice"`},
		{"ok with parts", `{"model":"m","stop":"x","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`, 200, `"content":"ok"`},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"model"`},
		{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"max_tokens"`},
		{"max_completion_tokens 0", `{"model":"m","max_completion_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"max_completion_tokens"`},
		{"max_tokens null is the default", `{"model":"m","max_tokens":null,"messages":[{"role":"user","content":"x"}]}`, 200, `"content":"ok"`},
		{"max_tokens 1", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, 200, `"content":"ok"`},
		{"tool message answering no call", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"call_9","content":"5"}]}`, 400, `"param":"messages[1].tool_call_id"`},
		{"five stops", `{"model":"m","stop":["a","b","c","d","e"],"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"stop"`},
		{"top_logprobs without logprobs", `{"model":"m","top_logprobs":3,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"top_logprobs"`},
		{"presence_penalty over 2", `{"model":"m","presence_penalty":2.5,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"presence_penalty"`},
		{"frequency_penalty under -2", `{"model":"m","frequency_penalty":-3,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"frequency_penalty"`},
		{"frequency_penalty not a number", `{"model":"m","frequency_penalty":"high","messages":[{"role":"user","content":"x"}]}`, 400, `"param":"frequency_penalty"`},
		{"penalties in range", `{"model":"m","presence_penalty":-2,"frequency_penalty":2,"messages":[{"role":"user","content":"x"}]}`, 200, `"content":"ok"`},
		{"model of the wrong type", `{"model":5,"messages":[{"role":"user","content":"x"}]}`, 400, `"param":"model"`},
		{"invalid UTF-8 in content", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}", 400, `"param":"messages[0].content"`},
		{"invalid UTF-8 in a part", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xc3\"}]}]}", 400, `"param":"messages[1].content[0].text"`},
		{"invalid UTF-8 in a key", "{\"model\":\"m\",\"\xfe\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "invalid UTF-8"},
		{"lone surrogate escape", `{"model":"m","messages":[{"role":"user","content":"a\ud800b"}]}`, 400, `"param":"messages[0].content"`},
		{"lone low surrogate escape", `{"model":"m","stop":"\udc00","messages":[{"role":"user","content":"x"}]}`, 400, `"param":"stop"`},
		{"surrogate pair escape is fine", `{"model":"m","messages":[{"role":"user","content":"\ud83d\ude00 \\ud800"}]}`, 200, `"content":"ok"`},
		{"invalid UTF-8 outside JSON", "\xff", 400, "invalid UTF-8 at byte 0"},
		{"array body", `[]`, 400, "want a JSON object"},
		{"unknown message field", `{"model":"m","messages":[{"role":"user","content":"x","cache_control":{"type":"ephemeral"}}]}`, 400, `"param":"messages[0].cache_control"`},
		{"unknown field in a later message", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":"y","weight":2}]}`, 400, `"param":"messages[1].weight"`},
		{"refusal null is left out", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","refusal":null,"annotations":null},{"role":"user","content":"z"}]}`, 200, `"content":"ok"`},
		{"a refusal is refused", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"refusal":"no"},{"role":"user","content":"z"}]}`, 400, `"param":"messages[1].refusal"`},
		{"unknown part field", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{}}]}]}`, 400, `"param":"messages[0].content[0].cache_control"`},
		{"a part copying its message's role and tool calls", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"text","text":"y","role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`, 200, `"content":"ok"`},
		{"a part's tool calls differing from its message's", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"text","text":"y","tool_calls":[{"id":"d","type":"function","function":{"name":"f","arguments":"{}"}}]}],"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`, 400, `"param":"messages[1].content[0].tool_calls"`},
		{"a part's role differing from its message's", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","role":"system"}]}]}`, 400, `"param":"messages[0].content[0].role"`},
		{"image in a part", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]}`, 400, `"param":"messages[0].content[0].image_url"`},
		{"unknown tool call field", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"index":0}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`, 400, `"param":"messages[1].tool_calls[0].index"`},
		{"unknown tool call function field", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}","parsed":{}}}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`, 400, `"param":"messages[1].tool_calls[0].function.parsed"`},
		{"duplicate keys are each checked", `{"model":"m","messages":[{"role":"user","role":"user","content":"x","zz":1}]}`, 400, `"param":"messages[0].zz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			b.Write(buf[:n])
			if resp.StatusCode != tt.status || !strings.Contains(b.String(), tt.want) {
				t.Errorf("status %d body %s; want %d containing %q", resp.StatusCode, b.String(), tt.status, tt.want)
			}
		})
	}
	resp, err := http.Get(srv.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("health: %v %v", resp, err)
	}
}

// TestBrowserPagesAreRefused sends what a browser's web page on the same machine can send to a loopback server.
// That is a rebound Host and a cross-site form post.
func TestBrowserPagesAreRefused(t *testing.T) {
	s, err := server.New(nil, modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("hi"), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name   string
		host   string
		header map[string]string
		want   int
	}{
		{name: "a plain client", header: map[string]string{"Content-Type": "application/json"}, want: 200},
		{name: "DNS rebinding", host: "attacker.example:80", header: map[string]string{"Content-Type": "application/json"}, want: 403},
		{name: "cross-site text/plain post", header: map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "text/plain without browser headers", header: map[string]string{"Content-Type": "text/plain"}, want: 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Error struct{ Code *string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&e) // the status is the check; the shape below
			_ = resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want != 200 && e.Error.Code == nil {
				t.Errorf("refusal is not OpenAI's error object")
			}
		})
	}
}

// manyBiases is n members of a logit_bias object.
func manyBiases(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"%d":1`, i)
	}
	return strings.Join(parts, ",")
}

func TestServerParameters(t *testing.T) {
	srv := serve(t, okModel("m"))
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, params string // params: the request's other fields, each followed by a comma
		status       int
		param        string // the param a 400 names
	}{
		{"user is a no-op", `"user":"u-1",`, 200, ""},
		{"user of the wrong type", `"user":5,`, 400, "user"},
		{"metadata is a no-op", `"metadata":{"run":"a"},`, 200, ""},
		{"metadata of numbers", `"metadata":{"run":1},`, 400, "metadata"},
		{"store false", `"store":false,`, 200, ""},
		{"store true", `"store":true,`, 400, "store"},
		{"text modality", `"modalities":["text"],`, 200, ""},
		{"audio modality", `"modalities":["text","audio"],`, 400, "modalities"},
		{"prompt_cache_key is a no-op", `"prompt_cache_key":"k",`, 200, ""},
		{"safety_identifier is a no-op", `"safety_identifier":"s",`, 200, ""},
		{"null is left out", `"audio":null,"store":null,`, 200, ""},
		{"functions", `"functions":[{"name":"f"}],`, 400, "functions"},
		{"function_call", `"function_call":"auto",`, 400, "function_call"},
		{"audio", `"audio":{"voice":"alloy","format":"wav"},`, 400, "audio"},
		{"prediction", `"prediction":{"type":"content","content":"x"},`, 400, "prediction"},
		{"reasoning_effort", `"reasoning_effort":"low",`, 400, "reasoning_effort"},
		{"service_tier", `"service_tier":"auto",`, 400, "service_tier"},
		{"web_search_options", `"web_search_options":{},`, 400, "web_search_options"},
		{"verbosity", `"verbosity":"low",`, 400, "verbosity"},
		{"vLLM's top_k", `"top_k":5,`, 400, "top_k"},
		{"a made-up field", `"temprature":0.5,`, 400, "temprature"},
		{"a made-up field of null", `"temprature":null,`, 400, "temprature"},
		// Left to constrained decoding: never refused here, the penalties
		// checked for range only.
		{"parallel_tool_calls", `"parallel_tool_calls":false,`, 200, ""},
		{"logit_bias", `"logit_bias":{"50256":-100},`, 200, ""},
		{"logit_bias past its bound", `"logit_bias":{` + manyBiases(server.MaxLogitBias+1) + `},`, 400, "logit_bias"},
		{"response_format", `"response_format":{"type":"text"},`, 200, ""},
		// Inside objects too, a field the server does not act on is
		// refused, and OpenAI's own are accepted as null only.
		{"unknown stream option", `"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false},`, 400, "stream_options.include_obfuscation"},
		{"unknown response_format field", `"response_format":{"type":"json_object","strict":true},`, 400, "response_format.strict"},
		{"unknown json_schema field", `"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{},"strct":true}},`, 400, "response_format.json_schema.strct"},
		{"unknown tool field", `"tools":[{"type":"function","function":{"name":"f"},"cache_control":{}}],`, 400, "tools[0].cache_control"},
		{"unknown function field", `"tools":[{"type":"function","function":{"name":"f","examples":[]}}],`, 400, "tools[0].function.examples"},
		{"unknown tool_choice field", `"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f","args":{}}},`, 400, "tool_choice.function.args"},
		{"known nested fields", `"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":false}}],"tool_choice":{"type":"function","function":{"name":"f"}},"response_format":{"type":"json_schema","json_schema":{"name":"a","description":"d","schema":{},"strict":false}},`, 200, ""},
		{"supported ones", `"n":2,"seed":1,"temperature":0,"top_p":1,"stop":["a"],"logprobs":true,"top_logprobs":1,"return_token_ids":true,"max_completion_tokens":4,`, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model":"m",`+tt.params+msgs+`}`)
			if status != tt.status {
				t.Fatalf("status = %d, want %d (%s)", status, tt.status, body)
			}
			if tt.status != 200 {
				e := checkErrorShape(t, body)
				if e.Error.Param == nil || *e.Error.Param != tt.param {
					t.Errorf("param = %v, want %q (%s)", e.Error.Param, tt.param, body)
				}
			}
		})
	}
}
