package telemetry

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
)

// scripted plays route: the strong model delegates two questions, then
// answers; the weak model answers each.
func scripted(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case len(req.Tools) > 0 && last.Role == delegate.RoleTool:
		return modeltest.Text("Both parts are done. Final answer: \\boxed{42}"), nil
	case len(req.Tools) > 0:
		return modeltest.ToolCalls(
			delegate.ToolCall{ID: "c1", Name: "delegate", Arguments: `{"question":"What is 6*7?"}`},
			delegate.ToolCall{ID: "c2", Name: "delegate", Arguments: `{"question":"What is 40+2?"}`},
		), nil
	}
	return modeltest.Text("It is 42.\nFinal answer: \\boxed{42}"), nil
}

// routeTrace runs route with scripted models priced as a strong and a
// weak model.
func routeTrace(t testing.TB) *delegate.Trace {
	t.Helper()
	roles := strategy.Roles{
		Strong: delegate.Agent{Role: "strong", Model: modeltest.New("big", scripted), Price: delegate.Price{Input: 2, Output: 8}},
		Weak:   delegate.Agent{Role: "weak", Model: modeltest.New("small", scripted), Price: delegate.Price{Input: 0.1, Output: 0.4}},
	}
	s, err := strategy.New(strategy.NameRoute, roles, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.Run(context.Background(), "What is 6*7?", nil)
	if err != nil {
		t.Fatalf("route: %v", err)
	}
	return tr
}

// The attribute names of the GenAI semantic conventions, written out so
// that a renamed constant cannot hide a wrong name.
const (
	keyOperation    = "gen_ai.operation.name"
	keyProvider     = "gen_ai.provider.name"
	keyRequestModel = "gen_ai.request.model"
	keyInputTokens  = "gen_ai.usage.input_tokens"
	keyOutputTokens = "gen_ai.usage.output_tokens"
	keyCacheRead    = "gen_ai.usage.cache_read.input_tokens"
	keyFinish       = "gen_ai.response.finish_reasons"
	keyAgentName    = "gen_ai.agent.name"
	keyToolName     = "gen_ai.tool.name"
	keyToolCallID   = "gen_ai.tool.call.id"
	keyToolType     = "gen_ai.tool.type"
)

func TestExportRouteAsGenAISpans(t *testing.T) {
	rcv := newReceiver(t, 0)
	e, err := New(config(func(c *Config) { c.Endpoint, c.Provider = rcv.URL, func(string) string { return "openai" } }))
	if err != nil {
		t.Fatal(err)
	}
	tr := routeTrace(t)
	e.Export(tr)
	if err := e.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := e.Stats(); got.Exported != 1 || got.Dropped != 0 {
		t.Fatalf("stats %+v, want 1 exported, none dropped", got)
	}
	spans := rcv.received()
	byName := map[string][]*tracepb.Span{}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		byID[string(s.SpanId)] = s
		if string(s.TraceId) != string(spans[0].TraceId) {
			t.Errorf("span %q is in another trace", s.Name)
		}
	}
	counts := []struct {
		name string
		kind tracepb.Span_SpanKind
		want int
	}{
		{"invoke_agent route", tracepb.Span_SPAN_KIND_INTERNAL, 1},
		{"turn 1", tracepb.Span_SPAN_KIND_INTERNAL, 1},
		{"turn 2", tracepb.Span_SPAN_KIND_INTERNAL, 1},
		{"chat big", tracepb.Span_SPAN_KIND_CLIENT, 2},
		{"execute_tool delegate", tracepb.Span_SPAN_KIND_INTERNAL, 2},
		{"invoke_agent weak", tracepb.Span_SPAN_KIND_INTERNAL, 2},
		{"chat small", tracepb.Span_SPAN_KIND_CLIENT, 2},
	}
	total := 0
	for _, c := range counts {
		total += c.want
		if got := len(byName[c.name]); got != c.want {
			t.Errorf("%d spans %q, want %d", got, c.name, c.want)
		}
		for _, s := range byName[c.name] {
			if s.Kind != c.kind {
				t.Errorf("span %q kind %v, want %v", c.name, s.Kind, c.kind)
			}
		}
	}
	if len(spans) != total {
		t.Errorf("%d spans, want %d", len(spans), total)
	}
	parent := func(s *tracepb.Span) string {
		if p, ok := byID[string(s.ParentSpanId)]; ok {
			return p.Name
		}
		return ""
	}

	root := byName["invoke_agent route"][0]
	ra := attrs(root.Attributes)
	if got := ra[keyOperation].GetStringValue(); got != "invoke_agent" {
		t.Errorf("root %s = %q, want invoke_agent", keyOperation, got)
	}
	if got := ra[keyAgentName].GetStringValue(); got != "route" {
		t.Errorf("root %s = %q, want route", keyAgentName, got)
	}
	if got, want := ra[keyInputTokens].GetIntValue(), int64(tr.Total.Usage.PromptTokens); got != want || got == 0 {
		t.Errorf("root input tokens %d, want %d", got, want)
	}
	if got := ra["delegate.cost.usd"].GetDoubleValue(); got != tr.Total.Cost || got == 0 {
		t.Errorf("root cost %v, want %v", got, tr.Total.Cost)
	}
	if got, want := time.Duration(root.EndTimeUnixNano-root.StartTimeUnixNano), tr.Latency; got != want {
		t.Errorf("root span lasts %v, the trace %v", got, want)
	}

	calls := tr.Calls()
	var chats []*tracepb.Span
	chats = append(chats, byName["chat big"]...)
	chats = append(chats, byName["chat small"]...)
	for _, s := range chats {
		a := attrs(s.Attributes)
		id := a["delegate.node.id"].GetIntValue()
		i := slices.IndexFunc(calls, func(n *delegate.Node) bool { return int64(n.ID) == id })
		if i < 0 {
			t.Errorf("chat span of node %d, which is no call", id)
			continue
		}
		n := calls[i]
		checks := []struct {
			key       string
			got, want any
		}{
			{keyOperation, a[keyOperation].GetStringValue(), "chat"},
			{keyProvider, a[keyProvider].GetStringValue(), "openai"},
			{keyRequestModel, a[keyRequestModel].GetStringValue(), n.Model},
			{keyInputTokens, a[keyInputTokens].GetIntValue(), int64(n.Usage.PromptTokens)},
			{keyOutputTokens, a[keyOutputTokens].GetIntValue(), int64(n.Usage.CompletionTokens)},
			{keyCacheRead, a[keyCacheRead].GetIntValue(), int64(n.Usage.CachedTokens)},
			{keyFinish, a[keyFinish].GetArrayValue().GetValues()[0].GetStringValue(), n.FinishReason},
			{"delegate.cost.usd", a["delegate.cost.usd"].GetDoubleValue(), n.Cost},
			{"delegate.role", a["delegate.role"].GetStringValue(), n.Role},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: %s = %v, want %v", s.Name, c.key, c.got, c.want)
			}
		}
		if n.Usage.PromptTokens == 0 || n.Cost == 0 {
			t.Errorf("%s: node %d has no usage or cost to check", s.Name, n.ID)
		}
		if got, want := s.StartTimeUnixNano, uint64(n.Start.UnixNano()); got != want {
			t.Errorf("%s starts at %d, its call at %d", s.Name, got, want)
		}
	}
	for _, s := range byName["chat big"] {
		if p := parent(s); !strings.HasPrefix(p, "turn ") {
			t.Errorf("chat big's parent is %q, want a turn", p)
		}
	}
	for _, s := range byName["chat small"] {
		if p := parent(s); p != "invoke_agent weak" {
			t.Errorf("chat small's parent is %q, want invoke_agent weak", p)
		}
	}
	var ids []string
	for _, s := range byName["execute_tool delegate"] {
		a := attrs(s.Attributes)
		if got := a[keyOperation].GetStringValue(); got != "execute_tool" {
			t.Errorf("execute_tool %s = %q", keyOperation, got)
		}
		if got := a[keyToolName].GetStringValue(); got != "delegate" {
			t.Errorf("execute_tool %s = %q, want delegate", keyToolName, got)
		}
		if got := a[keyToolType].GetStringValue(); got != "function" {
			t.Errorf("execute_tool %s = %q, want function", keyToolType, got)
		}
		ids = append(ids, a[keyToolCallID].GetStringValue())
		if p := parent(s); p != "turn 1" {
			t.Errorf("execute_tool's parent is %q, want turn 1", p)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"c1", "c2"}) {
		t.Errorf("tool call ids %q, want c1 and c2", ids)
	}
	for _, s := range byName["invoke_agent weak"] {
		a := attrs(s.Attributes)
		if a[keyOperation].GetStringValue() != "invoke_agent" || a[keyAgentName].GetStringValue() != "weak" {
			t.Errorf("invoke_agent weak: %s %q, %s %q", keyOperation, a[keyOperation].GetStringValue(), keyAgentName, a[keyAgentName].GetStringValue())
		}
		if p := parent(s); p != "execute_tool delegate" {
			t.Errorf("invoke_agent weak's parent is %q", p)
		}
	}
	if got := attrs(rcv.resource)["service.name"].GetStringValue(); got != "delegate" {
		t.Errorf("service.name %q, want delegate", got)
	}
}

