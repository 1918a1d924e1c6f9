package telemetry

import (
	"context"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegatelab/delegate"
)

// exportSpans sends what export queues, one trace, to a real receiver
// and returns the spans it received.
func exportSpans(t *testing.T, export func(e *Exporter)) []*tracepb.Span {
	t.Helper()
	rcv := newReceiver(t, 0)
	e, err := New(config(func(c *Config) { c.Endpoint, c.Provider = rcv.URL, func(string) string { return "delegate" } }))
	if err != nil {
		t.Fatal(err)
	}
	export(e)
	if err := e.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := e.Stats(); got.Exported != 1 || got.Dropped != 0 {
		t.Fatalf("stats %+v, want 1 trace exported", got)
	}
	return rcv.received()
}

// exportOne sends what export queues to a real receiver.
// It returns the spans by name, and their parents' names by span name.
func exportOne(t *testing.T, export func(e *Exporter)) (map[string]*tracepb.Span, map[string]string) {
	t.Helper()
	byName, byID := map[string]*tracepb.Span{}, map[string]string{}
	spans := exportSpans(t, export)
	for _, s := range spans {
		byName[s.Name] = s
		byID[string(s.SpanId)] = s.Name
		if string(s.TraceId) != string(spans[0].TraceId) {
			t.Errorf("span %q is in another trace", s.Name)
		}
	}
	parents := map[string]string{}
	for _, s := range spans {
		parents[s.Name] = byID[string(s.ParentSpanId)]
	}
	return byName, parents
}

// value reads an attribute as a comparable Go value.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		if vs := x.ArrayValue.GetValues(); len(vs) > 0 {
			return vs[0].GetStringValue()
		}
	}
	return nil
}

// checkAttrs compares a span's attributes with want, by their names.
func checkAttrs(t *testing.T, s *tracepb.Span, want map[string]any) {
	t.Helper()
	if s == nil {
		t.Errorf("span missing; want attributes %v", want)
		return
	}
	a := attrs(s.Attributes)
	for k, w := range want {
		if got := value(a[k]); got != w {
			t.Errorf("%s: %s = %v, want %v", s.Name, k, got, w)
		}
	}
}

func TestExportCallOfAServer(t *testing.T) {
	start := time.Unix(1700000000, 0)
	temp := 0.5
	tests := []struct {
		name string
		call Call
		want map[string]any
		err  bool
	}{
		{"answered", Call{Model: "solver", ResponseModel: "solver", ResponseID: "chatcmpl-1", Start: start, Latency: time.Second,
			Usage: delegate.Usage{PromptTokens: 12, CompletionTokens: 5}, Cost: 0.25, FinishReasons: []string{"stop"},
			Temperature: &temp, MaxTokens: 64, Choices: 2, Stream: true, Status: 200},
			map[string]any{keyOperation: "chat", keyProvider: "delegate", keyRequestModel: "solver", "gen_ai.response.model": "solver",
				"gen_ai.response.id": "chatcmpl-1", keyInputTokens: int64(12), keyOutputTokens: int64(5), keyFinish: "stop",
				"gen_ai.request.temperature": 0.5, "gen_ai.request.max_tokens": int64(64), "gen_ai.request.choice.count": int64(2),
				"delegate.cost.usd": 0.25, "delegate.stream": true, "http.response.status_code": int64(200)}, false},
		{"failed", Call{Model: "solver", Start: start, Latency: time.Millisecond, Status: 504, Error: "HTTP 504", ErrorType: "504"},
			map[string]any{keyOperation: "chat", "error.type": "504", "http.response.status_code": int64(504)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans, _ := exportOne(t, func(e *Exporter) { e.ExportCall(tt.call) })
			s := spans["chat solver"]
			if len(spans) != 1 || s == nil {
				t.Fatalf("spans %v, want one chat solver", spans)
			}
			checkAttrs(t, s, tt.want)
			if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("kind %v, want SERVER", s.Kind)
			}
			if got, want := time.Duration(s.EndTimeUnixNano-s.StartTimeUnixNano), tt.call.Latency; got != want {
				t.Errorf("span lasts %v, want %v", got, want)
			}
			if got := s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR; got != tt.err {
				t.Errorf("status %v, want error %v", s.Status, tt.err)
			}
		})
	}
}

