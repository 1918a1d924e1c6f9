package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/delegatelab/delegate/internal/edge"
)

// recorder records the actions an environment receives.
type recorder struct {
	Environment
	mu      *sync.Mutex
	actions *[]string
}

func (r recorder) Step(ctx context.Context, action json.RawMessage) (Observation, error) {
	r.mu.Lock()
	*r.actions = append(*r.actions, string(action))
	r.mu.Unlock()
	return r.Environment.Step(ctx, action)
}

// TestClientsSendUnescaped: every Go client sends <, > and & in a call's arguments as written.
func TestClientsSendUnescaped(t *testing.T) {
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var actions []string
	cfg := DefaultConfig()
	cfg.New = func() (Environment, error) {
		env, err := d.New()
		return recorder{Environment: env, mu: &mu, actions: &actions}, err
	}
	cfg.Name, cfg.Metadata, cfg.Schema, cfg.Tools = "delegation", d.Metadata(), d.Schema(), d.Tools()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, srv, "")
	ctx := context.Background()
	const q = "3<4 & 4>2"
	args := json.RawMessage(`{"question":"` + q + `"}`)
	params := map[string]any{"name": ToolDelegate, "arguments": map[string]string{"question": q}}
	ws, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	m := c.OpenMCP()
	defer m.Close()
	if _, err := m.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	sends := []struct {
		name string
		send func() error
	}{
		{"Session.Step", func() error {
			_, err := ws.Step(ctx, ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: args})
			return err
		}},
		{"Session.MCP", func() error { return ws.MCP(ctx, MethodToolsCall, params, nil) }},
		{"MCPSession.Step", func() error {
			_, err := m.Step(ctx, ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: args})
			return err
		}},
		{"Client.MCP", func() error {
			return c.MCP(ctx, MethodToolsCall, map[string]any{"name": ToolDelegate, "arguments": params["arguments"], "session_id": m.id}, nil)
		}},
		// A fresh environment refuses the step after reading it.
		{"Client.Step", func() error {
			action := json.RawMessage(`{"type":"call_tool","tool_name":"delegate","arguments":` + string(args) + `}`)
			_, err := c.Step(ctx, StepRequest{Action: action})
			if err == nil {
				return fmt.Errorf("a step on a fresh environment: no error")
			}
			return nil
		}},
	}
	for _, s := range sends {
		t.Run(s.name, func(t *testing.T) {
			mu.Lock()
			n := len(actions)
			mu.Unlock()
			if err := s.send(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(actions) != n+1 {
				t.Fatalf("the environment got %d actions, want 1", len(actions)-n)
			}
			if got := actions[n]; !strings.Contains(got, `"question":"`+q+`"`) {
				t.Errorf("the environment got %s, want the question as written", got)
			}
		})
	}
}

// TestMCPSessionRequests: every POST of an MCP session carries its own
// body, its length, the media type and the token, whether it copies one
// request made once or, with a cookie jar, is made afresh. The jar's
// cookie is sent once a request, not added to a shared header.
func TestMCPSessionRequests(t *testing.T) {
	const token = "mcp-requests-token"
	type got struct {
		body, contentType, auth, cookie string
		length                          int64
	}
	for _, withJar := range []bool{false, true} {
		t.Run(map[bool]string{false: "no jar", true: "cookie jar"}[withJar], func(t *testing.T) {
			var mu sync.Mutex
			var seen []got
			srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					t.Errorf("read body: %v", err)
				}
				mu.Lock()
				seen = append(seen, got{string(body), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), strings.Join(r.Header.Values("Cookie"), "|"), r.ContentLength})
				mu.Unlock()
				http.SetCookie(w, &http.Cookie{Name: "a", Value: "1"})
				r.Body = io.NopCloser(bytes.NewReader(body))
				srv.ServeHTTP(w, r)
			})
			ts := httptest.NewServer(edge.Config{Token: token}.Handler(h))
			defer ts.Close()
			hc := &http.Client{}
			if withJar {
				jar, err := cookiejar.New(nil)
				if err != nil {
					t.Fatal(err)
				}
				hc.Jar = jar
			}
			c := &Client{BaseURL: ts.URL, Token: token, HTTP: hc}
			ctx := context.Background()
			m := c.OpenMCP()
			if _, err := m.Reset(ctx, ResetRequest{}); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"4*7", "12*13"} {
				if _, err := m.Step(ctx, call(ToolDelegate, map[string]string{"question": q})); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 4 {
				t.Fatalf("the server saw %d requests, want create, two calls and close", len(seen))
			}
			for i, g := range seen {
				if g.contentType != "application/json" || g.auth != "Bearer "+token || g.length != int64(len(g.body)) || !json.Valid([]byte(g.body)) {
					t.Errorf("request %d: got %+v, want its JSON body, its length, application/json and the token", i, g)
				}
				wantCookie := ""
				if withJar && i > 0 {
					wantCookie = "a=1"
				}
				if g.cookie != wantCookie {
					t.Errorf("request %d: cookie %q, want %q", i, g.cookie, wantCookie)
				}
			}
			for i, q := range []string{"4*7", "12*13"} {
				if !strings.Contains(seen[i+1].body, q) {
					t.Errorf("call %d: body %s, want the question %s", i+1, seen[i+1].body, q)
				}
			}
		})
	}
}

