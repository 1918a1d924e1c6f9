package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// agentsJS is the folder of the JavaScript agents; npm ci installs their
// packages (.ci/run does).
const agentsJS = repoRoot + "/examples/agents-js"

// jsProblem is a world problem the shipped router delegates: two
// products, then sums, 3719 in all.
const jsProblem = "Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"

// gatewayChild is a `delegate gateway` child process of a test.
type gatewayChild struct {
	cmd  *exec.Cmd
	base string // its URL
	out  *syncBuffer
	done chan error
}

// startGatewayChild runs the delegate command that TestMain puts on PATH
// as `delegate gateway args...` and waits for its address.
func startGatewayChild(t *testing.T, token string, args ...string) *gatewayChild {
	t.Helper()
	exe, err := exec.LookPath("delegate")
	if err != nil {
		t.Fatalf("no delegate command on PATH (TestMain puts it there): %v", err)
	}
	cmd := exec.Command(exe, append([]string{"gateway", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), gatewayTokenEnv+"="+token)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayChild{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	re := regexp.MustCompile(`gateway on (http://\S+):`)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			g.out.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		g.done <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			// The test failed before stopping it.
			_ = cmd.Process.Kill()
			<-g.done
		}
	})
	select {
	case g.base = <-addr:
	case err := <-g.done:
		t.Fatalf("delegate gateway exited before listening: %v\n%s", err, g.out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("delegate gateway did not listen in 2 minutes:\n%s", g.out.String())
	}
	return g
}

// stop interrupts the child and waits for its exit.
func (g *gatewayChild) stop(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("delegate gateway: %v\n%s", err, g.out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("delegate gateway did not stop in a minute after SIGINT")
	}
}

// post sends a session API request with the token and decodes its answer.
func (g *gatewayChild) post(t *testing.T, token, path, body string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", strings.SplitN(path, "sess-", 2)[0], resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// needNode returns the node command, skipping the test without node or
// without the packages of examples/agents-js.
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH: the JavaScript clients need Node.js 20 or later")
	}
	for _, p := range []string{"openai", "@openai/agents", "zod"} {
		if _, err := os.Stat(filepath.Join(agentsJS, "node_modules", p, "package.json")); err != nil {
			t.Skipf("examples/agents-js/node_modules lacks %s: run npm ci in examples/agents-js", p)
		}
	}
	return node
}

