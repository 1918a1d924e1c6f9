package rollout

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/modeltest"
)

func TestFailureReasons(t *testing.T) {
	api := func(status int, typ string) error {
		return &delegate.APIError{Status: status, Type: typ, Message: "boom (not 500 or timeout)", Model: "m (v2)", Attempts: 3}
	}
	tests := []struct {
		name string
		err  error
		want string // kind
	}{
		{"rate limit", api(429, "rate_limit_error"), kindRateLimit},
		{"server error", api(503, "server_error"), kindServerError},
		{"bad request", api(400, "invalid_request_error"), "status_400"},
		{"timeout", api(0, delegate.ErrKindTimeout), delegate.ErrKindTimeout},
		{"reset", api(0, delegate.ErrKindConnection), delegate.ErrKindConnection},
		{"garbage body", api(0, delegate.ErrKindDecode), delegate.ErrKindDecode},
		{"truncated 200", api(200, delegate.ErrKindDecode), delegate.ErrKindDecode},
		{"status only", &delegate.APIError{Status: 404}, "status_404"},
		{"wrapped", fmt.Errorf("plan: %w", api(0, delegate.ErrKindDecode)), delegate.ErrKindDecode},
		{"deadline", context.DeadlineExceeded, delegate.ErrKindTimeout},
		{"plain", errors.New("status 500 but not an API error"), kindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := apiKind(tt.err); got != tt.want {
				t.Errorf("apiKind = %q, want %q", got, tt.want)
			}
			// A strategy keeps only the text: "call failed: <node>: <error>".
			text := "call failed: plan: " + tt.err.Error()
			want := tt.want
			if _, ok := tt.err.(*delegate.APIError); !ok && tt.name != "wrapped" {
				want = kindOther
			}
			if got := callFailure(text); got != "call "+want {
				t.Errorf("callFailure(%q) = %q, want %q", text, got, "call "+want)
			}
			// From a trace, the kind comes from the node's status and type,
			// whatever the text says.
			rec := delegate.NewRecorder("single", "q", nil)
			a := delegate.Agent{Role: "baseline", Model: modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) { return nil, tt.err })}
			_, _ = rec.Call(context.Background(), nil, "answer", a, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}})
			tr := rec.Finish("", delegate.Failed(delegate.FailureCall, "answer: garbled text"))
			wantTrace := tt.want
			if tt.name == "plain" {
				wantTrace = kindOther
			}
			if got := traceCallFailure(tr); got != "call "+wantTrace {
				t.Errorf("traceCallFailure = %q, want %q", got, "call "+wantTrace)
			}
		})
	}
}

func TestScoreFailureReasons(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("score task %q: %w", "t1", judge.ErrUnparseable), "score unparseable"},
		{fmt.Errorf("score task %q: %w", "t1", &delegate.APIError{Status: 500}), "score server_error"},
		{errors.New("judge: model api error (model j): timeout: slow"), "score timeout"},
		{errors.New("no judge"), "score other"},
	}
	for _, tt := range tests {
		if got := scoreFailure(tt.err); got != tt.want {
			t.Errorf("scoreFailure(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestReasonOfOldStates(t *testing.T) {
	tests := []struct {
		st   rolloutTally
		want string
	}{
		{rolloutTally{Reason: "call timeout", Error: "anything"}, "call timeout"},
		{rolloutTally{Error: "panic: nil map\ngoroutine 1"}, FailPanic},
		{rolloutTally{Error: "score: model api error: status 429 Too Many Requests"}, "score rate_limit"},
		{rolloutTally{Error: "call failed: aggregate: model api error (model x): connection: reset"}, "call connection"},
	}
	for _, tt := range tests {
		if got := reasonOf(tt.st.Reason, tt.st.Error); got != tt.want {
			t.Errorf("reasonOf(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}
