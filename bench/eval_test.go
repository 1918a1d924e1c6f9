package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/dataset"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/score"
	"github.com/delegatelab/delegate/strategy"
)

// The benchmark of these tests: 40 tasks "Task N: what is N plus N?" with
// answer 2N, and fake models whose correctness is known for every N:
//
//	weak alone   wrong where N%4 == 0; its backend fails on N = 7  29/40
//	strong alone wrong where N%10 == 3                               36/40
//	route        strong asks weak, keeps its answer, but fixes it
//	             where N%8 == 0: wrong where N%4 == 0, N%8 != 0      35/40
//	decompose    the delegator's final output is wrong where N%5 == 0 32/40
//	lead         the leader is right only where N%3 == 0             13/40
//	oracle       weak where it is right, strong elsewhere            40/40
//
// Every call reports a fixed usage: weak 50 in / 5 out, strong 200/20,
// decompose's delegator 150/30 (plan and aggregate) and sub-agents 40/8
// (three per plan), lead's peers 30/3 and leader 100/10. Prices per
// million tokens: weak $0.5 in, $1.5 out; strong $5 in, $15 out (the
// sub-agents and peers at the weak price, delegator and leader at the
// strong).
const (
	numTasks = 40
	numArms  = 5
)

var (
	weakPrice   = delegate.Price{Input: 0.5, Output: 1.5}
	strongPrice = delegate.Price{Input: 5, Output: 15}
	taskNumRE   = regexp.MustCompile(`Task (\d+):`)
)

func benchTasks() []delegate.Task {
	tasks := make([]delegate.Task, numTasks)
	for i := range tasks {
		n := i + 1
		tasks[i] = delegate.Task{
			ID:      fmt.Sprintf("t%02d", n),
			Dataset: "gsm8k",
			Prompt:  fmt.Sprintf("Task %d: what is %d plus %d?", n, n, n),
			Answer:  strconv.Itoa(2 * n),
		}
	}
	return tasks
}

// taskNum finds the task number in any message of req.
func taskNum(req *delegate.Request) int {
	for _, m := range req.Messages {
		if s := taskNumRE.FindStringSubmatch(m.Content); s != nil {
			n, _ := strconv.Atoi(s[1]) // the pattern matched digits only
			return n
		}
	}
	return -1
}

// answer is a correct (2n) or wrong (2n+1) boxed final answer.
func answer(n int, right bool) string {
	v := 2 * n
	if !right {
		v++
	}
	return fmt.Sprintf("Let me add. Final answer: \\boxed{%d}", v)
}

func weakFunc(failOn int) modeltest.Func {
	return func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		n := taskNum(req)
		if n == failOn {
			return nil, errors.New("backend down")
		}
		return modeltest.WithUsage(modeltest.Text(answer(n, n%4 != 0)), 50, 5), nil
	}
}

// strongFunc answers alone, or in route.
// In route it delegates the task in its first turn and answers with the weak model's result,
// corrected where N%8 == 0.
func strongFunc(block int, started chan<- struct{}) modeltest.Func {
	blocker := modeltest.Block(started)
	return func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		n := taskNum(req)
		if n == block {
			return blocker(ctx, req)
		}
		if len(req.Tools) == 0 {
			return modeltest.WithUsage(modeltest.Text(answer(n, n%10 != 3)), 200, 20), nil
		}
		for _, m := range req.Messages {
			if m.Role == delegate.RoleTool {
				got, _ := delegate.Boxed(m.Content)
				text := "The assistant says " + got + ". Final answer: \\boxed{" + got + "}"
				if n%8 == 0 {
					text = answer(n, true)
				}
				return modeltest.WithUsage(modeltest.Text(text), 200, 20), nil
			}
		}
		args, _ := json.Marshal(map[string]string{"question": modeltest.LastUser(req)})
		return modeltest.WithUsage(modeltest.ToolCalls(modeltest.Call("c1", strategy.DelegateToolName, string(args))), 200, 20), nil
	}
}

