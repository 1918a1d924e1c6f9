package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
)

// The system prompts the shipped models were trained with
// (examples/world.yaml), which the server adds.
var system = map[string]string{"delegator": "Solve or delegate.", "solver": "Compute."}

// shipped loads the shipped checkpoints of models/ as local models.
func shipped(t testing.TB) map[string]*local.Model {
	t.Helper()
	out := map[string]*local.Model{}
	for _, name := range []string{"delegator", "solver"} {
		p, _, err := nn.Load("../../models/" + name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := local.New(p, local.Config{Name: name, MaxBatch: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		out[name] = m
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, for logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clock is a settable clock for expiry.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// harness is a gateway over the shipped models on loopback.
type harness struct {
	t      *testing.T
	models map[string]*local.Model
	gw     *gateway.Gateway
	srv    *httptest.Server
	log    *syncBuffer
	clock  *clock
	ids    []string // every session id handed out
	cfg    gateway.Config
}

func newHarness(t *testing.T, dir string, models map[string]*local.Model) *harness {
	t.Helper()
	h := &harness{t: t, models: models, log: &syncBuffer{}, clock: &clock{}}
	hash := gateway.BuiltinTemplateHash()
	h.cfg = gateway.DefaultConfig()
	h.cfg.Dir = dir
	h.cfg.Server.System = system
	h.cfg.Token = "admin-token"
	h.cfg.Trained = []string{"delegator", "critic"}
	h.cfg.Prices = map[string]delegate.Price{"delegator": {Input: 1, Output: 5}, "solver": {Input: 0.2, Output: 1}}
	h.cfg.Templates = map[string]string{"delegator": hash, "solver": hash}
	h.cfg.TTL, h.cfg.GroupSize = time.Minute, 2
	h.cfg.Verify, h.cfg.Now = world.Verify, h.clock.now
	h.open()
	return h
}

func (h *harness) open() {
	h.t.Helper()
	log := slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw, err := gateway.Open(context.Background(), h.cfg, log, h.models["delegator"], h.models["solver"])
	if err != nil {
		h.t.Fatal(err)
	}
	h.gw = gw
	h.srv = httptest.NewServer(gw)
}

// crash stops serving and closes the store without ending the sessions
// open, as a SIGKILL leaves them.
func (h *harness) crash() {
	h.srv.Close()
	if err := h.gw.Close(); err != nil {
		h.t.Fatal(err)
	}
}

// post sends a session API request with the admin token.
func (h *harness) post(path, body string) (int, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer admin-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// session opens a session and returns its id and an official client
// pointed at its base URL.
func (h *harness) session(body string) (string, openai.Client) {
	h.t.Helper()
	status, b := h.post("/sessions", body)
	if status != 200 {
		h.t.Fatalf("POST /sessions: %d %s", status, b)
	}
	var cr gateway.CreateResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		h.t.Fatal(err)
	}
	if len(cr.SessionID) < 32+5 || cr.BaseURL != h.srv.URL+"/s/"+cr.SessionID+"/v1" {
		h.t.Fatalf("session %+v: want a long id and its base URL", cr)
	}
	h.ids = append(h.ids, cr.SessionID)
	return cr.SessionID, openai.NewClient(option.WithBaseURL(cr.BaseURL), option.WithAPIKey("ignored"), option.WithMaxRetries(0))
}

// reward ends a session.
func (h *harness) reward(id, body string) gateway.RewardResponse {
	h.t.Helper()
	status, b := h.post("/sessions/"+id+"/reward", body)
	if status != 200 {
		h.t.Fatalf("reward: %d %s", status, b)
	}
	var rr gateway.RewardResponse
	if err := json.Unmarshal(b, &rr); err != nil {
		h.t.Fatal(err)
	}
	return rr
}

const problem = "Ann has 56 boxes of 23 pens. Ann gets 41 more. How many pens does Ann have?"

var delegateTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:       "delegate",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"question": map[string]any{"type": "string"}}},
})

// direct calls the model in process with the request the gateway's model
// got. It returns the prompt ids and the choice's ids and logprobs.
func direct(t *testing.T, m *local.Model, req delegate.Request) (prompt, ids []int, lps []float64) {
	prompt, ids, lps, _ = directText(t, m, req)
	return prompt, ids, lps
}

// directText is direct with the choice's content.
func directText(t *testing.T, m *local.Model, req delegate.Request) (prompt, ids []int, lps []float64, text string) {
	t.Helper()
	req.Logprobs = true
	resp, err := m.Chat(context.Background(), &req)
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range resp.Choices[0].Logprobs {
		ids = append(ids, lp.TokenID)
		lps = append(lps, lp.Logprob)
	}
	return resp.PromptTokenIDs, ids, lps, resp.Choices[0].Message.Content
}

// readGroups reads the group records the gateway wrote.
func readGroups(t *testing.T, dir string) []*rollout.GroupRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, gateway.GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*rollout.GroupRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		g, err := rollout.DecodeGroup(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

func TestGatewaySessionsBecomeGroups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := newHarness(t, dir, shipped(t))
	defer h.srv.Close()

	// Session A: the delegator hands a product to the solver and answers
	// (turn 2 streamed), then a fork of its second turn with another tool
	// result.
	idA, a := h.session(`{"task":{"id":"ann","dataset":"world","prompt":"` + problem + `","answer":"1329"},"group":"g1","metadata":{"run":"test"}}`)
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(problem)}
	params := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "delegator", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{delegateTool},
			Temperature: openai.Float(1), Seed: openai.Int(7)}
	}
	resp1, err := a.Chat.Completions.New(ctx, params(msgs))
	if err != nil {
		t.Fatal(err)
	}
	if resp1.Choices[0].Logprobs.Content != nil {
		t.Errorf("the client got logprobs it did not ask for")
	}
	tc := resp1.Choices[0].Message.ToolCalls
	if len(tc) != 1 {
		t.Fatalf("turn 1: %+v, want one delegate call (seed 7)", resp1.Choices[0].Message)
	}
	// The solver over /v1 with the session id as the bearer key, streamed.
	bearer := openai.NewClient(option.WithBaseURL(h.srv.URL+"/v1"), option.WithAPIKey(idA), option.WithMaxRetries(0))
	var question struct{ Question string }
	if err := json.Unmarshal([]byte(tc[0].Function.Arguments), &question); err != nil {
		t.Fatal(err)
	}
	stream := bearer.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "solver",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question.Question)}, Temperature: openai.Float(1), Seed: openai.Int(3)})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	solved := acc.Choices[0].Message.Content
	msgs = append(msgs, resp1.Choices[0].Message.ToParam(), openai.ToolMessage(solved, tc[0].ID))
	// Turn 2 streamed: its recorded ids are checked below like the rest.
	stream = a.Chat.Completions.NewStreaming(ctx, params(msgs))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	fork := append(slices.Clone(msgs[:2]), openai.ToolMessage("1000", tc[0].ID))
	if _, err := a.Chat.Completions.New(ctx, params(fork)); err != nil {
		t.Fatal(err)
	}
	// A trained role by header: the solver playing critic.
	if _, err := a.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "solver",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("12*12")}, Temperature: openai.Float(0)},
		option.WithHeader(gateway.RoleHeader, "critic")); err != nil {
		t.Fatal(err)
	}
	rrA := h.reward(idA, `{"reward":0.25}`)
	// Samples: the delegator's turns 1 and 2 extend one sample, the fork
	// is another; the critic's call one; the solver is not trained.
	if want := map[string]int{"delegator": 2, "critic": 1}; rrA.Calls != 5 || !mapsEqual(rrA.Samples, want) || rrA.GroupsWritten != 0 {
		t.Errorf("reward of A: %+v, want 5 calls, samples %v, no group yet", rrA, want)
	}

	// Session B, same group: one delegator call, rewarded by the world
	// verifier from the task's reference.
	_, b := h.session(`{"task":{"id":"ann","dataset":"world","answer":"1329"},"group":"g1"}`)
	if _, err := b.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "delegator",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(problem)}, Temperature: openai.Float(0), Logprobs: openai.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	rrB := h.reward(h.ids[1], `{}`)
	if rrB.Correct == nil || rrB.GroupsWritten != 2 {
		t.Fatalf("reward of B: %+v, want a verdict and two records (delegator, critic)", rrB)
	}

	groups := readGroups(t, dir)
	if len(groups) != 2 {
		t.Fatalf("%d group records, want 2", len(groups))
	}
	crit, del := groups[0], groups[1]
	if !strings.HasSuffix(del.ID, ".delegator") || !strings.HasPrefix(del.ID, "g1#") || !strings.HasSuffix(crit.ID, ".critic") {
		t.Fatalf("record ids %q, %q", crit.ID, del.ID)
	}
	if len(del.Tokens) != 3 || !slices.Equal(del.SequenceRollout, []int{0, 0, 1}) || del.Scores[0] != 0.25 || del.Scores[2] != rrB.Reward {
		t.Errorf("delegator record: %d sequences of rollouts %v, scores %v", len(del.Tokens), del.SequenceRollout, del.Scores)
	}
	if del.Advantages[0] == 0 || del.Advantages[0]+del.Advantages[2] > 1e-9 || del.Advantages[0]+del.Advantages[2] < -1e-9 {
		t.Errorf("advantages %v, want opposite and non-zero", del.Advantages)
	}

	// The recorded ids and logprobs are what the engine generates for the
	// same request at the same seed.
	m := h.models["delegator"]
	tools := []delegate.Tool{{Name: "delegate", Parameters: json.RawMessage(`{"properties":{"question":{"type":"string"}},"type":"object"}`)}}
	seed, one := int64(7), 1.0
	sys := delegate.System(system["delegator"])
	p1, g1, l1 := direct(t, m, delegate.Request{Messages: []delegate.Message{sys, delegate.User(problem)}, Tools: tools, Seed: &seed, Temperature: &one})
	turn1 := delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: tc[0].ID, Name: "delegate", Arguments: tc[0].Function.Arguments}}}
	p2, g2, l2 := direct(t, m, delegate.Request{Messages: []delegate.Message{sys, delegate.User(problem), turn1, delegate.ToolResult(tc[0].ID, solved)},
		Tools: tools, Seed: &seed, Temperature: &one})
	pf, gf, lf := direct(t, m, delegate.Request{Messages: []delegate.Message{sys, delegate.User(problem), turn1, delegate.ToolResult(tc[0].ID, "1000")},
		Tools: tools, Seed: &seed, Temperature: &one})
	if !slices.Equal(p2[:len(p1)+len(g1)], append(slices.Clone(p1), g1...)) {
		t.Fatalf("turn 2's prompt does not extend turn 1's ids: the chat template is not prefix-stable here")
	}
	main := append(append(append(slices.Clone(p1), g1...), p2[len(p1)+len(g1):]...), g2...)
	if !slices.Equal(del.Tokens[0], main) {
		t.Errorf("sample 0 tokens:\n got %v\nwant %v", del.Tokens[0], main)
	}
	wantLps := append(append(append(ones(len(p1)), l1...), ones(len(p2)-len(p1)-len(g1))...), l2...)
	if !slices.Equal(del.InferenceLogprobs[0], wantLps) {
		t.Errorf("sample 0 logprobs differ from the engine's")
	}
	wantMask := append(append(append(ignore(len(p1)), g1...), ignore(len(p2)-len(p1)-len(g1))...), g2...)
	if !slices.Equal(del.Masks[0], wantMask) {
		t.Errorf("sample 0 masks:\n got %v\nwant %v", del.Masks[0], wantMask)
	}
	// The fork: its own sample, the shared turn 1 untrained in it.
	if !slices.Equal(del.Tokens[1], append(slices.Clone(pf), gf...)) || !slices.Equal(del.Masks[1], append(ignore(len(pf)), gf...)) ||
		!slices.Equal(del.InferenceLogprobs[1], append(ones(len(pf)), lf...)) {
		t.Errorf("fork sample: tokens, masks or logprobs differ from the engine's")
	}
	if !del.Messages[0][2].Trained || del.Messages[1][2].Trained {
		t.Errorf("turn 1 is trained in sample 0 and not in the fork: %+v / %+v", del.Messages[0][2], del.Messages[1][2])
	}
	// The solver's streamed call is what the engine gives at its seed,
	// and the critic's call (the solver, temperature 0) its ids.
	s3, zero := int64(3), 0.0
	solverSys := delegate.System(system["solver"])
	if _, _, _, text := directText(t, h.models["solver"], delegate.Request{Messages: []delegate.Message{solverSys, delegate.User(question.Question)}, Seed: &s3, Temperature: &one}); text != solved {
		t.Errorf("streamed %q, the engine at the same seed %q", solved, text)
	}
	pc, gc, lc := direct(t, h.models["solver"], delegate.Request{Messages: []delegate.Message{solverSys, delegate.User("12*12")}, Temperature: &zero})
	if len(crit.Tokens) != 1 || !slices.Equal(crit.Tokens[0], append(slices.Clone(pc), gc...)) || !slices.Equal(crit.InferenceLogprobs[0], append(ones(len(pc)), lc...)) {
		t.Errorf("critic sample differs from the engine's ids and logprobs")
	}
	if crit.Rollouts[0].Outcome == nil || crit.Rollouts[0].Outcome.Cost <= 0 {
		t.Errorf("critic record outcome %+v, want the session's dollars", crit.Rollouts[0].Outcome)
	}

	// No session id in the log, access log included.
	logText := h.log.String()
	if !strings.Contains(logText, "route=/s/{id}/v1/chat/completions") {
		t.Errorf("the access log has no agent route:\n%s", logText)
	}
	for _, id := range h.ids {
		if strings.Contains(logText, id) || strings.Contains(logText, strings.TrimPrefix(id, "sess-")) {
			t.Fatalf("a session id is in the log")
		}
	}
}