// TestGatewayJSClients runs JavaScript agents through a delegate gateway
// child process. One is the OpenAI Agents SDK's orchestrator with the
// solver as its tool (agents.mjs). The other is the openai client
// streaming with tools (client.mjs). Each runs two sessions, ended by the
// world's verifier; then
// two agents.mjs runs the model fails, which end cleanly with reward 0.
// The group records hold one sample set per role, whose ids and
// logprobs are the engine's own for the same requests.
func TestGatewayJSClients(t *testing.T) {
	endToEnd(t)
	node := needNode(t)
	const token = "gateway-js-test-token"
	config := repoRoot + "/examples/world.yaml"
	dir := t.TempDir()
	g := startGatewayChild(t, token, "--config", config, "--out", dir, "--group", "2")

	programs := []struct{ script, group string }{
		{"agents.mjs", "agents"},
		{"client.mjs", "client"},
	}
	for _, p := range programs {
		for i := range 2 {
			var cr gateway.CreateResponse
			g.post(t, token, "/sessions", `{"task":{"id":"coins","dataset":"world","answer":"3719"},"group":"`+p.group+`"}`, &cr)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			cmd := exec.CommandContext(ctx, node, p.script, cr.BaseURL, jsProblem)
			cmd.Dir = agentsJS
			out, err := cmd.Output()
			cancel()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("node %s, session %d: %v\n%s%s", p.script, i, err, out, stderr)
			}
			var res struct {
				FinalOutput string `json:"final_output"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("node %s: %v: %s", p.script, err, out)
			}
			if !strings.Contains(res.FinalOutput, `\boxed{3719}`) {
				t.Errorf("node %s, session %d: final output %q, want \\boxed{3719}", p.script, i, res.FinalOutput)
			}
			var rr gateway.RewardResponse
			g.post(t, token, "/sessions/"+cr.SessionID+"/reward", `{}`, &rr)
			if rr.Correct == nil || !*rr.Correct || rr.Samples["delegator"] == 0 || rr.Samples["solver"] == 0 {
				t.Errorf("node %s, session %d: reward %+v, want correct with delegator and solver samples", p.script, i, rr)
			}
			if want := min(i, 1) * 2; rr.GroupsWritten != want {
				t.Errorf("node %s, session %d: %d group records written, want %d", p.script, i, rr.GroupsWritten, want)
			}
		}
	}
	// A run the model fails (here: past its turns) ends cleanly, as a
	// real app's would: the app says so and exits 0, and its runner ends
	// the session with reward 0, its calls recorded.
	for i := range 2 {
		var cr gateway.CreateResponse
		g.post(t, token, "/sessions", `{"task":{"id":"coins","dataset":"world","answer":"3719"},"group":"failed"}`, &cr)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, node, "agents.mjs", cr.BaseURL, jsProblem, "1")
		cmd.Dir = agentsJS
		out, err := cmd.Output()
		cancel()
		var res agentResult
		if err != nil || json.Unmarshal(out, &res) != nil || !strings.Contains(res.Failed, "MaxTurnsExceededError") {
			t.Fatalf("node agents.mjs with 1 turn, session %d: %v: %s; want a failed run, exit status 0", i, err, out)
		}
		var rr gateway.RewardResponse
		g.post(t, token, "/sessions/"+cr.SessionID+"/reward", `{"reward":0}`, &rr)
		if rr.Reward != 0 || rr.Calls < 2 || rr.Samples["delegator"] != 1 || rr.Samples["solver"] == 0 {
			t.Errorf("failed run, session %d: reward %+v, want 0 with its delegator and solver calls and samples", i, rr)
		}
	}
	g.stop(t)

	cfg, err := LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	models, closeModels, err := openServed(cfg, []string{"delegator", "solver"}, func(string) string { return "" }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeModels()
	records := readGroupFile(t, filepath.Join(dir, gateway.GroupsFile))
	var ids []string
	for _, rec := range records {
		ids = append(ids, rec.ID[:strings.Index(rec.ID, "#")]+"."+rec.ID[strings.LastIndex(rec.ID, ".")+1:])
		role := rec.ID[strings.LastIndex(rec.ID, ".")+1:]
		want := 1.0
		if strings.HasPrefix(rec.ID, "failed#") {
			want = 0
		}
		if rec.Scores[0] != want || !rec.Overrides[0].SetAdvantageToZero {
			t.Errorf("record %s: scores %v, want %v and tied", rec.ID, rec.Scores, want)
		}
		for i := range rec.Tokens {
			checkReplayed(t, models[role], rec, i)
		}
	}
	slices.Sort(ids)
	if want := []string{"agents.delegator", "agents.solver", "client.delegator", "client.solver", "failed.delegator", "failed.solver"}; !slices.Equal(ids, want) {
		t.Errorf("group records %v, want %v", ids, want)
	}
}

// agentResult is the JSON line agents.mjs prints: the final output, or
// why the model failed the run.
type agentResult struct {
	FinalOutput string `json:"final_output"`
	Items       int    `json:"items"`
	Failed      string `json:"failed"`
	Error       string `json:"error"`
}

// readGroupFile reads the group records of a groups.jsonl.
func readGroupFile(t *testing.T, path string) []*rollout.GroupRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*rollout.GroupRecord
	for line := range strings.Lines(string(b)) {
		rec, err := rollout.DecodeGroup([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// checkReplayed calls m in process, at temperature 0 as the agents did.
// It sends the conversation before each trained turn of sequence i of rec.
// It checks that the sequence holds the engine's prompt ids, generated
// ids and logprobs at the same places, trained where it generated.
func checkReplayed(t *testing.T, m delegate.Model, rec *rollout.GroupRecord, i int) {
	t.Helper()
	toks, masks, lps := rec.Tokens[i], rec.Masks[i], rec.InferenceLogprobs[i]
	var msgs []delegate.Message
	var tools []delegate.Tool
	for _, turn := range rec.Messages[i] {
		if len(turn.ToolCalls) > 0 {
			// The delegate tool: the world preset declares it compactly
			// whatever its description, as it did for the agents.
			tools = []delegate.Tool{{Name: "delegate"}}
		}
	}
	end := 0
	for k, turn := range rec.Messages[i] {
		if !turn.Trained {
			msgs = append(msgs, turn.Message)
			continue
		}
		zero := 0.0
		resp, err := m.Chat(context.Background(), &delegate.Request{Messages: slices.Clone(msgs), Tools: tools, Temperature: &zero, Logprobs: true})
		if err != nil {
			t.Fatalf("record %s, sequence %d, turn %d: %v", rec.ID, i, k, err)
		}
		p := resp.PromptTokenIDs
		var gen []int
		var glp []float64
		for _, lp := range resp.Choices[0].Logprobs {
			gen, glp = append(gen, lp.TokenID), append(glp, lp.Logprob)
		}
		end = len(p) + len(gen)
		if end > len(toks) || !slices.Equal(toks[:len(p)], p) || !slices.Equal(toks[len(p):end], gen) || !slices.Equal(masks[len(p):end], gen) {
			t.Errorf("record %s, sequence %d, turn %d: the recorded ids differ from the engine's prompt %d and %d generated ids", rec.ID, i, k, len(p), len(gen))
			return
		}
		for j, lp := range glp {
			if got := lps[len(p)+j]; got != lp && !(math.IsNaN(got) && math.IsNaN(lp)) {
				t.Errorf("record %s, sequence %d, turn %d: logprob %d is %v, the engine's %v", rec.ID, i, k, j, got, lp)
				return
			}
		}
		if resp.Choices[0].Message.Content != turn.Content || len(resp.Choices[0].Message.ToolCalls) != len(turn.ToolCalls) {
			t.Errorf("record %s, sequence %d, turn %d: the engine answered %+v, the record holds %+v", rec.ID, i, k, resp.Choices[0].Message, turn.Message)
		}
		msgs = append(msgs, turn.Message)
	}
	if end != len(toks) {
		t.Errorf("record %s, sequence %d: %d tokens, the replayed turns end at %d", rec.ID, i, len(toks), end)
	}
}
