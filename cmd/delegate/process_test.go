package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/standin"
)

// graderServer serves models "big" and "small" answering like scripted.
// Only decompose's aggregator differs: it answers 42, right, and 41,
// wrong, in turn, so groups have different rewards. onAggregate, when set, is
// called with the count of aggregations so far.
type graderServer struct {
	*httptest.Server
	big, small   *modeltest.Model
	aggregations atomic.Int64
	onAggregate  atomic.Pointer[func(n int64)]
}

// stopAt makes the server call cancel at aggregation n, counting from now;
// n 0 clears it.
func (g *graderServer) stopAt(n int64, cancel func()) {
	g.aggregations.Store(0)
	if n == 0 {
		g.onAggregate.Store(nil)
		return
	}
	f := func(k int64) {
		if k == n {
			cancel()
		}
	}
	g.onAggregate.Store(&f)
}

func newGraderServer(t *testing.T) *graderServer {
	t.Helper()
	g := &graderServer{}
	fn := func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		sys := modeltest.SystemPrompt(req)
		switch {
		case strings.Contains(sys, "Combine their results"):
			n := g.aggregations.Add(1)
			if f := g.onAggregate.Load(); f != nil {
				(*f)(n)
			}
			if n%2 == 1 {
				return modeltest.Text("Final Output: 42, assembled"), nil
			}
			return modeltest.Text("Final Output: 41, assembled"), nil
		case strings.Contains(sys, "Score A"):
			return modeltest.Text("Both answers are equally good.\nScore A: 70\nScore B: 70"), nil
		}
		return scripted(ctx, req)
	}
	g.big, g.small = modeltest.New("big", fn), modeltest.New("small", fn)
	s, err := server.New(nil, g.big, g.small)
	if err != nil {
		t.Fatal(err)
	}
	g.Server = httptest.NewServer(s)
	t.Cleanup(g.Close)
	return g
}

