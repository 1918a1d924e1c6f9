package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// dialMCP opens a WebSocket at the server's /mcp, as an MCP client does.
func dialMCP(t *testing.T, c *Client) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(c.BaseURL, "http") + "/mcp"
	conn, _, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: c.HTTP})
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	return conn
}

// frame is one answer read from an MCP WebSocket: its top-level keys and
// the response they make.
type frame struct {
	keys []string
	resp RPCResponse
}

func readFrame(t *testing.T, conn *websocket.Conn) frame {
	t.Helper()
	typ, b, err := conn.Read(context.Background())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("message type: got %v, want text", typ)
	}
	return decodeFrame(t, b)
}

func decodeFrame(t *testing.T, b []byte) frame {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	var f frame
	for k := range top {
		f.keys = append(f.keys, k)
	}
	slices.Sort(f.keys)
	if err := json.Unmarshal(b, &f.resp); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return f
}

// exchange sends raw as one text message and reads the answer.
func exchange(t *testing.T, conn *websocket.Conn, raw string) frame {
	t.Helper()
	if err := conn.Write(context.Background(), websocket.MessageText, []byte(raw)); err != nil {
		t.Fatalf("write: %v", err)
	}
	return readFrame(t, conn)
}

// fixtureFrame reads a fixture written from OpenEnv's JsonRpcResponse.
func fixtureFrame(t *testing.T, name string) frame {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return decodeFrame(t, b)
}

// sameShape checks got against OpenEnv's answer want.
// They must have the same top-level members, id and error code.
// The members are jsonrpc, id, and result or error.
func sameShape(t *testing.T, what string, got, want frame) {
	t.Helper()
	if !slices.Equal(got.keys, want.keys) {
		t.Errorf("%s: members %v, want OpenEnv's %v", what, got.keys, want.keys)
	}
	if string(got.resp.ID) != string(want.resp.ID) || got.resp.JSONRPC != "2.0" {
		t.Errorf("%s: jsonrpc %q id %s, want 2.0 and %s", what, got.resp.JSONRPC, got.resp.ID, want.resp.ID)
	}
	switch {
	case want.resp.Error == nil && got.resp.Error != nil:
		t.Errorf("%s: got error %+v, want a result", what, got.resp.Error)
	case want.resp.Error != nil && (got.resp.Error == nil || got.resp.Error.Code != want.resp.Error.Code):
		t.Errorf("%s: got error %+v, want code %d", what, got.resp.Error, want.resp.Error.Code)
	}
}

