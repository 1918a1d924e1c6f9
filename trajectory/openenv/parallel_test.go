package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// barrierSolver answers as fakeSolver, but only once n calls have
// arrived: calls made one after another would wait for ever, and fail
// after a while. The question "fail" fails.
func barrierSolver(n int) *modeltest.Model {
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	return modeltest.New("barrier-solver", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		mu.Lock()
		if arrived++; arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
			return nil, errors.New("the calls did not run at once")
		}
		q := strings.TrimSpace(modeltest.LastUser(req))
		if q == "fail" {
			return nil, errors.New("scripted failure")
		}
		op, x, y, err := world.ParseExpr(q)
		if err != nil {
			return modeltest.Text("I cannot compute that."), nil
		}
		text, _, err := world.SolverAnswer(op, x, y)
		if err != nil {
			return modeltest.Text("I cannot compute that."), nil
		}
		return modeltest.Text(text), nil
	})
}

// TestDelegateQuestionsInParallel hands four questions in one delegate
// call over the WebSocket. They run at once; the answers come back in
// order, a failed one as its error; each answered call is billed; the
// critical path is the slowest call's.
func TestDelegateQuestionsInParallel(t *testing.T) {
	var mu sync.Mutex
	var seen []EpisodeRecord
	srv, _ := newDelegationServer(t, DelegationConfig{Subagent: barrierSolver(4), Ended: func(r EpisodeRecord) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
	}}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](2)}); err != nil {
		t.Fatal(err)
	}
	qs := []string{"12*34", "fail", "56+78", "90-12"}
	res, err := s.Step(ctx, call(ToolDelegate, map[string]any{"questions": qs}))
	if err != nil {
		t.Fatal(err)
	}
	o := observationOf(t, res)
	if o.Error != nil {
		t.Fatalf("delegate: error %+v", o.Error)
	}
	var got []string
	if err := json.Unmarshal([]byte(o.Result), &got); err != nil || len(got) != len(qs) {
		t.Fatalf("result %q (%v): want a JSON array of %d answers", o.Result, err, len(qs))
	}
	for i, q := range qs {
		want := "error: the sub-agent failed: "
		if q != "fail" {
			op, x, y, err := world.ParseExpr(q)
			if err != nil {
				t.Fatal(err)
			}
			text, _, err := world.SolverAnswer(op, x, y)
			if err != nil {
				t.Fatal(err)
			}
			want = transcript.RouteResult(strings.TrimSpace(text))
		}
		if !strings.HasPrefix(got[i], want) || (q != "fail" && got[i] != want) {
			t.Errorf("answer %d to %q: got %q, want %q", i, q, got[i], want)
		}
	}
	if sp := o.Spend.Subagent; sp.Calls != 3 || sp.CompletionTokens == 0 {
		t.Errorf("sub-agent spend %+v: want 3 answered calls billed", sp)
	}
	raw, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := stateOf(t, raw)
	if st.StepCount != 1 || st.Done {
		t.Errorf("state %+v: want one step, not done", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || len(seen[0].Steps) != 1 || len(seen[0].Steps[0].Parallel) != len(qs) || seen[0].Steps[0].Subagent != nil {
		t.Fatalf("Ended saw %+v: want one step with %d parallel calls", seen, len(qs))
	}
	var slowest, sum time.Duration
	for _, n := range seen[0].Steps[0].Parallel {
		slowest, sum = max(slowest, n.Latency), sum+n.Latency
	}
	if path := st.Spend.CriticalPathS; path != slowest.Seconds() || path >= sum.Seconds() {
		t.Errorf("critical path %vs: want the slowest call's %v, under the sum %v", path, slowest, sum)
	}
}

// TestDelegateQuestionsRefused sends bad lists of questions. Each is an
// invalid_args tool error that counts as a step; the episode goes on and
// a good call still runs.
func TestDelegateQuestionsRefused(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{MaxSteps: 20}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](1)}); err != nil {
		t.Fatal(err)
	}
	nine := make([]string, MaxQuestions+1)
	for i := range nine {
		nine[i] = "1+2"
	}
	tests := []struct {
		name string
		args any
		want string
	}{
		{"too many", map[string]any{"questions": nine}, "at most 8"},
		{"empty", map[string]any{"questions": []string{}}, "questions is empty"},
		{"null", map[string]any{"questions": nil}, "array of strings"},
		{"not an array", map[string]any{"questions": "1+2"}, "array of strings"},
		{"a number", map[string]any{"questions": []any{"1+2", 3}}, "questions[1] is not a string"},
		{"an object", map[string]any{"questions": []any{map[string]string{"question": "1+2"}}}, "questions[0] is not a string"},
		{"a blank question", map[string]any{"questions": []string{"1+2", " "}}, "questions[1] is empty"},
		{"both", map[string]any{"question": "1+2", "questions": []string{"3+4"}}, "not both"},
	}
	for i, tt := range tests {
		res, err := s.Step(ctx, call(ToolDelegate, tt.args))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		o := observationOf(t, res)
		if o.Error == nil || o.Error.ErrorType != ToolInvalidArgs || !strings.Contains(o.Error.Message, tt.want) || res.Done {
			t.Errorf("%s: error %+v, done %v; want invalid_args with %q", tt.name, o.Error, res.Done, tt.want)
		}
		if o.Spend.Subagent.Calls != 0 || o.Spend.Delegator.Calls != i+1 {
			t.Errorf("%s: spend %+v; want no sub-agent call and %d billed delegator calls", tt.name, o.Spend, i+1)
		}
	}
	res, err := s.Step(ctx, call(ToolDelegate, map[string]any{"questions": []string{"12*34", "56+78"}}))
	if err != nil {
		t.Fatal(err)
	}
	if o := observationOf(t, res); o.Error != nil || o.Spend.Subagent.Calls != 2 || !strings.HasPrefix(o.Result, `["`) {
		t.Errorf("a good call after the refusals: %+v", o)
	}
}
