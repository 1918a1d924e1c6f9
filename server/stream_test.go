package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/server"
)

// shippedServer serves the shipped checkpoints of models/ and returns an official OpenAI Go client for it.
// It uses the system prompts they were trained with, from examples/world.yaml,
// behind an API key, over real loopback HTTP.
func shippedServer(t *testing.T) openai.Client {
	t.Helper()
	const key = "sk-stream-test-key"
	open := func(name string) *local.Model {
		p, _, err := nn.Load("../models/" + name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := local.New(p, local.Config{Name: name, MaxBatch: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) {
		c.APIKey, c.System = key, map[string]string{"delegator": "Solve or delegate.", "solver": "Compute."}
	}), nil, open("delegator"), open("solver"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func TestServerStreamOfficialClient(t *testing.T) {
	c := shippedServer(t)
	ctx := context.Background()

	// The solver, no system message (the server adds "Compute."), usage
	// asked for at the end of the stream.
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "solver",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("56*23")},
		Temperature:   openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	chunks, pieces, ids := 0, 0, map[string]bool{}
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) == 1 && ch.Choices[0].Delta.Content != "" {
			pieces++
		}
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("chunk object %q", ch.Object)
		}
		ids[ch.ID] = true
		acc.AddChunk(ch)
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(acc.Choices) != 1 || !strings.Contains(acc.Choices[0].Message.Content, `\boxed{1288}`) || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("solver streamed %+v, want \\boxed{1288} and stop", acc.Choices)
	}
	if acc.Usage.CompletionTokens <= 0 || acc.Usage.TotalTokens != acc.Usage.PromptTokens+acc.Usage.CompletionTokens {
		t.Errorf("usage chunk: %+v", acc.Usage)
	}
	t.Logf("solver: %d chunks, %d with content", chunks, pieces)
	if chunks < 4 || len(ids) != 1 {
		t.Errorf("%d chunks with ids %v, want role, content, finish and usage chunks under one id", chunks, ids)
	}

	// The delegator with the delegate tool: a tool call streamed as
	// deltas, naming the tool, with a JSON object as arguments.
	delegateTool := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "delegate"})
	problem := "Ann has 56 boxes of 23 pens. Ann gets 41 more. How many pens does Ann have?"
	stream = c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:       "delegator",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(problem)},
		Tools:       []openai.ChatCompletionToolUnionParam{delegateTool},
		Temperature: openai.Float(0),
	})
	acc = openai.ChatCompletionAccumulator{}
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("tool stream: %v", err)
	}
	if len(finished) != 1 || finished[0].Name != "delegate" || finished[0].ID == "" {
		t.Fatalf("finished tool calls %+v, want one delegate call", finished)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(finished[0].Arguments), &args); err != nil || args["question"] != "56*23" {
		t.Errorf("arguments %q, want {\"question\":\"56*23\"}", finished[0].Arguments)
	}
	if acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish reason %q, want tool_calls", acc.Choices[0].FinishReason)
	}

	// Route over HTTP, as the strategy does: each delegate call goes to
	// the solver (whose whole reply is the tool's result), until the
	// delegator answers. The first turn was the stream above.
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(problem), acc.Choices[0].Message.ToParam()}
	call := finished[0]
	for turn := 2; ; turn++ {
		sol, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "solver", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(args["question"])}, Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, openai.ToolMessage(sol.Choices[0].Message.Content, call.ID))
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "delegator", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{delegateTool}, Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		if len(ch.Message.ToolCalls) == 0 {
			if !strings.Contains(ch.Message.Content, `\boxed{1329}`) || ch.FinishReason != "stop" {
				t.Errorf("turn %d: the delegator answered %q (%s), want \\boxed{1329}", turn, ch.Message.Content, ch.FinishReason)
			}
			break
		}
		if turn == 4 {
			t.Fatalf("no answer after %d turns: %+v", turn, msgs)
		}
		tc := ch.Message.ToolCalls[0]
		if tc.Function.Name != "delegate" || json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil {
			t.Fatalf("turn %d: tool call %+v", turn, tc.Function)
		}
		call = openai.FinishedChatCompletionToolCall{ID: tc.ID}
		msgs = append(msgs, ch.Message.ToParam())
	}
}

