package openenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/modeltest"
)

// TestSubagentReplies checks what the policy reads back for each kind of sub-agent reply.
// Route's rules apply: a failure is a tool error and the episode goes on.
func TestSubagentReplies(t *testing.T) {
	tests := []struct {
		name       string
		fn         modeltest.Func
		wantResult string // a prefix
		wantErr    string // the tool error's type, or ""
		wantCalls  int
	}{
		{"boxed answer", modeltest.Reply("4*7=28\n\\boxed{0028}"), "0028", "", 1},
		{"no answer marker", modeltest.Reply("about thirty"), "about thirty", "", 1},
		{"cut at max_tokens", modeltest.Script(modeltest.Truncated("1*2=2")), "1*2=2\n[the answer was cut at max_tokens]", "", 1},
		{"empty", modeltest.Reply("  "), "", ToolExecutionError, 1},
		{"failure", modeltest.Fail(errors.New("backend down")), "", ToolExecutionError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newDelegationServer(t, DelegationConfig{Subagent: modeltest.New("sub", tt.fn)}, nil)
			c := serve(t, srv, "")
			ctx := context.Background()
			s, err := c.Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
				t.Fatal(err)
			}
			res, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": "4*7"}))
			if err != nil {
				t.Fatal(err)
			}
			o := observationOf(t, res)
			gotErr := ""
			if o.Error != nil {
				gotErr = o.Error.ErrorType
			}
			if !strings.HasPrefix(o.Result, tt.wantResult) || gotErr != tt.wantErr || o.Spend.Subagent.Calls != tt.wantCalls || res.Done {
				t.Errorf("got result %q, error %q, %d calls, done %v; want %q, %q, %d, not done", o.Result, gotErr, o.Spend.Subagent.Calls, res.Done, tt.wantResult, tt.wantErr, tt.wantCalls)
			}
		})
	}
}

// TestStepTimeout: a sub-agent slower than the step timeout fails the
// step with EXECUTION_ERROR, and the episode goes on.
func TestStepTimeout(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{Subagent: modeltest.New("slow", modeltest.Block(nil))}, func(c *Config) { c.StepTimeout = 100 * time.Millisecond })
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": "4*7"})); !errors.As(err, &e) || e.Code != CodeExecutionError || !strings.Contains(e.Msg, "deadline") {
		t.Errorf("slow delegate: got %v, want EXECUTION_ERROR naming the deadline", err)
	}
	res, err := s.Step(ctx, call(ToolAnswer, map[string]string{"answer": "0"}))
	if err != nil || !res.Done {
		t.Errorf("answer after the timeout: %+v, %v", res, err)
	}
	raw, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, raw); st.StepCount != 2 || st.Spend.Subagent.Calls != 0 {
		t.Errorf("state: %+v, want 2 steps and no sub-agent call answered", st)
	}
}

// TestCloseEndsSessions: Close ends open sessions and refuses new ones.
func TestCloseEndsSessions(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if srv.Active() != 0 {
		t.Errorf("active after close: %d", srv.Active())
	}
	if _, err := s.State(ctx); err == nil {
		t.Error("state on a closed server's session: no error")
	}
	s2, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var e *Error
	if _, err := s2.Reset(ctx, ResetRequest{}); !errors.As(err, &e) || e.Code != CodeSessionError {
		t.Errorf("a session after close: got %v, want SESSION_ERROR", err)
	}
}
