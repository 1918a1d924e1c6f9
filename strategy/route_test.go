package strategy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func routeRoles(strong, weak delegate.Model) Roles {
	return Roles{Strong: agent(RoleStrong, strong), Weak: agent(RoleWeak, weak)}
}

func TestRouteParallelToolCalls(t *testing.T) {
	// The weak model's calls wait at a barrier until both are in flight.
	// So the run only succeeds if the two tool calls of turn 1 run concurrently.
	strong, weak := routeFixture()
	tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig()), mathRequest)
	if tr.Answer != "45" || tr.Failure != "" {
		t.Fatalf("answer, failure = %q, %q; want 45, none", tr.Answer, tr.Failure)
	}
	if got, want := childNames(tr.Root), []string{"turn 1", "turn 2"}; !slices.Equal(got, want) {
		t.Errorf("turns = %v, want %v", got, want)
	}
	turn1 := childNames(child(t, tr.Root, "turn 1"))
	slices.Sort(turn1)
	if want := []string{"delegate call_a", "delegate call_b", NodeStrong}; !slices.Equal(turn1, want) {
		t.Errorf("turn 1 = %v, want %v", turn1, want)
	}
	for _, name := range []string{"delegate call_a", "delegate call_b"} {
		if n := child(t, child(t, tr.Root, "turn 1"), name); n.Error != "" || n.Role != RoleWeak {
			t.Errorf("%s: role %q error %q, want a successful weak call", name, n.Role, n.Error)
		}
	}

	reqs := strong.Requests()
	if len(reqs) != 2 {
		t.Fatalf("strong model got %d requests, want 2", len(reqs))
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != DelegateToolName {
		t.Fatalf("tools offered = %+v, want the delegate tool", reqs[0].Tools)
	}
	var schema struct {
		Required   []string                     `json:"required"`
		Properties map[string]map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(reqs[0].Tools[0].Parameters, &schema); err != nil {
		t.Fatalf("tool schema: %v", err)
	}
	if !slices.Equal(schema.Required, []string{"question"}) || schema.Properties["question"]["type"] != "string" {
		t.Errorf("tool schema = %+v, want one required string question", schema)
	}
	// Turn 2 carries the assistant's tool calls and both results, in call order.
	msgs := reqs[1].Messages
	if len(msgs) != 5 {
		t.Fatalf("turn 2 has %d messages, want 5 (system, user, assistant, 2 tool results)", len(msgs))
	}
	if a := msgs[2]; a.Role != delegate.RoleAssistant || len(a.ToolCalls) != 2 {
		t.Errorf("message 3 = %+v, want the assistant's two tool calls", a)
	}
	wantResults := []delegate.Message{
		delegate.ToolResult("call_a", "6 * 7 = \\boxed{42}"),
		delegate.ToolResult("call_b", "42 + 3 = \\boxed{45}"),
	}
	for i, want := range wantResults {
		if got := msgs[3+i]; got.Role != want.Role || got.ToolCallID != want.ToolCallID || got.Content != want.Content {
			t.Errorf("tool result %d = %+v, want %+v", i+1, got, want)
		}
	}
	// The weak model saw the bare question only.
	for _, r := range weak.Requests() {
		if modeltest.Contains(r, "shop") {
			t.Errorf("weak model saw the user's request: %q", modeltest.LastUser(r))
		}
	}
	checkRole(t, tr, RoleStrong, strong)
	checkRole(t, tr, RoleWeak, weak)
	checkTotal(t, tr)
}

func TestRouteRejectedToolCalls(t *testing.T) {
	tests := []struct {
		name     string
		call     delegate.ToolCall
		node     string
		wantText string
	}{
		{"invalid json", modeltest.Call("c1", "delegate", `{"question": "What is`), "delegate c1", "error: invalid delegate arguments: not JSON"},
		{"question not a string", modeltest.Call("c1", "delegate", `{"question": 7}`), "delegate c1", `"question" is a number`},
		{"unknown tool", modeltest.Call("c1", "calculator", `{"x": 1}`), "tool c1", `error: unknown tool "calculator"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			strong := fake("strong", modeltest.Script(modeltest.ToolCalls(tt.call), modeltest.Text("I will do it myself.\nFinal answer: 45")))
			weak := fake("weak", modeltest.Reply("never asked"))
			tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig()), mathRequest)
			if tr.Answer != "45" || tr.Failure != "" {
				t.Errorf("answer, failure = %q, %q; want 45 from \"Final answer:\"", tr.Answer, tr.Failure)
			}
			if weak.Calls() != 0 {
				t.Errorf("weak model called %d times for a rejected call", weak.Calls())
			}
			n := child(t, child(t, tr.Root, "turn 1"), tt.node)
			if n.IsCall() || n.Error == "" {
				t.Errorf("node %s: call %v error %q, want a recorded refusal", tt.node, n.IsCall(), n.Error)
			}
			msgs := strong.Requests()[1].Messages
			last := msgs[len(msgs)-1]
			if last.Role != delegate.RoleTool || last.ToolCallID != "c1" || !strings.Contains(last.Content, tt.wantText) {
				t.Errorf("tool result = %+v, want an error containing %q", last, tt.wantText)
			}
		})
	}
}

func TestRouteMaxTurns(t *testing.T) {
	strong := fake("strong", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("c", "delegate", `{"question":"again?"}`)), nil
	})
	weak := fake("weak", modeltest.Reply("yes"))
	cfg := DefaultConfig()
	cfg.MaxTurns = 3
	tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), cfg), mathRequest)
	if tr.FailureKind != delegate.FailureMaxTurns || tr.Answer != "" {
		t.Errorf("answer, failure = %q, %q; want none and kind %q", tr.Answer, tr.Failure, delegate.FailureMaxTurns)
	}
	if strong.Calls() != 3 || weak.Calls() != 2 {
		t.Errorf("strong, weak calls = %d, %d; want 3, 2 (the last turn's calls are not run)", strong.Calls(), weak.Calls())
	}
	if got := len(tr.Root.Children); got != 3 {
		t.Errorf("%d turns in the trace, want 3", got)
	}
	checkRole(t, tr, RoleStrong, strong)
	checkRole(t, tr, RoleWeak, weak)
}

func TestRouteFailures(t *testing.T) {
	t.Run("weak call fails", func(t *testing.T) {
		strong := fake("strong", modeltest.Script(
			modeltest.ToolCalls(modeltest.Call("c1", "delegate", `{"question":"q"}`)),
			modeltest.Text("\\boxed{1}"),
		))
		weak := fake("weak", modeltest.Fail(&delegate.APIError{Status: 503}))
		tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig()), mathRequest)
		if tr.Answer != "1" || tr.Failure != "" {
			t.Errorf("answer, failure = %q, %q; want 1, none", tr.Answer, tr.Failure)
		}
		msgs := strong.Requests()[1].Messages
		if c := msgs[len(msgs)-1].Content; !strings.HasPrefix(c, "error: the delegate call failed") || !strings.Contains(c, "503") {
			t.Errorf("tool result = %q, want the stated failure", c)
		}
		checkRole(t, tr, RoleWeak, weak)
	})
	t.Run("strong call fails", func(t *testing.T) {
		strong := fake("strong", modeltest.Fail(&delegate.APIError{Status: 401}))
		weak := fake("weak", modeltest.Reply("r"))
		tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig()), mathRequest)
		if tr.FailureKind != delegate.FailureCall {
			t.Errorf("failure = %q, want kind %q", tr.Failure, delegate.FailureCall)
		}
	})
	t.Run("no answer marker", func(t *testing.T) {
		strong := fake("strong", modeltest.Reply("It is forty-five."))
		weak := fake("weak", modeltest.Reply("r"))
		tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig()), mathRequest)
		if tr.Answer != "It is forty-five." || tr.FailureKind != delegate.FailureAnswerFormat {
			t.Errorf("answer, failure = %q, %q; want the whole reply and kind %q", tr.Answer, tr.Failure, delegate.FailureAnswerFormat)
		}
	})
}

func TestRouteCancelDuringToolCalls(t *testing.T) {
	defer goleak.VerifyNone(t)
	strong := fake("strong", modeltest.Script(modeltest.ToolCalls(
		modeltest.Call("a", "delegate", `{"question":"1?"}`),
		modeltest.Call("b", "delegate", `{"question":"2?"}`),
	)))
	started := make(chan struct{}, 2)
	weak := fake("weak", modeltest.Block(started))
	s := mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var tr *delegate.Trace
	go func() {
		var err error
		tr, err = s.Run(ctx, mathRequest, nil)
		done <- err
	}()
	<-started
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if tr.FailureKind != delegate.FailureCanceled || strong.Calls() != 1 {
		t.Errorf("failure %q after %d strong calls, want canceled after 1", tr.Failure, strong.Calls())
	}
}

// TestRouteBoundedToolCalls runs five tool calls under each bound. As many
// as the bound run at once, this goroutine counted among them, and the
// results come back in call order.
func TestRouteBoundedToolCalls(t *testing.T) {
	var calls []delegate.ToolCall
	for i := range 5 {
		calls = append(calls, modeltest.Call(fmt.Sprintf("c%d", i), "delegate", fmt.Sprintf(`{"question":"q%d"}`, i)))
	}
	for _, limit := range []int{1, 2, 4, 5, 8} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			strong := fake("strong", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
				if len(req.Messages) > 2 {
					return modeltest.Text("\\boxed{done}"), nil
				}
				return modeltest.ToolCalls(calls...), nil
			})
			want := min(limit, len(calls))
			b := newBarrier(want)
			var mu sync.Mutex
			inFlight, peak := 0, 0
			weak := fake("weak", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
				mu.Lock()
				inFlight++
				peak = max(peak, inFlight)
				mu.Unlock()
				defer func() {
					mu.Lock()
					inFlight--
					mu.Unlock()
				}()
				if err := b.wait(ctx); err != nil {
					return nil, err
				}
				time.Sleep(time.Millisecond)
				return modeltest.Text("answer to " + modeltest.LastUser(req)), nil
			})
			cfg := DefaultConfig()
			cfg.ToolConcurrency = limit
			tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), cfg), mathRequest)
			if tr.Answer != "done" || tr.Failure != "" {
				t.Fatalf("answer, failure = %q, %q; want done, none", tr.Answer, tr.Failure)
			}
			if peak != want {
				t.Errorf("%d calls in flight at once, want %d", peak, want)
			}
			reqs := strong.Requests()
			if len(reqs) != 2 {
				t.Fatalf("strong model got %d requests, want 2", len(reqs))
			}
			for i, m := range reqs[1].Messages[3:] {
				if got, want := m.Content, fmt.Sprintf("answer to q%d", i); got != want || m.ToolCallID != calls[i].ID {
					t.Errorf("tool result %d = %q for %q, want %q for %q", i, got, m.ToolCallID, want, calls[i].ID)
				}
			}
		})
	}
}

// TestRouteToolPanics panics in one call of three, the first (on a goroutine
// of its own) or the last (on the run's): the run ends with the panic and
// its stack, and the calls still running are cancelled.
func TestRouteToolPanics(t *testing.T) {
	for _, bad := range []string{"q0", "q2"} {
		t.Run(bad, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			strong := fake("strong", modeltest.Script(modeltest.ToolCalls(
				modeltest.Call("c0", "delegate", `{"question":"q0"}`),
				modeltest.Call("c1", "delegate", `{"question":"q1"}`),
				modeltest.Call("c2", "delegate", `{"question":"q2"}`),
			)))
			started := make(chan struct{}, 3)
			weak := fake("weak", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
				if modeltest.LastUser(req) == bad {
					<-started // another call is in flight
					panic("fake model bug")
				}
				started <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			})
			s := mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig())
			done := make(chan struct{})
			var tr *delegate.Trace
			var err error
			go func() {
				tr, err = s.Run(context.Background(), mathRequest, nil)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after a tool call panicked")
			}
			if err == nil || !strings.Contains(err.Error(), "fake model bug") || !strings.Contains(err.Error(), "goroutine") {
				t.Errorf("err = %v, want the panic with its stack", err)
			}
			if tr == nil || tr.Failure != "panic: fake model bug" {
				t.Errorf("trace = %+v, want Failure %q", tr, "panic: fake model bug")
			}
		})
	}
}

// Config.Tool replaces the delegate tool's declaration in every request
// of route (same name); a tool of another name is refused.
func TestRouteDeclaresConfiguredTool(t *testing.T) {
	strong, weak := routeFixture()
	cfg := DefaultConfig()
	short := delegate.Tool{Name: DelegateToolName}
	cfg.Tool = &short
	mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), cfg), mathRequest)
	reqs := strong.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	for i, r := range reqs {
		if len(r.Tools) != 1 || !reflect.DeepEqual(r.Tools[0], short) {
			t.Errorf("request %d declares %+v, want only %+v", i, r.Tools, short)
		}
	}
	other := delegate.Tool{Name: "ask"}
	cfg.Tool = &other
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tool") {
		t.Errorf("a tool named %q: %v, want an error naming tool", other.Name, err)
	}
}

// TestRouteStrictToolCalls asks the strong model for well-formed calls
// in every turn when the config says so, and never otherwise.
func TestRouteStrictToolCalls(t *testing.T) {
	for _, strict := range []bool{false, true} {
		strong, weak := routeFixture()
		cfg := DefaultConfig()
		cfg.StrictToolCalls = strict
		mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), cfg), mathRequest)
		reqs := strong.Requests()
		if len(reqs) == 0 {
			t.Fatal("no request")
		}
		for i, r := range reqs {
			if r.StrictToolCalls != strict {
				t.Errorf("strict %v: request %d has StrictToolCalls %v", strict, i, r.StrictToolCalls)
			}
		}
		for _, r := range weak.Requests() {
			if r.StrictToolCalls {
				t.Errorf("the weak model, which gets no tools, was asked for strict calls")
			}
		}
	}
}

func TestRouteToolResultAnswer(t *testing.T) {
	strong, weak := routeFixture()
	cfg := DefaultConfig()
	cfg.ToolResult = ToolResultAnswer
	tr := mustRun(t, mustNew(t, NameRoute, routeRoles(strong, weak), cfg), mathRequest)
	if tr.Answer != "45" || tr.Failure != "" {
		t.Fatalf("answer, failure = %q, %q; want 45, none", tr.Answer, tr.Failure)
	}
	reqs := strong.Requests()
	if len(reqs) != 2 {
		t.Fatalf("strong model got %d requests, want 2", len(reqs))
	}
	// The weak model replies "6 * 7 = \boxed{42}" and "42 + 3 = \boxed{45}".
	// Only the boxed answers go back.
	var got []string
	for _, m := range reqs[1].Messages {
		if m.Role == delegate.RoleTool {
			got = append(got, m.Content)
		}
	}
	if want := []string{"42", "45"}; !slices.Equal(got, want) {
		t.Errorf("tool results = %q, want %q", got, want)
	}
}

func TestFinalAnswer(t *testing.T) {
	tests := []struct {
		text, want string
		ok         bool
	}{
		{"1316\n\\boxed{1316}", "1316", true},
		{"work <answer> 7 </answer>", "7", true},
		{"so\nFinal answer: 12", "12", true},
		{"Final Output: yes", "yes", true},
		{"no marker 12", "", false},
		{"\\boxed{ }", "", false},
	}
	for _, tt := range tests {
		got, ok := FinalAnswer(tt.text)
		if got != tt.want || ok != tt.ok {
			t.Errorf("FinalAnswer(%q) = %q, %v; want %q, %v", tt.text, got, ok, tt.want, tt.ok)
		}
	}
}