// mapContext is a context of a type that == cannot compare.
type mapContext struct {
	context.Context
	m map[string]int
}

// TestPosterRequest: calls under one context reuse one request, each with
// its own body and length; another context, or one that == cannot
// compare, gets a fresh copy.
func TestPosterRequest(t *testing.T) {
	proto, err := (&Client{BaseURL: "http://127.0.0.1:1"}).postProto("/mcp")
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	other, cancel := context.WithCancel(bg)
	defer cancel()
	odd := mapContext{bg, map[string]int{}}
	tests := []struct {
		name       string
		first, sec context.Context
		same       bool
	}{
		{"one context", bg, bg, true},
		{"another context", bg, other, false},
		{"a context == cannot compare", odd, odd, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poster{proto: proto}
			var reqs []*http.Request
			for i, body := range []string{`{"a":1}`, `{"b":22}`} {
				ctx := tt.first
				if i == 1 {
					ctx = tt.sec
				}
				req := p.request(ctx, []byte(body))
				reqs = append(reqs, req)
				if _, odd := ctx.(mapContext); odd && req.Context().(mapContext).m == nil || !odd && req.Context() != ctx {
					t.Errorf("request %d: another context", i)
				}
				got, err := io.ReadAll(req.Body)
				if err != nil || string(got) != body || req.ContentLength != int64(len(body)) {
					t.Errorf("request %d: body %q, length %d, err %v; want %q", i, got, req.ContentLength, err, body)
				}
				rc, err := req.GetBody()
				if err != nil {
					t.Fatal(err)
				}
				if again, _ := io.ReadAll(rc); string(again) != body {
					t.Errorf("request %d: GetBody gives %q, want %q", i, again, body)
				}
			}
			if got := reqs[0] == reqs[1]; got != tt.same {
				t.Errorf("one request for both: %v, want %v", got, tt.same)
			}
			if reqs[0].Header.Get("Content-Type") != "application/json" || reqs[1].URL.Path != "/mcp" {
				t.Errorf("header %v, URL %v: want the proto's", reqs[0].Header, reqs[1].URL)
			}
		})
	}
}

// TestMCPSessionRedirect: a POST redirected with 307 is sent again with
// its body, which GetBody reads afresh, on every call of a session.
func TestMCPSessionRedirect(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/real/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/real/mcp", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/mcp"
		srv.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	m := (&Client{BaseURL: ts.URL, HTTP: ts.Client()}).OpenMCP()
	ctx := context.Background()
	if _, err := m.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"4*7", "12*13"} {
		res, err := m.Step(ctx, call(ToolDelegate, map[string]string{"question": q}))
		if err != nil {
			t.Fatal(err)
		}
		if o := observationOf(t, res); o.Error != nil || o.Result == "" {
			t.Errorf("%s: result %q, error %+v; want an answer", q, o.Result, o.Error)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeCounter counts the writes on the connections it dials.
type writeCounter struct{ n atomic.Int64 }

func (wc *writeCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	return countedConn{c, &wc.n}, err
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// TestMCPSessionOneWrite: each call of an MCP session goes out in one
// write, its header and body together, as net/http sends a body it
// knows to be in memory. A body of another type costs a second write.
func TestMCPSessionOneWrite(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	var wc writeCounter
	c.HTTP = &http.Client{Transport: &http.Transport{DialContext: wc.dial}}
	m := c.OpenMCP()
	ctx := context.Background()
	if _, err := m.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := wc.n.Load(); got != 1 {
		t.Errorf("reset: %d writes, want 1", got)
	}
	for i, q := range []string{"4*7", "12*13"} {
		if _, err := m.Step(ctx, call(ToolDelegate, map[string]string{"question": q})); err != nil {
			t.Fatal(err)
		}
		if got, want := wc.n.Load(), int64(i+2); got != want {
			t.Errorf("step %d: %d writes in all, want %d", i+1, got, want)
		}
	}
}

// TestPosterReaderAfterFailure: a request's body reader serves the next
// request after a success, and is left to net/http after a failure, which
// may still be reading it.
func TestPosterReaderAfterFailure(t *testing.T) {
	proto, err := (&Client{BaseURL: "http://127.0.0.1:1"}).postProto("/mcp")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := poster{proto: proto}
	first := p.request(ctx, []byte(`{"a":1}`)).Body
	p.done(nil)
	second := p.request(ctx, []byte(`{"b":2}`)).Body
	if second != first {
		t.Error("after a success: a fresh reader, want the last one")
	}
	p.done(errors.New("connection reset"))
	third := p.request(ctx, []byte(`{"c":3}`))
	if third.Body == second {
		t.Error("after a failure: the last reader, want a fresh one")
	}
	if got, _ := io.ReadAll(third.Body); string(got) != `{"c":3}` {
		t.Errorf("body %q, want {\"c\":3}", got)
	}
	if got, _ := io.ReadAll(second); string(got) != `{"b":2}` {
		t.Errorf("the failed request's reader holds %q, want its own {\"b\":2}", got)
	}
}
