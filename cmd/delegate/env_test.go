package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world"
)

func TestEnvExposure(t *testing.T) {
	_, err := execute(t, func(string) string { return "" }, "env", "--config", "../../examples/world.yaml", "--addr", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), envTokenEnv) {
		t.Errorf("off loopback without a token: got %v, want an error naming $%s", err, envTokenEnv)
	}
	_, err = execute(t, func(string) string { return "" }, "env", "--config", "../../examples/world.yaml", "--split", "holdout")
	if err == nil || !strings.Contains(err.Error(), "--split") {
		t.Errorf("unknown split: got %v, want an error naming --split", err)
	}
}

// TestEnvServesShippedSolver starts delegate env on the shipped solver
// and drives one episode over the WebSocket with the token.
func TestEnvServesShippedSolver(t *testing.T) {
	const token = "env-command-test-token"
	getenv := func(name string) string {
		if name == envTokenEnv {
			return token
		}
		return ""
	}
	var out, logs syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"env", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--split", "test", "--max-steps", "4"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	addr := regexp.MustCompile(`serving OpenEnv on (http://\S+) `)
	base := awaitListening(t, &out, done, addr, "env")
	for _, want := range []string{`sub-agent "solver" (config key solver)`, "test problems", "token required"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("startup output lacks %q:\n%s", want, out.String())
		}
	}
	ctx2 := context.Background()
	anon := &openenv.Client{BaseURL: base}
	if h, err := anon.Health(ctx2); err != nil || h.Status != openenv.HealthHealthy {
		t.Errorf("health without a token: %+v, %v", h, err)
	}
	var e *openenv.Error
	if _, err := anon.Reset(ctx2, openenv.ResetRequest{}); !errors.As(err, &e) || e.Status != 401 {
		t.Errorf("reset without a token: got %v, want 401", err)
	}
	c := &openenv.Client{BaseURL: base, Token: token}
	s, err := c.Dial(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(3)
	res, err := s.Reset(ctx2, openenv.ResetRequest{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	var o openenv.DelegationObservation
	if err := json.Unmarshal(res.Observation, &o); err != nil || o.Task == "" {
		t.Fatalf("reset: %s, %v", res.Observation, err)
	}
	g, err := world.NewGenerator(world.DefaultConfig(), uint64(seed), world.Test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Next() // the problem a reset with seed draws (Delegation.Problem)
	if err != nil || p.Text != o.Task {
		t.Fatalf("the served task %q is not the problem of seed %d (%v)", o.Task, seed, err)
	}
	q, _ := json.Marshal(map[string]string{"question": p.Steps[0].Expr()})
	res, err = s.Step(ctx2, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolDelegate, Arguments: q})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.Observation, &o); err != nil || o.Spend.Subagent.Calls != 1 || o.Result == "" {
		t.Errorf("delegate %s: %s, %v", p.Steps[0].Expr(), res.Observation, err)
	}
	a, _ := json.Marshal(map[string]any{"answer": p.Answer})
	res, err = s.Step(ctx2, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a})
	if err != nil || !res.Done || res.Reward == nil || *res.Reward <= 0.5 {
		t.Errorf("answer: %+v, %v; want done with a reward near 1", res, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("env: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("env did not stop")
	}
}

// TestEnvDataset serves gsm8k tasks from a small file. A seed draws its
// task, gsm8k's verifier scores the answer, and MCP lists the tools.
func TestEnvDataset(t *testing.T) {
	_, err := execute(t, func(string) string { return "" }, "env", "--config", "../../examples/world.yaml", "--dataset", "trivia")
	if err == nil || !strings.Contains(err.Error(), "--dataset") {
		t.Errorf("an unknown dataset: got %v, want an error naming --dataset", err)
	}
	var out syncBuffer
	cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"env", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--dataset", "gsm8k", "--data", "../../dataset/testdata/gsm8k/test.jsonl"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := awaitListening(t, &out, done, regexp.MustCompile(`serving OpenEnv on (http://\S+) `), "env")
	if !strings.Contains(out.String(), "gsm8k (../../dataset/testdata/gsm8k/test.jsonl), all 5 items") {
		t.Errorf("startup output lacks the dataset:\n%s", out.String())
	}
	c := &openenv.Client{BaseURL: base}
	var tools struct {
		Tools []openenv.MCPTool `json:"tools"`
	}
	if err := c.MCP(ctx, openenv.MethodToolsList, nil, &tools); err != nil || len(tools.Tools) != 2 || !strings.Contains(tools.Tools[1].Description, "value alone") {
		t.Errorf("tools/list: got %+v, %v", tools, err)
	}
	tests := []struct {
		seed     int64
		inTask   string // a piece of the task
		answer   string
		wantDone bool
		correct  bool
	}{
		{1, "A robe takes 2 bolts", "3", true, true},
		{6, "A robe takes 2 bolts", "4", true, false},
		{2, "flipping a house", "$70,000", true, true},
	}
	for _, tt := range tests {
		s, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Reset(ctx, openenv.ResetRequest{Seed: &tt.seed})
		if err != nil {
			t.Fatal(err)
		}
		var o openenv.DelegationObservation
		if err := json.Unmarshal(res.Observation, &o); err != nil || !strings.Contains(o.Task, tt.inTask) {
			t.Fatalf("seed %d: task %q (%v), want one with %q", tt.seed, o.Task, err, tt.inTask)
		}
		a, _ := json.Marshal(map[string]string{"answer": tt.answer}) // strings always encode
		res, err = s.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a})
		if err != nil || !res.Done || res.Reward == nil || (*res.Reward > 0.5) != tt.correct {
			t.Errorf("seed %d: answer %q: %+v, %v; want done, correct %v", tt.seed, tt.answer, res, err, tt.correct)
		}
		raw, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var st openenv.DelegationState
		if err := json.Unmarshal(raw, &st); err != nil || st.Dataset != "gsm8k" || st.Correct == nil || *st.Correct != tt.correct {
			t.Errorf("seed %d: state %s, %v", tt.seed, raw, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("env: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("env did not stop")
	}
}

// TestBenchEnvShippedRouter serves the world with delegate env. It
// evaluates the shipped router as the policy with bench --env, over the
// WebSocket and over HTTP MCP. both report every episode, its reward as
// the score, and the sub-agent's spend.
func TestBenchEnvShippedRouter(t *testing.T) {
	endToEnd(t)
	var out syncBuffer
	cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"env", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--split", "test"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := awaitListening(t, &out, done, regexp.MustCompile(`serving OpenEnv on (http://\S+) `), "env")

	const n = 4
	scores := map[string][]float64{}
	rcv := newOTLPReceiver(t, 0) // the WebSocket run exports its episodes
	for _, transport := range []string{"ws", "http"} {
		dir := t.TempDir()
		args := []string{"bench", "--config", "../../examples/world.yaml", "--env", base,
			"--env-transport", transport, "--n", strconv.Itoa(n), "--seed", "10", "--out", dir, "--progress", "none"}
		if transport == "ws" {
			args = append(args, "--otlp", rcv.URL)
		}
		got, err := execute(t, func(string) string { return "" }, args...)
		if err != nil {
			t.Fatalf("%s: bench --env: %v\n%s", transport, err, got)
		}
		for _, want := range []string{"| env | env | 4 |", "mean reward", "env-subagent"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: output lacks %q:\n%s", transport, want, got)
			}
		}
		recs, _, err := bench.ReadResults(filepath.Join(dir, benchResults))
		if err != nil || len(recs) != n {
			t.Fatalf("%s: %d records, %v; want %d", transport, len(recs), err, n)
		}
		right := 0
		for _, r := range recs {
			if r.Score == nil || r.Error != "" || r.Roles["policy"].Calls == 0 {
				t.Errorf("%s: record %s: score %v, error %q, roles %+v", transport, r.TaskID, r.Score, r.Error, r.Roles)
				continue
			}
			if r.Correct {
				right++
			}
			scores[transport] = append(scores[transport], *r.Score)
		}
		t.Logf("%s: %d of %d right, rewards %v; first answer %q, failure %q", transport, right, n, scores[transport], recs[0].Answer, recs[0].Failure)
		if right == 0 {
			t.Errorf("%s: no episode right; the shipped router solves most world problems", transport)
		}
	}
	names := map[string]int{}
	for _, sp := range rcv.received() {
		names[sp.Name]++
	}
	if names["invoke_agent env"] != n || names["chat delegator"] == 0 {
		t.Errorf("bench --env --otlp: spans %v, want %d invoke_agent env and the policy's chat spans", names, n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("env: %v", err)
	}
}

func TestBenchEnvFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no episodes", []string{"--env", "http://127.0.0.1:1"}, "--n is required"},
		{"with a dataset", []string{"--env", "http://127.0.0.1:1", "--n", "2", "--dataset", "gsm8k"}, "--dataset and --data are not used"},
		{"bad transport", []string{"--env", "http://127.0.0.1:1", "--n", "2", "--env-transport", "grpc"}, "--env-transport"},
		{"not a URL", []string{"--env", "127.0.0.1:1", "--n", "2"}, "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"bench", "--config", "../../examples/world.yaml", "--out", t.TempDir()}, tt.args...)
			_, err := execute(t, func(string) string { return "" }, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}