func TestExportSession(t *testing.T) {
	start := time.Unix(1700000000, 0)
	r, ok := 1.0, true
	s := Session{ID: "0123456789abcdef", Task: "t1", Group: "g", Start: start, Latency: time.Minute, Reward: &r, Correct: &ok,
		Calls: []Call{
			{Model: "delegator", Role: "policy", Start: start, Latency: time.Second, Usage: delegate.Usage{PromptTokens: 10, CompletionTokens: 2}, Cost: 0.5, FinishReasons: []string{"tool_calls"}},
			{Model: "solver", Role: "helper", Start: start.Add(time.Second), Latency: time.Second, Usage: delegate.Usage{PromptTokens: 3, CompletionTokens: 1}, Cost: 0.25},
		}}
	spans, parents := exportOne(t, func(e *Exporter) { e.ExportSession(s) })
	if len(spans) != 3 {
		t.Errorf("%d spans, want the session and 2 chats", len(spans))
	}
	checkAttrs(t, spans["session"], map[string]any{"gen_ai.conversation.id": s.ID, "delegate.task.id": "t1", "delegate.group": "g",
		keyInputTokens: int64(13), keyOutputTokens: int64(3), "delegate.cost.usd": 0.75, "delegate.calls": int64(2),
		"delegate.reward": 1.0, "delegate.correct": true, "delegate.expired": false})
	checkAttrs(t, spans["chat delegator"], map[string]any{keyOperation: "chat", keyRequestModel: "delegator", "delegate.role": "policy",
		"gen_ai.conversation.id": s.ID, keyFinish: "tool_calls", "delegate.cost.usd": 0.5})
	checkAttrs(t, spans["chat solver"], map[string]any{keyOperation: "chat", "delegate.role": "helper"})
	for _, name := range []string{"chat delegator", "chat solver"} {
		if parents[name] != "session" {
			t.Errorf("%s's parent is %q, want session", name, parents[name])
		}
	}
}

func TestExportEpisode(t *testing.T) {
	start := time.Unix(1700000000, 0)
	r, ok := 0.8, true
	call := &Call{Model: "solver", Start: start.Add(time.Millisecond), Latency: 3 * time.Millisecond,
		Usage: delegate.Usage{PromptTokens: 7, CompletionTokens: 4}, Cost: 0.01, FinishReasons: []string{"stop"}}
	ep := Episode{ID: "ep1", Dataset: "world", Task: "p1", Start: start, Latency: time.Second, Ended: true, Correct: &ok, Reward: &r, Cost: 0.02,
		Steps: []Step{
			{Tool: "delegate", CallID: "call_1", Start: start, Latency: 5 * time.Millisecond, Agent: "subagent", Call: call},
			{Tool: "answer", CallID: "call_2", Start: start.Add(6 * time.Millisecond), Latency: time.Millisecond, Error: "bad", ErrorType: "invalid_args"},
		}}
	spans, parents := exportOne(t, func(e *Exporter) { e.ExportEpisode(ep) })
	if len(spans) != 5 {
		t.Errorf("%d spans, want the episode, 2 tools, an agent and a chat", len(spans))
	}
	checkAttrs(t, spans["episode"], map[string]any{"delegate.episode.id": "ep1", "delegate.dataset": "world", "delegate.task.id": "p1",
		"delegate.steps": int64(2), "delegate.ended": true, "delegate.reward": 0.8, "delegate.correct": true, "delegate.cost.usd": 0.02})
	checkAttrs(t, spans["execute_tool delegate"], map[string]any{keyOperation: "execute_tool", keyToolName: "delegate",
		keyToolCallID: "call_1", keyToolType: "function", "delegate.cost.usd": 0.01})
	checkAttrs(t, spans["execute_tool answer"], map[string]any{keyToolName: "answer", "error.type": "invalid_args"})
	checkAttrs(t, spans["invoke_agent subagent"], map[string]any{keyOperation: "invoke_agent", keyAgentName: "subagent",
		keyRequestModel: "solver", keyInputTokens: int64(7)})
	checkAttrs(t, spans["chat solver"], map[string]any{keyOperation: "chat", keyProvider: "delegate", keyRequestModel: "solver",
		keyInputTokens: int64(7), keyOutputTokens: int64(4), keyFinish: "stop", "delegate.cost.usd": 0.01})
	for child, parent := range map[string]string{"execute_tool delegate": "episode", "execute_tool answer": "episode",
		"invoke_agent subagent": "execute_tool delegate", "chat solver": "invoke_agent subagent"} {
		if parents[child] != parent {
			t.Errorf("%s's parent is %q, want %s", child, parents[child], parent)
		}
	}
	if s := spans["chat solver"]; s != nil && s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("the sub-agent's chat is %v, want CLIENT", s.Kind)
	}
}