// delegatorFunc plans three subtasks, then writes the final output.
func delegatorFunc(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	n := taskNum(req)
	if strings.Contains(modeltest.SystemPrompt(req), "<|end_subtask|>") {
		var b strings.Builder
		b.WriteString("<|reasoning|>\nSplit the sum.\n</|reasoning|>\n")
		for _, s := range []string{"Take the first number.", "Take the second number.", "Add them."} {
			b.WriteString("<|subtask|>\n" + s + "\n<|end_subtask|>\n")
		}
		return modeltest.WithUsage(modeltest.Text(b.String()), 150, 30), nil
	}
	v := 2 * n
	if n%5 == 0 {
		v++
	}
	return modeltest.WithUsage(modeltest.Text(fmt.Sprintf("Final Output: %d", v)), 150, 30), nil
}

func subagentFunc(context.Context, *delegate.Request) (*delegate.Response, error) {
	return modeltest.WithUsage(modeltest.Text("Done: the part is computed."), 40, 8), nil
}

func peerFunc(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	n := taskNum(req)
	return modeltest.WithUsage(modeltest.Text(fmt.Sprintf("<answer>%d</answer>", 2*n)), 30, 3), nil
}

func leaderFunc(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	n := taskNum(req)
	v := 2 * n
	if n%3 != 0 {
		v = 2*n + 1
	}
	return modeltest.WithUsage(modeltest.Text(fmt.Sprintf("The peers differ. <answer>%d</answer>", v)), 100, 10), nil
}

// fakes are the models behind one benchmark run, fresh for each run so
// that their call counts belong to it.
type fakes struct {
	weak, strong, routeStrong, routeWeak, delegator, subagent, peer, leader *modeltest.Model
}

// benchArms builds the four arms over fresh fake models. The strong models
// block on task block (0: none), signalling started as they do.
func benchArms(t *testing.T, block int, started chan<- struct{}) ([]Arm, *fakes) {
	t.Helper()
	f := &fakes{
		weak:        modeltest.New("weak-1b", weakFunc(7)),
		strong:      modeltest.New("strong-70b", strongFunc(block, started)),
		routeStrong: modeltest.New("strong-70b", strongFunc(block, started)),
		routeWeak:   modeltest.New("weak-1b", weakFunc(-1)),
		delegator:   modeltest.New("strong-70b", delegatorFunc),
		subagent:    modeltest.New("weak-1b", subagentFunc),
		peer:        modeltest.New("weak-1b", peerFunc),
		leader:      modeltest.New("strong-70b", leaderFunc),
	}
	cfg := strategy.DefaultConfig()
	cfg.Peers, cfg.Rounds = 2, 0
	build := func(name string, roles strategy.Roles) delegate.Strategy {
		s, err := strategy.New(name, roles, cfg)
		if err != nil {
			t.Fatalf("strategy.New(%s): %v", name, err)
		}
		return s
	}
	arms := []Arm{
		{Name: "strong", Role: RoleStrong, Strategy: build(strategy.NameSingle, strategy.Roles{
			Single: delegate.Agent{Role: "strong", Model: f.strong, Price: strongPrice}})},
		{Name: "weak", Role: RoleWeak, Strategy: build(strategy.NameSingle, strategy.Roles{
			Single: delegate.Agent{Role: "weak", Model: f.weak, Price: weakPrice}})},
		{Name: "route", Strategy: build(strategy.NameRoute, strategy.Roles{
			Strong: delegate.Agent{Model: f.routeStrong, Price: strongPrice},
			Weak:   delegate.Agent{Model: f.routeWeak, Price: weakPrice}})},
		{Name: "decompose", Strategy: build(strategy.NameDecompose, strategy.Roles{
			Delegator: delegate.Agent{Model: f.delegator, Price: strongPrice},
			Subagent:  delegate.Agent{Model: f.subagent, Price: weakPrice}})},
		{Name: "lead", Strategy: build(strategy.NameLead, strategy.Roles{
			Leader: delegate.Agent{Model: f.leader, Price: strongPrice},
			Peers:  []delegate.Agent{{Model: f.peer, Price: weakPrice}}})},
	}
	return arms, f
}

// wantRow holds a row's figures that do not depend on timing.
type wantRow struct {
	arm              string
	correct, failed  int
	accuracy         string // the Markdown cell
	mcnemar          string // the Markdown cell
	pgr              string
	tokensIn, tokOut float64
	dollars, calls   float64
	roles            string // the Markdown cell
	mcB, mcC         int
	mcP              float64
	mcMethod         string
}

