package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

const testKey = "sk-test-0123456789abcdef"

// scripted answers every stage of every strategy the way a capable model
// would, recognising the stage from the system prompt.
func scripted(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	sys := modeltest.SystemPrompt(req)
	last := req.Messages[len(req.Messages)-1]
	switch {
	case len(req.Tools) > 0 && last.Role == delegate.RoleTool:
		return modeltest.Text("Both parts are done. Final answer: \\boxed{42}"), nil
	case len(req.Tools) > 0:
		return modeltest.ToolCalls(
			delegate.ToolCall{ID: "c1", Name: "delegate", Arguments: `{"question":"What is 6*7?"}`},
			delegate.ToolCall{ID: "c2", Name: "delegate", Arguments: `{"question":"What is 40+2?"}`},
		), nil
	case strings.Contains(sys, "break a user's request into subtasks"):
		return modeltest.Text("<|reasoning|>Three parts.</|reasoning|>\n<|subtask|>Part one<|end_subtask|>\n<|subtask|>Part two<|end_subtask|>\n<|subtask|>Part three</|end_subtask|>"), nil
	case strings.Contains(sys, "Combine their results"):
		return modeltest.Text("Final Output: 42, assembled"), nil
	case strings.Contains(sys, "You lead a team"):
		return modeltest.Text("Most agree. <answer>42</answer>"), nil
	case strings.Contains(sys, "<answer>"):
		return modeltest.Text("I think <answer>42</answer>"), nil
	}
	return modeltest.Text("It is 42.\nFinal answer: \\boxed{42}"), nil
}