// A step that asked several questions at once has an invoke_agent span
// and a chat span per call, under its execute_tool span. Each keeps its
// own start and latency, so they overlap as the calls ran. The step's
// cost is their total.
func TestExportEpisodeParallel(t *testing.T) {
	start := time.Unix(1700000000, 0)
	ms := time.Millisecond
	calls := []Call{
		{Model: "solver", Role: "subagent", Start: start.Add(ms), Latency: 4 * ms, Usage: delegate.Usage{PromptTokens: 7, CompletionTokens: 4}, Cost: 0.01, FinishReasons: []string{"stop"}},
		{Model: "solver", Role: "subagent", Start: start.Add(2 * ms), Latency: 6 * ms, Usage: delegate.Usage{PromptTokens: 9, CompletionTokens: 5}, Cost: 0.02, FinishReasons: []string{"stop"}},
		{Model: "solver", Role: "subagent", Start: start.Add(3 * ms), Latency: 2 * ms, Error: "the backend is down", ErrorType: "503"},
	}
	ep := Episode{ID: "ep1", Dataset: "world", Task: "p1", Start: start, Latency: time.Second, Steps: []Step{
		{Tool: "delegate", CallID: "call_1", Start: start, Latency: 9 * ms, Agent: "subagent", Parallel: calls},
	}}
	spans := exportSpans(t, func(e *Exporter) { e.ExportEpisode(ep) })
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
	}
	// The calls start at different times: that tells which span is whose.
	var step *tracepb.Span
	agents, chats := map[uint64]*tracepb.Span{}, map[uint64]*tracepb.Span{}
	for _, s := range spans {
		switch s.Name {
		case "execute_tool delegate":
			step = s
		case "invoke_agent subagent":
			agents[s.StartTimeUnixNano] = s
		case "chat solver":
			chats[s.StartTimeUnixNano] = s
		}
	}
	if len(spans) != 2+2*len(calls) || step == nil || len(agents) != len(calls) || len(chats) != len(calls) {
		t.Fatalf("%d spans, %d agents, %d chats: want the episode, the step, and an agent and a chat per call", len(spans), len(agents), len(chats))
	}
	checkAttrs(t, step, map[string]any{keyToolName: "delegate", "delegate.cost.usd": 0.03})
	for i, c := range calls {
		a, ch := agents[uint64(c.Start.UnixNano())], chats[uint64(c.Start.UnixNano())]
		if a == nil || ch == nil {
			t.Errorf("call %d: no agent or chat span starts with it", i)
			continue
		}
		if p := byID[string(a.ParentSpanId)]; p != step {
			t.Errorf("agent %d is under %v, want the step", i, p)
		}
		if p := byID[string(ch.ParentSpanId)]; p != a {
			t.Errorf("chat %d is not under agent %d", i, i)
		}
		for _, s := range []*tracepb.Span{a, ch} {
			if got, want := s.EndTimeUnixNano, uint64(c.Start.Add(c.Latency).UnixNano()); got != want {
				t.Errorf("%s %d ends at %d, want %d", s.Name, i, got, want)
			}
		}
		agent := map[string]any{keyOperation: "invoke_agent", keyAgentName: "subagent", keyRequestModel: "solver",
			"delegate.role": "subagent", keyInputTokens: int64(c.Usage.PromptTokens), keyOutputTokens: int64(c.Usage.CompletionTokens),
			"delegate.cost.usd": c.Cost}
		chat := map[string]any{keyOperation: "chat", keyProvider: "delegate", keyRequestModel: "solver", "delegate.role": "subagent",
			keyInputTokens: int64(c.Usage.PromptTokens), keyOutputTokens: int64(c.Usage.CompletionTokens), "delegate.cost.usd": c.Cost}
		if c.Error != "" {
			agent["error.type"], chat["error.type"] = c.ErrorType, c.ErrorType
		}
		checkAttrs(t, a, agent)
		checkAttrs(t, ch, chat)
	}
}

// BenchmarkExportCall measures what ExportCall costs the request that calls it.
// That is one span and a send into a full queue, which drops the trace.
func BenchmarkExportCall(b *testing.B) {
	e, err := New(config(func(c *Config) { c.Endpoint, c.QueueSize = "http://127.0.0.1:1", 1 }))
	if err != nil {
		b.Fatal(err)
	}
	temp := 0.0
	c := Call{Model: "solver", ResponseModel: "solver", Start: time.Now(), Latency: time.Millisecond, Temperature: &temp, MaxTokens: 64,
		Usage: delegate.Usage{PromptTokens: 20, CompletionTokens: 8}, Cost: 1e-5, FinishReasons: []string{"stop"}, Status: 200}
	b.ReportAllocs()
	for b.Loop() {
		e.ExportCall(c)
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = e.Close(ctx) // the port is closed: every trace is dropped
}
