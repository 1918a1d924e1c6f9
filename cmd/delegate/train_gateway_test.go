package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// TestTrainGateway closes the loop in one process: `delegate train
// --gateway` serves the gateway and trains the shipped router on its
// sessions, serving the policy it trains. A Go agent, package strategy's
// route over the repository's OpenAI client, solves world training
// problems in tasked sessions over loopback HTTP, each ended by the
// world's verifier. The test checks that each step trained on exactly its
// problems' groups, that the policy the gateway serves changed after step
// 1 without a checkpoint being read, and that every session ended.
func TestTrainGateway(t *testing.T) {
	const (
		steps = 2
		items = 2 // training problems per step
		group = 4 // sessions per problem
		token = "train-gateway-test-token"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "world.yaml")
	writeRouterConfig(t, cfgPath, "", "")
	outDir := filepath.Join(dir, "train")

	base, out, finish := startTrainGateway(t, ctx, cancel, token, "--config", cfgPath, "--out", outDir, "--steps", fmt.Sprint(steps),
		"--items", fmt.Sprint(items), "--group", fmt.Sprint(group), "--lr", "3e-4", "--gateway-reward", "world")
	admin := gateway.Admin{Base: base, Token: token}

	problems, err := world.Generate(world.DefaultConfig(), 1, world.Train, steps*items)
	if err != nil {
		t.Fatal(err)
	}
	probes := 1
	v0, lp0 := probeSession(ctx, t, admin, "probe-0")
	if v0 != 0 {
		t.Fatalf("before training the served policy is version %d, want 0", v0)
	}
	for s := range steps {
		var batch []*world.Problem
		for range group {
			batch = append(batch, problems[s*items:(s+1)*items]...)
		}
		right := routeSessions(ctx, t, admin, batch)
		t.Logf("step %d: %d of %d sessions right", s+1, right, len(batch))
		if s > 0 {
			continue
		}
		// Once step 1 is done the gateway serves its update from memory.
		waitSteps(ctx, t, outDir, 1)
		lp1, n := waitServed(ctx, t, admin, 1)
		probes += n
		if slices.Equal(lp0, lp1) {
			t.Errorf("the same seeded call has the same logprobs before and after step 1 (%v): the served weights did not change", lp0)
		}
	}
	if err := finish(); err != nil {
		t.Fatalf("train --gateway: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	// The trainer stepped on the sessions' groups, one sequence a session,
	// each group sampled by the policy of the step before its own.
	ms, err := readTrainerMetrics(outDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != steps {
		t.Fatalf("%d trainer steps, want %d", len(ms), steps)
	}
	for _, m := range ms {
		if m.Groups != items || m.Rollouts != items*group || math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) || m.OffPolicySequences != 0 {
			t.Errorf("step %d: %d groups, %d rollouts, loss %v, %d off-policy sequences; want %d, %d, finite, 0",
				m.Step, m.Groups, m.Rollouts, m.Loss, m.OffPolicySequences, items, items*group)
		}
	}
	logged := readGatewaySteps(t, filepath.Join(outDir, train.GatewaySteps))
	byID := readGroupRecords(t, filepath.Join(outDir, gatewayDir, gateway.GroupsFile))
	if len(logged) != steps {
		t.Fatalf("%d steps logged, want %d: %+v", len(logged), steps, logged)
	}
	var trained []string
	for s, e := range logged {
		var tasks []string
		for _, id := range e.Groups {
			r := byID[id]
			if r == nil {
				t.Fatalf("step %d trained group %s, which the gateway did not write", e.Step, id)
			}
			if r.PolicyVersion != s {
				t.Errorf("step %d: group %s sampled by version %d, want %d", e.Step, id, r.PolicyVersion, s)
			}
			tasks = append(tasks, r.TaskID)
			trained = append(trained, id)
		}
		slices.Sort(tasks)
		want := []string{problems[s*items].ID, problems[s*items+1].ID}
		slices.Sort(want)
		if e.Step != s+1 || !slices.Equal(tasks, want) || len(e.Stale) != 0 {
			t.Errorf("logged step %d: tasks %v, stale %v; want step %d, tasks %v, none stale", e.Step, tasks, e.Stale, s+1, want)
		}
	}
	// Verified sessions get the world's reward, costs charged: a right
	// answer scores below 1, a wrong one below 0.
	if want := "verified sessions get the world reward"; !strings.Contains(out.String(), want) {
		t.Errorf("the output does not say %q", want)
	}
	var written []string
	for id, r := range byID {
		written = append(written, id)
		for _, sc := range r.Scores {
			if sc == 0 || sc == 1 {
				t.Errorf("group %s scores %v: a session got %v, not the world's reward with its costs", id, r.Scores, sc)
				break
			}
		}
	}
	slices.Sort(trained)
	slices.Sort(written)
	if !slices.Equal(trained, written) {
		t.Errorf("trained groups %v, written %v: want the same", trained, written)
	}
	// Every session ended: the probes too, which make no group.
	sessions := steps*items*group + probes
	if want := fmt.Sprintf("sessions finished %d, open 0, lost 0, expired 0", sessions); !strings.Contains(out.String(), want) {
		t.Errorf("the output does not say %q", want)
	}
}

// startTrainGateway runs `delegate train --gateway 127.0.0.1:0 args...` in
// this process, the session API's token being token. It returns the
// gateway's URL, the command's output and a function that waits for the
// command's end and returns its error. The test's end cancels ctx, through
// cancel, and waits for it.
func startTrainGateway(t *testing.T, ctx context.Context, cancel context.CancelFunc, token string, args ...string) (string, *syncBuffer, func() error) {
	t.Helper()
	out := &syncBuffer{}
	getenv := func(name string) string {
		if name == gatewayTokenEnv {
			return token
		}
		return ""
	}
	cmd := newRootCmd(getenv, slog.New(slog.DiscardHandler))
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs(append([]string{"train", "--gateway", "127.0.0.1:0", "--progress", "none"}, args...))
	var runErr error
	ended := make(chan struct{})
	go func() {
		runErr = cmd.ExecuteContext(ctx)
		close(ended)
	}()
	finish := func() error {
		<-ended
		return runErr
	}
	t.Cleanup(func() {
		cancel()
		<-ended // the test has failed already when the run has not ended
	})
	done := make(chan error, 1)
	go func() { done <- finish() }()
	base := awaitListening(t, out, done, regexp.MustCompile(`gateway on (http://\S+):`), "train --gateway")
	return base, out, finish
}

// probeSession calls the delegator once in a session of its own group,
// seeded, and ends it with reward 0. Its group never fills, so it trains
// nothing. It returns the served version and the call's logprobs.
func probeSession(ctx context.Context, t *testing.T, admin gateway.Admin, group string) (int, []float64) {
	t.Helper()
	var cr gateway.CreateResponse
	if err := admin.Post(ctx, "/sessions", fmt.Sprintf(`{"group":%q}`, group), &cr); err != nil {
		t.Fatal(err)
	}
	m, err := sessionModel(cr.BaseURL, "delegator")
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(7)
	resp, err := m.Chat(ctx, &delegate.Request{Messages: []delegate.Message{delegate.User("Dot has 91 jars of 23 coins. How many coins does Dot have?")},
		MaxTokens: 24, Seed: &seed, Logprobs: true})
	if err != nil {
		t.Fatal(err)
	}
	var rr gateway.RewardResponse
	if err := admin.Post(ctx, "/sessions/"+cr.SessionID+"/reward", `{"reward":0}`, &rr); err != nil {
		t.Fatal(err)
	}
	if resp.PolicyVersion == nil {
		t.Fatal("the served policy's answer carries no version")
	}
	var lps []float64
	for _, lp := range resp.Choices[0].Logprobs {
		lps = append(lps, lp.Logprob)
	}
	return *resp.PolicyVersion, lps
}

// routeSessions runs route on each problem, all at once, each in a
// session grouped by its problem and ended by the world's verifier. A run
// the model fails (too many turns) ends with reward 0. It returns how
// many were right.
func routeSessions(ctx context.Context, t *testing.T, admin gateway.Admin, problems []*world.Problem) int {
	t.Helper()
	right := make([]bool, len(problems))
	errs := make([]error, len(problems))
	var wg sync.WaitGroup
	for i, p := range problems {
		wg.Go(func() {
			var cr gateway.CreateResponse
			task := fmt.Sprintf(`{"task":{"id":%q,"dataset":"world","answer":"%d"}}`, p.ID, p.Answer)
			if errs[i] = admin.Post(ctx, "/sessions", task, &cr); errs[i] != nil {
				return
			}
			del, err := sessionModel(cr.BaseURL, "delegator")
			if err != nil {
				errs[i] = err
				return
			}
			sol, err := sessionModel(cr.BaseURL, "solver")
			if err != nil {
				errs[i] = err
				return
			}
			roles := strategy.Roles{Strong: delegate.Agent{Model: del}, Weak: delegate.Agent{Model: sol}}
			st, err := strategy.New(strategy.NameRoute, roles, transcript.StrategyConfig())
			if err != nil {
				errs[i] = err
				return
			}
			body := `{}`
			if tr, err := st.Run(ctx, p.Text, nil); err != nil || tr.Failure != "" {
				body = `{"reward":0}`
			}
			var rr gateway.RewardResponse
			if errs[i] = admin.Post(ctx, "/sessions/"+cr.SessionID+"/reward", body, &rr); errs[i] != nil {
				return
			}
			right[i] = rr.Correct != nil && *rr.Correct
		})
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session on %s: %v", problems[i].ID, err)
		}
		if right[i] {
			n++
		}
	}
	return n
}

// sessionModel is the repository's OpenAI client of model at a session's
// base URL.
func sessionModel(baseURL, model string) (delegate.Model, error) {
	oc := openai.DefaultConfig()
	oc.BaseURL, oc.Model, oc.MaxRetries = baseURL, model, 0
	return openai.New(oc)
}

// waitServed probes the served policy until it is version v, and returns
// the last probe's logprobs and the probes made. Step v-1's checkpoint is
// written just before the trainer serves step v's weights.
func waitServed(ctx context.Context, t *testing.T, admin gateway.Admin, v int) ([]float64, int) {
	t.Helper()
	for n := 1; ; n++ {
		got, lps := probeSession(ctx, t, admin, fmt.Sprintf("probe-%d-%d", v, n))
		if got == v {
			return lps, n
		}
		if n == 100 {
			t.Fatalf("the served policy is version %d, want %d", got, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSteps waits until the trainer in dir has logged n steps' metrics.
func waitSteps(ctx context.Context, t *testing.T, dir string, n int) {
	t.Helper()
	for {
		if ms, err := readTrainerMetrics(dir); err == nil && len(ms) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the trainer did not log %d steps", n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readGatewaySteps reads train --gateway's step log.
func readGatewaySteps(t *testing.T, path string) []train.GatewayStep {
	t.Helper()
	var out []train.GatewayStep
	for _, e := range readLines(t, path, func(line []byte) (*train.GatewayStep, error) {
		var e train.GatewayStep
		return &e, json.Unmarshal(line, &e)
	}) {
		out = append(out, *e)
	}
	return out
}

// TestTrainGatewayJSAgent runs train --gateway with the unmodified Agents
// SDK app (agents.mjs) for 2 short steps, as TestGatewayTrainsRouter runs
// the three-process chain. It checks the plumbing, not a rise.
func TestTrainGatewayJSAgent(t *testing.T) {
	endToEnd(t)
	node := needNode(t)
	const (
		steps = 2
		items = 2
		group = 4
		token = "train-gateway-js-token"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "world.yaml")
	writeRouterConfig(t, cfgPath, "", "")
	outDir := filepath.Join(dir, "train")
	base, out, finish := startTrainGateway(t, ctx, cancel, token, "--config", cfgPath, "--out", outDir, "--steps", fmt.Sprint(steps),
		"--items", fmt.Sprint(items), "--group", fmt.Sprint(group))
	problems, err := world.Generate(world.DefaultConfig(), 1, world.Train, steps*items)
	if err != nil {
		t.Fatal(err)
	}
	for s := range steps {
		var batch []*world.Problem
		for range group {
			batch = append(batch, problems[s*items:(s+1)*items]...)
		}
		right, failed := runAgents(ctx, t, node, base, token, batch)
		t.Logf("step %d: %d of %d sessions right, %d agent runs failed", s+1, right.count(), len(batch), failed)
	}
	if err := finish(); err != nil {
		t.Fatalf("train --gateway: %v\n%s", err, out.String())
	}
	ms, err := readTrainerMetrics(outDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != steps {
		t.Fatalf("%d trainer steps, want %d", len(ms), steps)
	}
	for _, m := range ms {
		t.Logf("step %d: reward %.3f, delegation rate %.3f, staleness %v", m.Step, m.Reward, m.DelegationRate, m.StalenessGroups)
		if m.Groups != items || m.Rollouts != items*group || math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) {
			t.Errorf("step %d: %d groups, %d rollouts, loss %v; want %d, %d and finite", m.Step, m.Groups, m.Rollouts, m.Loss, items, items*group)
		}
	}
	if want := fmt.Sprintf("sessions finished %d, open 0", steps*items*group); !strings.Contains(out.String(), want) {
		t.Errorf("the output does not say %q:\n%s", want, out.String())
	}
}

// TestTrainGatewayResumesAfterSIGKILL kills `delegate train --gateway`
// after its first step, with one session open, and runs it again. The
// open session is counted lost; the first step is not trained again; the
// second trains on the second problem's sessions alone.
func TestTrainGatewayResumesAfterSIGKILL(t *testing.T) {
	endToEnd(t)
	exe, err := exec.LookPath("delegate")
	if err != nil {
		t.Fatalf("no delegate command on PATH (TestMain puts it there): %v", err)
	}
	const (
		steps = 2
		group = 2
		token = "train-gateway-kill-token"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "world.yaml")
	writeRouterConfig(t, cfgPath, "", "")
	outDir := filepath.Join(dir, "train")
	start := func() (string, *exec.Cmd, *syncBuffer, chan error) {
		cmd := exec.CommandContext(ctx, exe, "train", "--gateway", "127.0.0.1:0", "--config", cfgPath, "--out", outDir,
			"--steps", fmt.Sprint(steps), "--items", "1", "--group", fmt.Sprint(group), "--progress", "none")
		cmd.Env = append(os.Environ(), gatewayTokenEnv+"="+token)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		base := awaitListening(t, out, done, regexp.MustCompile(`gateway on (http://\S+):`), "train --gateway")
		return base, cmd, out, done
	}
	problems, err := world.Generate(world.DefaultConfig(), 2, world.Train, steps)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(p *world.Problem) []*world.Problem {
		var b []*world.Problem
		for range group {
			b = append(b, p)
		}
		return b
	}

	base, cmd, out, done := start()
	admin := gateway.Admin{Base: base, Token: token}
	routeSessions(ctx, t, admin, batch(problems[0]))
	waitSteps(ctx, t, outDir, 1)
	waitServed(ctx, t, admin, 1) // step 1 is checkpointed
	var open gateway.CreateResponse
	if err := admin.Post(ctx, "/sessions", `{"group":"left-open"}`, &open); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("the run finished before SIGKILL reached it:\n%s", out)
	}

	base, _, out, done = start()
	if !strings.Contains(out.String(), "1 sessions open at the last stop are lost") {
		t.Errorf("the restarted run does not count the open session lost:\n%s", out)
	}
	routeSessions(ctx, t, gateway.Admin{Base: base, Token: token}, batch(problems[1]))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the resumed run: %v\n%s", err, out)
		}
	case <-ctx.Done():
		t.Fatalf("the resumed run did not finish:\n%s", out)
	}
	ms, err := readTrainerMetrics(outDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != steps {
		t.Fatalf("%d metrics lines, want %d", len(ms), steps)
	}
	logged := readGatewaySteps(t, filepath.Join(outDir, train.GatewaySteps))
	byID := readGroupRecords(t, filepath.Join(outDir, gatewayDir, gateway.GroupsFile))
	if len(logged) != steps || len(byID) != steps {
		t.Fatalf("steps logged %+v, %d group records; want %d of each", logged, len(byID), steps)
	}
	for i, e := range logged {
		if e.Step != i+1 || len(e.Groups) != 1 || byID[e.Groups[0]] == nil || byID[e.Groups[0]].TaskID != problems[i].ID {
			t.Errorf("logged step %+v, want step %d on the group of %s", e, i+1, problems[i].ID)
		}
	}
}

// TestTrainGatewayFlags checks the command lines train --gateway refuses
// before it serves anything.
func TestTrainGatewayFlags(t *testing.T) {
	worldCfg := filepath.Join(repoRoot, "examples", "world.yaml")
	gw := []string{"--gateway", "127.0.0.1:0", "--config", worldCfg}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"api", append(gw, "--api", "http://127.0.0.1:1"), "--gateway goes without --api"},
		{"processes", append(gw, "--processes", "2"), "--gateway goes without --processes"},
		{"rl seeds", append(gw, "--rl-seeds", "1,2"), "--gateway goes without --rl-seeds"},
		{"delegator", append(gw, "--delegator", "shipped:router"), "--gateway goes without --delegator"},
		{"time", append(gw, "--time", "1h"), "--gateway goes without --time"},
		{"otlp", append(gw, "--otlp", "http://127.0.0.1:4318"), "--gateway goes without --otlp"},
		{"mlpo", append(gw, "--mode", "mlpo"), "--gateway trains the delegator under route with task credit"},
		{"the solver", append(gw, "--train", "both"), "--gateway trains the delegator under route with task credit"},
		{"role credit", append(gw, "--credit", "role"), "--gateway trains the delegator under route with task credit"},
		{"a trainer's reward", append(gw, "--reward", reward.KindPerCall), "the gateway rewards the sessions"},
		{"negative staleness", append(gw, "--max-staleness", "-1"), "--max-staleness -1 is negative"},
		{"negative offpolicy", append(gw, "--offpolicy", "-1"), "--offpolicy -1 is negative"},
		{"no model of the role", append(gw, "--gateway-role", "critic"), `no served model plays role "critic"`},
		{"two models of the role", append(gw, "--role", "solver=delegator"), "models delegator, solver all play role"},
		{"config alone", []string{"--config", worldCfg}, "--config goes with --gateway"},
		{"max staleness alone", []string{"--max-staleness", "2"}, "--max-staleness goes with --gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, testEnv, append([]string{"train", "--out", t.TempDir(), "--progress", "none"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one containing %q\n%s", err, tt.want, out)
			}
		})
	}
}
