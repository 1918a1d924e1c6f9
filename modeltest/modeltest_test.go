package modeltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
)

func TestConformance(t *testing.T) {
	Conformance(t, New("fake", Reply("Hello there.")))
}

func TestConformanceBlockingModel(t *testing.T) {
	// A model that only ever answers when its context ends must still pass.
	// The plain and concurrent calls get a model that replies; the
	// cancellation checks get one that blocks.
	m := New("slow", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
			return Text("hi"), nil
		}
	})
	Conformance(t, m)
}

func TestChatFillsGaps(t *testing.T) {
	tests := []struct {
		name       string
		resp       *delegate.Response
		wantFinish string
		wantUsage  delegate.Usage
	}{
		{
			name:       "text",
			resp:       Text("two words"),
			wantFinish: "stop",
			// prompt: 3 + 2 ("Say hi") ; completion: 2
			wantUsage: delegate.Usage{PromptTokens: 5, CompletionTokens: 2},
		},
		{
			name:       "tool call",
			resp:       &delegate.Response{Choices: []delegate.Choice{{Message: delegate.Message{ToolCalls: []delegate.ToolCall{Call("c1", "delegate", `{"question":"x"}`)}}}}},
			wantFinish: "tool_calls",
			// completion: "delegate" 1 + { " question " : " x " } = 1 + 9
			wantUsage: delegate.Usage{PromptTokens: 5, CompletionTokens: 10},
		},
		{
			name:       "given usage kept",
			resp:       WithUsage(Truncated("cut"), 100, 7),
			wantFinish: "length",
			wantUsage:  delegate.Usage{PromptTokens: 100, CompletionTokens: 7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New("fake", Script(tt.resp))
			got, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("Say hi")}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != "fake" {
				t.Errorf("Model = %q, want %q", got.Model, "fake")
			}
			if got.Choices[0].Message.Role != delegate.RoleAssistant {
				t.Errorf("role = %q, want assistant", got.Choices[0].Message.Role)
			}
			if got.Choices[0].FinishReason != tt.wantFinish {
				t.Errorf("finish = %q, want %q", got.Choices[0].FinishReason, tt.wantFinish)
			}
			if got.Usage != tt.wantUsage {
				t.Errorf("usage = %+v, want %+v", got.Usage, tt.wantUsage)
			}
		})
	}
}

func TestCountTokens(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"   ", 0},
		{"hello", 1},
		{"hello world", 2},
		{"f(x) = 2", 6},
		{"héllo wörld 42", 3},
		{"a\nb\tc", 3},
	}
	for _, tt := range tests {
		if got := CountTokens(tt.in); got != tt.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestRequestsRecordedAndCopied(t *testing.T) {
	m := New("fake", Reply("ok"))
	req := &delegate.Request{Messages: []delegate.Message{delegate.User("first")}}
	if _, err := m.Chat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	req.Messages[0].Content = "changed after the call"
	got := m.Requests()
	if len(got) != 1 {
		t.Fatalf("Requests() has %d requests, want 1", len(got))
	}
	if c := got[0].Messages[0].Content; c != "first" {
		t.Errorf("recorded content = %q, want %q (the fake must copy requests)", c, "first")
	}
	got[0].Messages[0].Content = "mutated copy"
	if c := m.Requests()[0].Messages[0].Content; c != "first" {
		t.Errorf("Requests() handed out the fake's own copy: content now %q", c)
	}
}

func TestScriptConcurrent(t *testing.T) {
	const n = 50
	resps := make([]*delegate.Response, n)
	for i := range resps {
		resps[i] = Text("r")
	}
	m := New("fake", Script(resps...))
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for range n + 1 {
		wg.Go(func() {
			_, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("q")}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	var failed int
	for err := range errs {
		if err != nil {
			if !errors.Is(err, ErrScriptDone) {
				t.Errorf("error = %v, want ErrScriptDone", err)
			}
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d calls failed, want exactly 1 (script of %d for %d calls)", failed, n, n+1)
	}
	if got := m.Calls(); got != n+1 {
		t.Errorf("Calls() = %d, want %d", got, n+1)
	}
}

func TestCancellation(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		m := New("fake", Reply("never"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := m.Chat(ctx, &delegate.Request{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("during", func(t *testing.T) {
		started := make(chan struct{}, 1)
		m := New("fake", Block(started))
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-started; cancel() }()
		_, err := m.Chat(ctx, &delegate.Request{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("function ignores context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		m := New("fake", func(context.Context, *delegate.Request) (*delegate.Response, error) {
			cancel()
			return Text("too late"), nil
		})
		resp, err := m.Chat(ctx, &delegate.Request{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Chat = %+v, %v; want context.Canceled", resp, err)
		}
	})
}

func TestErrorsPassThrough(t *testing.T) {
	want := &delegate.APIError{Status: 500, Model: "fake"}
	m := New("fake", Fail(want))
	_, err := m.Chat(context.Background(), &delegate.Request{})
	var ae *delegate.APIError
	if !errors.As(err, &ae) || ae.Status != 500 {
		t.Errorf("err = %v, want the *APIError with status 500", err)
	}
}
