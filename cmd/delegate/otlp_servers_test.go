package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world"
)

// bgServer is a server command started in the background for a test.
type bgServer struct {
	base      string
	out, logs *syncBuffer
	cancel    func()
	done      chan error
}

// startServer runs a server command until stop, and returns once it
// prints the address re captures.
func startServer(t *testing.T, getenv env, re *regexp.Regexp, args ...string) *bgServer {
	t.Helper()
	s := &bgServer{out: &syncBuffer{}, logs: &syncBuffer{}, done: make(chan error, 1)}
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(s.logs, nil)))
	cmd.SetOut(s.out)
	cmd.SetErr(s.out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	t.Cleanup(cancel)
	go func() { s.done <- cmd.ExecuteContext(ctx) }()
	s.base = awaitListening(t, s.out, s.done, re, args[0])
	return s
}

// stop interrupts the command and waits for it: at most the exporter's
// bounded close beyond the server's own shutdown.
func (s *bgServer) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("after interrupt: %v\n%s", err, s.out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the command did not stop")
	}
}

// downURL is a loopback URL on which nothing listens: a receiver down.
func downURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return url
}

// droppedLogged says the log counts the spans of a receiver that is down.
var droppedLogged = regexp.MustCompile(`otlp: traces not exported" dropped=[1-9]\d* dropped_spans=[1-9]`)

// spanAttr reads one attribute of a span as a comparable value.
func spanAttr(s *tracepb.Span, key string) any {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			return v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			return v.BoolValue
		case *commonpb.AnyValue_ArrayValue:
			if vs := v.ArrayValue.GetValues(); len(vs) > 0 {
				return vs[0].GetStringValue()
			}
		}
	}
	return nil
}

// wantAttrs checks attributes by their semantic-convention names; a
// want of positive means any number above 0.
func wantAttrs(t *testing.T, s *tracepb.Span, want map[string]any) {
	t.Helper()
	for k, w := range want {
		got := spanAttr(s, k)
		if w == positive {
			switch g := got.(type) {
			case int64:
				if g > 0 {
					continue
				}
			case float64:
				if g > 0 {
					continue
				}
			}
		} else if got == w {
			continue
		}
		t.Errorf("%s: %s = %v, want %v", s.Name, k, got, w)
	}
}

// positive stands for any number above 0 in wantAttrs.
const positive = "positive"

// serve --otlp exports each chat completion, streamed or failed, as a
// SERVER chat span. With a receiver down every request is still answered,
// and the log counts the dropped spans.
func TestServeOTLP(t *testing.T) {
	addr := regexp.MustCompile(`serving \[delegator solver\] on (http://\S+/v1)`)
	post := func(t *testing.T, base, body string) int {
		t.Helper()
		resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	const ask = `{"model":"solver","temperature":0,"max_tokens":40,"messages":[{"role":"user","content":"56*23"}]}`
	requests := []struct {
		body   string
		status int
	}{
		{ask, 200},
		{strings.Replace(ask, `"temperature"`, `"stream":true,"temperature"`, 1), 200},
		{strings.Replace(ask, `"solver"`, `"nobody"`, 1), 404},
	}
	for _, up := range []bool{true, false} {
		name := map[bool]string{true: "up", false: "down"}[up]
		t.Run(name, func(t *testing.T) {
			var rcv *otlpReceiver
			url := downURL(t)
			if up {
				rcv = newOTLPReceiver(t, 0)
				url = rcv.URL
			}
			s := startServer(t, testEnv, addr, "serve", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--otlp", url)
			for _, r := range requests {
				if got := post(t, s.base, r.body); got != r.status {
					t.Errorf("status %d, want %d", got, r.status)
				}
			}
			s.stop(t)
			if !up {
				if !droppedLogged.MatchString(s.logs.String()) {
					t.Errorf("the log does not count the dropped spans:\n%s", s.logs.String())
				}
				return
			}
			spans := rcv.received()
			if len(spans) != len(requests) {
				t.Fatalf("%d spans, want one per request", len(spans))
			}
			streamed := 0
			for _, sp := range spans {
				if sp.Kind != tracepb.Span_SPAN_KIND_SERVER {
					t.Errorf("%s: kind %v, want SERVER", sp.Name, sp.Kind)
				}
				if sp.Name == "chat" { // the unknown model
					wantAttrs(t, sp, map[string]any{"gen_ai.operation.name": "chat", "error.type": "404", "http.response.status_code": int64(404)})
					if sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
						t.Errorf("the refused request's span has status %v", sp.Status)
					}
					continue
				}
				wantAttrs(t, sp, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "delegate",
					"gen_ai.request.model": "solver", "gen_ai.response.model": "solver", "gen_ai.usage.input_tokens": positive,
					"gen_ai.usage.output_tokens": positive, "gen_ai.response.finish_reasons": "stop",
					"gen_ai.request.temperature": 0.0, "gen_ai.request.max_tokens": int64(40), "delegate.cost.usd": positive,
					"http.response.status_code": int64(200)})
				if spanAttr(sp, "delegate.stream") == true {
					streamed++
				}
			}
			if streamed != 1 {
				t.Errorf("%d streamed spans, want 1", streamed)
			}
		})
	}
}