// The expected table, computed by hand from the design above.
var wantRows = []wantRow{
	{arm: "strong", correct: 36, accuracy: "90.0 [76.9, 96.0]", mcnemar: "baseline", pgr: "1.000",
		tokensIn: 200, tokOut: 20, dollars: 0.0013, calls: 1, roles: "strong 200.0/20.0"},
	{arm: "weak", correct: 29, failed: 1, accuracy: "72.5 [57.2, 83.9]", mcnemar: "0.1185 (exact; b=11, c=4)", pgr: "0.000",
		// 39 calls of 50/5 and one failed call that used nothing.
		tokensIn: 39 * 50 / 40.0, tokOut: 39 * 5 / 40.0, dollars: 39 * 3.25e-5 / 40, calls: 1, roles: "weak 48.8/4.9",
		mcB: 11, mcC: 4, mcP: 2 * 1941.0 / 32768, mcMethod: McNemarExact},
	{arm: "route", correct: 35, accuracy: "87.5 [73.9, 94.5]", mcnemar: "1.0000 (exact; b=5, c=4)", pgr: "0.857",
		tokensIn: 450, tokOut: 45, dollars: 2*0.0013 + 3.25e-5, calls: 3, roles: "strong 400.0/40.0; weak 50.0/5.0",
		mcB: 5, mcC: 4, mcP: 1, mcMethod: McNemarExact},
	{arm: "decompose", correct: 32, accuracy: "80.0 [65.2, 89.5]", mcnemar: "0.3877 (exact; b=8, c=4)", pgr: "0.429",
		tokensIn: 420, tokOut: 84, dollars: 2*1200e-6 + 3*32e-6, calls: 5, roles: "delegator 300.0/60.0; subagent 120.0/24.0",
		mcB: 8, mcC: 4, mcP: 2 * 794.0 / 4096, mcMethod: McNemarExact},
	{arm: "lead", correct: 13, accuracy: "32.5 [20.1, 48.0]", mcnemar: "2.3e-05 (chi2cc; b=25, c=2)", pgr: "-2.286",
		tokensIn: 160, tokOut: 16, dollars: 2*19.5e-6 + 650e-6, calls: 3, roles: "leader 100.0/10.0; peer 60.0/6.0",
		mcB: 25, mcC: 2, mcP: 2.2967108733407425e-05, mcMethod: McNemarChiSquare},
	{arm: OracleArm, correct: 40, accuracy: "100.0 [91.2, 100.0]", mcnemar: "0.1250 (exact; b=0, c=4)", pgr: "1.571",
		// weak's record on its 29 right answers, strong's on the other 11.
		tokensIn: (29*50 + 11*200) / 40.0, tokOut: (29*5 + 11*20) / 40.0, dollars: (29*3.25e-5 + 11*0.0013) / 40, calls: 1,
		roles: "strong 55.0/5.5; weak 36.2/3.6", mcB: 0, mcC: 4, mcP: 0.125, mcMethod: McNemarExact},
}

func checkReport(t *testing.T, rep *Report) {
	t.Helper()
	if rep.Tasks != numTasks || rep.Incomplete != 0 {
		t.Errorf("tasks, incomplete = %d, %d, want %d, 0", rep.Tasks, rep.Incomplete, numTasks)
	}
	if len(rep.Rows) != len(wantRows) {
		t.Fatalf("got %d rows, want %d", len(rep.Rows), len(wantRows))
	}
	for i, want := range wantRows {
		r := &rep.Rows[i]
		t.Run(want.arm, func(t *testing.T) {
			if r.Arm != want.arm || r.N != numTasks || r.Correct != want.correct || r.Failures != want.failed || r.Errors != 0 {
				t.Errorf("arm, n, correct, failures, errors = %q, %d, %d, %d, %d, want %q, %d, %d, %d, 0",
					r.Arm, r.N, r.Correct, r.Failures, r.Errors, want.arm, numTasks, want.correct, want.failed)
			}
			if got := percentCI(r.Accuracy, r.CI); got != want.accuracy {
				t.Errorf("accuracy = %s, want %s", got, want.accuracy)
			}
			if got := r.mcNemarCell(); got != want.mcnemar {
				t.Errorf("McNemar = %s, want %s", got, want.mcnemar)
			}
			if m := r.McNemar; m != nil && (m.B != want.mcB || m.C != want.mcC || !near(m.P, want.mcP, 1e-12) || m.Method != want.mcMethod) {
				t.Errorf("McNemar = %+v, want b=%d c=%d p=%v %s", *m, want.mcB, want.mcC, want.mcP, want.mcMethod)
			}
			if got := fixed(r.PGR, 3); got != want.pgr {
				t.Errorf("PGR = %s, want %s", got, want.pgr)
			}
			if !near(r.TokensIn, want.tokensIn, 1e-9) || !near(r.TokensOut, want.tokOut, 1e-9) {
				t.Errorf("tokens in, out = %v, %v, want %v, %v", r.TokensIn, r.TokensOut, want.tokensIn, want.tokOut)
			}
			if !near(r.Dollars, want.dollars, 1e-15) || !near(r.Calls, want.calls, 1e-12) {
				t.Errorf("dollars, calls = %.10g, %v, want %.10g, %v", r.Dollars, r.Calls, want.dollars, want.calls)
			}
			if got := r.rolesCell(); got != want.roles {
				t.Errorf("roles = %s, want %s", got, want.roles)
			}
			if !defined(r.LatencyP50) || !defined(r.LatencyP95) || r.LatencyP50 <= 0 || r.LatencyP50 > r.LatencyP95 {
				t.Errorf("latency p50, p95 = %v, %v, want 0 < p50 <= p95", r.LatencyP50, r.LatencyP95)
			}
		})
	}
}

