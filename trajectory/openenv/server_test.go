package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/world"
)

// fakeSolver answers every question of world.Expr's form right, at once,
// in the solver's format, and anything else with a sentence.
func fakeSolver() *modeltest.Model {
	return modeltest.New("fake-solver", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		op, x, y, err := world.ParseExpr(strings.TrimSpace(modeltest.LastUser(req)))
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

// serve starts srv behind the project's edge, with the edge's server and
// short request timeouts that a session must outlive.
func serve(t testing.TB, srv *Server, token string) *Client {
	t.Helper()
	return serveWith(t, srv, token, edge.Timeouts{ReadHeader: time.Second, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: time.Second})
}

// serveWith is serve with the edge's timeouts to.
func serveWith(t testing.TB, srv *Server, token string, to edge.Timeouts) *Client {
	t.Helper()
	h := edge.Config{Token: token, Open: []string{"/health"}, Refuse: func(w http.ResponseWriter, rf edge.Refusal) {
		WriteDetail(w, rf.Status, rf.Message)
	}}.Handler(srv)
	ts := httptest.NewUnstartedServer(h)
	ts.Config = edge.Server(h, to, nil, slog.LevelWarn)
	ts.Start()
	tr := &http.Transport{}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		ts.Close()
		tr.CloseIdleConnections()
	})
	return &Client{BaseURL: ts.URL, Token: token, HTTP: &http.Client{Transport: tr}}
}

// newDelegationServer serves the delegation environment on the fake
// solver, with the default bounds as set changes them.
func newDelegationServer(t testing.TB, dc DelegationConfig, set func(*Config)) (*Server, *Delegation) {
	t.Helper()
	if dc.Subagent == nil {
		dc.Subagent = fakeSolver()
	}
	d, err := NewDelegation(dc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if set != nil {
		set(&cfg)
	}
	cfg.New, cfg.Name, cfg.Metadata, cfg.Schema, cfg.Tools = d.New, "delegation", d.Metadata(), d.Schema(), d.Tools()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, d
}

func call(tool string, args any) ToolAction {
	b, _ := json.Marshal(args) // maps of strings always encode
	return ToolAction{Type: ActionCallTool, ToolName: tool, Arguments: b}
}

func observationOf(t *testing.T, r Result) DelegationObservation {
	t.Helper()
	var o DelegationObservation
	if err := json.Unmarshal(r.Observation, &o); err != nil {
		t.Fatalf("decode observation %s: %v", r.Observation, err)
	}
	return o
}

func stateOf(t *testing.T, raw json.RawMessage) DelegationState {
	t.Helper()
	var s DelegationState
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("decode state %s: %v", raw, err)
	}
	return s
}

// rawHTTP sends one request and returns the status and body.
func rawHTTP(t *testing.T, c *Client, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, c.BaseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.String()
}