// TestServerUndeclaredToolOfficialClient declares a tool the shipped model never learned.
// Whatever it writes, streaming or not, every tool call that comes back
// names a declared tool with a JSON object as arguments.
func TestServerUndeclaredToolOfficialClient(t *testing.T) {
	c := shippedServer(t)
	ctx := context.Background()
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})
	params := openai.ChatCompletionNewParams{
		Model:    "delegator",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weather},
		Seed:     openai.Int(1),
	}
	check := func(how string, ch openai.ChatCompletionChoice) {
		t.Helper()
		for _, tc := range ch.Message.ToolCalls {
			var obj map[string]any
			if tc.Function.Name != "get_weather" || json.Unmarshal([]byte(tc.Function.Arguments), &obj) != nil {
				t.Errorf("%s: tool call %+v names no declared tool or lacks JSON object arguments", how, tc.Function)
			}
		}
		// The shipped delegator writes a malformed call here (it never saw
		// get_weather): it must come back as text, not vanish.
		if len(ch.Message.ToolCalls) == 0 && (ch.Message.Content == "" || ch.FinishReason != "stop" && ch.FinishReason != "length") {
			t.Errorf("%s: no tool calls, content %q, finish reason %q; want the model's text and stop", how, ch.Message.Content, ch.FinishReason)
		}
	}
	for _, temp := range []float64{0, 1} {
		params.Temperature = openai.Float(temp)
		resp, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		check("non-streaming", resp.Choices[0])
		stream := c.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		check("streaming", acc.Choices[0])
	}
}

// events reads a server-sent-event body into its data lines.
func events(t *testing.T, body string) (data []string, done bool) {
	t.Helper()
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		d, ok := strings.CutPrefix(block, "data: ")
		if !ok || strings.Contains(d, "\n") {
			t.Fatalf("event %q is not one data line", block)
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("event %q after [DONE]", d)
		}
		data = append(data, d)
	}
	return data, done
}

// TestServerStreamWholeAnswer streams from a model that is not a Streamer.
// The chunks carry its content, calls and usage once the answer is in.
func TestServerStreamWholeAnswer(t *testing.T) {
	m := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		r := modeltest.ToolCalls(delegate.ToolCall{ID: "call_1", Name: "delegate", Arguments: `{"question":"2+2"}`})
		r.Choices[0].Message.Content = "Asking."
		return r, nil
	})
	srv := serve(t, m)
	status, h, body := do(t, "POST", srv.URL+"/v1/chat/completions", "",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"delegate"}}],"messages":[{"role":"user","content":"x"}]}`)
	if status != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q %s", status, h.Get("Content-Type"), body)
	}
	data, done := events(t, body)
	if !done {
		t.Error("no [DONE]")
	}
	type chunk struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Delta struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	var content, name, args, finish string
	var ids = map[string]bool{}
	var usage int
	for _, d := range data {
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		ids[c.ID] = true
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object %q", c.Object)
		}
		if c.Usage != nil {
			usage = c.Usage.TotalTokens
			if len(c.Choices) != 0 {
				t.Error("the usage chunk has choices")
			}
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if content != "Asking." || name != "delegate" || args != `{"question":"2+2"}` || finish != "tool_calls" || usage <= 0 || len(ids) != 1 {
		t.Errorf("stream gave content %q call %s%s finish %q usage %d ids %v", content, name, args, finish, usage, ids)
	}
}

// failing streams a piece, then fails.
type failing struct{}

func (failing) Name() string { return "m" }

func (failing) Chat(context.Context, *delegate.Request) (*delegate.Response, error) {
	return nil, &delegate.APIError{Status: 500, Type: "server_error", Message: "engine died"}
}

func (f failing) ChatStream(_ context.Context, _ *delegate.Request, emit func(int, string)) (*delegate.Response, error) {
	emit(0, "Partial")
	return f.Chat(context.Background(), nil)
}

func TestServerStreamErrors(t *testing.T) {
	srv := serve(t, failing{})
	status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if status != 200 {
		t.Fatalf("status %d after the stream began", status)
	}
	data, done := events(t, body)
	if done || len(data) < 3 || !strings.Contains(data[1], "Partial") {
		t.Fatalf("events %q, [DONE] %v; want role, content, then an error and no [DONE]", data, done)
	}
	checkErrorShape(t, data[len(data)-1])

	// Before any event, an error is an ordinary JSON error.
	srv2 := serve(t, modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return nil, &delegate.APIError{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "too long"}
	}))
	status, h, body := do(t, "POST", srv2.URL+"/v1/chat/completions", "", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if status != 400 || h.Get("Content-Type") != "application/json" {
		t.Errorf("early error: %d %q", status, h.Get("Content-Type"))
	}
	if e := checkErrorShape(t, body); e.Error.Code == nil || *e.Error.Code != "context_length_exceeded" {
		t.Errorf("early error body %s", body)
	}
}
