// Package modeltest holds a scripted fake delegate.Model and the conformance suite.
// Tests use the fake and the helpers that build its responses in place of a
// real backend. Conformance is the suite every delegate.Model must pass.
//
// A fake is a name plus a function that answers each request. The fake is
// safe for concurrent use; its function may run on many goroutines at once
// and must be safe for that, as Script is. The fake records every request
// and fails at once for a context already done. It fills in what a test
// leaves out: the model name, a finish reason, and a usage counted by
// CountTokens.
package modeltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"github.com/delegatelab/delegate"
)

// Func answers one request. It receives the caller's context. A Func that
// blocks must return when the context is done: Chat waits for it, so a fake
// never leaves a goroutine behind. It may be called from many goroutines at
// once.
type Func func(ctx context.Context, req *delegate.Request) (*delegate.Response, error)

// Model is a scripted fake delegate.Model. Create it with New; its methods may
// be called from many goroutines at once.
type Model struct {
	name string
	fn   Func

	mu   sync.Mutex
	reqs []*delegate.Request
}

// New returns a fake model called name whose replies come from fn.
func New(name string, fn Func) *Model {
	return &Model{name: name, fn: fn}
}

// Name returns the name given to New.
func (m *Model) Name() string { return m.name }

// Chat records req, then answers it with the model's function. A context
// done before the call, or ending while the function runs, gives an error
// wrapping ctx.Err(). The response is the function's with the gaps filled.
// An empty Model becomes the fake's name. A choice with no finish reason
// gets "tool_calls" when it carries tool calls, else "stop". A zero usage is
// replaced by CountUsage; a non-zero usage is kept as given.
func (m *Model) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if req == nil {
		return nil, fmt.Errorf("chat %s: nil request", m.name)
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, cloneRequest(req))
	m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chat %s: %w", m.name, err)
	}
	resp, err := m.fn(ctx, req)
	if cerr := ctx.Err(); cerr != nil && err == nil {
		// The work was cut short: a real backend would not have answered.
		return nil, fmt.Errorf("chat %s: %w", m.name, cerr)
	}
	if err != nil {
		return resp, err
	}
	if resp == nil {
		return nil, fmt.Errorf("chat %s: script returned neither a response nor an error", m.name)
	}
	out := *resp
	out.Choices = append([]delegate.Choice(nil), resp.Choices...)
	if out.Model == "" {
		out.Model = m.name
	}
	for i := range out.Choices {
		c := &out.Choices[i]
		if c.Message.Role == "" {
			c.Message.Role = delegate.RoleAssistant
		}
		if c.FinishReason == "" {
			c.FinishReason = "stop"
			if len(c.Message.ToolCalls) > 0 {
				c.FinishReason = "tool_calls"
			}
		}
	}
	if out.Usage == (delegate.Usage{}) {
		out.Usage = CountUsage(req, &out)
	}
	return &out, nil
}

// Requests returns copies of the requests received so far, in arrival order.
func (m *Model) Requests() []*delegate.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*delegate.Request, len(m.reqs))
	for i, r := range m.reqs {
		out[i] = cloneRequest(r)
	}
	return out
}

// Calls returns how many requests the model has received.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

func cloneRequest(r *delegate.Request) *delegate.Request {
	c := *r
	c.Messages = make([]delegate.Message, len(r.Messages))
	for i, msg := range r.Messages {
		msg.ToolCalls = append([]delegate.ToolCall(nil), msg.ToolCalls...)
		c.Messages[i] = msg
	}
	c.Tools = append([]delegate.Tool(nil), r.Tools...)
	c.Stop = append([]string(nil), r.Stop...)
	return &c
}

// CountTokens is the fake's token count: the number of words in s.
// A word is a run of letters and digits or a single other non-space
// character, so "f(x) = 2" counts 6. It is cheap, deterministic and roughly
// proportional to a real tokenizer's count.
func CountTokens(s string) int {
	n := 0
	inWord := false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				n++
				inWord = true
			}
		case unicode.IsSpace(r):
			inWord = false
		default:
			n++
			inWord = false
		}
	}
	return n
}