func ones(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func ignore(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = delegate.MaskIgnore
	}
	return out
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestGatewayRefusesBadSessions sends requests with forged, missing,
// expired or ended sessions. It also sends session API requests without
// the token, or with a template the gateway does not render with.
func TestGatewayRefusesBadSessions(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, t.TempDir(), shipped(t))
	defer h.srv.Close()
	_, c := h.session(`{"group":"g"}`)
	if _, err := c.Models.List(ctx); err != nil {
		t.Fatalf("GET /v1/models in a session: %v", err)
	}
	ask := openai.ChatCompletionNewParams{Model: "solver", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("2*3")}, MaxTokens: openai.Int(4)}
	if _, err := c.Chat.Completions.New(ctx, ask); err != nil {
		t.Fatalf("a call in a live session: %v", err)
	}
	forged := "sess-" + strings.Repeat("ab", 32)
	expired, ce := h.session(`{"group":"g"}`)
	ended, cd := h.session(`{"group":"h"}`)
	h.reward(ended, `{"reward":1}`)
	h.clock.advance(30 * time.Second)
	late, _ := h.session(`{"group":"g"}`) // opened later: still live after the first expire
	h.clock.advance(45 * time.Second)     // past the first sessions' minute

	status := func(err error) int {
		var e *openai.Error
		if errors.As(err, &e) {
			return e.StatusCode
		}
		t.Fatalf("want an API error, got %v", err)
		return 0
	}
	forgedClient := openai.NewClient(option.WithBaseURL(h.srv.URL+"/s/"+forged+"/v1"), option.WithMaxRetries(0), option.WithAPIKey("x"))
	bearerClient := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(h.srv.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	tests := []struct {
		name string
		c    openai.Client
		want int
	}{
		{"forged id in the path", forgedClient, 401},
		{"forged bearer key", bearerClient(forged), 401},
		{"admin token as bearer key", bearerClient("admin-token"), 401},
		{"expired session", ce, 401},
		{"expired session as bearer key", bearerClient(expired), 401},
		{"ended session", cd, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Chat.Completions.New(ctx, ask)
			if got := status(err); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
	lateClient := bearerClient(late)
	if _, err := lateClient.Chat.Completions.New(ctx, ask); err != nil {
		t.Errorf("a live session as bearer key: %v", err)
	}

	// The session API.
	for _, tc := range []struct {
		name, path, body, token string
		want                    int
	}{
		{"create without the token", "/sessions", `{}`, "", 401},
		{"create with another template", "/sessions", `{"chat_template_hashes":{"solver":"sha256:00"}}`, "admin-token", 409},
		{"create without a group or task", "/sessions", `{"metadata":{"a":"b"}}`, "admin-token", 400},
		{"create with an unknown field", "/sessions", `{"groop":"g"}`, "admin-token", 400},
		{"reward of a forged session", "/sessions/" + forged + "/reward", `{"reward":1}`, "admin-token", 404},
		{"reward of an expired session", "/sessions/" + expired + "/reward", `{"reward":1}`, "admin-token", 404},
		{"reward of an ended session", "/sessions/" + ended + "/reward", `{"reward":1}`, "admin-token", 404},
		{"reward without the token", "/sessions/" + late + "/reward", `{"reward":1}`, "", 401},
		{"verified reward without a reference", "/sessions/" + late + "/reward", `{}`, "admin-token", 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, b, tc.want)
			}
		})
	}
	counts, err := h.gw.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"expired": 2, "finished": 1, "open": 1}; !mapsEqual(counts, want) {
		t.Errorf("stored sessions %v, want %v", counts, want)
	}
}