// gateway --otlp exports each ended session as a session span. It holds a
// chat span per recorded call, its role an attribute, never its id.
func TestGatewayOTLP(t *testing.T) {
	const token = "gateway-otlp-test-token"
	getenv := func(name string) string {
		if name == gatewayTokenEnv {
			return token
		}
		return ""
	}
	addr := regexp.MustCompile(`gateway on (http://\S+):`)
	for _, up := range []bool{true, false} {
		name := map[bool]string{true: "up", false: "down"}[up]
		t.Run(name, func(t *testing.T) {
			var rcv *otlpReceiver
			url := downURL(t)
			if up {
				rcv = newOTLPReceiver(t, 0)
				url = rcv.URL
			}
			s := startServer(t, getenv, addr, "gateway", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0",
				"--out", t.TempDir(), "--role", "solver=calc", "--otlp", url)
			post := func(path, body, key string) []byte {
				t.Helper()
				req, _ := http.NewRequest("POST", path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("POST: %d %s", resp.StatusCode, b)
				}
				return b
			}
			var cr gateway.CreateResponse
			if err := json.Unmarshal(post(s.base+"/sessions", `{"task":{"id":"p1","dataset":"world","answer":"1288"}}`, token), &cr); err != nil {
				t.Fatal(err)
			}
			post(cr.BaseURL+"/chat/completions", `{"model":"solver","temperature":0,"messages":[{"role":"user","content":"56*23"}]}`, cr.SessionID)
			var rr gateway.RewardResponse
			if err := json.Unmarshal(post(s.base+"/sessions/"+cr.SessionID+"/reward", `{}`, token), &rr); err != nil {
				t.Fatal(err)
			}
			s.stop(t)
			if !up {
				if !droppedLogged.MatchString(s.logs.String()) {
					t.Errorf("the log does not count the dropped spans:\n%s", s.logs.String())
				}
				return
			}
			byName := map[string]*tracepb.Span{}
			for _, sp := range rcv.received() {
				byName[sp.Name] = sp
				for _, kv := range sp.Attributes {
					if v := kv.Value.GetStringValue(); strings.Contains(v, cr.SessionID) || strings.Contains(v, token) {
						t.Errorf("%s: attribute %s holds the session id or the token", sp.Name, kv.Key)
					}
				}
			}
			session, chat := byName["session"], byName["chat solver"]
			if len(byName) != 2 || session == nil || chat == nil {
				t.Fatalf("spans %v, want session and chat solver", byName)
			}
			wantAttrs(t, session, map[string]any{"gen_ai.conversation.id": rr.Session, "delegate.task.id": "p1",
				"delegate.reward": 1.0, "delegate.correct": true, "delegate.calls": int64(1), "delegate.cost.usd": positive})
			wantAttrs(t, chat, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "solver", "delegate.role": "calc",
				"gen_ai.conversation.id": rr.Session, "gen_ai.usage.input_tokens": positive, "gen_ai.usage.output_tokens": positive,
				"delegate.cost.usd": positive})
			if string(chat.ParentSpanId) != string(session.SpanId) {
				t.Error("the call's span is not under the session's")
			}
		})
	}
}