// writeGSM8K writes n GSM8K records whose answer is 42. It writes bad
// lines, text that is not a record, at the given 1-based line numbers.
func writeProcessGSM8K(t *testing.T, n int, badLines ...int) string {
	t.Helper()
	var b strings.Builder
	line := 0
	for i := 0; i < n; {
		line++
		if containsInt(badLines, line) {
			b.WriteString(`{"question": "cut short` + "\n")
			continue
		}
		fmt.Fprintf(&b, `{"question": "Item %d: what is 6*7?", "answer": "6*7 = 42\n#### 42"}`+"\n", i)
		i++
	}
	path := filepath.Join(t.TempDir(), "gsm8k.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// executeCtx is execute with a context.
func executeCtx(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var out, logs bytes.Buffer
	cmd := newRootCmd(testEnv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if strings.Contains(out.String()+logs.String(), testKey) {
		t.Errorf("the API key leaked into the output or logs")
	}
	return out.String(), err
}

// readLines decodes a JSONL output file, failing the test on a bad line.
func readLines[T any](t *testing.T, path string, decode func([]byte) (*T, error)) []*T {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		v, err := decode(sc.Bytes())
		if err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// outputs is what a process run left in its directory.
type outputs struct {
	arts    []*rollout.Artifact
	groups  []*rollout.GroupRecord
	summary rollout.Summary
}

func readOutputs(t *testing.T, dir string) outputs {
	t.Helper()
	var o outputs
	o.arts = readLines(t, filepath.Join(dir, rollout.ArtifactsFile), rollout.DecodeArtifact)
	o.groups = readLines(t, filepath.Join(dir, rollout.GroupsFile), rollout.DecodeGroup)
	data, err := os.ReadFile(filepath.Join(dir, rollout.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &o.summary); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkExact checks a finished run. Every planned rollout is recorded
// once, every group decided once, and the summary agrees with the files.
func checkExact(t *testing.T, o outputs, items, g int) {
	t.Helper()
	ids := map[string]int{}
	for _, a := range o.arts {
		ids[a.ID]++
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("rollout %s recorded %d times", id, n)
		}
	}
	if got, want := len(ids), items*g; got != want {
		t.Errorf("distinct rollouts %d, want %d", got, want)
	}
	gids := map[string]int{}
	for _, gr := range o.groups {
		gids[gr.ID]++
		if gids[gr.ID] > 1 {
			t.Errorf("group %s written twice", gr.ID)
		}
	}
	s := o.summary
	if !s.Complete || s.Rollouts != items*g || s.Groups != items || s.GroupsWritten != len(o.groups) {
		t.Errorf("summary complete %v rollouts %d groups %d written %d; want true, %d, %d, %d",
			s.Complete, s.Rollouts, s.Groups, s.GroupsWritten, items*g, items, len(o.groups))
	}
	dropped := 0
	for _, n := range s.Dropped {
		dropped += n
	}
	if s.GroupsWritten+dropped != items {
		t.Errorf("groups written %d + dropped %d != items %d", s.GroupsWritten, dropped, items)
	}
}

func TestProcessFullRun(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 6)
	dir := filepath.Join(t.TempDir(), "out")
	const items, g = 4, 4
	out, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "gsm8k", "--data", data,
		"-n", fmt.Sprint(items), "--seed", "3", "-g", fmt.Sprint(g), "--concurrency", "1", "--advantage", "rloo",
		"--out", dir, "--progress", "plain")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, out)
	}
	for _, want := range []string{
		"6 records read, 0 malformed skipped",
		"4 items × 4 rollouts of decompose",
		"items 4/4, rollouts 16/16 (scored 16, failed 0",
		"groups 4: written 4",
		"mean reward",
		"delegator", "subagent", "baselines", "total",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	o := readOutputs(t, dir)
	checkExact(t, o, items, g)
	// One rollout at a time: the aggregations alternate right and wrong
	// within every group, so no group ties and every one is written.
	if len(o.groups) != items {
		t.Fatalf("groups written %d, want %d", len(o.groups), items)
	}
	for _, gr := range o.groups {
		if len(gr.Rollouts) != g || len(gr.Messages) != len(gr.Advantages) {
			t.Errorf("group %s: %d rollouts, %d sequences, %d advantages", gr.ID, len(gr.Rollouts), len(gr.Messages), len(gr.Advantages))
		}
		sum := 0.0
		for _, m := range gr.Rollouts {
			sum += m.Advantage
		}
		if math.Abs(sum) > 1e-9 {
			t.Errorf("group %s: rloo advantages sum to %v, want 0", gr.ID, sum)
		}
	}
	for _, a := range o.arts {
		if a.Seed != 3 || a.Status != rollout.StatusScored || a.Roles["delegator"].Calls != 2 || a.Score == nil {
			t.Errorf("artifact %s: seed %d status %s delegator %+v score %v", a.ID, a.Seed, a.Status, a.Roles["delegator"], a.Score)
		}
	}
	if d := o.summary.Roles["delegator"]; d.Calls != items*g*2 || d.Cost <= 0 {
		t.Errorf("summary delegator totals %+v, want %d calls and a cost", d, items*g*2)
	}
	if o.summary.Baselines.Calls != items {
		t.Errorf("baseline calls %d, want %d", o.summary.Baselines.Calls, items)
	}

	// The same command again finds everything done and does nothing.
	out, err = execute(t, testEnv, "process", "--config", cfg, "--dataset", "gsm8k", "--data", data,
		"-n", fmt.Sprint(items), "--seed", "3", "-g", fmt.Sprint(g), "--concurrency", "1", "--advantage", "rloo",
		"--out", dir, "--progress", "none")
	if err != nil || !strings.Contains(out, "resumed 16 rollouts") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	checkExact(t, readOutputs(t, dir), items, g)

	// Other settings on the same directory are refused, naming the difference.
	out, err = execute(t, testEnv, "process", "--config", cfg, "--dataset", "gsm8k", "--data", data,
		"-n", fmt.Sprint(items), "--seed", "3", "-g", "3", "--out", dir, "--progress", "none")
	if err == nil || !strings.Contains(err.Error(), "group_size 4 there, 3 now") {
		t.Errorf("rerun with -g 3: err = %v, want the difference named\n%s", err, out)
	}
}

func TestProcessResumesAfterInterrupt(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 5)
	const items, g = 5, 4
	for _, stopAt := range []int64{1, 7, 13} {
		t.Run(fmt.Sprintf("interrupt at aggregation %d", stopAt), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", fmt.Sprint(g),
				"--concurrency", "3", "--out", dir, "--progress", "none"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv.stopAt(stopAt, cancel)
			out, err := executeCtx(t, ctx, args...)
			srv.stopAt(0, nil)
			if err == nil || !strings.Contains(err.Error(), "run the same command again to resume") {
				t.Fatalf("interrupted run: err = %v\n%s", err, out)
			}
			first := readOutputs(t, dir)
			if first.summary.Complete || len(first.arts) >= items*g {
				t.Fatalf("interrupted run recorded %d rollouts, complete %v: not interrupted", len(first.arts), first.summary.Complete)
			}
			out, err = execute(t, testEnv, args...)
			if err != nil {
				t.Fatalf("resumed run: %v\n%s", err, out)
			}
			o := readOutputs(t, dir)
			checkExact(t, o, items, g)
			if got, want := o.summary.Resumed, len(first.arts); got != want {
				t.Errorf("resumed %d, want the %d rollouts of the first run", got, want)
			}
			// The first run's records are kept as they were.
			for i, a := range first.arts {
				if o.arts[i].ID != a.ID {
					t.Errorf("artifact %d: %s after the resume, %s before", i, o.arts[i].ID, a.ID)
				}
			}
		})
	}
}

