package strategy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func decomposeRoles(delegator, subagent delegate.Model) Roles {
	return Roles{Delegator: agent(RoleDelegator, delegator), Subagent: agent(RoleSubagent, subagent)}
}

func TestDecomposeHappyPath(t *testing.T) {
	for _, closing := range SubtaskCloses {
		t.Run(closing, func(t *testing.T) {
			delegator, subagent := decomposeFixture(closing)
			s := mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig())
			tr := mustRun(t, s, testRequest)

			if tr.Answer != testAnswer || tr.Failure != "" {
				t.Errorf("answer, failure = %q, %q; want %q, none", tr.Answer, tr.Failure, testAnswer)
			}
			if got, want := childNames(tr.Root), []string{NodePlan, NodeSubagents, NodeAggregate}; !slices.Equal(got, want) {
				t.Errorf("stages = %v, want %v", got, want)
			}
			if got := childNames(child(t, tr.Root, NodePlan)); !slices.Equal(got, []string{NodeDelegator}) {
				t.Errorf("plan children = %v, want [delegator]", got)
			}
			subs := childNames(child(t, tr.Root, NodeSubagents))
			slices.Sort(subs)
			if want := []string{"subagent 1", "subagent 2", "subagent 3"}; !slices.Equal(subs, want) {
				t.Errorf("subagents = %v, want %v", subs, want)
			}

			// Each sub-agent got its subtask and, by default, the request.
			reqs := subagent.Requests()
			if len(reqs) != 3 {
				t.Fatalf("sub-agent got %d requests, want 3", len(reqs))
			}
			var got []string
			for _, r := range reqs {
				got = append(got, subtaskOf(r))
				if !modeltest.Contains(r, testRequest) {
					t.Errorf("sub-agent request lacks the user's request:\n%s", modeltest.LastUser(r))
				}
				if r.MaxTokens != 512 || r.Temperature == nil || *r.Temperature != 0.5 {
					t.Errorf("sub-agent max_tokens %d temperature %v, want 512 and 0.5", r.MaxTokens, r.Temperature)
				}
			}
			slices.Sort(got)
			want := slices.Clone(testSubtasks)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("subtasks sent = %q, want %q", got, want)
			}

			// The aggregator saw the request, the plan and every pair in order.
			dreqs := delegator.Requests()
			if len(dreqs) != 2 {
				t.Fatalf("delegator got %d requests, want 2", len(dreqs))
			}
			agg := modeltest.LastUser(dreqs[1])
			for i, sub := range testSubtasks {
				pair := fmt.Sprintf("Subtask %d: %s\nResult %d: Result for: %s", i+1, sub, i+1, sub)
				if !strings.Contains(agg, pair) {
					t.Errorf("aggregate prompt lacks %q:\n%s", pair, agg)
				}
			}
			for _, s := range []string{testRequest, testPlanReasoning} {
				if !strings.Contains(agg, s) {
					t.Errorf("aggregate prompt lacks %q", s)
				}
			}
			checkRole(t, tr, RoleDelegator, delegator)
			checkRole(t, tr, RoleSubagent, subagent)
			checkTotal(t, tr)
			if tr.Total.Calls != 5 {
				t.Errorf("total calls = %d, want 5", tr.Total.Calls)
			}
		})
	}
}

func TestDecomposeWithoutSubagentContext(t *testing.T) {
	delegator, subagent := decomposeFixture("<|end_subtask|>")
	cfg := DefaultConfig()
	cfg.SubagentContext = false
	tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), cfg), testRequest)
	if tr.Failure != "" {
		t.Fatalf("failure = %q", tr.Failure)
	}
	for _, r := range subagent.Requests() {
		if modeltest.Contains(r, testRequest) {
			t.Errorf("sub-agent saw the request with subagent_context off:\n%s", modeltest.LastUser(r))
		}
	}
	if p := modeltest.SystemPrompt(delegator.Requests()[0]); strings.Contains(p, "the user's request and") {
		t.Errorf("plan prompt promises sub-agents the request with subagent_context off:\n%s", p)
	}
}