func TestHTTPEndpoints(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxMessageBytes = 4096 })
	c := serve(t, srv, "")
	ctx := context.Background()

	h, err := c.Health(ctx)
	if err != nil || h.Status != HealthHealthy {
		t.Errorf("health: got %+v, %v; want healthy", h, err)
	}
	m, err := c.Metadata(ctx)
	if err != nil || m.Name != "delegate-world" || m.Version == nil {
		t.Errorf("metadata: got %+v, %v", m, err)
	}
	sc, err := c.Schema(ctx)
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	for name, s := range map[string]json.RawMessage{"action": sc.Action, "observation": sc.Observation, "state": sc.State} {
		if !isObject(s) {
			t.Errorf("schema %s: not an object: %s", name, s)
		}
	}

	// /reset: each request a fresh episode, the same for the same seed.
	r1, err := c.Reset(ctx, ResetRequest{Seed: ptr[int64](5), EpisodeID: ptr("e1")})
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	p, err := d.Problem(5)
	if err != nil {
		t.Fatal(err)
	}
	if o := observationOf(t, r1); o.Task != p.Text || len(o.Tools) != 2 || r1.Done || r1.Reward != nil {
		t.Errorf("reset: got %+v, done %v, reward %v; want the task of seed 5, two tools, not done, null reward", o, r1.Done, r1.Reward)
	}
	r2, err := c.Reset(ctx, ResetRequest{})
	if err != nil {
		t.Fatalf("reset with no seed: %v", err)
	}
	if observationOf(t, r2).Task == "" {
		t.Error("reset with no seed: empty task")
	}

	// /state: a fresh environment's, as OpenEnv's HTTP server answers.
	raw, err := c.State(ctx)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	if st := stateOf(t, raw); st.EpisodeID != nil || st.StepCount != 0 {
		t.Errorf("state: got %+v, want no episode", st)
	}

	// /step: stateless, so a tool call finds no episode; list_tools needs none.
	a, _ := json.Marshal(call(ToolAnswer, map[string]string{"answer": "1"}))
	_, err = c.Step(ctx, StepRequest{Action: a})
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || !strings.Contains(e.Msg, "reset first") {
		t.Errorf("step without episode: got %v, want 409 naming reset", err)
	}
	res, err := c.Step(ctx, StepRequest{Action: json.RawMessage(`{"type":"list_tools"}`)})
	if err != nil || len(observationOf(t, res).Tools) != 2 {
		t.Errorf("list_tools: got %+v, %v; want two tools", res, err)
	}

	tests := []struct {
		name, method, path, ctype, body string
		status                          int
		want                            string // in the body
	}{
		{"reset empty body", "POST", "/reset", "", "", 200, `"task"`},
		{"reset negative seed", "POST", "/reset", "application/json", `{"seed":-1}`, 422, `"greater_than_equal"`},
		{"reset not JSON", "POST", "/reset", "application/json", `{"seed":`, 422, `"json_invalid"`},
		{"reset not an object", "POST", "/reset", "application/json", `[1]`, 422, `"model_attributes_type"`},
		{"reset seed not a number", "POST", "/reset", "application/json", `{"seed":"x"}`, 422, `"value_error"`},
		{"step missing action", "POST", "/step", "application/json", `{}`, 422, `"missing"`},
		{"step action not an object", "POST", "/step", "application/json", `{"action":3}`, 422, `"dict_type"`},
		{"step huge timeout", "POST", "/step", "application/json", `{"action":{"type":"list_tools"},"timeout_s":1e300}`, 200, `"tools"`},
		{"step extra fields", "POST", "/step", "application/json", `{"action":{"type":"list_tools"},"timeout_s":0.5,"request_id":"r1","render":true}`, 200, `"tools"`},
		{"step zero timeout", "POST", "/step", "application/json", `{"action":{},"timeout_s":0}`, 422, `"greater_than"`},
		{"step unknown action field", "POST", "/step", "application/json", `{"action":{"tool":"x"}}`, 422, `"action"`},
		{"step bad action type", "POST", "/step", "application/json", `{"action":{"type":"dance"}}`, 422, `"union_tag_invalid"`},
		{"step body too large", "POST", "/step", "application/json", `{"action":{"metadata":{"x":"` + strings.Repeat("a", 5000) + `"}}}`, 413, `over 4096 bytes`},
		{"text/plain refused by the edge", "POST", "/reset", "text/plain", `{}`, 415, `"detail"`},
		{"unknown path", "GET", "/nowhere", "", "", 404, `"Not Found"`},
		{"wrong method", "GET", "/reset", "", "", 405, `"Method Not Allowed"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rawHTTP(t, c, tt.method, tt.path, tt.ctype, tt.body)
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("got %d %s, want %d with %s", status, body, tt.status, tt.want)
			}
		})
	}
}

func TestToken(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "sesame")
	ctx := context.Background()
	anon := &Client{BaseURL: c.BaseURL, HTTP: c.HTTP}
	if _, err := anon.Health(ctx); err != nil {
		t.Errorf("health without a token: %v, want it open", err)
	}
	var e *Error
	if _, err := anon.Reset(ctx, ResetRequest{}); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Errorf("reset without a token: got %v, want 401", err)
	}
	if _, err := anon.Dial(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("dial without a token: got %v, want 401", err)
	}
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatalf("dial with the token: %v", err)
	}
	defer s.Close()
	if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
		t.Errorf("reset with the token: %v", err)
	}
}

// TestWebSocketEpisode drives one episode from reset to close.
// It sends a bad call of each kind, delegate calls, the answer, a state request and a step after done.
// The session outlives the edge's 300ms request timeouts.
func TestWebSocketEpisode(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var e *Error
	if _, err := s.Step(ctx, call(ToolAnswer, map[string]string{"answer": "1"})); !errors.As(err, &e) || e.Code != CodeExecutionError || !strings.Contains(e.Msg, "reset first") {
		t.Errorf("step before reset: got %v, want EXECUTION_ERROR naming reset", err)
	}
	const seed = 11
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](seed), EpisodeID: ptr("ep-11")})
	if err != nil || observationOf(t, res).Task != p.Text {
		t.Fatalf("reset: got %+v, %v; want the task of seed %d", res, err, seed)
	}
	time.Sleep(400 * time.Millisecond) // past the edge's read and write timeouts

	// Tool errors are observations: the episode goes on.
	toolErrs := []struct {
		action ToolAction
		want   string
	}{
		{call("search", map[string]string{"q": "x"}), ToolNotFound},
		{call(ToolDelegate, map[string]string{"query": "1+1"}), ToolInvalidArgs},
		{call(ToolAnswer, map[string]int{"value": 3}), ToolInvalidArgs},
	}
	for _, te := range toolErrs {
		res, err := s.Step(ctx, te.action)
		if err != nil {
			t.Fatalf("step %+v: %v", te.action, err)
		}
		if o := observationOf(t, res); o.Error == nil || o.Error.ErrorType != te.want || res.Done {
			t.Errorf("step %s: got error %+v, done %v; want %s, not done", te.action.ToolName, o.Error, res.Done, te.want)
		}
	}
	// Malformed actions are validation errors and no step.
	if _, err := s.Step(ctx, map[string]any{"tool_name": "delegate", "extra": 1}); !errors.As(err, &e) || e.Code != CodeValidationError {
		t.Errorf("action with an unknown field: got %v, want VALIDATION_ERROR", err)
	}
	if _, err := s.Step(ctx, map[string]any{"type": "call_tool"}); !errors.As(err, &e) || e.Code != CodeValidationError {
		t.Errorf("call without tool_name: got %v, want VALIDATION_ERROR", err)
	}

	var delegated int
	for _, st := range p.Steps {
		if st.Op != world.Mul {
			continue
		}
		res, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": st.Expr()}))
		if err != nil {
			t.Fatalf("delegate %s: %v", st.Expr(), err)
		}
		delegated++
		o := observationOf(t, res)
		if o.Result != world.Pad(st.Result) || o.Error != nil || o.Spend.Subagent.Calls != delegated {
			t.Errorf("delegate %s: got %+v, want result %s and %d sub-agent calls", st.Expr(), o, world.Pad(st.Result), delegated)
		}
	}
	res, err = s.Step(ctx, call(ToolAnswer, map[string]string{"answer": "\\boxed{" + world.Pad(p.Answer) + "}"}))
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	if o := observationOf(t, res); !res.Done || res.Reward == nil || o.Result != "correct" {
		t.Fatalf("answer: got %+v done %v reward %v, want done, correct, a reward", o, res.Done, res.Reward)
	}
	raw, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := stateOf(t, raw)
	wantSteps := len(toolErrs) + delegated + 1
	if st.EpisodeID == nil || *st.EpisodeID != "ep-11" || st.StepCount != wantSteps || !st.Done || st.Correct == nil || !*st.Correct ||
		st.Reward == nil || *st.Reward != *res.Reward || st.ProblemID != p.ID || st.Spend.Subagent.Calls != delegated {
		t.Errorf("state: got %+v, want episode ep-11, %d steps, done and correct, reward %v", st, wantSteps, *res.Reward)
	}
	if _, err := s.Step(ctx, call(ToolAnswer, map[string]string{"answer": "1"})); !errors.As(err, &e) || e.Code != CodeExecutionError || !strings.Contains(e.Msg, "done") {
		t.Errorf("step after done: got %v, want EXECUTION_ERROR", err)
	}
	// A new reset starts over on the same connection.
	if res, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](seed + 1)}); err != nil || res.Done {
		t.Errorf("second reset: got %+v, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	waitActive(t, srv, 0)
}

func waitActive(t *testing.T, srv *Server, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Active() != want {
		if time.Now().After(deadline) {
			t.Fatalf("active sessions: got %d, want %d", srv.Active(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebSocketMessageErrors sends each malformed message and checks the
// code, and that the session still serves afterwards.
func TestWebSocketMessageErrors(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name, msg, code string
	}{
		{"not JSON", `{"type":`, CodeInvalidJSON},
		{"not an object", `[1,2]`, CodeValidationError},
		{"unknown type", `{"type":"dance"}`, CodeUnknownType},
		{"no type", `{"data":{}}`, CodeUnknownType},
		{"mcp without data", `{"type":"mcp"}`, CodeValidationError},
		{"mcp data not an object", `{"type":"mcp","data":"tools/list"}`, CodeValidationError},
		{"extra field", `{"type":"state","data":{}}`, CodeValidationError},
		{"step without data", `{"type":"step"}`, CodeValidationError},
		{"step data not an object", `{"type":"step","data":"answer"}`, CodeValidationError},
		{"reset data not an object", `{"type":"reset","data":[1]}`, CodeValidationError},
		{"reset negative seed", `{"type":"reset","data":{"seed":-3}}`, CodeValidationError},
		{"bad action", `{"type":"step","data":{"type":"call_tool"}}`, CodeValidationError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ExchangeRaw(ctx, []byte(tt.msg))
			var e *Error
			if !errors.As(err, &e) || e.Code != tt.code {
				t.Errorf("got %v, want %s", err, tt.code)
			}
		})
	}
	if _, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](1), Extra: map[string]json.RawMessage{"difficulty": json.RawMessage(`"hard"`)}}); err != nil {
		t.Errorf("reset after the errors, with an extra field: %v", err)
	}
}

// TestLimits checks each bound.
// The world's step limit and budget end an episode with its reward.
// The server's step limit refuses a step, and the session limit refuses a connection.
// An idle session and an oversized message close theirs.
func TestLimits(t *testing.T) {
	ctx := context.Background()
	t.Run("world step limit", func(t *testing.T) {
		srv, d := newDelegationServer(t, DelegationConfig{MaxSteps: 2}, nil)
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](3)}); err != nil {
			t.Fatal(err)
		}
		p, _ := d.Problem(3)
		var res Result
		for i := range 2 {
			if res, err = s.Step(ctx, call(ToolDelegate, map[string]string{"question": p.Steps[0].Expr()})); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if !res.Done || res.Reward == nil || *res.Reward >= 0 || !strings.Contains(observationOf(t, res).Result, "without an answer") {
			t.Errorf("after 2 of 2 steps: got %s done %v reward %v, want done with a negative reward", res.Observation, res.Done, res.Reward)
		}
	})
	t.Run("budget", func(t *testing.T) {
		srv, d := newDelegationServer(t, DelegationConfig{Budget: 1e-9}, nil)
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](3)}); err != nil {
			t.Fatal(err)
		}
		p, _ := d.Problem(3)
		res, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": p.Steps[0].Expr()}))
		if err != nil || !res.Done || !strings.Contains(observationOf(t, res).Result, "budget") {
			t.Errorf("over budget: got %+v, %v; want done naming the budget", res, err)
		}
	})
	t.Run("server step limit", func(t *testing.T) {
		srv, _ := newDelegationServer(t, DelegationConfig{MaxSteps: 100}, func(c *Config) { c.MaxSteps = 2 })
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := s.Step(ctx, call("nothing", nil)); err != nil {
				t.Fatal(err)
			}
		}
		var e *Error
		if _, err := s.Step(ctx, call("nothing", nil)); !errors.As(err, &e) || e.Code != CodeExecutionError || !strings.Contains(e.Msg, "step limit") {
			t.Errorf("third step: got %v, want EXECUTION_ERROR naming the step limit", err)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		srv, _ := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxSessions = 1 })
		c := serve(t, srv, "")
		s1, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s1.Reset(ctx, ResetRequest{}); err != nil {
			t.Fatal(err)
		}
		s2, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s2.Reset(ctx, ResetRequest{})
		var e *Error
		var cap ErrorData
		if !errors.As(err, &e) || e.Code != CodeCapacityReached || json.Unmarshal(e.Detail, &cap) != nil || cap.MaxSessions == nil || *cap.MaxSessions != 1 {
			t.Errorf("second session: got %v, want CAPACITY_REACHED of 1", err)
		}
		s2.Close()
		s1.Close()
		waitActive(t, srv, 0)
		s3, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s3.Close()
		if _, err := s3.Reset(ctx, ResetRequest{}); err != nil {
			t.Errorf("a session after the others closed: %v", err)
		}
	})
	t.Run("idle", func(t *testing.T) {
		srv, _ := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		waitActive(t, srv, 1)
		time.Sleep(300 * time.Millisecond) // past the idle timeout
		_, err = s.Reset(ctx, ResetRequest{})
		if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Errorf("reset on a reaped session: got %v, want close status %v", err, websocket.StatusPolicyViolation)
		}
		waitActive(t, srv, 0)
	})
	t.Run("message size", func(t *testing.T) {
		srv, _ := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxMessageBytes = 512 })
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.ExchangeRaw(ctx, []byte(`{"type":"reset","data":{"pad":"`+strings.Repeat("x", 1024)+`"}}`))
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Errorf("oversized message: got %v, want close status %v", err, websocket.StatusMessageTooBig)
		}
		waitActive(t, srv, 0)
	})
}

// failing is an environment whose factory or state fails.
type failing struct{ Environment }

func (failing) State() any { return map[string]any{"bad": make(chan int)} }

func TestSessionFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("factory", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Name, cfg.New = "broken", func() (Environment, error) { return nil, errors.New("no model") }
		srv, err := NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Reset(ctx, ResetRequest{})
		var e *Error
		var fd ErrorData
		if !errors.As(err, &e) || e.Code != CodeFactoryError || json.Unmarshal(e.Detail, &fd) != nil || fd.FactoryName != "broken" {
			t.Errorf("got %v, want FACTORY_ERROR naming broken", err)
		}
		if status, body := rawHTTP(t, c, "POST", "/reset", "", ""); status != 500 || !strings.Contains(body, "no model") {
			t.Errorf("HTTP reset: got %d %s, want 500 naming the cause", status, body)
		}
	})
	t.Run("state that cannot be encoded", func(t *testing.T) {
		d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver()})
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.New = func() (Environment, error) {
			env, err := d.New()
			return failing{env}, err
		}
		srv, err := NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := serve(t, srv, "")
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.State(ctx)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeSessionError {
			t.Errorf("got %v, want SESSION_ERROR", err)
		}
		if _, err := s.Reset(ctx, ResetRequest{}); err != nil {
			t.Errorf("reset after the failure: %v", err)
		}
	})
}

func decodeObservation(r Result) (DelegationObservation, error) {
	var o DelegationObservation
	return o, jsonUnmarshal(r.Observation, &o)
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", clip(string(b)), err)
	}
	return nil
}