func TestProcessTruncatedLastLine(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 3)
	const items, g = 3, 3
	tests := []struct {
		name    string
		damage  func(t *testing.T, path string)
		wantOut string // in the resumed run's output
		wantErr string // or its error
	}{
		{"a record cut short after the last recorded one is removed and redone", func(t *testing.T, path string) {
			appendFile(t, path, `{"version":1,"id":"gsm8k/gsm8k/9#0.0","status":"sco`)
		}, "repaired", ""},
		{"a cut into recorded records is reported", func(t *testing.T, path string) {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, st.Size()-10); err != nil {
				t.Fatal(err)
			}
		}, "", "committed records were lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", fmt.Sprint(g),
				"--concurrency", "1", "--out", dir, "--progress", "none"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv.stopAt(5, cancel)
			if _, err := executeCtx(t, ctx, args...); err == nil {
				t.Fatal("the first run was not interrupted")
			}
			srv.stopAt(0, nil)
			tt.damage(t, filepath.Join(dir, rollout.ArtifactsFile))
			out, err := execute(t, testEnv, args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), rollout.ArtifactsFile) {
					t.Fatalf("err = %v, want %q naming the file\n%s", err, tt.wantErr, out)
				}
				return
			}
			if err != nil || !strings.Contains(out, tt.wantOut) || !strings.Contains(out, "partial line") {
				t.Fatalf("err = %v, output lacks %q:\n%s", err, tt.wantOut, out)
			}
			checkExact(t, readOutputs(t, dir), items, g)
		})
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestProcessEveryGroupTies(t *testing.T) {
	// The stand-in answers as a function of the request, so the G rollouts
	// of an item are alike and every group ties.
	sv, err := standin.New(standin.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sv)
	t.Cleanup(srv.Close)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 3)
	const items, g = 3, 3
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep ties %v", keep), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", fmt.Sprint(g),
				"--out", dir, "--progress", "none", "--strategy", "route"}
			if keep {
				args = append(args, "--keep-ties")
			}
			out, err := execute(t, testEnv, args...)
			if err != nil {
				t.Fatalf("process: %v\n%s", err, out)
			}
			o := readOutputs(t, dir)
			checkExact(t, o, items, g)
			if got := o.summary.Ties[rollout.DropEqual]; got != items {
				t.Errorf("ties %d, want %d", got, items)
			}
			if !keep {
				if len(o.groups) != 0 || o.summary.Dropped[rollout.DropEqual] != items || !strings.Contains(out, "dropped equal_scores 3") {
					t.Errorf("groups written %d, dropped %v; want none written, %d dropped as equal\n%s", len(o.groups), o.summary.Dropped, items, out)
				}
				return
			}
			if len(o.groups) != items || o.summary.TiesKept != items {
				t.Fatalf("groups written %d, ties kept %d; want %d", len(o.groups), o.summary.TiesKept, items)
			}
			for _, gr := range o.groups {
				for i, a := range gr.Advantages {
					if a != 0 || !gr.Overrides[i].SetAdvantageToZero {
						t.Errorf("group %s sequence %d: advantage %v override %+v; want 0 and set_advantage_to_zero", gr.ID, i, a, gr.Overrides[i])
					}
				}
			}
		})
	}
}

func TestProcessBadDatasetLines(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 3, 2, 4) // lines 2 and 4 are bad; 3 good records
	dir := filepath.Join(t.TempDir(), "out")
	args := []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", "2",
		"--out", dir, "--progress", "none"}

	out, err := execute(t, testEnv, args...)
	if err == nil || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "2") || !strings.Contains(err.Error(), "--skip-bad") {
		t.Fatalf("without --skip-bad: err = %v, want the file and line 2 named\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a failed load created the output directory: %v", err)
	}

	out, err = execute(t, testEnv, append(args, "--skip-bad")...)
	if err != nil {
		t.Fatalf("with --skip-bad: %v\n%s", err, out)
	}
	for _, want := range []string{"3 records read, 2 malformed skipped", "skipped " + data + ":2:", "skipped " + data + ":4:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	checkExact(t, readOutputs(t, dir), 3, 2)
}