func TestDecomposePlanFailures(t *testing.T) {
	tests := []struct {
		name  string
		reply *delegate.Response
		text  string // the failure message's start
	}{
		{"no reasoning", modeltest.Text(strings.Repeat("<|subtask|>s<|end_subtask|>", 3)), "plan no_reasoning"},
		{"unclosed", modeltest.Text("<|reasoning|>R</|reasoning|><|subtask|>a"), "plan unclosed_tag"},
		{"empty subtask", modeltest.Text(planText("R", "<|end_subtask|>", "a", "", "c")), "plan empty_subtask"},
		{"too few", modeltest.Text(planText("R", "<|end_subtask|>", "a", "b")), "plan too_few_subtasks"},
		{"too many", modeltest.Text(planText("R", "<|end_subtask|>", "1", "2", "3", "4", "5", "6")), "plan too_many_subtasks"},
		{"truncated", modeltest.Truncated(planText("R", "<|end_subtask|>", "a", "b", "c")), "plan truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delegator := fake("d", modeltest.Script(tt.reply))
			subagent := fake("s", modeltest.Reply("never asked"))
			tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig()), testRequest)
			kind := delegate.FailurePlan
			if tt.name == "truncated" {
				kind = delegate.FailurePlanTruncated
			}
			if tr.FailureKind != kind || !strings.HasPrefix(tr.Failure, tt.text+": ") {
				t.Errorf("failure %q, %q; want kind %q, text starting %q", tr.FailureKind, tr.Failure, kind, tt.text+": ")
			}
			if tr.Answer != "" {
				t.Errorf("answer = %q, want none", tr.Answer)
			}
			if n := subagent.Calls(); n != 0 {
				t.Errorf("sub-agent called %d times after a format failure, want 0", n)
			}
			if n := delegator.Calls(); n != 1 {
				t.Errorf("delegator called %d times, want 1", n)
			}
			if plan := child(t, tr.Root, NodePlan); plan.Error != tr.Failure {
				t.Errorf("plan node error = %q, want %q", plan.Error, tr.Failure)
			}
			if got := childNames(tr.Root); !slices.Equal(got, []string{NodePlan}) {
				t.Errorf("stages = %v, want only plan", got)
			}
		})
	}
}

func TestDecomposeSubagentFailsTwice(t *testing.T) {
	delegator, _ := decomposeFixture("<|end_subtask|>")
	subagent := fake("subagent-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if subtaskOf(req) == testSubtasks[1] {
			return nil, &delegate.APIError{Status: 500, Type: "server_error", Model: "subagent-model", Attempts: 3}
		}
		return modeltest.Text("Result for: " + subtaskOf(req)), nil
	})
	tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig()), testRequest)
	if tr.Failure != "" || tr.Answer != testAnswer {
		t.Errorf("answer, failure = %q, %q; want the path to go on to %q", tr.Answer, tr.Failure, testAnswer)
	}
	if n := subagent.Calls(); n != 4 {
		t.Errorf("sub-agent calls = %d, want 4 (3 subtasks + 1 retry)", n)
	}
	subs := child(t, tr.Root, NodeSubagents)
	for _, name := range []string{"subagent 2", "subagent 2" + RetrySuffix} {
		n := child(t, subs, name)
		if n.Error == "" || n.Retries != 2 {
			t.Errorf("%s: error %q retries %d, want the API error and 2 backend retries", name, n.Error, n.Retries)
		}
	}
	for _, name := range []string{"subagent 1", "subagent 3"} {
		if n := child(t, subs, name); n.Error != "" {
			t.Errorf("%s failed: %s", name, n.Error)
		}
	}
	agg := modeltest.LastUser(delegator.Requests()[1])
	if !strings.Contains(agg, "Result 2: [sub-agent 2 failed: ") || !strings.Contains(agg, "status 500") {
		t.Errorf("aggregate prompt does not state sub-agent 2's failure:\n%s", agg)
	}
	if !strings.Contains(agg, "Result 3: Result for: "+testSubtasks[2]) {
		t.Errorf("aggregate prompt lost sub-agent 3's result:\n%s", agg)
	}
	checkRole(t, tr, RoleSubagent, subagent)
	if got := tr.Roles[RoleSubagent].Errors; got != 2 {
		t.Errorf("sub-agent errors = %d, want 2", got)
	}
}

func TestDecomposeSubagentRetrySucceeds(t *testing.T) {
	delegator, _ := decomposeFixture("<|end_subtask|>")
	var mu sync.Mutex
	failed := false
	subagent := fake("subagent-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if subtaskOf(req) == testSubtasks[0] && !failed {
			failed = true
			return nil, &delegate.APIError{Type: delegate.ErrKindConnection}
		}
		return modeltest.Text("Result for: " + subtaskOf(req)), nil
	})
	tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig()), testRequest)
	agg := modeltest.LastUser(delegator.Requests()[1])
	if !strings.Contains(agg, "Result 1: Result for: "+testSubtasks[0]) {
		t.Errorf("the retried result is missing from the aggregate prompt:\n%s", agg)
	}
	if got := tr.Roles[RoleSubagent]; got.Calls != 4 || got.Errors != 1 {
		t.Errorf("sub-agent calls %d errors %d, want 4 and 1", got.Calls, got.Errors)
	}
}

