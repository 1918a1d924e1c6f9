package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai/wire"
	"github.com/delegatelab/delegate/strategy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// render executes the strategy package's embedded template name over d.
func render(t *testing.T, name string, d strategy.PromptData) string {
	t.Helper()
	src, ok := strategy.DefaultPrompt(name)
	if !ok {
		t.Fatalf("no template %s", name)
	}
	var b strings.Builder
	if err := template.Must(template.New(name).Parse(src)).Execute(&b, d); err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	return strings.TrimSpace(b.String())
}

func delegateToolDef() []wireToolDef {
	var td wireToolDef
	td.Type = "function"
	td.Function.Name = strategy.DelegateTool.Name
	td.Function.Description = strategy.DelegateTool.Description
	td.Function.Parameters = strategy.DelegateTool.Parameters
	return []wireToolDef{td}
}

func wmsg(role, content string) wireMsg { return wireMsg{Role: role, Content: &content} }

func TestAnswers(t *testing.T) {
	const request = "A farmer has 17 sheep and buys 25 more. How many sheep now?"
	s := start(t, testConfig(func(c *Config) { c.Seed = 7 }))
	url := s.URL()
	route := []wireMsg{wmsg("system", render(t, "route_system", strategy.PromptData{})), wmsg("user", request)}

	// Route's first turn: its tool calls feed the second turn.
	first := chatOK(t, url, wireReq{Messages: route, Tools: delegateToolDef()})
	var second []wireMsg
	second = append(second, route...)
	second = append(second, first.Choices[0].Message)
	for _, tc := range first.Choices[0].Message.ToolCalls {
		second = append(second, wireMsg{Role: "tool", Content: ptr("\\boxed{42}"), ToolCallID: tc.ID})
	}

	data := strategy.PromptData{Request: request, Min: 3, Max: 5, SubagentContext: true, Subtask: "count the sheep", Index: 1,
		Budget: 512, Reasoning: "add", Results: []strategy.SubtaskResult{{Index: 1, Subtask: "count", Result: "42"}},
		Question: "what is 17 + 25?", K: 3, Peers: []strategy.PeerAnswer{{Index: 1, Answer: "<answer>42</answer>"}}}
	pair := func(sys, user string) []wireMsg {
		return []wireMsg{wmsg("system", render(t, sys, data)), wmsg("user", render(t, user, data))}
	}
	tests := []struct {
		name  string
		req   wireReq
		kind  Kind
		check func(t *testing.T, r wireResp)
	}{
		{"route first turn", wireReq{Messages: route, Tools: delegateToolDef()}, KindRouteCalls, func(t *testing.T, r wireResp) {
			c := r.Choices[0]
			if c.FinishReason != "tool_calls" {
				t.Errorf("finish_reason %q, want tool_calls", c.FinishReason)
			}
			if c.Message.Content != nil {
				t.Errorf("content %q, want null", *c.Message.Content)
			}
			if got, want := len(c.Message.ToolCalls), DefaultConfig().ToolCalls; got != want {
				t.Fatalf("%d tool calls, want %d", got, want)
			}
			ids := map[string]bool{}
			for _, tc := range c.Message.ToolCalls {
				q, err := strategy.ParseDelegateArgs(tc.Function.Arguments)
				if err != nil {
					t.Errorf("call %s: %v", tc.ID, err)
				}
				if !strings.Contains(q, "17 sheep") {
					t.Errorf("question %q does not quote the request", q)
				}
				if tc.Type != "function" || tc.Function.Name != DelegateTool || tc.ID == "" || ids[tc.ID] {
					t.Errorf("call %+v: want a function call of delegate with a fresh id", tc)
				}
				ids[tc.ID] = true
			}
		}},
		{"route final turn", wireReq{Messages: second, Tools: delegateToolDef()}, KindRouteFinal, func(t *testing.T, r wireResp) {
			if _, ok := delegate.Boxed(text(r.Choices[0].Message)); !ok {
				t.Errorf("no \\boxed{} in %q", text(r.Choices[0].Message))
			}
			if r.Usage.PromptTokensDetails.CachedTokens == 0 {
				t.Errorf("no cached tokens on a second turn")
			}
		}},
		{"weak", wireReq{Messages: pair("weak_system", "weak_user")}, KindWeak, func(t *testing.T, r wireResp) {
			if _, ok := delegate.Boxed(text(r.Choices[0].Message)); !ok {
				t.Errorf("no \\boxed{} in %q", text(r.Choices[0].Message))
			}
		}},
		{"plan", wireReq{Messages: pair("plan_system", "plan_user")}, KindPlan, func(t *testing.T, r wireResp) {
			p, err := strategy.ParsePlan(text(r.Choices[0].Message), 3, 5)
			if err != nil {
				t.Fatalf("ParsePlan: %v", err)
			}
			if got, want := len(p.Subtasks), DefaultConfig().Subtasks; got != want {
				t.Errorf("%d subtasks, want %d", got, want)
			}
		}},
		{"subagent", wireReq{Messages: pair("subagent_system", "subagent_user")}, KindSubagent, func(t *testing.T, r wireResp) {
			if got := text(r.Choices[0].Message); got == "" || len(got) > DefaultConfig().ReplyBytes {
				t.Errorf("sub-agent answer of %d bytes, want a brief one", len(got))
			}
		}},
		{"aggregate", wireReq{Messages: pair("aggregate_system", "aggregate_user")}, KindAggregate, func(t *testing.T, r wireResp) {
			if _, ok := delegate.FinalOutput(text(r.Choices[0].Message)); !ok {
				t.Errorf("no Final Output in %q", text(r.Choices[0].Message))
			}
		}},
		{"peer", wireReq{Messages: pair("peer_system", "peer_user")}, KindPeer, func(t *testing.T, r wireResp) {
			if _, ok := delegate.AnswerTag(text(r.Choices[0].Message)); !ok {
				t.Errorf("no <answer> in %q", text(r.Choices[0].Message))
			}
		}},
		{"leader", wireReq{Messages: pair("leader_system", "leader_user")}, KindLeader, func(t *testing.T, r wireResp) {
			if _, ok := delegate.AnswerTag(text(r.Choices[0].Message)); !ok {
				t.Errorf("no <answer> in %q", text(r.Choices[0].Message))
			}
		}},
		{"single", wireReq{Messages: pair("single_system", "single_user")}, KindSingle, func(t *testing.T, r wireResp) {
			if _, ok := delegate.ExtractAnswer(text(r.Choices[0].Message)); !ok {
				t.Errorf("no final answer in %q", text(r.Choices[0].Message))
			}
		}},
		{"plain", wireReq{Messages: []wireMsg{wmsg("user", "Tell me about sheep.")}}, KindPlain, func(t *testing.T, r wireResp) {
			if text(r.Choices[0].Message) == "" {
				t.Errorf("empty plain answer")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Stats().Answers[tt.kind]
			r := chatOK(t, url, tt.req)
			if got := s.Stats().Answers[tt.kind] - before; got != 1 {
				t.Errorf("answers of kind %v went up by %d, want 1", tt.kind, got)
			}
			if r.Object != "chat.completion" || !strings.HasPrefix(r.ID, "chatcmpl-") || r.Created == 0 || r.Model != DefaultConfig().Model {
				t.Errorf("envelope id %q object %q created %d model %q", r.ID, r.Object, r.Created, r.Model)
			}
			if r.Choices[0].Message.Role != "assistant" {
				t.Errorf("role %q, want assistant", r.Choices[0].Message.Role)
			}
			if tt.kind != KindRouteCalls && r.Choices[0].FinishReason != "stop" {
				t.Errorf("finish_reason %q, want stop", r.Choices[0].FinishReason)
			}
			u := r.Usage
			if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v", u)
			}
			body := must(json.Marshal(tt.req))
			if lo, hi := len(body)/8, len(body)/2; u.PromptTokens < lo || u.PromptTokens > hi {
				t.Errorf("prompt_tokens %d for a %d-byte request, want about bytes/4", u.PromptTokens, len(body))
			}
			tt.check(t, r)
			again := chatOK(t, url, tt.req)
			if got, want := must(json.Marshal(again.Choices)), must(json.Marshal(r.Choices)); string(got) != string(want) {
				t.Errorf("the same request answered differently:\n%s\n%s", got, want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestMarkers checks that every embedded prompt of the strategy package is recognised as its stage.
// Rewording a prompt then breaks this test rather than the benchmark.
func TestMarkers(t *testing.T) {
	data := strategy.PromptData{Request: "r", Min: 2, Max: 6, Subtask: "s", Question: "q", K: 2, Budget: 9,
		Peers: []strategy.PeerAnswer{{Index: 1, Answer: "a"}}}
	tests := []struct {
		system, user string
		tools        bool
		want         Kind
	}{
		{"single_system", "single_user", false, KindSingle},
		{"plan_system", "plan_user", false, KindPlan},
		{"subagent_system", "subagent_user", false, KindSubagent},
		{"aggregate_system", "aggregate_user", false, KindAggregate},
		{"route_system", "route_user", true, KindRouteCalls},
		{"weak_system", "weak_user", false, KindWeak},
		{"peer_system", "peer_user", false, KindPeer},
		{"leader_system", "leader_user", false, KindLeader},
	}
	for _, tt := range tests {
		t.Run(tt.system, func(t *testing.T) {
			sys, user := render(t, tt.system, data), render(t, tt.user, data)
			r := &wire.ChatRequest{Messages: []wire.Message{
				{Role: "system", Content: wire.Content{Value: &sys}},
				{Role: "user", Content: wire.Content{Value: &user}},
			}}
			if tt.tools {
				r.Tools = make([]wire.Tool, 1)
				r.Tools[0].Function.Name = strategy.DelegateToolName
			}
			if got := read(r, 0).kind; got != tt.want {
				t.Errorf("kind %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("plan bounds", func(t *testing.T) {
		sys := render(t, "plan_system", data)
		lo, hi, ok := subtaskBounds(sys)
		if !ok || lo != 2 || hi != 6 {
			t.Errorf("subtaskBounds = %d, %d, %v; want 2, 6, true", lo, hi, ok)
		}
	})
}

func TestToolCallsAndSubtasksConfigured(t *testing.T) {
	s := start(t, testConfig(func(c *Config) { c.ToolCalls, c.Subtasks = 7, 9 }))
	route := []wireMsg{wmsg("system", render(t, "route_system", strategy.PromptData{})), wmsg("user", "q")}
	r := chatOK(t, s.URL(), wireReq{Messages: route, Tools: delegateToolDef()})
	if got := len(r.Choices[0].Message.ToolCalls); got != 7 {
		t.Errorf("%d tool calls, want 7", got)
	}
	// The prompt allows 3 to 5: 9 is clamped to 5.
	plan := []wireMsg{wmsg("system", render(t, "plan_system", strategy.PromptData{Min: 3, Max: 5})), wmsg("user", "q")}
	r = chatOK(t, s.URL(), wireReq{Messages: plan})
	p, err := strategy.ParsePlan(text(r.Choices[0].Message), 3, 5)
	if err != nil || len(p.Subtasks) != 5 {
		t.Errorf("plan: %d subtasks, err %v; want 5, nil", len(p.Subtasks), err)
	}
}

func TestMaxTokensCuts(t *testing.T) {
	s := start(t, testConfig(func(c *Config) { c.ReplyBytes = 2000 }))
	r := chatOK(t, s.URL(), wireReq{Messages: []wireMsg{wmsg("user", "hello")}, MaxTokens: 10})
	c := r.Choices[0]
	if c.FinishReason != delegate.FinishLength || len(text(c.Message)) > 40 || r.Usage.CompletionTokens != 10 {
		t.Errorf("finish %q, %d bytes, %d completion tokens; want length, <= 40, 10", c.FinishReason, len(text(c.Message)), r.Usage.CompletionTokens)
	}
	r = chatOK(t, s.URL(), wireReq{Messages: []wireMsg{wmsg("user", "hello")}, N: 3})
	if len(r.Choices) != 3 || r.Choices[2].Index != 2 || text(r.Choices[0].Message) == text(r.Choices[1].Message) {
		t.Errorf("n=3: %d choices, want 3 different ones", len(r.Choices))
	}
}

func TestBadRequests(t *testing.T) {
	s := start(t, DefaultConfig())
	base := "http://" + s.Addr()
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"not json", "POST", "/v1/chat/completions", "{", 400},
		{"no messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400},
		{"bad role", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400},
		{"bad content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":3}]}`, 400},
		{"tool without id", "POST", "/v1/chat/completions", `{"messages":[{"role":"tool","content":"x"}]}`, 400},
		{"stream", "POST", "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"x"}]}`, 400},
		{"get chat", "GET", "/v1/chat/completions", "", 405},
		{"unknown path", "GET", "/v2/nothing", "", 404},
		{"post models", "POST", "/v1/models", "", 405},
		{"post metrics", "POST", "/metrics", "", 405},
		{"parts", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, 200},
		{"image part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400},
		{"n over the format's bound", "POST", "/v1/chat/completions", `{"n":129,"messages":[{"role":"user","content":"x"}]}`, 400},
		{"models", "GET", "/v1/models", "", 200},
		{"health", "GET", "/health", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := must(http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var v map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Errorf("body is not JSON: %v", err)
			}
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d (body %v)", resp.StatusCode, tt.want, v)
			}
			if tt.want >= 400 {
				if e, ok := v["error"].(map[string]any); !ok || e["message"] == "" {
					t.Errorf("error body %v, want an OpenAI-style error", v)
				}
			}
		})
	}
	if got := s.Stats().BadRequests; got != 8 { // the 400s above
		t.Errorf("BadRequests %d, want 8", got)
	}
}

func TestStartRejectsNonLoopback(t *testing.T) {
	s := must(New(DefaultConfig()))
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:80", "nonsense"} {
		if err := s.Start(addr); err == nil {
			t.Errorf("Start(%q) succeeded, want an error", addr)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Start(""); err == nil {
		t.Errorf("Start after Close succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" valid, else a substring of the error
	}{
		{"defaults", DefaultConfig(), ""},
		{"zero latency, slow delay, retry after and reply", testConfig(func(c *Config) { c.Latency, c.SlowDelay, c.RetryAfter, c.ReplyBytes = 0, 0, 0, 0 }), ""},
		{"zero config", Config{}, "jitter"},
		{"no jitter kind", testConfig(func(c *Config) { c.Jitter = "" }), "jitter"},
		{"no model", testConfig(func(c *Config) { c.Model = " " }), "model"},
		{"zero tool calls", testConfig(func(c *Config) { c.ToolCalls = 0 }), "tool_calls"},
		{"zero subtasks", testConfig(func(c *Config) { c.Subtasks = 0 }), "subtasks"},
		{"full", testConfig(func(c *Config) {
			c.Latency, c.Jitter, c.Spread, c.Faults = time.Millisecond, JitterLognormal, 0.5, Uniform(0.02)
		}), ""},
		{"negative latency", testConfig(func(c *Config) { c.Latency = -1 }), "latency"},
		{"unknown jitter", testConfig(func(c *Config) { c.Jitter = "gamma" }), "jitter"},
		{"spread on fixed", testConfig(func(c *Config) { c.Spread = 0.1 }), "spread"},
		{"uniform spread", testConfig(func(c *Config) { c.Jitter, c.Spread = JitterUniform, 1.5 }), "spread"},
		{"nan spread", testConfig(func(c *Config) { c.Jitter, c.Spread = JitterExp, math.NaN() }), "spread"},
		{"rate out of range", testConfig(func(c *Config) { c.Faults = FaultRates{Reset: 1.2} }), "faults.reset"},
		{"rates sum", testConfig(func(c *Config) { c.Faults = Uniform(0.2) }), "add up"},
		{"tool calls", testConfig(func(c *Config) { c.ToolCalls = 100 }), "tool_calls"},
		{"reply bytes", testConfig(func(c *Config) { c.ReplyBytes = -1 }), "reply_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New: %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestFaults observes every kind of fault from a client.
// Each must be seen at its configured rate, and exactly as often as the server counted it.
func TestFaults(t *testing.T) {
	const (
		n        = 400
		rate     = 0.08
		slowRate = 0.03
	)
	faults := Uniform(rate)
	faults.Slow = slowRate // each costs a client timeout
	s := start(t, testConfig(func(c *Config) {
		c.Faults, c.SlowDelay, c.RetryAfter, c.Seed = faults, time.Minute, 1500*time.Millisecond, 3
	}))
	// The timeout is far above a proper answer's time even under -race on a
	// loaded machine, and far below SlowDelay.
	client := &http.Client{Timeout: 1500 * time.Millisecond, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.Transport.(*http.Transport).CloseIdleConnections()
	req := wireReq{Messages: []wireMsg{wmsg("user", "hello")}}

	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for range work {
				kind, detail := observe(client, s.URL(), req)
				mu.Lock()
				seen[kind]++
				if detail != "" {
					seen["bad: "+detail]++
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()

	st := s.Stats()
	tests := []struct {
		kind   string
		server int64
		p      float64
	}{
		{"rate_limit", st.Faults.RateLimit, rate},
		{"server_error", st.Faults.ServerError, rate},
		{"reset", st.Faults.Reset, rate},
		{"truncated", st.Faults.Truncated, rate},
		{"slow", st.Faults.Slow, slowRate},
		{"garbage", st.Faults.Garbage, rate},
		{"ok", st.AnswersTotal(), 1 - 5*rate - slowRate},
	}
	for _, tt := range tests {
		got := seen[tt.kind]
		if int64(got) != tt.server {
			t.Errorf("%s: client saw %d, server counted %d", tt.kind, got, tt.server)
		}
		mean, sd := n*tt.p, math.Sqrt(n*tt.p*(1-tt.p))
		if math.Abs(float64(got)-mean) > 4*sd {
			t.Errorf("%s: %d of %d, want %.0f ± %.0f", tt.kind, got, n, mean, 4*sd)
		}
	}
	var bad []string
	for k, v := range seen {
		if strings.HasPrefix(k, "bad: ") {
			bad = append(bad, k+" ×"+strconv.Itoa(v))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("unexpected observations: %v", bad)
	}
	if st.Requests != n {
		t.Errorf("Requests %d, want %d", st.Requests, n)
	}
}

// observe makes one request and says what the client saw: the fault kind or "ok".
// It adds a detail when what it saw does not fit the kind.
func observe(c *http.Client, url string, req wireReq) (kind, detail string) {
	status, h, data, err := post(context.Background(), c, url, req)
	var ne net.Error
	switch {
	case err != nil && errors.As(err, &ne) && ne.Timeout():
		return "slow", ""
	case err != nil:
		return "reset", ""
	case status == http.StatusTooManyRequests:
		if h.Get("Retry-After") != "2" || h.Get("Retry-After-Ms") != "1500" {
			return "rate_limit", "retry-after " + h.Get("Retry-After") + " / " + h.Get("Retry-After-Ms")
		}
		return "rate_limit", ""
	case status == http.StatusInternalServerError:
		if !json.Valid(data) {
			return "server_error", "500 body not JSON"
		}
		return "server_error", ""
	case status != http.StatusOK:
		return "other", "status " + http.StatusText(status)
	case len(data) > 0 && data[0] == '<':
		return "garbage", ""
	case !json.Valid(data):
		if !strings.HasPrefix(string(data), `{"id":"chatcmpl-`) {
			return "truncated", "truncated body does not start as an answer"
		}
		return "truncated", ""
	}
	return "ok", ""
}

func dur(ns float64) time.Duration { return time.Duration(ns) }

func TestLatencyDistributions(t *testing.T) {
	const (
		n = 20000
		l = 50 * time.Millisecond
	)
	tests := []struct {
		jitter   string
		spread   float64
		lo, hi   time.Duration // bounds every draw must respect (hi 0: none)
		median   time.Duration // the distribution's median
		medRelTo float64       // tolerance of the median, relative
	}{
		{JitterFixed, 0, l, l, l, 0},
		{JitterUniform, 0.5, l / 2, 3 * l / 2, l, 0.03},
		{JitterExp, 1, 0, 0, dur(float64(l) * math.Ln2), 0.04},
		{JitterExp, 0.2, 4 * l / 5, 0, 4*l/5 + dur(float64(l)*0.2*math.Ln2), 0.03},
		{JitterLognormal, 0.5, 0, 0, dur(float64(l) * math.Exp(-0.125)), 0.03},
	}
	for _, tt := range tests {
		t.Run(tt.jitter, func(t *testing.T) {
			cfg := testConfig(func(c *Config) { c.Latency, c.Jitter, c.Spread = l, tt.jitter, tt.spread })
			d := draws{key: 1}
			xs := make([]float64, n)
			var sum float64
			for i := range xs {
				v := cfg.latency(&d)
				if v < tt.lo || tt.hi > 0 && v > tt.hi {
					t.Fatalf("draw %v outside [%v, %v]", v, tt.lo, tt.hi)
				}
				xs[i] = float64(v)
				sum += xs[i]
			}
			if mean := sum / n; math.Abs(mean/float64(l)-1) > 0.03 {
				t.Errorf("mean %v, want %v within 3%%", time.Duration(mean), l)
			}
			slices.Sort(xs)
			if med := xs[n/2]; math.Abs(med/float64(tt.median)-1) > tt.medRelTo+1e-9 {
				t.Errorf("median %v, want %v within %.0f%%", time.Duration(med), tt.median, 100*tt.medRelTo)
			}
		})
	}
}

// TestLatencyWaits checks the server waits at least the fixed latency.
// It gives up on a client that went away, counted as Canceled.
func TestLatencyWaits(t *testing.T) {
	s := start(t, testConfig(func(c *Config) { c.Latency = 40 * time.Millisecond }))
	req := wireReq{Messages: []wireMsg{wmsg("user", "hi")}}
	begin := time.Now()
	chatOK(t, s.URL(), req)
	if el := time.Since(begin); el < 40*time.Millisecond {
		t.Errorf("answered after %v, want at least 40ms", el)
	}
	// Cancel once the server holds the request: on a loaded machine a
	// fixed short timeout can end it before it arrives.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, _, err := post(ctx, http.DefaultClient, s.URL(), req)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().InFlight != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Errorf("a request cancelled in flight succeeded")
	}
	deadline = time.Now().Add(5 * time.Second)
	for s.Stats().Canceled != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.Stats().Canceled; got != 1 {
		t.Errorf("Canceled %d, want 1", got)
	}
}

// TestConcurrent hits one server from many goroutines with every kind of request.
// Run under -race, it checks the counters add up.
func TestConcurrent(t *testing.T) {
	s, err := New(testConfig(func(c *Config) { c.Latency, c.Jitter, c.Spread = time.Millisecond, JitterExp, 1 }))
	if err != nil {
		t.Fatal(err)
	}
	url := inProcess(t, s)
	reqs := []wireReq{
		{Messages: []wireMsg{wmsg("system", render(t, "route_system", strategy.PromptData{})), wmsg("user", "x")}, Tools: delegateToolDef()},
		{Messages: []wireMsg{wmsg("system", render(t, "weak_system", strategy.PromptData{})), wmsg("user", "x")}},
		{Messages: []wireMsg{wmsg("user", "x")}},
	}
	const g, per = 32, 10
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			for j := range per {
				req := reqs[(i+j)%len(reqs)]
				status, _, data, err := post(context.Background(), http.DefaultClient, url, req)
				if err != nil || status != 200 || !json.Valid(data) {
					t.Errorf("request: status %d err %v", status, err)
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Requests != g*per || st.AnswersTotal() != g*per || st.InFlight != 0 {
		t.Errorf("stats %+v: want %d requests and answers, none in flight", st, g*per)
	}
	if st.MaxInFlight < 2 {
		t.Errorf("MaxInFlight %d: the requests never overlapped", st.MaxInFlight)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "line\nfeed\ttab\r\x00\x1f", "héllo ✓", "bad \xff utf8", "sep \u2028 \u2029", "<&>"} {
		got := appendString(nil, s)
		want := must(json.Marshal(s))
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendString(%q) = %s: not JSON: %v", s, got, err)
			continue
		}
		var wantBack string
		_ = json.Unmarshal(want, &wantBack) // json.Marshal's output always decodes
		if back != wantBack {
			t.Errorf("appendString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
}

// TestStrategiesEndToEnd runs the four strategies of package strategy against the stand-in over real HTTP.
// Each must end with a proper answer after the calls its shape implies.
func TestStrategiesEndToEnd(t *testing.T) {
	s := start(t, testConfig(func(c *Config) { c.Seed = 11 }))
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	m := &httpModel{url: s.URL(), name: "standin", client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	a := delegate.Agent{Model: m}
	roles := strategy.Roles{Single: a, Delegator: a, Subagent: a, Strong: a, Weak: a, Leader: a, Peers: []delegate.Agent{a}}
	cfg := strategy.DefaultConfig()
	tests := []struct {
		name  string
		calls int
	}{
		{strategy.NameSingle, 1},
		{strategy.NameDecompose, 1 + DefaultConfig().Subtasks + 1},
		{strategy.NameRoute, 1 + DefaultConfig().ToolCalls + 1},
		{strategy.NameLead, (cfg.Peers + 1) * (cfg.Rounds + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := strategy.New(tt.name, roles, cfg)
			if err != nil {
				t.Fatal(err)
			}
			trace, err := st.Run(context.Background(), "A farmer has 17 sheep and buys 25 more. How many now?", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if trace.Failure != "" || trace.Answer == "" {
				t.Errorf("failure %q, answer %q; want a proper answer", trace.Failure, trace.Answer)
			}
			if got := len(trace.Calls()); got != tt.calls {
				t.Errorf("%d calls, want %d", got, tt.calls)
			}
			if trace.Total.Errors != 0 || trace.Total.Usage.PromptTokens == 0 {
				t.Errorf("totals %+v: want no errors and some usage", trace.Total)
			}
		})
	}
}

// FuzzChat sends arbitrary bodies: the server answers each with a status
// and a JSON body, never a panic.
func FuzzChat(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"<|subtask|> between 2 and 3"},{"role":"user","content":"x"}],"max_tokens":1}`,
		`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"delegate","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}],"tools":[{"type":"function","function":{"name":"delegate"}}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"\u2028\xff"}]}],"n":16}`,
		`{"messages":null}`, `[]`, `nul`, "",
	} {
		f.Add([]byte(seed))
	}
	s, err := New(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
		if w.Code != 200 && w.Code != 400 {
			t.Errorf("status %d, want 200 or 400", w.Code)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Errorf("body is not JSON: %q", w.Body.Bytes())
		}
	})
}