func TestProcessParityReward(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	dir := filepath.Join(t.TempDir(), "out")
	out, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "open", "-n", "2", "-g", "2",
		"--parity", "--strategy", "single", "--out", dir, "--progress", "none")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, out)
	}
	o := readOutputs(t, dir)
	checkExact(t, o, 2, 2)
	// The judge scores both answers 70: a diff of 0 is the bucket +0.1.
	for _, a := range o.arts {
		if a.Reward != 0.1 || a.Score == nil || a.Score.Judge == nil || a.Roles["single"].Calls != 1 {
			t.Errorf("artifact %s: reward %v, score %+v, roles %v; want the parity bucket 0.1 from the judge", a.ID, a.Reward, a.Score, a.Roles)
		}
	}
	if o.summary.Roles["judge"].Calls != 2*2*2 {
		t.Errorf("judge calls %d, want 8 (both orders per rollout)", o.summary.Roles["judge"].Calls)
	}
}

func TestProcessProgressBar(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 2)
	out, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", "2",
		"--out", filepath.Join(t.TempDir(), "out"), "--progress", "bar")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, out)
	}
	// The bar's last frame shows the items done, the rollouts and the reward.
	for _, want := range []string{"items 2/2", "4/4 rollouts", "mean reward", "ETA"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestProcessFlagErrors(t *testing.T) {
	srv := newGraderServer(t)
	cfg := writeTestConfig(t, srv.URL)
	data := writeProcessGSM8K(t, 2)
	base := []string{"process", "--config", cfg, "--progress", "none"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no output directory", []string{"--dataset", "open"}, "--out is required"},
		{"unknown dataset", []string{"--dataset", "squad", "--out", "x"}, `--dataset "squad"`},
		{"no data file", []string{"--dataset", "gsm8k", "--out", "x"}, "--data is required"},
		{"too many items", []string{"--dataset", "gsm8k", "--data", data, "-n", "9", "--out", "x"}, "--n 9, but the dataset has 2"},
		{"unknown estimator", []string{"--dataset", "gsm8k", "--data", data, "--advantage", "ppo", "--out", filepath.Join(t.TempDir(), "o")}, "ppo"},
		{"group of one", []string{"--dataset", "gsm8k", "--data", data, "-g", "1", "--out", filepath.Join(t.TempDir(), "o")}, "group_size"},
		{"parity with answers", []string{"--dataset", "gsm8k", "--data", data, "--parity", "--out", "x"}, "open-ended tasks"},
		{"parity with lambda", []string{"--dataset", "open", "--parity", "--lambda", "0.1", "--out", "x"}, "--lambda"},
		{"unknown strategy", []string{"--dataset", "open", "--strategy", "vote", "--out", "x"}, `--strategy "vote"`},
		{"no baseline for a judge", []string{"--dataset", "open", "--no-baseline", "--out", "x"}, "--no-baseline"},
		{"sync without push", []string{"--dataset", "open", "--push-sync", "2", "--out", "x"}, "--push-sync goes with --push"},
		{"sync policy without sync", []string{"--dataset", "open", "--push", "http://127.0.0.1:1", "--push-sync-policy", "http://127.0.0.1:1", "--out", "x"}, "goes with --push-sync"},
		{"no baseline with parity", []string{"--dataset", "open", "--parity", "--no-baseline", "--out", "x"}, "--no-baseline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, testEnv, append(base, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q\n%s", err, tt.want, out)
			}
		})
	}
}

