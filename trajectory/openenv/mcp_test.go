package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/internal/edge"
)

// rawRPC posts body to /mcp and decodes a 200's JSON-RPC response.
func rawRPC(t *testing.T, c *Client, body string) (int, RPCResponse) {
	t.Helper()
	status, b := rawHTTP(t, c, http.MethodPost, "/mcp", "application/json", body)
	var resp RPCResponse
	if status == http.StatusOK {
		if err := json.Unmarshal([]byte(b), &resp); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
	}
	return status, resp
}

// TestMCPHTTPRequests posts one request each and checks the JSON-RPC
// answer: its error code, or a piece of its result.
func TestMCPHTTPRequests(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxMessageBytes = 4096 })
	c := serve(t, srv, "")
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   int    // 0: a result
		wantID     string // the id answered
		wantResult string // a piece of the result
	}{
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			200, 0, `1`, `"protocolVersion":"2025-03-26"`},
		{"initialize without version", `{"jsonrpc":"2.0","id":"a","method":"initialize"}`, 200, 0, `"a"`, `"serverInfo":{"name":"delegate-world","version":"1"}`},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 200, 0, `2`, `{"name":"answer","description":"Give the final answer, an integer. It ends the episode.","inputSchema":`},
		{"tools/call without a session", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"answer","arguments":{"answer":"1"}}}`, 200, RPCInvalidRequest, `3`, ""},
		{"unknown tool", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search","arguments":{}}}`, 200, RPCInvalidParams, `4`, ""},
		{"call without a name", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}`, 200, RPCInvalidParams, `5`, ""},
		{"arguments not an object", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"answer","arguments":[1]}}`, 200, RPCInvalidParams, `6`, ""},
		{"params not an object", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}`, 200, RPCInvalidParams, `7`, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":8,"method":"resources/list"}`, 200, RPCMethodNotFound, `8`, ""},
		{"unknown session", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"answer","session_id":"nope"}}`, 200, RPCInvalidParams, `9`, ""},
		{"close unknown session", `{"jsonrpc":"2.0","id":10,"method":"openenv/session/close","params":{"session_id":"nope"}}`, 200, RPCInvalidParams, `10`, ""},
		{"negative seed", `{"jsonrpc":"2.0","id":11,"method":"openenv/session/create","params":{"seed":-1}}`, 200, RPCInvalidParams, `11`, ""},
		{"not JSON", `{"jsonrpc":`, 200, RPCParseError, `null`, ""},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 200, RPCInvalidRequest, `null`, ""},
		{"wrong version", `{"jsonrpc":"1.0","id":12,"method":"tools/list"}`, 200, RPCInvalidRequest, `12`, ""},
		{"no method", `{"jsonrpc":"2.0","id":13}`, 200, RPCInvalidRequest, `13`, ""},
		{"id an object", `{"jsonrpc":"2.0","id":{},"method":"tools/list"}`, 200, RPCInvalidRequest, `null`, ""},
		{"escaped method", `{"jsonrpc":"2.0","id":14,"method":"tools\/list"}`, 200, 0, `14`, `{"name":"answer"`},
		{"escaped tool name", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"\u0061nswer","arguments":{"answer":"1"}}}`, 200, RPCInvalidRequest, `15`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusAccepted, 0, "", ""},
		{"over the body limit", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`, http.StatusRequestEntityTooLarge, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, resp := rawRPC(t, c, tt.body)
			if status != tt.wantStatus {
				t.Fatalf("status: got %d, want %d", status, tt.wantStatus)
			}
			if status != http.StatusOK {
				return
			}
			if resp.JSONRPC != "2.0" || string(resp.ID) != tt.wantID {
				t.Errorf("envelope: got jsonrpc %q id %s, want 2.0 and %s", resp.JSONRPC, resp.ID, tt.wantID)
			}
			switch {
			case tt.wantCode != 0 && (resp.Error == nil || resp.Error.Code != tt.wantCode):
				t.Errorf("error: got %+v (result %s), want code %d", resp.Error, resp.Result, tt.wantCode)
			case tt.wantCode == 0 && (resp.Error != nil || !strings.Contains(string(resp.Result), tt.wantResult)):
				t.Errorf("result: got %s (error %+v), want it to contain %s", resp.Result, resp.Error, tt.wantResult)
			}
		})
	}
	if status, _ := rawHTTP(t, c, http.MethodGet, "/mcp", "", ""); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /mcp: got %d, want 405", status)
	}
}

// TestMCPSession runs episodes on an HTTP MCP session.
// create draws the seed's problem, calls step it, and a call after the answer is refused.
// reset starts the next episode up to the bound, and close frees the slot.
func TestMCPSession(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxSessions = 1; c.MaxMCPEpisodes = 2 })
	c := serve(t, srv, "")
	ctx := context.Background()
	const seed = 5
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	var created sessionResult
	if err := c.MCP(ctx, MethodSessionCreate, map[string]any{"seed": seed}, &created); err != nil {
		t.Fatal(err)
	}
	var o DelegationObservation
	if err := json.Unmarshal(created.Observation, &o); err != nil || o.Task != p.Text || created.Episode != 1 || created.SessionID == "" {
		t.Fatalf("create: got %+v (task %q, %v), want episode 1 of %q", created, o.Task, err, p.Text)
	}
	var rerr *RPCError
	if err := c.MCP(ctx, MethodSessionCreate, nil, nil); !errors.As(err, &rerr) || rerr.Code != RPCServerError || !strings.Contains(string(rerr.Data), `"max_sessions":1`) {
		t.Errorf("a second session past the bound: got %v, want %d with max_sessions", err, RPCServerError)
	}
	callTool := func(name string, args map[string]string) (MCPCallResult, error) {
		var r MCPCallResult
		err := c.MCP(ctx, MethodToolsCall, map[string]any{"session_id": created.SessionID, "name": name, "arguments": args}, &r)
		return r, err
	}
	steps := 0
	for _, s := range p.Steps {
		r, err := callTool(ToolDelegate, map[string]string{"question": s.Expr()})
		if err != nil {
			t.Fatalf("delegate %s: %v", s.Expr(), err)
		}
		steps++
		if r.IsError || len(r.Content) != 1 || r.Content[0].Text == "" || r.Done {
			t.Errorf("delegate %s: got %+v, want a text result, not done", s.Expr(), r)
		}
	}
	r, err := callTool(ToolAnswer, map[string]string{"answer": fmt.Sprint(p.Answer)})
	if err != nil || !r.Done || r.Reward == nil || r.Content[0].Text != "correct" {
		t.Fatalf("answer: got %+v, %v; want done, correct, with a reward", r, err)
	}
	if want := 1 - 0.02*float64(steps); *r.Reward > want || *r.Reward < want-0.5 {
		t.Errorf("reward %v: want below %v for %d sub-agent calls, less the delegator's tokens", *r.Reward, want, steps)
	}
	if _, err := callTool(ToolAnswer, map[string]string{"answer": "1"}); !errors.As(err, &rerr) || rerr.Code != RPCInvalidRequest {
		t.Errorf("a call after done: got %v, want %d", err, RPCInvalidRequest)
	}
	var again sessionResult
	if err := c.MCP(ctx, MethodSessionReset, map[string]any{"session_id": created.SessionID, "seed": seed}, &again); err != nil || again.Episode != 2 {
		t.Fatalf("reset: got %+v, %v; want episode 2", again, err)
	}
	if err := c.MCP(ctx, MethodSessionReset, map[string]any{"session_id": created.SessionID}, nil); !errors.As(err, &rerr) || rerr.Code != RPCServerError {
		t.Errorf("a third episode past the bound: got %v, want %d", err, RPCServerError)
	}
	var closed map[string]any
	if err := c.MCP(ctx, MethodSessionClose, map[string]any{"session_id": created.SessionID}, &closed); err != nil || closed["closed"] != true {
		t.Fatalf("close: got %v, %v", closed, err)
	}
	waitActive(t, srv, 0)
	if _, err := callTool(ToolAnswer, map[string]string{"answer": "1"}); !errors.As(err, &rerr) || rerr.Code != RPCInvalidParams {
		t.Errorf("a call on a closed session: got %v, want %d", err, RPCInvalidParams)
	}
}

// TestMCPReusedBuffers: requests of sizes above and below what the
// buffers keep, one after another, each get their own id back and nothing
// of the request before.
func TestMCPReusedBuffers(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	c := serveWith(t, srv, "", edge.DefaultTimeouts()) // 128 KiB each way outlasted serve's 300 ms under the race detector
	for i, n := range []int{maxPooled * 2, 10, maxPooled / 2, 1, maxPooled * 2, 3} {
		id := `"` + strings.Repeat("x", n) + `"`
		status, resp := rawRPC(t, c, `{"jsonrpc":"2.0","method":"tools/list","id":`+id+`}`)
		if status != http.StatusOK || string(resp.ID) != id || resp.Error != nil || !strings.Contains(string(resp.Result), `"name":"delegate"`) {
			t.Errorf("request %d, id of %d bytes: got %d, id of %d bytes, error %v", i, n, status, len(resp.ID), resp.Error)
		}
	}
}

// TestMCPSessionReset: MCPSession's hand-written requests create a
// session, then reset it, with the seed and episode id asked for.
func TestMCPSessionReset(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	m := c.OpenMCP()
	defer m.Close()
	tests := []struct {
		name string
		seed *int64
		id   *string
	}{
		{"create", ptr[int64](3), ptr(`ep "one" <1>`)},
		{"reset", ptr[int64](7), nil},
		{"reset without a seed", nil, ptr("ep-3")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := m.Reset(ctx, ResetRequest{Seed: tt.seed, EpisodeID: tt.id})
			if err != nil {
				t.Fatal(err)
			}
			st := stateOf(t, mustState(t, m))
			if st.Seed == nil || tt.seed != nil && *st.Seed != *tt.seed || tt.id != nil && (st.EpisodeID == nil || *st.EpisodeID != *tt.id) {
				t.Errorf("state: got seed %v, episode %v; want %v, %v", st.Seed, st.EpisodeID, tt.seed, tt.id)
			}
			p, err := d.Problem(*st.Seed)
			if err != nil {
				t.Fatal(err)
			}
			if o := observationOf(t, res); o.Task != p.Text || res.Done || res.Reward != nil {
				t.Errorf("got task %q, done %v, reward %v; want %q, not done, no reward", o.Task, res.Done, res.Reward, p.Text)
			}
		})
	}
	if got := srv.Active(); got != 1 {
		t.Errorf("sessions: got %d, want 1: a reset reuses the session", got)
	}
}

func mustState(t *testing.T, s Stepper) json.RawMessage {
	t.Helper()
	raw, err := s.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestMCPSessionIdle checks that an idle HTTP MCP session is closed and its slot freed.
// Closing the server closes the others.
func TestMCPSessionIdle(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
	c := serve(t, srv, "")
	ctx := context.Background()
	var created sessionResult
	if err := c.MCP(ctx, MethodSessionCreate, nil, &created); err != nil {
		t.Fatal(err)
	}
	if got := srv.Active(); got != 1 {
		t.Fatalf("active after create: got %d, want 1", got)
	}
	waitActive(t, srv, 0)
	if err := c.MCP(ctx, MethodSessionCreate, nil, &created); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := srv.Active(); got != 0 {
		t.Errorf("active after Close: got %d, want 0", got)
	}
}

// TestMCPWebSocket sends MCP messages on a WebSocket session.
// They run on the session's environment, after its reset, and count as steps.
func TestMCPWebSocket(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var tools struct {
		Tools []MCPTool `json:"tools"`
	}
	if err := s.MCP(ctx, MethodToolsList, nil, &tools); err != nil || len(tools.Tools) != 2 || tools.Tools[0].Name != ToolDelegate {
		t.Fatalf("tools/list: got %+v, %v", tools, err)
	}
	var rerr *RPCError
	args := map[string]any{"name": ToolAnswer, "arguments": map[string]string{"answer": "1"}}
	if err := s.MCP(ctx, MethodToolsCall, args, nil); !errors.As(err, &rerr) || rerr.Code != RPCInvalidRequest {
		t.Errorf("tools/call before reset: got %v, want %d", err, RPCInvalidRequest)
	}
	if err := s.MCP(ctx, MethodSessionCreate, nil, nil); !errors.As(err, &rerr) || rerr.Code != RPCInvalidRequest {
		t.Errorf("session/create on the WebSocket: got %v, want %d", err, RPCInvalidRequest)
	}
	if err := s.MCP(ctx, "prompts/list", nil, nil); !errors.As(err, &rerr) || rerr.Code != RPCMethodNotFound {
		t.Errorf("unknown method: got %v, want %d", err, RPCMethodNotFound)
	}
	m, err := s.ExchangeRaw(ctx, []byte(`{"type":"mcp","data":{"jsonrpc":"2.0","id":{}}}`))
	if err != nil || m.Type != MsgMCP || !strings.Contains(string(m.Data), `"code":-32600`) {
		t.Errorf("bad request: got %+v, %v; want an mcp answer with -32600", m, err)
	}
	const seed = 3
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reset(ctx, ResetRequest{Seed: ptr[int64](seed)}); err != nil {
		t.Fatal(err)
	}
	var r MCPCallResult
	args["arguments"] = map[string]string{"answer": fmt.Sprint(p.Answer)}
	if err := s.MCP(ctx, MethodToolsCall, args, &r); err != nil || !r.Done || r.Content[0].Text != "correct" {
		t.Fatalf("answer: got %+v, %v; want done and correct", r, err)
	}
	raw, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, raw); st.StepCount != 1 || st.Correct == nil || !*st.Correct {
		t.Errorf("state: got %+v, want one step, correct", st)
	}
}