// closedPort returns a loopback URL on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// A receiver that is down or slow costs the caller nothing.
// Export never waits, traces beyond the queue are counted as dropped, and Close returns at its deadline.
func TestExportNeverBlocks(t *testing.T) {
	tr := routeTrace(t)
	tests := []struct {
		name     string
		endpoint func(t *testing.T) string
	}{
		{"down", closedPort},
		{"slow", func(t *testing.T) string { return newReceiver(t, time.Minute).URL }},
	}
	const queue, traces = 8, 200
	const spansPerTrace = 11 // routeTrace's
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(config(func(c *Config) { c.Endpoint, c.QueueSize, c.Timeout = tt.endpoint(t), queue, 30*time.Second }))
			if err != nil {
				t.Fatal(err)
			}
			for range traces {
				e.Export(tr)
			}
			// At most the queue and the trace in flight wait; the rest
			// were dropped at once.
			if got := e.Stats().Dropped; got < traces-queue-1 {
				t.Errorf("dropped %d of %d with a queue of %d", got, traces, queue)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			// A down receiver fails each export at once, a slow one runs
			// into the deadline: either way every trace is dropped.
			_ = e.Close(ctx)
			// Generous: Close gives up at its deadline, not the export's 30s.
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("close took %v with a 200ms deadline", d)
			}
			if got := e.Stats(); got.Dropped != traces || got.Exported != 0 || got.DroppedSpans != traces*spansPerTrace {
				t.Errorf("stats %+v, want all %d traces of %d spans dropped", got, traces, spansPerTrace)
			}
			e.Export(tr) // after Close: counted, not sent, no panic
			if got := e.Stats().Dropped; got != traces+1 {
				t.Errorf("dropped %d after a late export, want %d", got, traces+1)
			}
		})
	}
}