// CountUsage is the usage the fake reports when its function leaves it zero.
// The prompt counts every request message's content and tool-call arguments,
// plus 3 per message for the role framing. The completion counts the first
// choice's content and tool-call names and arguments. Both use CountTokens.
func CountUsage(req *delegate.Request, resp *delegate.Response) delegate.Usage {
	var u delegate.Usage
	for _, m := range req.Messages {
		u.PromptTokens += 3 + CountTokens(m.Content)
		for _, tc := range m.ToolCalls {
			u.PromptTokens += CountTokens(tc.Name) + CountTokens(tc.Arguments)
		}
	}
	if resp != nil && len(resp.Choices) > 0 {
		msg := resp.Choices[0].Message
		u.CompletionTokens = CountTokens(msg.Content)
		for _, tc := range msg.ToolCalls {
			u.CompletionTokens += CountTokens(tc.Name) + CountTokens(tc.Arguments)
		}
	}
	return u
}

// Text returns a response whose one choice is an assistant message with
// content text, finished with "stop". Its usage is zero, so the fake fills it.
func Text(text string) *delegate.Response {
	return &delegate.Response{Choices: []delegate.Choice{{
		Message:      delegate.Assistant(text),
		FinishReason: "stop",
	}}}
}

// Truncated returns a text response finished with "length", as a generation
// cut by max_tokens is.
func Truncated(text string) *delegate.Response {
	r := Text(text)
	r.Choices[0].FinishReason = delegate.FinishLength
	return r
}

// ToolCalls returns a response whose one choice asks for calls, finished with
// "tool_calls".
func ToolCalls(calls ...delegate.ToolCall) *delegate.Response {
	return &delegate.Response{Choices: []delegate.Choice{{
		Message:      delegate.Message{Role: delegate.RoleAssistant, ToolCalls: calls},
		FinishReason: "tool_calls",
	}}}
}

// Call builds a tool call.
func Call(id, name, arguments string) delegate.ToolCall {
	return delegate.ToolCall{ID: id, Name: name, Arguments: arguments}
}

// WithUsage sets r's usage and returns r, for a test that wants exact
// figures rather than the fake's count.
func WithUsage(r *delegate.Response, prompt, completion int) *delegate.Response {
	r.Usage = delegate.Usage{PromptTokens: prompt, CompletionTokens: completion}
	return r
}

// Reply returns a Func that answers every request with text.
func Reply(text string) Func {
	return func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return Text(text), nil
	}
}

// Fail returns a Func that fails every request with err.
func Fail(err error) Func {
	return func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return nil, err
	}
}

// ErrScriptDone is returned by a Script asked for more responses than it has.
var ErrScriptDone = errors.New("modeltest: script exhausted")

// Script returns a Func that gives the responses in order, one per call, and
// ErrScriptDone once they are used up. Under concurrent calls the order in
// which callers get them is the order they arrive. It is safe for concurrent
// use.
func Script(responses ...*delegate.Response) Func {
	var mu sync.Mutex
	next := 0
	return func(context.Context, *delegate.Request) (*delegate.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(responses) {
			return nil, ErrScriptDone
		}
		r := responses[next]
		next++
		return r, nil
	}
}

// Block returns a Func that waits until ctx is done and returns its error.
// It acts as a slow backend whose caller gives up. A non-nil started gets
// one value per call as the call begins waiting; a full channel is skipped.
func Block(started chan<- struct{}) Func {
	return func(ctx context.Context, _ *delegate.Request) (*delegate.Response, error) {
		if started != nil {
			select {
			case started <- struct{}{}:
			default:
			}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

// LastUser returns the content of the last user message of req, or "" when
// there is none. Scripts use it to answer by question.
func LastUser(req *delegate.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == delegate.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// SystemPrompt returns the content of req's first system message, or "".
func SystemPrompt(req *delegate.Request) string {
	for _, m := range req.Messages {
		if m.Role == delegate.RoleSystem {
			return m.Content
		}
	}
	return ""
}

// Contains reports whether any message of req contains s.
func Contains(req *delegate.Request, s string) bool {
	for _, m := range req.Messages {
		if strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}
