package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai/wire"
)

// The streaming form of a chat completion: server-sent events, each
// "data: " and one chat.completion.chunk object, ending with "data: [DONE]".
//
// A model that implements Streamer (a local model does) has its content
// sent as it is generated; any other model's completion is sent once it is
// whole. Per choice the events are: the role, content pieces, each tool
// call (its id and name, then its arguments), and the finish reason with
// the choice's logprobs; then, when stream_options.include_usage is set, a
// last chunk with no choices and the usage. An error before the first
// event is an ordinary JSON error with its status; one after it is an
// event {"error":{...}} and the stream ends without [DONE]. The events
// carry the same checks as a non-streaming reply: a tool call always
// names a declared tool, and content sent early is never taken back
// (a model's pieces are a prefix of its final content).

// Streamer is a model that hands out its content while it generates it.
// ChatStream is Chat that calls emit with each new piece of a choice's content.
// It calls emit in order, from the goroutine that called ChatStream.
// The pieces of a choice put together are a prefix of its final content.
type Streamer interface {
	ChatStream(ctx context.Context, req *delegate.Request, emit func(choice int, text string)) (*delegate.Response, error)
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
	// A writer that cannot flush still delivers the events, at its end.
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		e.err = err
	}
}

// stream answers a request with stream: true. It returns the status
// answered, for the metrics, and the error written, for the hook.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, m delegate.Model, req *wire.ChatRequest, dreq *delegate.Request, id string, done func(*delegate.Response)) (int, *apiErr) {
	c := &chunks{w: w, out: &sse{w: w, rc: http.NewResponseController(w), timeout: s.writeTimeout},
		id: id, model: req.Model, created: time.Now().Unix()}
	var resp *delegate.Response
	var err error
	if st, ok := m.(Streamer); ok {
		resp, err = st.ChatStream(ctx, dreq, c.content)
	} else {
		resp, err = m.Chat(ctx, dreq)
	}
	if err != nil {
		e, gone := s.failed(ctx, req.Model, err)
		switch {
		case gone:
			return 499, nil
		case !c.started:
			writeError(w, e)
		default:
			c.out.event(e.body())
		}
		return e.Status, &e
	}
	s.answered(req.Model, resp, dreq.Tools, done)

	c.begin()
	for i := range resp.Choices {
		if !c.finish(i, &resp.Choices[i], req, resp) {
			// A Streamer broke its contract; the client has what it has.
			s.log.Error("streamed content is not a prefix of the final content", "model", req.Model, "choice", i)
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		last := c.chunk()
		last.Choices = []wire.ChunkChoice{}
		last.Usage = toWireUsage(resp.Usage)
		c.out.event(last)
	}
	c.out.raw([]byte("[DONE]"))
	if c.out.err != nil {
		s.log.Debug("stream cut", "model", req.Model, "err", c.out.err)
		return 499, nil
	}
	return http.StatusOK, nil
}

// chunks writes one response's chunks and keeps what each choice was sent.
type chunks struct {
	w       http.ResponseWriter
	out     *sse
	id      string
	model   string
	created int64    // every chunk of a response carries its creation time
	started bool     // the status line and headers are out
	sent    []string // content sent per choice
	opened  []bool   // whether the choice's role is sent
}

func (c *chunks) chunk(choices ...wire.ChunkChoice) wire.ChatChunk {
	return wire.ChatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model, Choices: choices}
}

// begin writes the status line and headers, once.
func (c *chunks) begin() {
	if c.started {
		return
	}
	c.started = true
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
}

// open sends choice i's role, once.
func (c *chunks) open(i int) {
	for len(c.sent) <= i {
		c.sent = append(c.sent, "")
		c.opened = append(c.opened, false)
	}
	if !c.opened[i] {
		c.opened[i] = true
		empty := ""
		c.out.event(c.chunk(wire.ChunkChoice{Index: i, Delta: wire.Delta{Role: "assistant", Content: &empty}}))
	}
}

// content sends a piece of choice i's content as it is generated: a
// Streamer's emit.
func (c *chunks) content(i int, text string) {
	c.begin()
	c.open(i)
	c.sent[i] += text
	c.out.event(c.chunk(wire.ChunkChoice{Index: i, Delta: wire.Delta{Content: &text}}))
}

// finish sends the rest of choice i. That is the content not yet sent,
// each tool call, then the finish reason with the logprobs. It reports
// false when the content sent is not a prefix of ch's, and then sends no
// more of it.
func (c *chunks) finish(i int, ch *delegate.Choice, req *wire.ChatRequest, resp *delegate.Response) bool {
	c.open(i)
	rest, ok := strings.CutPrefix(ch.Message.Content, c.sent[i])
	if ok && rest != "" {
		c.out.event(c.chunk(wire.ChunkChoice{Index: i, Delta: wire.Delta{Content: &rest}}))
	}
	for j, tc := range ch.Message.ToolCalls {
		var d wire.ToolCallDelta
		d.Index, d.ID, d.Type, d.Function.Name = j, tc.ID, "function", tc.Name
		c.out.event(c.chunk(wire.ChunkChoice{Index: i, Delta: wire.Delta{ToolCalls: []wire.ToolCallDelta{d}}}))
		var a wire.ToolCallDelta
		a.Index, a.Function.Arguments = j, tc.Arguments
		c.out.event(c.chunk(wire.ChunkChoice{Index: i, Delta: wire.Delta{ToolCalls: []wire.ToolCallDelta{a}}}))
	}
	finish := ch.FinishReason
	last := c.chunk(wire.ChunkChoice{Index: i, FinishReason: &finish, Logprobs: wireLogprobsOf(ch.Logprobs, req.ReturnTokensAsTokenIDs)})
	if i == 0 {
		last.PromptTokenIDs = promptIDs(req, resp)
	}
	last.PolicyVersion = resp.PolicyVersion
	c.out.event(last)
	return ok
}