// TestMCPWebSocketEndpoint plays an episode over MCP on the WebSocket at
// /mcp. Each message is a bare JSON-RPC request and each answer a bare
// response, framed as the fixtures written from OpenEnv's server are.
func TestMCPWebSocketEndpoint(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxSessions = 1 })
	c := serve(t, srv, "")
	conn := dialMCP(t, c)
	defer conn.CloseNow()

	req, err := os.ReadFile(filepath.Join("testdata", "mcp_tools_list_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := exchange(t, conn, string(req))
	sameShape(t, "tools/list", got, fixtureFrame(t, "mcp_tools_list_response.json"))
	var tools struct {
		Tools []MCPTool `json:"tools"`
	}
	if err := json.Unmarshal(got.resp.Result, &tools); err != nil || len(tools.Tools) != 2 || tools.Tools[0].Name != ToolDelegate {
		t.Errorf("tools/list: got %s, %v; want delegate and answer", got.resp.Result, err)
	}

	got = exchange(t, conn, `{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "answer", "arguments": {"answer": "1"}}, "id": 2}`)
	if got.resp.Error == nil || got.resp.Error.Code != RPCInvalidRequest {
		t.Errorf("tools/call before an episode: got %+v, want code %d", got.resp.Error, RPCInvalidRequest)
	}

	req, err = os.ReadFile(filepath.Join("testdata", "mcp_session_create_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	got = exchange(t, conn, string(req))
	sameShape(t, "session/create", got, fixtureFrame(t, "mcp_session_create_response.json"))
	var created sessionResult
	if err := json.Unmarshal(got.resp.Result, &created); err != nil || created.SessionID == "" || created.Episode != 1 {
		t.Fatalf("session/create: got %s, %v; want a session_id and episode 1", got.resp.Result, err)
	}

	const seed = 4
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	got = exchange(t, conn, fmt.Sprintf(`{"jsonrpc": "2.0", "method": "openenv/session/reset", "params": {"session_id": %q, "seed": %d}, "id": 3}`, created.SessionID, seed))
	var again sessionResult
	if err := json.Unmarshal(got.resp.Result, &again); err != nil || again.SessionID != created.SessionID || again.Episode != 2 {
		t.Fatalf("session/reset: got %s (error %+v), want episode 2 of the same session", got.resp.Result, got.resp.Error)
	}
	if o := observationOf(t, again.Result); o.Task != p.Text {
		t.Errorf("reset task: got %q, want %q", o.Task, p.Text)
	}

	for i, s := range p.Steps {
		got = exchange(t, conn, fmt.Sprintf(`{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "delegate", "arguments": {"question": %q}}, "id": %d}`, s.Expr(), 10+i))
		var r MCPCallResult
		if err := json.Unmarshal(got.resp.Result, &r); err != nil || r.IsError || r.Done || len(r.Content) != 1 || r.Content[0].Text == "" {
			t.Errorf("delegate %s: got %s (error %+v)", s.Expr(), got.resp.Result, got.resp.Error)
		}
	}
	got = exchange(t, conn, fmt.Sprintf(`{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "answer", "arguments": {"answer": "%d"}}, "id": 20}`, p.Answer))
	var r MCPCallResult
	if err := json.Unmarshal(got.resp.Result, &r); err != nil || !r.Done || r.Reward == nil || r.Content[0].Text != "correct" {
		t.Fatalf("answer: got %s (error %+v), want done, correct, with a reward", got.resp.Result, got.resp.Error)
	}
	got = exchange(t, conn, `{"jsonrpc": "2.0", "method": "openenv/session/state", "id": 21}`)
	if st := stateOf(t, got.resp.Result); st.StepCount != len(p.Steps)+1 || st.Correct == nil || !*st.Correct {
		t.Errorf("state: got %+v, want %d steps, correct", st, len(p.Steps)+1)
	}

	// Refusals, each framed as OpenEnv's.
	own := exchange(t, conn, fmt.Sprintf(`{"jsonrpc": "2.0", "method": "openenv/session/close", "params": {"session_id": %q}, "id": 4}`, created.SessionID))
	sameShape(t, "close own session", own, fixtureFrame(t, "mcp_ws_close_own.json"))
	sameShape(t, "not JSON", exchange(t, conn, `{"jsonrpc":`), fixtureFrame(t, "mcp_ws_parse_error.json"))
	if got := exchange(t, conn, `{"jsonrpc": "2.0", "method": "notifications/initialized"}`); string(got.resp.ID) != "null" {
		t.Errorf("notification: got id %s, want an answer with id null, as OpenEnv's", got.resp.ID)
	}
	if got := exchange(t, conn, `{"type": "reset", "data": {}}`); got.resp.Error == nil || got.resp.Error.Code != RPCInvalidRequest {
		t.Errorf("a /ws message on /mcp: got %+v, want code %d", got.resp.Error, RPCInvalidRequest)
	}

	// The connection holds the one slot: a second gets OpenEnv's
	// capacity error and is closed.
	second := dialMCP(t, c)
	defer second.CloseNow()
	capErr := readFrame(t, second)
	sameShape(t, "capacity", capErr, fixtureFrame(t, "mcp_ws_capacity.json"))
	var data struct {
		Active int `json:"active_sessions"`
		Max    int `json:"max_sessions"`
	}
	if capErr.resp.Error == nil || json.Unmarshal(capErr.resp.Error.Data, &data) != nil || data.Active != 1 || data.Max != 1 {
		t.Errorf("capacity data: got %+v, want active_sessions and max_sessions 1", capErr.resp.Error)
	}
	if _, _, err := second.Read(context.Background()); websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Errorf("after the capacity error: got %v, want close %d", err, websocket.StatusTryAgainLater)
	}

	if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	waitActive(t, srv, 0)
	var rerr *RPCError
	if err := c.MCP(context.Background(), MethodSessionState, map[string]string{"session_id": created.SessionID}, nil); !errors.As(err, &rerr) || rerr.Code != RPCInvalidParams {
		t.Errorf("the WebSocket's session over HTTP: got %v, want %d: it is the connection's alone", err, RPCInvalidParams)
	}
}
