package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/pretrain"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

// TestPretrainRejectsBadFlags checks that every bad flag is refused,
// named, before any corpus is built: each case takes a moment, also
// under the race detector. A checkpoint --init or --solver names must
// load, and --init's must have the model's shape.
func TestPretrainRejectsBadFlags(t *testing.T) {
	tiny, _ := tinyModels(t, t.TempDir())
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown model", []string{"--model", "oracle"}, "--model"},
		{"steps and time", []string{"--model", "solver", "--steps", "3", "--time", "1m"}, "not both"},
		{"negative steps", []string{"--steps", "-1"}, "negative"},
		{"no eval items", []string{"--eval", "0"}, "positive"},
		{"init with two models", []string{"--init", "somewhere"}, "--init"},
		{"unknown level", []string{"--model", "delegator", "--levels", "2,9"}, "--levels: 9"},
		{"level twice", []string{"--model", "delegator", "--levels", "2,2"}, "twice"},
		{"init missing", []string{"--model", "solver", "--init", "/nonexistent/ckpt", "--steps", "1"}, "--init /nonexistent/ckpt: checkpoint /nonexistent/ckpt"},
		{"init missing for the delegator", []string{"--model", "delegator", "--init", "/nonexistent/ckpt"}, "--init /nonexistent/ckpt:"},
		{"init of another shape", []string{"--model", "solver", "--init", tiny}, "--init " + tiny + " holds a model of another shape"},
		{"solver missing", []string{"--model", "delegator", "--solver", "/nonexistent/solver"}, "--solver /nonexistent/solver: checkpoint /nonexistent/solver"},
		{"route mix of two", []string{"--model", "delegator", "--route-mix", "0.5,0.5"}, "--route-mix has 2 weights"},
		{"negative route mix", []string{"--model", "delegator", "--route-mix", "-1,1,0"}, "--route-mix: world mix: never: weight -1 is negative"},
		{"route mix for the solver", []string{"--model", "solver", "--route-mix", "0,0,1"}, "--model solver"},
		{"levels for the solver", []string{"--model", "solver", "--levels", "2"}, "--levels sets the delegator's corpus"},
		{"peers for the solver", []string{"--model", "solver", "--with-peers"}, "--with-peers sets the delegator's corpus"},
		{"unknown world", []string{"--model", "solver", "--world", "nowhere"}, `world "nowhere"`},
		{"digits world's delegator", []string{"--model", "delegator", "--world", "digits"}, "--world sets the solver's coverage"},
		{"unknown grade split", []string{"--model", "delegator", "--grade-split", "train"}, `--grade-split "train", want validation or test`},
		// test is accepted: the run gets past the flags to the missing --init.
		{"grade split test", []string{"--model", "solver", "--grade-split", "test", "--init", "/nonexistent/ckpt", "--steps", "1"}, "--init /nonexistent/ckpt:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"pretrain", "--out", t.TempDir()}, tt.args...)
			got, err := execute(t, func(string) string { return "" }, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("pretrain %v: %v, want an error mentioning %q", tt.args, err, tt.want)
			}
			if strings.Contains(got, "transcripts") {
				t.Errorf("pretrain %v built a corpus before refusing its flags:\n%s", tt.args, got)
			}
		})
	}
}

// TestPretrainChecksEveryModelFirst: --model all refuses to replace the
// delegator's finished checkpoint before it trains the solver.
func TestPretrainChecksEveryModelFirst(t *testing.T) {
	out := t.TempDir()
	tinyModels(t, out)
	// out/delegator holds a finished checkpoint; the solver is to train.
	if err := os.RemoveAll(filepath.Join(out, "solver")); err != nil {
		t.Fatal(err)
	}
	got, err := execute(t, func(string) string { return "" }, "pretrain", "--out", out, "--steps", "1")
	if err == nil || !strings.Contains(err.Error(), "pretrain delegator: "+filepath.Join(out, "delegator")+" already holds a trained checkpoint") {
		t.Errorf("pretrain --model all over a finished delegator: %v, want the delegator's checkpoint named", err)
	}
	if strings.Contains(got, "transcripts") {
		t.Errorf("it built the solver's corpus before refusing:\n%s", got)
	}
}