// TestGatewayRestartKeepsFinishedSessions closes the store with a session
// open, as a SIGKILL does. On reopening, the finished session waiting for
// its group is kept and completes it, and the open one is counted lost.
func TestGatewayRestartKeepsFinishedSessions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	models := shipped(t)
	h := newHarness(t, dir, models)
	ask := openai.ChatCompletionNewParams{Model: "delegator", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(problem)}, Temperature: openai.Float(0)}
	done, c1 := h.session(`{"group":"g"}`)
	if _, err := c1.Chat.Completions.New(ctx, ask); err != nil {
		t.Fatal(err)
	}
	if rr := h.reward(done, `{"reward":1}`); rr.GroupsWritten != 0 {
		t.Fatalf("a group of one written: %+v", rr)
	}
	open, c2 := h.session(`{"group":"g"}`)
	if _, err := c2.Chat.Completions.New(ctx, ask); err != nil {
		t.Fatal(err)
	}
	h.crash()
	// A group record torn by the crash, past the recorded length.
	f, err := os.OpenFile(filepath.Join(dir, gateway.GroupsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"version":1,"id":"torn`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	h.open()
	defer h.srv.Close()
	defer h.gw.Close()
	if h.gw.Lost() != 1 {
		t.Errorf("lost %d sessions, want 1", h.gw.Lost())
	}
	if _, err := c2.Chat.Completions.New(ctx, ask); err == nil {
		t.Errorf("a session open at the crash still answers")
	}
	if status, b := h.post("/sessions/"+open+"/reward", `{"reward":0}`); status != 404 {
		t.Errorf("reward of a lost session: %d %s, want 404", status, b)
	}
	// Two choices in one request: two calls, forks of one prompt.
	third, c3 := h.session(`{"group":"g"}`)
	ask.N, ask.Temperature = openai.Int(2), openai.Float(1)
	if _, err := c3.Chat.Completions.New(ctx, ask); err != nil {
		t.Fatal(err)
	}
	if rr := h.reward(third, `{"reward":0}`); rr.GroupsWritten != 1 || rr.Calls != 2 || rr.Samples["delegator"] != 2 {
		t.Fatalf("the second finished session: %+v, want 2 calls, 2 samples and 1 record", rr)
	}
	groups := readGroups(t, dir)
	if len(groups) != 1 || len(groups[0].Rollouts) != 2 || groups[0].Rollouts[0].Reward != 1 || groups[0].Rollouts[1].Reward != 0 ||
		!slices.Equal(groups[0].SequenceRollout, []int{0, 1, 1}) {
		t.Fatalf("groups %+v, want one of the session before the crash and the one after", groups)
	}
	counts, err := h.gw.Counts(ctx)
	if want := map[string]int{"finished": 2, "lost": 1}; err != nil || !mapsEqual(counts, want) {
		t.Errorf("stored sessions %v, %v, want %v", counts, err, want)
	}
}