func TestProcessLogprobs(t *testing.T) {
	data := writeProcessGSM8K(t, 2)
	for _, want := range []bool{false, true} {
		t.Run(fmt.Sprintf("logprobs %v", want), func(t *testing.T) {
			srv := newGraderServer(t)
			cfg := writeTestConfig(t, srv.URL)
			dir := filepath.Join(t.TempDir(), "out")
			// --keep-ties: every group is written, tied or not.
			args := []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", "2", "--keep-ties",
				"--out", dir, "--progress", "none"}
			if want {
				args = append(args, "--logprobs")
			}
			if out, err := execute(t, testEnv, args...); err != nil {
				t.Fatalf("process: %v\n%s", err, out)
			}
			// Only the trained role (decompose's delegator, on "big") asks;
			// the baseline (also "big") and the sub-agents ("small") do not.
			delegator, other := 0, 0
			for _, req := range srv.big.Requests() {
				sys := modeltest.SystemPrompt(req)
				isDelegator := strings.Contains(sys, "break a user's request into subtasks") || strings.Contains(sys, "Combine their results")
				switch {
				case isDelegator && req.Logprobs != want:
					t.Errorf("a delegator request has logprobs %v, want %v", req.Logprobs, want)
				case isDelegator:
					delegator++
				case req.Logprobs:
					t.Errorf("a baseline request asks for logprobs")
				default:
					other++
				}
			}
			for _, req := range srv.small.Requests() {
				if req.Logprobs {
					t.Errorf("a sub-agent request asks for logprobs")
				}
			}
			if delegator != 2*2*2 || other != 2 {
				t.Errorf("delegator requests %d, baseline requests %d; want 8 and 2", delegator, other)
			}
			// The scripted backend returns no token ids: every sequence says
			// so.
			groups := readOutputs(t, dir).groups
			if len(groups) != 2 {
				t.Fatalf("%d groups written, want 2", len(groups))
			}
			for _, gr := range groups {
				for i, why := range gr.NoTokens {
					if why == "" || len(gr.Tokens[i]) != 0 {
						t.Errorf("group %s sequence %d: tokens %v, no_tokens %q", gr.ID, i, gr.Tokens[i], why)
					}
				}
			}
		})
	}
}

func TestProcessResumeIdentity(t *testing.T) {
	data := writeProcessGSM8K(t, 3)
	first, second := newGraderServer(t), newGraderServer(t)
	dir := filepath.Join(t.TempDir(), "out")
	args := func(cfg string) []string {
		return []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", "2", "--out", dir, "--progress", "none"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first.stopAt(2, cancel)
	if _, err := executeCtx(t, ctx, args(writeTestConfig(t, first.URL))...); err == nil {
		t.Fatal("the first run was not interrupted")
	}

	// Another price changes the rewards: the resume is refused.
	priced := writeTestConfig(t, second.URL)
	doc, err := os.ReadFile(priced)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(priced, bytes.Replace(doc, []byte("output: 8}"), []byte("output: 9}"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := execute(t, testEnv, args(priced)...)
	if err == nil || !strings.Contains(err.Error(), "settings Models.big.Price.output: 8 there, 9 now") {
		t.Fatalf("resume with another price: err = %v, want the price named with both values\n%s", err, out)
	}

	// Another address (the server moved) is the same run.
	out, err = execute(t, testEnv, args(writeTestConfig(t, second.URL))...)
	if err != nil {
		t.Fatalf("resume against another address: %v\n%s", err, out)
	}
	checkExact(t, readOutputs(t, dir), 3, 2)
}

// syncWriter is a bytes.Buffer safe for the bar's goroutine and the test.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Progress events are dropped when the view lags. The last state comes
// from the summary, and the bar ends either way.
func TestProgressViewEndsFromSummary(t *testing.T) {
	tests := []struct {
		name string
		mode string
		sum  rollout.Summary
		want string
	}{
		{"bar, complete, every event dropped", progressBar,
			rollout.Summary{Version: 1, Complete: true, Items: 3, ItemsDone: 3, RolloutsPlanned: 12, Rollouts: 12, MeanReward: 0.25},
			"12/12 rollouts items 3/3"},
		{"bar, interrupted", progressBar,
			rollout.Summary{Version: 1, Items: 3, ItemsDone: 1, RolloutsPlanned: 12, Rollouts: 5, RolloutsFailed: 1},
			"5/12 rollouts items 1/3, 1 failed"},
		{"plain, complete", progressPlain,
			rollout.Summary{Version: 1, Complete: true, Items: 3, ItemsDone: 3, RolloutsPlanned: 12, Rollouts: 12, MeanReward: 0.25},
			"process 12/12 rollouts (100%)  items 3/3  mean reward +0.250  elapsed 0s  ETA 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w syncWriter
			v := &processProgress{v: newProgressView(&w, tt.mode)}
			events := make(chan rollout.Progress)
			close(events)
			v.run(events)
			done := make(chan struct{})
			go func() {
				defer close(done)
				v.end(tt.sum)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("finish did not return")
			}
			if !strings.Contains(w.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, w.String())
			}
		})
	}
}

// `delegate rollout` is `delegate process`, named after its library.
func TestProcessAnswersToRollout(t *testing.T) {
	root := newRootCmd(testEnv, slog.New(slog.DiscardHandler))
	cmd, _, err := root.Find([]string{"rollout"})
	if err != nil || cmd.Name() != "process" {
		t.Fatalf("rollout finds %v (%v), want the process command", cmd, err)
	}
}