func TestNewRejectsBadEndpoints(t *testing.T) {
	for _, endpoint := range []string{"", "localhost:4318", "ftp://host/x", "http://"} {
		if _, err := New(config(func(c *Config) { c.Endpoint = endpoint })); err == nil {
			t.Errorf("New(%q): no error", endpoint)
		}
	}
}

// BenchmarkExport measures what Export costs the run that calls it.
// That is the conversion of a route trace of 11 spans and a send into a full queue, which drops it.
func BenchmarkExport(b *testing.B) {
	tr := routeTrace(b)
	e, err := New(config(func(c *Config) { c.Endpoint, c.QueueSize = "http://127.0.0.1:1", 1 }))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Export(tr)
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = e.Close(ctx) // the port is closed: every trace is dropped
}

// config is DefaultConfig changed by set.
func config(set func(c *Config)) Config {
	c := DefaultConfig()
	set(&c)
	return c
}

func TestConfigValidate(t *testing.T) {
	const ok = "http://127.0.0.1:4318"
	tests := []struct {
		name string
		set  func(c *Config)
		want string // "" for valid, else a part of the error
	}{
		{"default with an endpoint", func(c *Config) { c.Endpoint = ok }, ""},
		{"zero log every logs each", func(c *Config) { c.Endpoint, c.LogEvery = ok, 0 }, ""},
		{"no endpoint", func(c *Config) {}, "endpoint"},
		{"empty service", func(c *Config) { c.Endpoint, c.Service = ok, "" }, "service"},
		{"zero queue", func(c *Config) { c.Endpoint, c.QueueSize = ok, 0 }, "queue size"},
		{"zero timeout", func(c *Config) { c.Endpoint, c.Timeout = ok, 0 }, "timeout"},
		{"negative log every", func(c *Config) { c.Endpoint, c.LogEvery = ok, -time.Second }, "log every"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := config(tt.set).Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Validate() = %q, want an error naming %q", got, tt.want)
			}
		})
	}
}
