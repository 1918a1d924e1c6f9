package delegate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
)

// echo is a minimal Model for the recorder's tests.
// It answers with the last message's content and a usage derived from its length.
type echo struct {
	name string
	fail error
}

func (e echo) Name() string { return e.name }

func (e echo) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if e.fail != nil {
		return nil, e.fail
	}
	last := req.Messages[len(req.Messages)-1].Content
	return &delegate.Response{
		Model:   e.name,
		Choices: []delegate.Choice{{Message: delegate.Assistant("re: " + last), FinishReason: "stop"}},
		Usage:   delegate.Usage{PromptTokens: len(last), CompletionTokens: 2, CachedTokens: 1},
	}, nil
}

func TestPriceCost(t *testing.T) {
	p := delegate.Price{Input: 2, CachedInput: 0.5, Output: 8}
	tests := []struct {
		name string
		u    delegate.Usage
		want float64
	}{
		{"empty", delegate.Usage{}, 0},
		{"prompt only", delegate.Usage{PromptTokens: 1_000_000}, 2},
		{"cached part", delegate.Usage{PromptTokens: 1_000_000, CachedTokens: 400_000}, 0.6*2 + 0.4*0.5},
		{"output", delegate.Usage{CompletionTokens: 500_000}, 4},
		{"cached above prompt is capped", delegate.Usage{PromptTokens: 10, CachedTokens: 20}, 10 * 0.5 / 1e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Cost(tt.u); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Cost(%+v) = %v, want %v", tt.u, got, tt.want)
			}
		})
	}
}

func TestRecorderConcurrentCallsAndTotals(t *testing.T) {
	events := make(chan delegate.Event, 1000)
	rec := delegate.NewRecorder("test", "hello", events)
	lead := delegate.Agent{Role: "delegator", Model: echo{name: "big"}, Price: delegate.Price{Input: 1, Output: 2}}
	sub := delegate.Agent{Role: "subagent", Model: echo{name: "small"}, Price: delegate.Price{Input: 0.1, CachedInput: 0.05, Output: 0.2}}

	if _, err := rec.Call(context.Background(), nil, "plan", lead, &delegate.Request{Messages: []delegate.Message{delegate.User("abcd")}}); err != nil {
		t.Fatal(err)
	}
	group := rec.Group(nil, "subagents")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &delegate.Request{Messages: []delegate.Message{delegate.User(fmt.Sprintf("task %02d", i))}}
			if _, err := rec.Call(context.Background(), group, fmt.Sprintf("subagent %d", i+1), sub, req); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	rec.EndGroup(group)
	failing := delegate.Agent{Role: "subagent", Model: echo{name: "small", fail: &delegate.APIError{Status: 500, Attempts: 3}}}
	if _, err := rec.Call(context.Background(), group, "subagent 21", failing, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}}); err == nil {
		t.Fatal("failing model returned no error")
	}
	tr := rec.Finish("done", delegate.Failure{})

	if got, want := len(group.Children), 21; got != want {
		t.Fatalf("group children = %d, want %d", got, want)
	}
	sr := tr.Roles["subagent"]
	if sr.Calls != 21 || sr.Errors != 1 || sr.Retries != 2 {
		t.Errorf("subagent totals = %+v, want 21 calls, 1 error, 2 retries", sr)
	}
	if got, want := sr.Usage.PromptTokens, 20*len("task 00"); got != want {
		t.Errorf("subagent prompt tokens = %d, want %d", got, want)
	}
	wantCost := 20 * sub.Price.Cost(delegate.Usage{PromptTokens: 7, CompletionTokens: 2, CachedTokens: 1})
	if math.Abs(sr.Cost-wantCost) > 1e-15 {
		t.Errorf("subagent cost = %v, want %v", sr.Cost, wantCost)
	}
	if got, want := tr.Total.Calls, 22; got != want {
		t.Errorf("total calls = %d, want %d", got, want)
	}
	ids := map[int]bool{}
	for _, n := range tr.Calls() {
		if ids[n.ID] {
			t.Errorf("duplicate node id %d", n.ID)
		}
		ids[n.ID] = true
	}
	close(events)
	starts, finishes := 0, 0
	for ev := range events {
		switch ev.Kind {
		case delegate.EventStart:
			starts++
		case delegate.EventFinish:
			finishes++
			if ev.Name == "subagent 3" && ev.Depth != 2 {
				t.Errorf("subagent depth = %d, want 2", ev.Depth)
			}
		}
	}
	if starts != 23 || finishes != 23 {
		t.Errorf("events: %d starts, %d finishes, want 23 each", starts, finishes)
	}
}