func readAll(t *testing.T, path string) []Record {
	t.Helper()
	recs, repair, err := ReadResults(path)
	if err != nil {
		t.Fatalf("ReadResults: %v", err)
	}
	if repair != nil {
		t.Fatalf("ReadResults repaired %v, want a clean file", repair)
	}
	seen := map[itemKey]bool{}
	for _, r := range recs {
		k := itemKey{r.Arm, r.TaskID}
		if seen[k] {
			t.Errorf("item %v recorded twice", k)
		}
		seen[k] = true
	}
	return recs
}

func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	// Label reads each trace's number of calls into its record.
	label := func(tr *delegate.Trace) map[string]string {
		return map[string]string{"calls": strconv.Itoa(tr.Total.Calls)}
	}
	cfg := testConfig(func(c *Config) {
		c.Results, c.Concurrency, c.Trace, c.Label = filepath.Join(dir, "results.jsonl"), 4, true, label
	})
	arms, f := benchArms(t, 0, nil)
	progress := make(chan Progress, numArms*numTasks)
	rep, err := Run(context.Background(), cfg, benchTasks(), arms, score.Verify, progress)
	close(progress)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkReport(t, rep)

	// Every arm saw every task in the same order of IDs, and each fake got
	// the calls its strategy makes: 1 per single item, 2 strong + 1 weak per
	// route item, 2 delegator + 3 sub-agent calls per decompose item, 2
	// peers + 1 leader per lead item.
	for name, c := range map[string][2]int{
		"weak": {f.weak.Calls(), 40}, "strong": {f.strong.Calls(), 40}, "route strong": {f.routeStrong.Calls(), 80},
		"route weak": {f.routeWeak.Calls(), 40}, "delegator": {f.delegator.Calls(), 80}, "subagent": {f.subagent.Calls(), 120}, "peer": {f.peer.Calls(), 80}, "leader": {f.leader.Calls(), 40},
	} {
		if c[0] != c[1] {
			t.Errorf("%s model calls = %d, want %d", name, c[0], c[1])
		}
	}

	n, last := 0, 0
	for p := range progress {
		n++
		if p.Resumed || p.Total != numArms*numTasks || p.Done <= last {
			t.Errorf("progress %+v after done %d: want a new item of %d, counting up", p, last, numArms*numTasks)
		}
		last = p.Done
	}
	if n != numArms*numTasks || rep.DroppedProgress != 0 {
		t.Errorf("progress values = %d, dropped %d, want %d, 0", n, rep.DroppedProgress, numArms*numTasks)
	}

	recs := readAll(t, cfg.Results)
	if len(recs) != numArms*numTasks {
		t.Fatalf("results file has %d records, want %d", len(recs), numArms*numTasks)
	}
	for _, r := range recs {
		if r.Version != RecordVersion || r.Trace == nil || r.PromptHash == "" || r.Reference == "" {
			t.Errorf("record %s/%s: version %d, trace %v, hash %q, reference %q: want all set",
				r.Arm, r.TaskID, r.Version, r.Trace != nil, r.PromptHash, r.Reference)
		}
		if r.Trace != nil && r.Labels["calls"] != strconv.Itoa(r.Trace.Total.Calls) {
			t.Errorf("record %s/%s: labels %v, want calls %d", r.Arm, r.TaskID, r.Labels, r.Trace.Total.Calls)
		}
		if r.Arm == "weak" && r.TaskID == "t07" {
			if r.Correct || r.FailureKind != delegate.FailureCall || r.Answer != "" {
				t.Errorf("weak t07 = correct %v, failure %q (%q), answer %q: want a recorded call failure", r.Correct, r.Failure, r.FailureKind, r.Answer)
			}
		}
	}

	// The files of the report exist and are not empty.
	out := filepath.Join(dir, "report")
	paths, err := rep.WriteFiles(out)
	if err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	if len(paths) != len(Files) {
		t.Errorf("WriteFiles wrote %d files, want %d", len(paths), len(Files))
	}
	for _, name := range Files {
		st, err := os.Stat(filepath.Join(out, name))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: stat %v, want a non-empty file", name, err)
		}
	}
	png, err := os.ReadFile(filepath.Join(out, "cost.png"))
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("cost.png does not start as a PNG (err %v)", err)
	}
	svg, err := os.ReadFile(filepath.Join(out, "latency.svg"))
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Errorf("latency.svg holds no <svg> element (err %v)", err)
	}

	// A rerun over the complete file runs nothing and gives the same table.
	arms2, f2 := benchArms(t, 0, nil)
	rep2, err := Run(context.Background(), cfg, benchTasks(), arms2, score.Verify, nil)
	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if rep2.Resumed != numArms*numTasks || f2.strong.Calls()+f2.weak.Calls()+f2.routeStrong.Calls()+f2.leader.Calls() != 0 {
		t.Errorf("second run resumed %d items and called models, want %d and none", rep2.Resumed, numArms*numTasks)
	}
	checkReport(t, rep2)
}

