package view

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// scripted is a model that answers with its name and the message count.
// It returns token ids and logprobs, so the gateway records them.
type scripted struct{ name string }

func (m scripted) Name() string { return m.name }

func (m scripted) Chat(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	n := len(req.Messages)
	return &delegate.Response{Model: m.name, Usage: delegate.Usage{PromptTokens: 10 * n, CompletionTokens: 2},
		PromptTokenIDs: make([]int, 10*n),
		Choices: []delegate.Choice{{Message: delegate.Message{Role: delegate.RoleAssistant, Content: m.name + " says " + strings.Repeat("x", n)},
			FinishReason: "stop", Logprobs: []delegate.TokenLogprob{{TokenID: 1, Logprob: -1}, {TokenID: 2, Logprob: -3}}}}}, nil
}

// gatewayFixture runs a real gateway on loopback in dir and returns the ids handed out.
// One session finishes with two delegator calls, the second continuing the first, and one solver call.
// Another session is left open.
func gatewayFixture(t testing.TB, dir string) (finished, open string) {
	t.Helper()
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.Token, cfg.GroupSize = dir, "admin", 2
	cfg.Prices = map[string]delegate.Price{"delegator": {Input: 1, Output: 5}, "solver": {Input: 0.2, Output: 1}}
	gw, err := gateway.Open(context.Background(), cfg, nil, scripted{"delegator"}, scripted{"solver"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw)
	post := func(path, token string, body any) []byte {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", hs.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
		}
		return out
	}
	create := func() string {
		var cr gateway.CreateResponse
		if err := json.Unmarshal(post("/sessions", "admin", map[string]any{"group": "g", "task": map[string]string{"id": "t1", "prompt": "2+2?"}}), &cr); err != nil {
			t.Fatal(err)
		}
		return cr.SessionID
	}
	chat := func(id, model string, msgs []delegate.Message) delegate.Message {
		var resp struct {
			Choices []struct {
				Message delegate.Message `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(post("/v1/chat/completions", id, map[string]any{"model": model, "messages": msgs}), &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message
	}
	finished = create()
	first := []delegate.Message{{Role: delegate.RoleUser, Content: "2+2?"}}
	out := chat(finished, "delegator", first)
	chat(finished, "solver", []delegate.Message{{Role: delegate.RoleUser, Content: "add 2 and 2"}})
	chat(finished, "delegator", append(first, out, delegate.Message{Role: delegate.RoleUser, Content: "the solver says 4"}))
	post("/sessions/"+finished+"/reward", "admin", map[string]any{"reward": 0.5})
	open = create()
	hs.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	return finished, open
}

// digestOf is the gateway's stored key of a session id: its SHA-256.
func digestOf(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

func TestGatewayAPI(t *testing.T) {
	dir := t.TempDir()
	finished, open := gatewayFixture(t, dir)
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	id := runID(t, s, KindGateway, gateway.StoreFile)

	var sum gatewayPage
	if status := get(t, hs.URL, "/api/gateway?run="+itoa(id), &sum); status != 200 {
		t.Fatalf("GET /api/gateway: %d", status)
	}
	if got, want := sum.Statuses, map[string]int{"finished": 1, "open": 1}; len(got) != 2 || got["finished"] != 1 || got["open"] != 1 {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if sum.Sessions.Total != 2 || len(sum.Sessions.Items) != 2 {
		t.Fatalf("sessions = %+v, want 2", sum.Sessions)
	}
	// Newest first: the open session, then the finished one.
	var fin SessionRow
	for _, r := range sum.Sessions.Items {
		if r.Key == finished || r.Key == open {
			t.Errorf("a session id is shown in clear: %q", r.Key)
		}
		if len(r.Key) != 64 {
			t.Errorf("key %q: want a 64-hex digest", r.Key)
		}
		if r.Status == "finished" {
			fin = r
		}
		if want := map[string]string{"finished": digestOf(finished), "open": digestOf(open)}[r.Status]; r.Key != want {
			t.Errorf("%s session key %q, want the digest %q", r.Status, r.Key, want)
		}
	}
	if fin.Reward == nil || *fin.Reward != 0.5 || fin.Calls != 3 || fin.Task != "t1" {
		t.Errorf("finished row = %+v, want reward 0.5, 3 calls, task t1", fin)
	}
	wantRoles := []RoleTotals{
		{Role: "delegator", Calls: 2, PromptTokens: 10 + 30, CompletionTokens: 4, Dollars: (40*1 + 4*5) / 1e6},
		{Role: "solver", Calls: 1, PromptTokens: 10, CompletionTokens: 2, Dollars: (10*0.2 + 2*1) / 1e6},
	}
	if len(fin.Roles) != len(wantRoles) {
		t.Fatalf("roles = %+v, want %+v", fin.Roles, wantRoles)
	}
	for i, w := range wantRoles {
		g := fin.Roles[i]
		if g.Role != w.Role || g.Calls != w.Calls || g.PromptTokens != w.PromptTokens || g.CompletionTokens != w.CompletionTokens || !near(g.Dollars, w.Dollars) {
			t.Errorf("role %d = %+v, want %+v", i, g, w)
		}
	}

	var sv SessionView
	if status := get(t, hs.URL, "/api/gateway/session?run="+itoa(id)+"&key="+fin.Key, &sv); status != 200 {
		t.Fatalf("GET /api/gateway/session: %d", status)
	}
	if sv.Calls != 3 || sv.Reward == nil || sv.Prompt != "2+2?" || sv.Samples == 0 {
		t.Errorf("session = %d calls, reward %v, prompt %q, %d samples; want 3 calls, its reward, prompt and samples", sv.Calls, sv.Reward, sv.Prompt, sv.Samples)
	}
	// The second delegator call continues the first: it is its child.
	var shape []string
	var walk func(n *SessionCall, depth int)
	walk = func(n *SessionCall, depth int) {
		shape = append(shape, strings.Repeat(" ", depth)+n.Role)
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	for _, c := range sv.Tree {
		walk(c, 0)
	}
	if got, want := strings.Join(shape, ","), "delegator, delegator,solver"; got != want {
		t.Errorf("tree = %q, want %q", got, want)
	}
	root := sv.Tree[0]
	if lp := root.Logprobs; lp == nil || lp.Tokens != 2 || lp.Mean != -2 || lp.Min != -3 {
		t.Errorf("logprobs = %+v, want 2 tokens, mean -2, min -3", lp)
	}
	if root.PromptIDs != 10 || len(root.Messages) != 1 || root.Messages[0].Content != "2+2?" {
		t.Errorf("root call = %+v, want its message and 10 prompt ids", root)
	}

	for _, tc := range []struct {
		path string
		want int
	}{
		{"/api/gateway/session?run=" + itoa(id) + "&key=" + finished, 404}, // an id is not a key
		{"/api/gateway/session?run=" + itoa(id) + "&key=nope", 404},
		{"/api/gateway?run=" + itoa(id) + "&limit=0", 400},
	} {
		if got := get(t, hs.URL, tc.path, nil); got != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, got, tc.want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

func itoa(i int) string { return strconv.Itoa(i) }

// TestGatewayRunning reads a gateway's directory while the gateway holds its store.
// The page answers at once with an error saying so.
func TestGatewayRunning(t *testing.T) {
	dir := t.TempDir()
	gatewayFixture(t, dir)
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.Token, cfg.GroupSize = dir, "admin", 2
	gw, err := gateway.Open(context.Background(), cfg, nil, scripted{"delegator"})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	id := runID(t, s, KindGateway, gateway.StoreFile)
	var got struct {
		Error struct{ Message string }
	}
	start := time.Now()
	status := get(t, hs.URL, "/api/gateway?run="+itoa(id), &got)
	if status != 500 || !strings.Contains(got.Error.Message, "a running gateway holds it") {
		t.Errorf("GET /api/gateway with the gateway running: %d %q, want 500 saying the gateway holds it", status, got.Error.Message)
	}
	// It waits storeWait for the lock, not the 10 s of a shared store.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered in %v, want at once", d)
	}
}

// TestSessionShowsFailedCalls reads a session dropped with its timed-out
// group. Its row counts the failed and refused calls, and its tree shows
// each failed call's status and error.
func TestSessionShowsFailedCalls(t *testing.T) {
	fin := gateway.Finished{Version: gateway.FinishedVersion, Key: "k", Group: "g", Reward: 1, Refused: 3, Calls: []gateway.Call{
		{Index: 0, Role: "delegator", Output: delegate.Message{Role: delegate.RoleAssistant, Content: "4"}},
		{Index: 1, Role: "delegator", Failed: true, Status: 502, Error: "upstream down"},
		{Index: 2, Role: "delegator", Failed: true, Status: 429, Error: "the session's bound of 2 recorded calls is reached"},
	}}
	data, err := json.Marshal(fin)
	if err != nil {
		t.Fatal(err)
	}
	row, err := sessionRow(store.Session{Key: "k", Group: "g", Status: store.SessionDropped, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if row.Calls != 3 || row.Failed != 2 || row.Refused != 3 || row.Reward == nil {
		t.Errorf("row = %+v, want 3 calls, 2 failed, 3 refused and the reward", row)
	}
	var got []string
	var walk func(n *SessionCall)
	walk = func(n *SessionCall) {
		if n.Failed {
			got = append(got, strconv.Itoa(n.Status)+" "+n.Error)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, n := range callTree(fin.Calls) {
		walk(n)
	}
	if want := []string{"502 upstream down", "429 the session's bound of 2 recorded calls is reached"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("failed calls in the tree %q, want %q", got, want)
	}
}