func writeTestConfig(t *testing.T, url string) string {
	t.Helper()
	doc := `models:
  big:
    base_url: ` + url + `/v1
    model: big
    api_key_env: TEST_DELEGATE_KEY
    price: {input: 2, cached_input: 0.5, output: 8}
    max_retries: 1
  small:
    base_url: ` + url + `/v1
    model: small
    price: {input: 0.1, output: 0.4}
    max_retries: 1
roles:
  default: big
  subagent: small
  weak: small
  peers: [small, small, big]
strategy:
  peers: 3
`
	path := filepath.Join(t.TempDir(), "delegate.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func testEnv(name string) string {
	if name == "TEST_DELEGATE_KEY" {
		return testKey
	}
	return ""
}

func execute(t *testing.T, getenv env, args ...string) (string, error) {
	t.Helper()
	var out, logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cmd := newRootCmd(getenv, log)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if strings.Contains(out.String()+logs.String(), testKey) {
		t.Errorf("the API key leaked into the output or logs")
	}
	return out.String(), err
}

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := server.New(nil, modeltest.New("big", scripted), modeltest.New("small", scripted))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func TestRunEveryStrategyOverHTTP(t *testing.T) {
	srv := newTestServer(t)
	cfg := writeTestConfig(t, srv.URL)
	tests := []struct {
		strategy string
		want     []string
	}{
		{"single", []string{"answer  [baseline big]", "answer:\n42\n"}},
		{"decompose", []string{"▸ subagents", "subagent 3  [subagent small]", "42, assembled"}},
		{"route", []string{"delegate c1  [weak small]", "delegate c2  [weak small]", "▸ turn 2", "answer:\n42\n"}},
		{"lead", []string{"peer 3  [peer big]", "leader  [leader big]", "42"}},
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			out, err := execute(t, testEnv, "run", "--config", cfg, "--strategy", tt.strategy, "What is 6*7?")
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			for _, w := range append(tt.want, "answer:", "total", "wall time") {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestRunJSONTraceAccountsEveryCall(t *testing.T) {
	srv := newTestServer(t)
	cfg := writeTestConfig(t, srv.URL)
	out, err := execute(t, testEnv, "run", "--config", cfg, "--strategy", "route", "--json", "What is 6*7?")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var tr delegate.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatalf("output is not a trace: %v\n%s", err, out)
	}
	if tr.Version != delegate.TraceVersion || tr.Answer != "42" {
		t.Errorf("trace version %d answer %q", tr.Version, tr.Answer)
	}
	strong, weak := tr.Roles["strong"], tr.Roles["weak"]
	if strong.Calls != 2 || weak.Calls != 2 {
		t.Fatalf("calls: strong %d weak %d, want 2 and 2", strong.Calls, weak.Calls)
	}
	// Every call's usage came from the server's usage block, and its cost
	// from the configured prices.
	var sum delegate.Usage
	for _, n := range tr.Calls() {
		if n.Usage.PromptTokens == 0 || n.Usage.CompletionTokens == 0 {
			t.Errorf("call %s has no usage", n.Name)
		}
		sum = sum.Add(n.Usage)
	}
	if sum != tr.Total.Usage {
		t.Errorf("total usage %+v, sum of calls %+v", tr.Total.Usage, sum)
	}
	wantCost := float64(strong.Usage.PromptTokens)*2/1e6 + float64(strong.Usage.CompletionTokens)*8/1e6 +
		float64(weak.Usage.PromptTokens)*0.1/1e6 + float64(weak.Usage.CompletionTokens)*0.4/1e6
	if d := tr.Total.Cost - wantCost; d > 1e-12 || d < -1e-12 {
		t.Errorf("total cost %v, want %v", tr.Total.Cost, wantCost)
	}
}

func TestConfigCheckPing(t *testing.T) {
	srv := newTestServer(t)
	cfg := writeTestConfig(t, srv.URL)
	out, err := execute(t, testEnv, "config", "check", "--ping", cfg)
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	if !strings.Contains(out, "big") || !strings.Contains(out, "small") || strings.Count(out, "  ok  ") != 2 {
		t.Errorf("ping output:\n%s", out)
	}
	out, err = execute(t, func(string) string { return "" }, "config", "check", "--ping", cfg)
	if err == nil || !strings.Contains(err.Error(), "TEST_DELEGATE_KEY") {
		t.Errorf("missing key: err = %v, want it to name the variable\n%s", err, out)
	}
	srv.Close()
	out, err = execute(t, testEnv, "config", "check", "--ping", cfg)
	if err == nil || !strings.Contains(out, "FAIL") {
		t.Errorf("dead server: err = %v\n%s", err, out)
	}
}

func TestRunWithLocalCheckpoint(t *testing.T) {
	dir := t.TempDir()
	saveSmallModel(t, filepath.Join(dir, "tiny"))
	doc := "models:\n  tiny:\n    kind: local\n    checkpoint: tiny\n    price: {input: 1, output: 1}\nroles:\n  default: tiny\nstrategy:\n  single: {temperature: 0, max_tokens: 8}\n"
	path := filepath.Join(dir, "delegate.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// Random weights write no proper answer in 8 tokens: the run fails
	// (non-zero exit) but the whole trace is still written.
	out, err := execute(t, testEnv, "run", "--config", path, "--strategy", "single", "--json", "hello")
	if err == nil || !strings.Contains(err.Error(), "no proper answer") {
		t.Fatalf("run: %v, want a failure for the truncated answer\n%s", err, out)
	}
	var tr delegate.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	call := tr.Calls()[0]
	if call.Model != "tiny" || call.Usage.CompletionTokens == 0 || call.Usage.CompletionTokens > 8 || len(call.PromptTokenIDs) != call.Usage.PromptTokens {
		t.Errorf("local call = %+v", call)
	}
}

// TestRunShippedModelsWithWorldPreset runs route on the shipped local
// models through examples/world.yaml. The router must hand the products to
// the solver under the compact tool declaration and answer right.
func TestRunShippedModelsWithWorldPreset(t *testing.T) {
	const problem = "Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"
	out, err := execute(t, testEnv, "run", "--config", "../../examples/world.yaml", "--strategy", "route", "--json", problem)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var tr delegate.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Answer != "3719" || tr.Failure != "" {
		t.Errorf("answer %q (failure %q), want 3719", tr.Answer, tr.Failure)
	}
	if tr.Roles["weak"].Calls == 0 {
		t.Errorf("the delegator asked the solver nothing: roles %+v", tr.Roles)
	}
}

// TestRunExitsNonZeroOnFailure checks that a run without a proper answer
// returns an error, so the command exits non-zero. That holds whatever
// failed: an
// unreachable endpoint, a refused key, or a plan that cannot be parsed.
func TestRunExitsNonZeroOnFailure(t *testing.T) {
	unparseable := func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("I will not make a plan."), nil
	}
	s, err := server.New(nil, modeltest.New("big", unparseable), modeltest.New("small", unparseable))
	if err != nil {
		t.Fatal(err)
	}
	garbled := httptest.NewServer(s)
	t.Cleanup(garbled.Close)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	t.Cleanup(refusing.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // connection refused from here on

	tests := []struct {
		name, url, strategy string
		json                bool
	}{
		{"plan not parsed", garbled.URL, "decompose", false},
		{"plan not parsed, json", garbled.URL, "decompose", true},
		{"401", refusing.URL, "single", false},
		{"connection refused", closed.URL, "route", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"run", "--config", writeTestConfig(t, tt.url), "--strategy", tt.strategy}
			if tt.json {
				args = append(args, "--json")
			}
			out, err := execute(t, testEnv, append(args, "What is 6*7?")...)
			if err == nil {
				t.Fatalf("run returned no error for a failed run; output:\n%s", out)
			}
		})
	}
}

// TestRunReplicas gives a model a replica that refuses connections. Its
// other replica serves it, and the trace names the one that answered.
func TestRunReplicas(t *testing.T) {
	live := newTestServer(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	doc := `models:
  big:
    base_url: ` + dead.URL + `/v1
    replicas: [` + live.URL + `/v1]
    model: big
    max_retries: 2
roles:
  default: big
`
	path := filepath.Join(t.TempDir(), "delegate.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := execute(t, testEnv, "run", "--config", path, "--strategy", "single", "--json", "What is 6*7?")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var tr delegate.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Calls()[0].Endpoint, live.URL+"/v1"; got != want {
		t.Errorf("the call names endpoint %q, want the live replica %q", got, want)
	}
}

// TestLocalModelConfig checks that a model's max_batch of 0 or none is
// local's default, and any other is kept.
func TestLocalModelConfig(t *testing.T) {
	for _, tt := range []struct {
		maxBatch, want int
	}{
		{0, local.DefaultConfig().MaxBatch},
		{1, 1},
		{64, 64},
	} {
		t.Run(fmt.Sprint(tt.maxBatch), func(t *testing.T) {
			c := localModelConfig("m", ModelConfig{Kind: "local", Checkpoint: "ckpt", MaxBatch: tt.maxBatch}, nil)
			if c.Name != "m" || c.MaxBatch != tt.want {
				t.Errorf("got name %q, max batch %d; want m, %d", c.Name, c.MaxBatch, tt.want)
			}
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}