// TestRunWithoutResultsFile runs the same benchmark with no results file and with one.
// The reports agree, nothing is written, and a second run without a file does every item again.
func TestRunWithoutResultsFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // a stray file would land here
	arms, _ := benchArms(t, 0, nil)
	withFile, err := Run(context.Background(), testConfig(func(c *Config) { c.Results, c.Concurrency = filepath.Join(t.TempDir(), "r.jsonl"), 4 }), benchTasks(), arms, score.Verify, nil)
	if err != nil {
		t.Fatalf("Run with a results file: %v", err)
	}
	for run := range 2 {
		arms, f := benchArms(t, 0, nil)
		rep, err := Run(context.Background(), testConfig(func(c *Config) { c.Concurrency = 4 }), benchTasks(), arms, score.Verify, nil)
		if err != nil {
			t.Fatalf("run %d without a results file: %v", run, err)
		}
		checkReport(t, rep)
		if rep.Resumed != 0 || f.strong.Calls() != numTasks {
			t.Errorf("run %d without a results file: resumed %d, strong model called %d times; want 0 and %d", run, rep.Resumed, f.strong.Calls(), numTasks)
		}
		if len(rep.Rows) != len(withFile.Rows) {
			t.Fatalf("run %d: %d rows, with a results file %d", run, len(rep.Rows), len(withFile.Rows))
		}
		for i, r := range rep.Rows {
			w := withFile.Rows[i]
			if r.Arm != w.Arm || r.N != w.N || r.Correct != w.Correct || r.Failures != w.Failures || r.TokensOut != w.TokensOut || r.Calls != w.Calls {
				t.Errorf("run %d row %s: N %d correct %d failures %d out %v calls %v; with a results file %s: %d %d %d %v %v",
					run, r.Arm, r.N, r.Correct, r.Failures, r.TokensOut, r.Calls, w.Arm, w.N, w.Correct, w.Failures, w.TokensOut, w.Calls)
			}
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("working directory after runs without a results file: %d entries (%v), want none", len(ents), err)
	}
}

func TestRunResumesAfterCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	cfg := testConfig(func(c *Config) { c.Results, c.Concurrency = filepath.Join(dir, "results.jsonl"), 2 })
	started := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	arms, _ := benchArms(t, 20, started) // both strong models hang on task 20
	var (
		wg     sync.WaitGroup
		runErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, runErr = Run(ctx, cfg, benchTasks(), arms, score.Verify, nil)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("task 20 never started")
	}
	cancel()
	wg.Wait()
	if !errors.Is(runErr, context.Canceled) {
		t.Fatalf("Run after cancel: error %v, want context.Canceled", runErr)
	}
	first := readAll(t, cfg.Results)
	if len(first) == 0 || len(first) >= numArms*numTasks {
		t.Fatalf("interrupted run saved %d records, want some but not all of %d", len(first), numArms*numTasks)
	}
	perArm := map[string]int{}
	for _, r := range first {
		perArm[r.Arm]++
		if r.Error != "" || strings.Contains(r.Failure, "cancel") {
			t.Errorf("record %s/%s of the interrupted run: failure %q, error %q: an abandoned item was saved", r.Arm, r.TaskID, r.Failure, r.Error)
		}
	}

	arms2, f2 := benchArms(t, 0, nil)
	progress := make(chan Progress, numArms*numTasks)
	rep, err := Run(context.Background(), cfg, benchTasks(), arms2, score.Verify, progress)
	close(progress)
	if err != nil {
		t.Fatalf("resumed Run: %v", err)
	}
	if rep.Resumed != len(first) {
		t.Errorf("resumed %d items, want the %d saved", rep.Resumed, len(first))
	}
	if got, want := f2.strong.Calls(), numTasks-perArm["strong"]; got != want {
		t.Errorf("strong model calls on resume = %d, want %d (only the missing items)", got, want)
	}
	if got, want := f2.leader.Calls(), numTasks-perArm["lead"]; got != want {
		t.Errorf("leader calls on resume = %d, want %d", got, want)
	}
	resumed := 0
	for p := range progress {
		if p.Resumed {
			resumed++
		}
	}
	if resumed != len(first) {
		t.Errorf("progress marked %d items resumed, want %d", resumed, len(first))
	}
	if all := readAll(t, cfg.Results); len(all) != numArms*numTasks {
		t.Errorf("results file has %d records after resuming, want %d", len(all), numArms*numTasks)
	}
	checkReport(t, rep)
}

func TestRunRepairsTruncatedResults(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(func(c *Config) { c.Results, c.Concurrency = filepath.Join(dir, "results.jsonl"), 3 })
	arms, _ := benchArms(t, 0, nil)
	if _, err := Run(context.Background(), cfg, benchTasks(), arms, score.Verify, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	data, err := os.ReadFile(cfg.Results)
	if err != nil {
		t.Fatal(err)
	}
	lastLine := data[strings.LastIndex(strings.TrimSuffix(string(data), "\n"), "\n")+1:]
	var lost Record
	if err := json.Unmarshal(lastLine, &lost); err != nil {
		t.Fatalf("decode last line: %v", err)
	}
	cut := data[:len(data)-len(lastLine)/2] // a run killed while writing its last record
	if err := os.WriteFile(cfg.Results, cut, 0o644); err != nil {
		t.Fatal(err)
	}

	arms2, _ := benchArms(t, 0, nil)
	rep, err := Run(context.Background(), cfg, benchTasks(), arms2, score.Verify, nil)
	if err != nil {
		t.Fatalf("Run over a cut file: %v", err)
	}
	if rep.Repair == nil || rep.Repair.Line != numArms*numTasks || rep.Repair.Dropped != int64(len(lastLine)-len(lastLine)/2) {
		t.Errorf("repair = %v, want line %d with %d bytes dropped", rep.Repair, numArms*numTasks, len(lastLine)-len(lastLine)/2)
	}
	if rep.Resumed != numArms*numTasks-1 {
		t.Errorf("resumed %d items, want %d", rep.Resumed, numArms*numTasks-1)
	}
	all := readAll(t, cfg.Results)
	if len(all) != numArms*numTasks {
		t.Fatalf("results file has %d records, want %d", len(all), numArms*numTasks)
	}
	if r := all[len(all)-1]; r.Arm != lost.Arm || r.TaskID != lost.TaskID {
		t.Errorf("last record is %s/%s, want the cut item %s/%s run again", r.Arm, r.TaskID, lost.Arm, lost.TaskID)
	}
	checkReport(t, rep)
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), fmt.Sprintf("Results file repaired: line %d was cut short", numArms*numTasks)) {
		t.Errorf("the table does not report the repair:\n%s", md.String())
	}
}

