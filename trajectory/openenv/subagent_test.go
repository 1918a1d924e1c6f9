package openenv

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
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
// step, and the episode goes on: an EXECUTION_ERROR on the WebSocket, an
// internal error over HTTP MCP. The next step gets a fresh deadline.
func TestStepTimeout(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{Subagent: modeltest.New("slow", modeltest.Block(nil))}, func(c *Config) { c.StepTimeout = 100 * time.Millisecond })
	c := serve(t, srv, "")
	tests := []struct {
		name    string
		open    func(ctx context.Context) (Stepper, error)
		timeout func(err error) bool // whether err is the transport's step timeout
	}{
		{"websocket", func(ctx context.Context) (Stepper, error) { return c.Dial(ctx) }, func(err error) bool {
			var e *Error
			return errors.As(err, &e) && e.Code == CodeExecutionError && strings.Contains(e.Msg, "deadline")
		}},
		{"http-mcp", func(context.Context) (Stepper, error) { return c.OpenMCP(), nil }, func(err error) bool {
			var e *RPCError
			return errors.As(err, &e) && e.Code == RPCInternalError && strings.Contains(e.Message, "deadline")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := tt.open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if _, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": "4*7"})); !tt.timeout(err) {
					t.Errorf("slow delegate %d: got %v, want the step timeout naming the deadline", i+1, err)
				}
			}
			res, err := s.Step(ctx, call(ToolAnswer, map[string]string{"answer": "0"}))
			if err != nil || !res.Done {
				t.Errorf("answer after the timeouts: %+v, %v", res, err)
			}
			raw, err := s.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st := stateOf(t, raw); st.StepCount != 3 || st.Spend.Subagent.Calls != 0 {
				t.Errorf("state: %+v, want 3 steps and no sub-agent call answered", st)
			}
		})
	}
}

// TestMCPStepEndsWithItsRequest: an HTTP MCP step whose client goes away
// is cancelled, though its deadline is far off. The session's next step
// runs on a fresh context.
func TestMCPStepEndsWithItsRequest(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	var calls atomic.Int64
	sub := modeltest.New("sub", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if calls.Add(1) > 1 {
			return modeltest.Reply("4*7=28\n\\boxed{28}")(ctx, req)
		}
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	srv, _ := newDelegationServer(t, DelegationConfig{Subagent: sub}, nil)
	c := serveWith(t, srv, "", edge.DefaultTimeouts())
	s := c.OpenMCP()
	defer s.Close()
	if _, err := s.Reset(context.Background(), ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel() // the client goes away mid-step
	}()
	if _, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": "4*7"})); err == nil {
		t.Fatal("a step whose client went away: no error")
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the sub-agent's context ended with %v, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sub-agent's call went on after its client went away")
	}
	res, err := s.Step(context.Background(), call(ToolDelegate, map[string]string{"question": "4*7"}))
	if err != nil {
		t.Fatalf("the next step: %v", err)
	}
	if o := observationOf(t, res); o.Error != nil || o.Result != "28" {
		t.Errorf("the next step: result %q, error %+v; want 28", o.Result, o.Error)
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
