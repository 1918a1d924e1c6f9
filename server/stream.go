package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/delegatelab/delegate"
)

// The streaming form of a chat completion: server-sent events, each
// "data: " and one chat.completion.chunk object, ending with "data: [DONE]".
//
// The model's Chat interface returns a completion whole (the local engine
// has no per-token hook), so the events are sent once the generation is
// done: per choice, the role, the content, each tool call (its id and name,
// then its arguments), and the finish reason with the choice's logprobs;
// then, when stream_options.include_usage is set, a last chunk with no
// choices and the usage. An error before the first event is an ordinary
// JSON error with its status; the events carry the same checks as a
// non-streaming reply (a tool call always names a declared tool).

type wireChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []wireChunkChoice `json:"choices"`
	Usage   *wireUsage        `json:"usage,omitempty"`
	// PromptTokenIDs as vLLM returns them, in the first chunk, when asked.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

type wireChunkChoice struct {
	Index        int           `json:"index"`
	Delta        wireDelta     `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *wireLogprobs `json:"logprobs,omitempty"`
}

type wireDelta struct {
	Role      string              `json:"role,omitempty"`
	Content   *string             `json:"content,omitempty"`
	ToolCalls []wireToolCallDelta `json:"tool_calls,omitempty"`
}

type wireToolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// sse writes events, pushing the write deadline forward before each.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error // the first failed write; later events are dropped
}

func (e *sse) event(v any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = fmt.Errorf("encode event: %w", err)
		return
	}
	e.raw(b)
}

func (e *sse) raw(data []byte) {
	if e.err != nil {
		return
	}
	if e.timeout > 0 {
		// Not every ResponseWriter has deadlines; then there is none to push.
		_ = e.rc.SetWriteDeadline(time.Now().Add(e.timeout))
	}
	if _, err := fmt.Fprintf(e.w, "data: %s\n\n", data); err != nil {
		e.err = err
		return
	}
	e.err = e.rc.Flush()
}

// stream answers a request with stream: true and returns the status
// answered, for the metrics.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, m delegate.Model, req *wireRequest, dreq *delegate.Request, id string) int {
	resp, err := m.Chat(ctx, dreq)
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != errDeadline {
			return 499
		}
		e := modelError(ctx, err)
		s.logFailure(req.Model, e, err)
		writeError(w, e.Status, e)
		return e.Status
	}
	keepDeclaredCalls(resp, dreq.Tools)
	s.served.Add(1)
	s.metrics.tokens(req.Model, resp.Usage)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, rc: http.NewResponseController(w), timeout: s.writeTimeout}
	chunk := func(choices ...wireChunkChoice) wireChunk {
		return wireChunk{ID: id, Object: "chat.completion.chunk", Created: s.created, Model: req.Model, Choices: choices}
	}
	for i, c := range resp.Choices {
		empty := ""
		first := chunk(wireChunkChoice{Index: i, Delta: wireDelta{Role: "assistant", Content: &empty}})
		if i == 0 {
			first.PromptTokenIDs = req.promptIDs(resp)
		}
		out.event(first)
		if c.Message.Content != "" {
			text := c.Message.Content
			out.event(chunk(wireChunkChoice{Index: i, Delta: wireDelta{Content: &text}}))
		}
		for j, tc := range c.Message.ToolCalls {
			var d wireToolCallDelta
			d.Index, d.ID, d.Type, d.Function.Name = j, tc.ID, "function", tc.Name
			out.event(chunk(wireChunkChoice{Index: i, Delta: wireDelta{ToolCalls: []wireToolCallDelta{d}}}))
			var a wireToolCallDelta
			a.Index, a.Function.Arguments = j, tc.Arguments
			out.event(chunk(wireChunkChoice{Index: i, Delta: wireDelta{ToolCalls: []wireToolCallDelta{a}}}))
		}
		finish := c.FinishReason
		out.event(chunk(wireChunkChoice{Index: i, FinishReason: &finish, Logprobs: wireLogprobsOf(c.Logprobs, req.ReturnTokensAsTokenIDs)}))
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		last := chunk()
		last.Choices = []wireChunkChoice{}
		last.Usage = toWireUsage(resp.Usage)
		out.event(last)
	}
	out.raw([]byte("[DONE]"))
	if out.err != nil {
		s.log.Debug("stream cut", "model", req.Model, "err", out.err)
		return 499
	}
	return http.StatusOK
}