func TestDecomposeTokenBudget(t *testing.T) {
	delegator, _ := decomposeFixture("<|end_subtask|>")
	long := "alpha beta gamma delta epsilon zeta eta theta"
	subagent := fake("subagent-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		// The backend ignored max_tokens: 8 tokens for a budget of 4.
		return modeltest.WithUsage(modeltest.Text(long), 30, 8), nil
	})
	cfg := DefaultConfig()
	cfg.Subagent.MaxTokens = 4
	tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), cfg), testRequest)
	if tr.Failure != "" {
		t.Fatalf("failure = %q", tr.Failure)
	}
	for _, r := range subagent.Requests() {
		if r.MaxTokens != 4 {
			t.Errorf("sub-agent asked for max_tokens %d, want the budget 4", r.MaxTokens)
		}
	}
	agg := modeltest.LastUser(delegator.Requests()[1])
	want := "Result 1: alpha beta gamma delta\n[truncated at the 4-token budget]" // 46 bytes * 4/8 = 23, trailing space trimmed
	if !strings.Contains(agg, want) {
		t.Errorf("aggregate prompt lacks the cut result %q:\n%s", want, agg)
	}
	if strings.Contains(agg, "epsilon") {
		t.Error("aggregate prompt holds text beyond the budget")
	}
}

func TestDecomposeBoundedFanOut(t *testing.T) {
	delegator := fake("d", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Subtask 1:") {
			return modeltest.Text("Final Output: ok"), nil
		}
		return modeltest.Text(planText("R", "<|end_subtask|>", "1", "2", "3", "4", "5")), nil
	})
	var mu sync.Mutex
	inFlight, peak := 0, 0
	subagent := fake("s", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return modeltest.Text("done"), nil
	})
	cfg := DefaultConfig()
	cfg.SubagentConcurrency = 2
	tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), cfg), testRequest)
	if tr.Answer != "ok" {
		t.Errorf("answer = %q, want ok", tr.Answer)
	}
	if peak > 2 {
		t.Errorf("%d sub-agents in flight at once, want at most 2", peak)
	}
	if n := subagent.Calls(); n != 5 {
		t.Errorf("sub-agent calls = %d, want 5", n)
	}
}

func TestDecomposeAggregateFormat(t *testing.T) {
	tests := []struct {
		name       string
		reply      *delegate.Response
		wantAnswer string
		wantKind   delegate.FailureKind
	}{
		{"no marker", modeltest.Text("Just the answer, no marker."), "Just the answer, no marker.", delegate.FailureAnswerFormat},
		{"truncated", modeltest.Truncated("Final Output: half an ans"), "half an ans", delegate.FailureTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delegator := fake("d", modeltest.Script(modeltest.Text(planText("R", "<|end_subtask|>", "a", "b", "c")), tt.reply))
			subagent := fake("s", modeltest.Reply("r"))
			tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig()), testRequest)
			if tr.Answer != tt.wantAnswer || tr.FailureKind != tt.wantKind {
				t.Errorf("answer, failure = %q, %q; want %q and kind %q", tr.Answer, tr.Failure, tt.wantAnswer, tt.wantKind)
			}
		})
	}
}

func TestDecomposeDelegatorFails(t *testing.T) {
	delegator := fake("d", modeltest.Fail(&delegate.APIError{Status: 400, Type: "invalid_request_error"}))
	subagent := fake("s", modeltest.Reply("r"))
	tr := mustRun(t, mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig()), testRequest)
	if tr.FailureKind != delegate.FailureCall || !strings.Contains(tr.Failure, "status 400") {
		t.Errorf("failure = %q, want a call failure naming status 400", tr.Failure)
	}
	if subagent.Calls() != 0 {
		t.Errorf("sub-agents ran after the plan call failed")
	}
	checkRole(t, tr, RoleDelegator, delegator)
}

func TestDecomposeCancelDuringFanOut(t *testing.T) {
	defer goleak.VerifyNone(t)
	delegator, _ := decomposeFixture("<|end_subtask|>")
	started := make(chan struct{}, 3)
	subagent := fake("s", modeltest.Block(started))
	s := mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		tr  *delegate.Trace
		err error
	}
	done := make(chan result, 1)
	go func() {
		tr, err := s.Run(ctx, testRequest, nil)
		done <- result{tr, err}
	}()
	for range 3 {
		<-started // every sub-agent is in flight
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", r.err)
	}
	if r.tr == nil {
		t.Fatal("no partial trace returned")
	}
	if r.tr.FailureKind != delegate.FailureCanceled {
		t.Errorf("failure = %q, want kind %q", r.tr.Failure, delegate.FailureCanceled)
	}
	if n := subagent.Calls(); n != 3 {
		t.Errorf("sub-agent calls = %d, want 3 (no retry after cancellation)", n)
	}
	if n := delegator.Calls(); n != 1 {
		t.Errorf("delegator calls = %d, want 1 (no aggregation after cancellation)", n)
	}
}

func TestDecomposeSubagentPanics(t *testing.T) {
	delegator, _ := decomposeFixture("<|end_subtask|>")
	subagent := fake("s", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		panic("fake model bug")
	})
	tr, err := New(NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	got, err := tr.Run(context.Background(), testRequest, nil)
	if err == nil || !strings.Contains(err.Error(), "fake model bug") || !strings.Contains(err.Error(), "goroutine") {
		t.Errorf("err = %v, want the panic with its stack", err)
	}
	if got == nil || got.Failure != "panic: fake model bug" {
		t.Errorf("trace = %+v, want Failure %q", got, "panic: fake model bug")
	}
}