// panicky is a strategy that panics on one request and answers the rest.
type panicky struct{ on string }

func (p panicky) Name() string { return "panicky" }

func (p panicky) Run(_ context.Context, request string, _ chan<- delegate.Event) (*delegate.Trace, error) {
	if request == p.on {
		panic("boom")
	}
	rec := delegate.NewRecorder("panicky", request, nil)
	return rec.Finish("2", delegate.Failure{}), nil
}

func TestRunRecordsItemFailures(t *testing.T) {
	tasks := []delegate.Task{
		{ID: "a", Dataset: "gsm8k", Prompt: "1+1", Answer: "2"},
		{ID: "b", Dataset: "gsm8k", Prompt: "boom", Answer: "2"},
		{ID: "c", Dataset: "open", Prompt: "no reference"},
	}
	cfg := testConfig(func(c *Config) { c.Results = filepath.Join(t.TempDir(), "r.jsonl") })
	rep, err := Run(context.Background(), cfg, tasks, []Arm{{Name: "p", Strategy: panicky{on: "boom"}}}, score.Verify, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := rep.Rows[0]; r.N != 3 || r.Correct != 1 || r.Failures != 0 || r.Errors != 2 {
		t.Errorf("n, correct, failures, errors = %d, %d, %d, %d, want 3, 1, 0, 2", r.N, r.Correct, r.Failures, r.Errors)
	}
	for _, r := range readAll(t, cfg.Results) {
		var want string
		switch r.TaskID {
		case "b":
			want = "run: panic: boom"
		case "c":
			want = `verify: verify task "c": no verifier for dataset "open"`
		}
		if !strings.HasPrefix(r.Error, want) || (want == "") != (r.Error == "") {
			t.Errorf("task %s: error %q, want prefix %q", r.TaskID, r.Error, want)
		}
	}
}

// testConfig is DefaultConfig changed by set.
func testConfig(set func(*Config)) Config {
	c := DefaultConfig()
	set(&c)
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Config)
		want string // "" valid, else a substring of the error
	}{
		{"defaults", func(*Config) {}, ""},
		{"one at once, no item timeout", func(c *Config) { c.Concurrency, c.ItemTimeout = 1, 0 }, ""},
		{"zero config", func(c *Config) { *c = Config{} }, "concurrency: 0"},
		{"zero concurrency", func(c *Config) { c.Concurrency = 0 }, "concurrency: 0 is outside [1, 1024]"},
		{"too many at once", func(c *Config) { c.Concurrency = 1025 }, "concurrency: 1025"},
		{"negative item timeout", func(c *Config) { c.ItemTimeout = -time.Second }, "item_timeout: -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := testConfig(tt.set).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	s := panicky{}
	results := filepath.Join(t.TempDir(), "r.jsonl")
	tasks := []delegate.Task{{ID: "a", Prompt: "p", Answer: "1"}}
	tests := []struct {
		name  string
		cfg   Config
		tasks []delegate.Task
		arms  []Arm
		want  string
	}{
		{"negative concurrency", testConfig(func(c *Config) { c.Results, c.Concurrency = results, -1 }), tasks, []Arm{{Name: "a", Strategy: s}}, "concurrency: -1"},
		{"no arms", testConfig(func(c *Config) { c.Results = results }), tasks, nil, "arms: none given"},
		{"duplicate arm", testConfig(func(c *Config) { c.Results = results }), tasks, []Arm{{Name: "a", Strategy: s}, {Name: "a", Strategy: s}}, `name "a" used twice`},
		{"reserved name", testConfig(func(c *Config) { c.Results = results }), tasks, []Arm{{Name: OracleArm, Strategy: s}}, "reserved"},
		{"two weak arms", testConfig(func(c *Config) { c.Results = results }), tasks, []Arm{{Name: "a", Strategy: s, Role: RoleWeak}, {Name: "b", Strategy: s, Role: RoleWeak}}, "role weak already given"},
		{"unknown role", testConfig(func(c *Config) { c.Results = results }), tasks, []Arm{{Name: "a", Strategy: s, Role: "medium"}}, `unknown role "medium"`},
		{"unknown baseline", testConfig(func(c *Config) { c.Results, c.Baseline = results, "x" }), tasks, []Arm{{Name: "a", Strategy: s}}, `no arm named "x"`},
		{"no strategy", testConfig(func(c *Config) { c.Results = results }), tasks, []Arm{{Name: "a"}}, "has no strategy"},
		{"duplicate task", testConfig(func(c *Config) { c.Results = results }), append(tasks, tasks[0]), []Arm{{Name: "a", Strategy: s}}, `id "a" already used`},
		{"no tasks", testConfig(func(c *Config) { c.Results = results }), nil, []Arm{{Name: "a", Strategy: s}}, "no tasks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.cfg, tt.tasks, tt.arms, score.Verify, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRunRefusesChangedPrompt(t *testing.T) {
	cfg := testConfig(func(c *Config) { c.Results = filepath.Join(t.TempDir(), "r.jsonl") })
	arms := []Arm{{Name: "p", Strategy: panicky{}}}
	tasks := []delegate.Task{{ID: "a", Dataset: "gsm8k", Prompt: "1+1", Answer: "2"}}
	if _, err := Run(context.Background(), cfg, tasks, arms, score.Verify, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	tasks[0].Prompt = "2+2"
	_, err := Run(context.Background(), cfg, tasks, arms, score.Verify, nil)
	if err == nil || !strings.Contains(err.Error(), `task "a" has another prompt`) {
		t.Errorf("Run with a changed prompt: error %v, want one naming the task", err)
	}
}

// TestRunOnGSM8KSample composes the pieces as `delegate bench` does.
// It takes a seeded sample of package dataset's GSM8K sample, real strategies and score.Verify.
// One model knows every reference answer and writes it as "The answer is N.".
// The other is off by one in a \boxed{}.
func TestRunOnGSM8KSample(t *testing.T) {
	all, _, err := dataset.Load("gsm8k", "../dataset/testdata/gsm8k/test.jsonl", dataset.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	tasks := dataset.Sample(all, 3, 1)
	if len(tasks) == 0 {
		t.Fatal("no tasks sampled")
	}
	lookup := func(req *delegate.Request) (delegate.Task, bool) {
		for _, tk := range tasks {
			if modeltest.Contains(req, tk.Prompt) {
				return tk, true
			}
		}
		return delegate.Task{}, false
	}
	knower := modeltest.New("knower", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		tk, ok := lookup(req)
		if !ok {
			return nil, errors.New("unknown task")
		}
		return modeltest.Text("Working it out... The answer is " + tk.Answer + "."), nil
	})
	offByOne := modeltest.New("off-by-one", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		tk, ok := lookup(req)
		if !ok {
			return nil, errors.New("unknown task")
		}
		v, err := strconv.Atoi(strings.ReplaceAll(tk.Answer, ",", ""))
		if err != nil {
			return nil, err
		}
		return modeltest.Text(fmt.Sprintf("Final answer: \\boxed{%d}", v+1)), nil
	})
	arm := func(name string, m delegate.Model) Arm {
		s, err := strategy.New(strategy.NameSingle, strategy.Roles{Single: delegate.Agent{Model: m}}, strategy.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		return Arm{Name: name, Strategy: s}
	}
	cfg := testConfig(func(c *Config) { c.Results = filepath.Join(t.TempDir(), "r.jsonl") })
	rep, err := Run(context.Background(), cfg, tasks, []Arm{arm("knower", knower), arm("off", offByOne)}, score.Verify, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	n := len(tasks)
	if k, o := rep.Rows[0], rep.Rows[1]; k.Correct != n || o.Correct != 0 || o.McNemar.B != n || o.McNemar.C != 0 {
		t.Errorf("knower %d/%d, off %d/%d (b=%d, c=%d), want %d/%d, 0/%d (b=%d, c=0)",
			k.Correct, k.N, o.Correct, o.N, o.McNemar.B, o.McNemar.C, n, n, n, n)
	}
	// The knower's answer has no \boxed{} and no "Final answer:": its trace
	// says so, and the verifier still finds "the answer is".
	if k := rep.Rows[0]; k.Failures != n || k.Errors != 0 {
		t.Errorf("knower failures, errors = %d, %d, want %d (answer format), 0", k.Failures, k.Errors, n)
	}
}