func TestRecorderNeverBlocksOnFullChannel(t *testing.T) {
	events := make(chan delegate.Event) // nobody reads
	rec := delegate.NewRecorder("test", "q", events)
	a := delegate.Agent{Role: "r", Model: echo{name: "m"}}
	for range 5 {
		if _, err := rec.Call(context.Background(), nil, "c", a, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	tr := rec.Finish("", delegate.Failure{})
	if got, want := tr.DroppedEvents, int64(10); got != want {
		t.Errorf("dropped = %d, want %d", got, want)
	}
}

func TestTraceJSONRoundTrip(t *testing.T) {
	rec := delegate.NewRecorder("single", "q", nil)
	a := delegate.Agent{Role: "baseline", Model: echo{name: "m"}, Price: delegate.Price{Input: 1}}
	if _, err := rec.Call(context.Background(), nil, "answer", a, &delegate.Request{Messages: []delegate.Message{delegate.User("q")}}); err != nil {
		t.Fatal(err)
	}
	tr := rec.Finish("re: q", delegate.Failure{})
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var back delegate.Trace
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Version != delegate.TraceVersion || back.Answer != "re: q" || back.Roles["baseline"].Calls != 1 {
		t.Errorf("round trip lost data: %+v", back)
	}
	if got := back.Root.Children[0].Output.Content; got != "re: q" {
		t.Errorf("output = %q", got)
	}
}

func TestAPIErrorRetryable(t *testing.T) {
	tests := []struct {
		err  delegate.APIError
		want bool
	}{
		{delegate.APIError{Status: 429}, true},
		{delegate.APIError{Status: 500}, true},
		{delegate.APIError{Status: 503}, true},
		{delegate.APIError{Status: 400}, false},
		{delegate.APIError{Status: 401}, false},
		{delegate.APIError{Status: 404}, false},
		{delegate.APIError{Type: delegate.ErrKindConnection}, true},
		{delegate.APIError{Type: delegate.ErrKindTimeout}, true},
		{delegate.APIError{Type: delegate.ErrKindDecode}, true},
		{delegate.APIError{Type: delegate.ErrKindCanceled}, false},
	}
	for _, tt := range tests {
		if got := tt.err.Retryable(); got != tt.want {
			t.Errorf("%v Retryable() = %v, want %v", tt.err.Error(), got, tt.want)
		}
	}
	wrapped := fmt.Errorf("call: %w", &delegate.APIError{Status: 500, Attempts: 4})
	if got := delegate.AttemptsOf(wrapped); got != 4 {
		t.Errorf("AttemptsOf = %d, want 4", got)
	}
	if got := delegate.AttemptsOf(errors.New("plain")); got != 1 {
		t.Errorf("AttemptsOf(plain) = %d, want 1", got)
	}
}

func TestRecorderNoChoicesIsAnError(t *testing.T) {
	rec := delegate.NewRecorder("t", "q", nil)
	a := delegate.Agent{Role: "r", Model: empty{}}
	_, err := rec.Call(context.Background(), nil, "c", a, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}})
	if err == nil {
		t.Fatal("no error for a response without choices")
	}
	g := rec.Group(nil, "g")
	rec.FailGroup(g, "plan no_reasoning")
	tr := rec.Finish("", delegate.Failed(delegate.FailureCall, "x"))
	if got := tr.Root.Children[0].Error; got == "" {
		t.Error("call node records no error")
	}
	if got := tr.Root.Children[1].Error; got != "plan no_reasoning" {
		t.Errorf("group error = %q", got)
	}
	if !errors.Is(&delegate.APIError{Type: delegate.ErrKindCanceled}, context.Canceled) {
		t.Error("a cancelled APIError does not match context.Canceled")
	}
}

type empty struct{}

func (empty) Name() string { return "empty" }
func (empty) Chat(context.Context, *delegate.Request) (*delegate.Response, error) {
	return &delegate.Response{}, nil
}