// TestPretrainSolverWritesCheckpoint runs two steps of the solver's
// pretraining. It checks the checkpoint it leaves, its metadata, and that
// the resumable state is gone.
func TestPretrainSolverWritesCheckpoint(t *testing.T) {
	endToEnd(t)
	out := t.TempDir()
	got, err := execute(t, func(string) string { return "" }, "pretrain", "--model", "solver", "--steps", "2", "--batch", "2", "--eval", "1", "--eval-every", "0", "--out", out, "--seed", "7")
	if err != nil {
		t.Fatalf("pretrain: %v\n%s", err, got)
	}
	for _, want := range []string{"solver step 2/2", "solver held-out 2d*2d", "inside its coverage"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	p, meta, err := nn.Load(filepath.Join(out, "solver"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Config != pretrain.SolverShape || meta["model"] != "solver" || meta["seed"] != "7" || meta["steps"] != "2" {
		t.Errorf("checkpoint config %+v, meta %v", p.Config, meta)
	}
	if _, err := os.Stat(filepath.Join(out, "solver.state")); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}

	// The finished checkpoint is not replaced unless asked.
	again := []string{"pretrain", "--model", "solver", "--steps", "2", "--batch", "2", "--eval", "1", "--eval-every", "0", "--out", out, "--seed", "8"}
	if got, err := execute(t, func(string) string { return "" }, again...); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("pretrain over a trained checkpoint: %v, want a refusal naming --force\n%s", err, got)
	}
	if _, meta, err := nn.Load(filepath.Join(out, "solver")); err != nil || meta["seed"] != "7" {
		t.Fatalf("the refused run changed the checkpoint: seed %q, %v", meta["seed"], err)
	}
	if got, err := execute(t, func(string) string { return "" }, append(again, "--force")...); err != nil {
		t.Fatalf("pretrain --force: %v\n%s", err, got)
	}
	if _, meta, err := nn.Load(filepath.Join(out, "solver")); err != nil || meta["seed"] != "8" {
		t.Fatalf("--force did not replace the checkpoint: seed %q, %v", meta["seed"], err)
	}
}

// TestDelegatorCorpusLevelsAndPeers checks what --levels and --with-peers
// put in the delegator's corpus. It holds problems of the given levels
// only, and the peers' terse right answers under lead's peer prompt.
// scratchLine is a line of the delegator's own product scratchpad, "a*d+c=rd".
var scratchLine = regexp.MustCompile(`\d\*\d\+\d=\d\d`)

func TestDelegatorCorpusLevelsAndPeers(t *testing.T) {
	endToEnd(t)
	plain, err := pretrain.DelegatorCorpus(3, []int{1}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	withPeers, err := pretrain.DelegatorCorpus(3, []int{1}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(withPeers)-len(plain), 40000/4; got != want {
		t.Errorf("--with-peers adds %d transcripts, want %d (a quarter of the problems)", got, want)
	}
	peer := withPeers[len(withPeers)-1]
	text := tokenizer.Decode(peer.Tokens)
	if !strings.Contains(text, "<answer>") || !strings.Contains(text, "End with <answer>N</answer>.") {
		t.Errorf("the last transcript is not a peer answer: %q", text)
	}
	// --route-mix 0,1,0: every route transcript hands every step over, so
	// none computes a product itself.
	always, err := pretrain.DelegatorCorpus(3, []int{1}, false, []float64{0, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	routes := 0
	for _, e := range always {
		text := tokenizer.Decode(e.Tokens)
		if !strings.Contains(text, "Solve or delegate.") {
			continue
		}
		routes++
		if !strings.Contains(text, `delegate{"question":`) || scratchLine.MatchString(text) {
			t.Fatalf("an always-delegate route transcript computes a step: %q", text)
		}
	}
	if routes != 40000 {
		t.Errorf("%d route transcripts, want one per problem (40000)", routes)
	}
	never, err := pretrain.DelegatorCorpus(3, []int{1}, false, []float64{1, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range never[:200] {
		if text := tokenizer.Decode(e.Tokens); strings.Contains(text, "Solve or delegate.") && (!scratchLine.MatchString(text) || strings.Contains(text, `delegate{"question":`)) {
			t.Fatalf("a never-delegate route transcript hands a step over: %q", text)
		}
	}
	if _, err := pretrain.DelegatorCorpus(3, []int{1}, false, []float64{-1, 1, 0}); err == nil || !strings.Contains(err.Error(), "never") {
		t.Errorf("a negative weight: %v, want an error naming never", err)
	}
	for _, e := range plain[:200] {
		// Level 1 is one product: no amount is got or given away.
		if text := tokenizer.Decode(e.Tokens); strings.Contains(text, "gives away") || strings.Contains(text, "more.") {
			t.Fatalf("a level-1 corpus holds a longer problem: %q", text)
		}
	}
}

// TestPretrainProgressModes checks the three progress modes. Bar draws a
// bar per model with the steps, the loss, the held-out score and an ETA,
// the run's own lines above it. Plain writes lines with an ETA at
// evaluations and at the last step. None writes no step lines at all. The
// view is fed as pretrain.Run feeds it (TestPretrainSolverWritesCheckpoint
// runs the command itself).
func TestPretrainProgressModes(t *testing.T) {
	tests := []struct {
		mode     string
		want     []string
		wantNone []string
	}{
		{progressBar, []string{"solver", "3/3 steps", "100 %", "loss 1.5000", "held-out 0.250", "ETA 0s", "delegator", "2/2 steps",
			"solver step 3/3 held-out 0.250 (2d*2d 1/4)", "solver: saved"}, nil},
		{progressPlain, []string{"solver 3/3 steps (100%)  loss 1.5000  lr 1.00e-03  held-out 0.250  elapsed 3s  ETA 0s",
			"solver step 3/3 held-out 0.250 (2d*2d 1/4)", "delegator 2/2 steps (100%)", "solver: saved"}, []string{"solver 1/3 steps"}},
		{progressNone, []string{"solver: saved"}, []string{"step", "ETA"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			var buf bytes.Buffer
			v := newProgressView(&buf, tt.mode)
			p := &pretrainProgress{v: v}
			for step := 1; step <= 3; step++ {
				pr := pretrain.Progress{Step: step, Steps: 3, Loss: 1.5, LR: 1e-3, Elapsed: time.Duration(step) * time.Second}
				if step == 3 {
					pr.Evaluated, pr.Score, pr.Detail = true, 0.25, "2d*2d 1/4"
				}
				p.step("solver", pr)
			}
			fmt.Fprintln(v.text(), "solver: saved")
			for step := 1; step <= 2; step++ {
				p.step("delegator", pretrain.Progress{Step: step, Steps: 2, Loss: 2, LR: 1e-3, Elapsed: time.Duration(step) * time.Second})
			}
			v.finish(true)
			got := buf.String()
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			for _, not := range tt.wantNone {
				if strings.Contains(got, not) {
					t.Errorf("output holds %q:\n%s", not, got)
				}
			}
		})
	}
	if _, err := execute(t, func(string) string { return "" }, "pretrain", "--progress", "fancy"); err == nil || !strings.Contains(err.Error(), "want auto, bar, plain or none") {
		t.Errorf("--progress fancy: %v", err)
	}
}

// TestPretrainOTLP runs two steps of the solver's pretraining with --otlp.
// A receiver that is up gets each graded question as GenAI spans. With
// the receiver down, the run succeeds all the same, and takes at most the
// exporter's bounded close longer than without --otlp.
func TestPretrainOTLP(t *testing.T) {
	endToEnd(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	up := newOTLPReceiver(t, 0)
	classes := len(world.SolverSizes(true)) + len(world.SolverSizes(false))
	tests := []struct {
		name  string
		url   string
		chats int // spans expected: 4 questions a class at the end of training, 1 in the final grading
	}{
		{"none", "", 0},
		{"up", up.URL, 5 * classes},
		{"down", down, 0},
	}
	var baseTime time.Duration // the run without --otlp
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			args := []string{"pretrain", "--model", "solver", "--steps", "2", "--batch", "2", "--eval", "1",
				"--eval-every", "0", "--out", out, "--seed", "7", "--progress", "none"}
			if tt.url != "" {
				args = append(args, "--otlp", tt.url)
			}
			start := time.Now()
			got, err := execute(t, testEnv, args...)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("pretrain --otlp with the receiver %s: %v\n%s", tt.name, err, got)
			}
			if !strings.Contains(got, "solver held-out accuracy inside its coverage") {
				t.Errorf("output lacks the final grading:\n%s", got)
			}
			if _, _, err := nn.Load(filepath.Join(out, "solver")); err != nil {
				t.Errorf("no checkpoint with the receiver %s: %v", tt.name, err)
			}
			switch tt.name {
			case "none":
				baseTime = took
			case "down":
				// Generous against a loaded machine: the bound is the close's.
				if limit := 2*baseTime + otlpCloseTimeout + 5*time.Second; took > limit {
					t.Errorf("pretrain took %v with the receiver down, want under %v (%v without --otlp)", took, limit, baseTime)
				}
			}
			if tt.chats == 0 {
				return
			}
			names := map[string]int{}
			for _, s := range up.received() {
				names[s.Name]++
				a := map[string]string{}
				for _, kv := range s.Attributes {
					a[kv.Key] = kv.Value.GetStringValue()
				}
				var want map[string]string
				switch s.Name {
				case "chat solver":
					want = map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": inProcess, "gen_ai.request.model": "solver"}
				case "invoke_agent " + pretrain.GradeSolverRun:
					want = map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": pretrain.GradeSolverRun}
				default:
					t.Errorf("unexpected span %q", s.Name)
				}
				for k, v := range want {
					if a[k] != v {
						t.Errorf("%s: %s = %q, want %q", s.Name, k, a[k], v)
					}
				}
			}
			if names["chat solver"] != tt.chats || names["invoke_agent "+pretrain.GradeSolverRun] != tt.chats {
				t.Errorf("spans %v, want %d of each: one run per graded question", names, tt.chats)
			}
		})
	}
}

// TestPretrainDelegatorOTLP runs two steps of the delegator's pretraining
// with --otlp and the shipped solver. Its grading's strategy runs arrive
// as GenAI spans: alone at the end of training and in the final grading,
// route with the delegator and with always-delegate.
func TestPretrainDelegatorOTLP(t *testing.T) {
	endToEnd(t)
	rcv := newOTLPReceiver(t, 0)
	got, err := execute(t, testEnv, "pretrain", "--model", "delegator", "--steps", "2", "--eval", "1", "--eval-every", "0",
		"--out", t.TempDir(), "--solver", filepath.Join(repoRoot, "models", "solver"), "--progress", "none", "--otlp", rcv.URL)
	if err != nil {
		t.Fatalf("pretrain --otlp: %v\n%s", err, got)
	}
	names := map[string]int{}
	for _, s := range rcv.received() {
		names[s.Name]++
		if op, _, _ := strings.Cut(s.Name, " "); op == "chat" || op == "invoke_agent" || op == "execute_tool" {
			var gotOp string
			for _, kv := range s.Attributes {
				if kv.Key == "gen_ai.operation.name" {
					gotOp = kv.Value.GetStringValue()
				}
			}
			if gotOp != op {
				t.Errorf("%s: gen_ai.operation.name %q, want %q", s.Name, gotOp, op)
			}
		}
	}
	want := map[string]int{"invoke_agent single": 2, "invoke_agent route": 2}
	for name, n := range want {
		if names[name] != n {
			t.Errorf("%d spans %q, want %d (got %v)", names[name], name, n, names)
		}
	}
	for _, name := range []string{"chat delegator", "chat always-delegate", "chat solver", "execute_tool delegate"} {
		if names[name] == 0 {
			t.Errorf("no span %q (got %v)", name, names)
		}
	}
}
