package modeltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
)

// conformanceWait bounds how long Conformance waits for a call before it
// declares the model hung. It is a hang guard, not a speed requirement.
const conformanceWait = 30 * time.Second

// Conformance checks that m keeps the delegate.Model contract. Every backend
// runs it from its own tests, against a loopback server, a tiny local model
// or a fake. It must pass under -race. It checks that:
//   - Name is not empty;
//   - a short text request gets a response with at least one choice, an
//     assistant message, a finish reason, and non-negative usage;
//   - eight concurrent calls all return, each with a response or an error;
//   - a context cancelled before the call gives an error, promptly;
//   - a context cancelled during the call makes it return, promptly.
//
// The model must answer any short user message; a backend that needs a
// scripted server sets that up before calling Conformance.
func Conformance(t *testing.T, m delegate.Model) {
	t.Helper()
	req := func() *delegate.Request {
		return &delegate.Request{
			Messages: []delegate.Message{
				delegate.System("You answer in one short sentence."),
				delegate.User("Say hello."),
			},
			MaxTokens: 16,
		}
	}

	t.Run("name", func(t *testing.T) {
		if m.Name() == "" {
			t.Errorf("Name() = %q, want a non-empty name", m.Name())
		}
	})

	t.Run("text reply", func(t *testing.T) {
		resp, err := callWithin(t, context.Background(), m, req())
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		checkResponse(t, resp)
	})

	t.Run("concurrent calls", func(t *testing.T) {
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		resps := make([]*delegate.Response, n)
		for i := range n {
			wg.Go(func() {
				resps[i], errs[i] = m.Chat(context.Background(), req())
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(conformanceWait):
			t.Fatalf("%d concurrent calls did not return within %v", n, conformanceWait)
		}
		for i := range n {
			if errs[i] != nil {
				t.Errorf("call %d: %v", i, errs[i])
				continue
			}
			checkResponse(t, resps[i])
		}
	})

	t.Run("cancelled before call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		resp, err := callWithin(t, ctx, m, req())
		if err == nil {
			t.Errorf("Chat with a cancelled context = %+v, nil; want an error", resp)
		}
	})

	t.Run("cancelled during call", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		// A response or an error are both fine here: a fast backend may finish
		// before the deadline. What is checked is that the call returns.
		_, _ = callWithin(t, ctx, m, req())
	})
}

// callWithin calls m.Chat and fails the test if it has not returned within
// conformanceWait.
func callWithin(t *testing.T, ctx context.Context, m delegate.Model, req *delegate.Request) (*delegate.Response, error) {
	t.Helper()
	type result struct {
		resp *delegate.Response
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := m.Chat(ctx, req)
		ch <- result{resp, err}
	}()
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-time.After(conformanceWait):
		t.Fatalf("Chat did not return within %v", conformanceWait)
		return nil, nil
	}
}

func checkResponse(t *testing.T, resp *delegate.Response) {
	t.Helper()
	if resp == nil {
		t.Fatal("Chat returned a nil response and a nil error")
	}
	if len(resp.Choices) == 0 {
		t.Fatal("response has no choices")
	}
	c := resp.Choices[0]
	if c.Message.Role != delegate.RoleAssistant {
		t.Errorf("choice role = %q, want %q", c.Message.Role, delegate.RoleAssistant)
	}
	if c.FinishReason == "" {
		t.Error("choice has no finish_reason")
	}
	u := resp.Usage
	if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 {
		t.Errorf("usage = %+v, want no negative count", u)
	}
	if u.CachedTokens > u.PromptTokens {
		t.Errorf("usage = %+v: cached tokens exceed prompt tokens", u)
	}
}