// A failed call's node classifies the error by status and type.
// Readers of a trace then never parse the message.
func TestRecorderClassifiesErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantType   string
	}{
		{"rate limit", &delegate.APIError{Status: 429, Type: "rate_limit_error", Attempts: 5}, 429, "rate_limit_error"},
		{"decode", &delegate.APIError{Status: 200, Type: delegate.ErrKindDecode}, 200, delegate.ErrKindDecode},
		{"wrapped timeout", fmt.Errorf("subagent: %w", context.DeadlineExceeded), 0, delegate.ErrKindTimeout},
		{"canceled", context.Canceled, 0, delegate.ErrKindCanceled},
		{"other", errors.New("boom"), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := delegate.NewRecorder("single", "q", nil)
			a := delegate.Agent{Role: "baseline", Model: echo{name: "m", fail: tt.err}}
			if _, err := rec.Call(context.Background(), nil, "answer", a, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}}); err == nil {
				t.Fatal("no error")
			}
			n := rec.Finish("", delegate.Failed(delegate.FailureCall, "failed")).Calls()[0]
			if n.ErrorStatus != tt.wantStatus || n.ErrorType != tt.wantType {
				t.Errorf("node error status, type = %d, %q, want %d, %q", n.ErrorStatus, n.ErrorType, tt.wantStatus, tt.wantType)
			}
		})
	}
}

func TestTotalsAdd(t *testing.T) {
	a := delegate.Totals{Calls: 1, Errors: 1, Retries: 2, Usage: delegate.Usage{PromptTokens: 3, CompletionTokens: 4, CachedTokens: 1}, Cost: 0.5, Latency: time.Second}
	b := delegate.Totals{Calls: 2, Retries: 1, Usage: delegate.Usage{PromptTokens: 10, CompletionTokens: 1}, Cost: 0.25, Latency: time.Millisecond}
	want := delegate.Totals{Calls: 3, Errors: 1, Retries: 3, Usage: delegate.Usage{PromptTokens: 13, CompletionTokens: 5, CachedTokens: 1}, Cost: 0.75, Latency: time.Second + time.Millisecond}
	if got := a.Add(b); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
}

func TestErrorClass(t *testing.T) {
	tests := []struct {
		err    error
		status int
		typ    string
	}{
		{fmt.Errorf("wrapped: %w", &delegate.APIError{Status: 429, Type: "rate_limit_error"}), 429, "rate_limit_error"},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), 0, delegate.ErrKindTimeout},
		{context.Canceled, 0, delegate.ErrKindCanceled},
		{errors.New("plain"), 0, ""},
	}
	for _, tt := range tests {
		if status, typ := delegate.ErrorClass(tt.err); status != tt.status || typ != tt.typ {
			t.Errorf("ErrorClass(%v) = %d, %q; want %d, %q", tt.err, status, typ, tt.status, tt.typ)
		}
	}
}

// TestTraceFailureKindJSON reads traces written before failure_kind was
// recorded (the kind comes from the message) and after (the kind as kept).
func TestTraceFailureKindJSON(t *testing.T) {
	tests := []struct {
		name, json string
		want       delegate.FailureKind
	}{
		{"no failure", `{"version":1,"answer":"45"}`, ""},
		{"old call failure", `{"version":1,"failure":"call failed: answer: status 429"}`, delegate.FailureCall},
		{"old answer format", `{"version":1,"failure":"answer format: answer gave no \\boxed{}"}`, delegate.FailureAnswerFormat},
		{"old plan", `{"version":1,"failure":"plan too_few_subtasks: 1 subtasks, want at least 2"}`, delegate.FailurePlan},
		{"old plan truncated", `{"version":1,"failure":"plan truncated: the generation stopped at max_tokens (finish_reason length)"}`, delegate.FailurePlanTruncated},
		{"kind recorded", `{"version":1,"failure":"call failed: x","failure_kind":"max turns"}`, delegate.FailureMaxTurns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr delegate.Trace
			if err := json.Unmarshal([]byte(tt.json), &tr); err != nil {
				t.Fatal(err)
			}
			if tr.FailureKind != tt.want {
				t.Errorf("kind %q, want %q", tr.FailureKind, tt.want)
			}
		})
	}
	// Written and read back, the kind and message are kept.
	rec := delegate.NewRecorder("single", "q", nil)
	b, err := json.Marshal(rec.Finish("", delegate.Failed(delegate.FailureTruncated, "answer stopped at max_tokens")))
	if err != nil {
		t.Fatal(err)
	}
	var got delegate.Trace
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.FailureKind != delegate.FailureTruncated || got.Failure != "truncated: answer stopped at max_tokens" {
		t.Errorf("read back %q, %q; want truncated and its message", got.FailureKind, got.Failure)
	}
}
