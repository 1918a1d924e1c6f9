package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
)

// TestGatewayTrainsRouter closes the loop with an unmodified JavaScript
// agent. The Agents SDK orchestrator (agents.mjs) solves world training
// problems through `delegate gateway --push` to `delegate api`.
// `delegate train --api` trains the shipped router on its batches. The
// gateway's delegator follows the trainer's checkpoint. Whether the
// held-out reward rises is not asserted: 2 steps are too few, and
// perf/gatewaytrain measures it (docs/gateway.md).
func TestGatewayTrainsRouter(t *testing.T) {
	endToEnd(t)
	node := needNode(t)
	const (
		steps = 2
		items = 2 // training problems per step
		group = 4 // sessions per problem
		token = "gateway-train-test-token"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	trainerDir := filepath.Join(dir, "trainer")
	trainCfg := filepath.Join(dir, "train.yaml")
	writeRouterConfig(t, trainCfg, "", rl.CheckpointDir(trainerDir))

	apiURL := startAPI(t)
	trainer := make(chan error, 1)
	var trainerOut syncBuffer
	go func() {
		cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
		cmd.SetOut(&trainerOut)
		cmd.SetErr(&trainerOut)
		cmd.SetArgs([]string{"train", "--api", apiURL, "--out", trainerDir, "--steps", strconv.Itoa(steps),
			"--items", strconv.Itoa(items), "--group", strconv.Itoa(group), "--progress", "none"})
		trainer <- cmd.ExecuteContext(ctx)
	}()
	// The agent samples at 0; the gateway samples the delegator's calls
	// at the trainer's temperature, so that a group's sessions differ.
	base, stop := startGatewayIn(t, ctx, token, "--config", trainCfg, "--out", filepath.Join(dir, "gateway"), "--group", strconv.Itoa(group),
		"--train", "delegator", "--temperature", "1", "--push", apiURL, "--push-offpolicy", "1", "--push-wait", "2m")

	problems, err := world.Generate(world.DefaultConfig(), 1, world.Train, steps*items)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for s := range steps {
		var batch []*world.Problem
		for range group {
			batch = append(batch, problems[s*items:(s+1)*items]...)
		}
		right, failed := runAgents(ctx, t, node, base, token, batch)
		t.Logf("training step %d (%s): %d of %d sessions right, %d agent runs failed", s+1, time.Since(start).Round(time.Second), right.count(), len(batch), failed)
	}
	select {
	case err := <-trainer:
		if err != nil {
			t.Fatalf("train --api: %v\n%s", err, trainerOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("the trainer did not finish its %d steps:\n%s", steps, trainerOut.String())
	}
	stop()
	t.Logf("%d sessions, %d trainer steps in %s", steps*items*group, steps, time.Since(start).Round(time.Second))
	ms, err := readTrainerMetrics(trainerDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != steps {
		t.Fatalf("%d trainer steps, want %d", len(ms), steps)
	}
	for _, m := range ms {
		t.Logf("trainer step %d: reward %.3f, accuracy %.3f, delegation rate %.3f, %d tied groups, staleness %v",
			m.Step, m.Reward, m.Accuracy, m.DelegationRate, m.DegenerateGroups, m.StalenessGroups)
	}

	// The trainer took every step on the agent's sessions: one trained
	// sequence per session, the delegator's calls with their logprobs.
	for _, m := range ms {
		if m.Rollouts != items*group || math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) {
			t.Errorf("trainer step %d: %d rollouts, loss %v; want %d and finite", m.Step, m.Rollouts, m.Loss, items*group)
		}
	}
}

// verdicts holds, per problem, whether the agent's session was right.
type verdicts []bool

func (v verdicts) count() int {
	n := 0
	for _, ok := range v {
		if ok {
			n++
		}
	}
	return n
}

// writeRouterConfig writes examples/world.yaml's models at path: the
// delegator from checkpoint (default the shipped router), following
// follow when set.
func writeRouterConfig(t *testing.T, path, checkpoint, follow string) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if checkpoint == "" {
		checkpoint = filepath.Join(root, "models", "router")
	}
	var extra string
	if follow != "" {
		extra = fmt.Sprintf("    follow: %q\n    follow_every: 10ms\n", follow)
	}
	doc := fmt.Sprintf(`preset: world
models:
  delegator:
    kind: local
    checkpoint: %q
%s    system_prompt: Solve or delegate.
    price: {input: 1.00, cached_input: 0.10, output: 5.00}
  solver:
    kind: local
    checkpoint: %q
    system_prompt: Compute.
    price: {input: 0.20, cached_input: 0.02, output: 1.00}
roles: {default: delegator, subagent: solver, weak: solver}
`, checkpoint, extra, filepath.Join(root, "models", "solver"))
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startGatewayIn runs `delegate gateway args...` in this process on a free
// loopback port. It returns its URL and a function that stops it.
func startGatewayIn(t *testing.T, ctx context.Context, token string, args ...string) (string, func()) {
	t.Helper()
	var out syncBuffer
	getenv := func(name string) string {
		if name == gatewayTokenEnv {
			return token
		}
		return ""
	}
	cmd := newRootCmd(getenv, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"gateway", "--addr", "127.0.0.1:0"}, args...))
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(gctx) }()
	base := awaitListening(t, &out, done, regexp.MustCompile(`gateway on (http://\S+):`), "gateway")
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway: %v\n%s", err, out.String())
			}
		})
	}
	t.Cleanup(stop)
	return base, stop
}

// runAgents runs agents.mjs once per problem, all at once. Each runs in a
// session of the gateway at base, grouped by the problem. The world's
// verifier ends each. A run the model fails (agents.mjs says
// "failed": a malformed tool call, too many turns) ends its session with
// reward 0; an agent that crashes fails the test.
func runAgents(ctx context.Context, t *testing.T, node, base, token string, problems []*world.Problem) (verdicts, int) {
	t.Helper()
	right := make(verdicts, len(problems))
	errs := make([]error, len(problems))
	agentFailed := make([]bool, len(problems))
	var wg sync.WaitGroup
	for i, p := range problems {
		wg.Go(func() {
			task := fmt.Sprintf(`{"task":{"id":%q,"dataset":"world","answer":"%d"}}`, p.ID, p.Answer)
			var cr gateway.CreateResponse
			if errs[i] = (gateway.Admin{Base: base, Token: token}).Post(ctx, "/sessions", task, &cr); errs[i] != nil {
				return
			}
			actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			cmd := exec.CommandContext(actx, node, "agents.mjs", cr.BaseURL, p.Text)
			cmd.Dir = agentsJS
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			cancel()
			var res agentResult
			if err != nil || json.Unmarshal(out, &res) != nil {
				errs[i] = fmt.Errorf("agents.mjs on %s: %v: %s%s", p.ID, err, out, lastLine(stderr.String()))
				return
			}
			// A run the model failed scores 0; any other is verified.
			body := `{}`
			if res.Failed != "" {
				agentFailed[i], body = true, `{"reward":0}`
				t.Logf("agents.mjs on %s: %s", p.ID, res.Failed)
			}
			var rr gateway.RewardResponse
			if errs[i] = (gateway.Admin{Base: base, Token: token}).Post(ctx, "/sessions/"+cr.SessionID+"/reward", body, &rr); errs[i] != nil {
				return
			}
			right[i] = rr.Correct != nil && *rr.Correct
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, f := range agentFailed {
		if f {
			failed++
		}
	}
	return right, failed
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