// env --otlp exports each episode. Its steps are execute_tool spans, and
// the sub-agent's call a chat span under an invoke_agent span. The reward
// and costs are attributes.
func TestEnvOTLP(t *testing.T) {
	addr := regexp.MustCompile(`serving OpenEnv on (http://\S+) `)
	g, err := world.NewGenerator(world.DefaultConfig(), 3, world.Test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Next() // the problem a reset with seed 3 draws
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range []bool{true, false} {
		name := map[bool]string{true: "up", false: "down"}[up]
		t.Run(name, func(t *testing.T) {
			var rcv *otlpReceiver
			url := downURL(t)
			if up {
				rcv = newOTLPReceiver(t, 0)
				url = rcv.URL
			}
			s := startServer(t, testEnv, addr, "env", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--split", "test", "--otlp", url)
			ctx := context.Background()
			ws, err := (&openenv.Client{BaseURL: s.base}).Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seed := int64(3)
			if _, err := ws.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
				t.Fatal(err)
			}
			q, _ := json.Marshal(map[string]string{"question": p.Steps[0].Expr()})
			if _, err := ws.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolDelegate, Arguments: q}); err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(map[string]any{"answer": p.Answer})
			res, err := ws.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a})
			if err != nil || !res.Done || res.Reward == nil {
				t.Fatalf("answer: %+v, %v", res, err)
			}
			if err := ws.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			s.stop(t)
			if !up {
				if !droppedLogged.MatchString(s.logs.String()) {
					t.Errorf("the log does not count the dropped spans:\n%s", s.logs.String())
				}
				return
			}
			byName, byID := map[string]*tracepb.Span{}, map[string]string{}
			for _, sp := range rcv.received() {
				byName[sp.Name] = sp
				byID[string(sp.SpanId)] = sp.Name
			}
			if len(byName) != 5 {
				t.Fatalf("spans %v, want the episode, two tools, the sub-agent and its chat", byName)
			}
			wantAttrs(t, byName["episode"], map[string]any{"delegate.reward": *res.Reward, "delegate.correct": true, "delegate.ended": true,
				"delegate.steps": int64(2), "delegate.dataset": "world", "delegate.cost.usd": positive})
			wantAttrs(t, byName["execute_tool delegate"], map[string]any{"gen_ai.operation.name": "execute_tool",
				"gen_ai.tool.name": "delegate", "gen_ai.tool.call.id": "call_1", "delegate.cost.usd": positive})
			wantAttrs(t, byName["execute_tool answer"], map[string]any{"gen_ai.tool.name": "answer", "gen_ai.tool.call.id": "call_2"})
			wantAttrs(t, byName["invoke_agent subagent"], map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "subagent"})
			wantAttrs(t, byName["chat solver"], map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "delegate",
				"gen_ai.request.model": "solver", "gen_ai.usage.input_tokens": positive, "gen_ai.usage.output_tokens": positive,
				"delegate.cost.usd": positive})
			for child, parent := range map[string]string{"execute_tool delegate": "episode", "execute_tool answer": "episode",
				"invoke_agent subagent": "execute_tool delegate", "chat solver": "invoke_agent subagent"} {
				if sp := byName[child]; sp == nil || byID[string(sp.ParentSpanId)] != parent {
					t.Errorf("%s is not under %s", child, parent)
				}
			}
		})
	}
}

// config check --ping --otlp exports each ping as a CLIENT chat span; a
// receiver that is down fails nothing.
func TestConfigPingOTLP(t *testing.T) {
	rcv := newOTLPReceiver(t, 0)
	for _, url := range []string{rcv.URL, downURL(t)} {
		out, err := execute(t, testEnv, "config", "check", "--ping", "--otlp", url, "../../examples/world.yaml")
		if err != nil || strings.Count(out, " ok    ") != 2 {
			t.Fatalf("config check --ping --otlp %s: %v\n%s", url, err, out)
		}
	}
	names := map[string]bool{}
	for _, sp := range rcv.received() {
		names[sp.Name] = true
		if sp.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s: kind %v, want CLIENT", sp.Name, sp.Kind)
		}
		wantAttrs(t, sp, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "delegate",
			"gen_ai.request.max_tokens": int64(1), "gen_ai.usage.input_tokens": positive, "gen_ai.usage.output_tokens": positive})
	}
	if len(names) != 2 || !names["chat delegator"] || !names["chat solver"] {
		t.Errorf("spans %v, want a chat span per model", names)
	}
	if _, err := execute(t, testEnv, "config", "check", "--otlp", rcv.URL, "../../examples/world.yaml"); err == nil {
		t.Error("config check --otlp without --ping: no error")
	}
}
