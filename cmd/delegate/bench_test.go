package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/dataset"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

// benchTask is one generated GSM8K-style problem; problem i's reference is
// 10+i.
func benchProblem(i int) (question string, answer int) {
	return fmt.Sprintf("Problem %d: Ann has %d apples and buys %d more. How many apples does she have?", i, 10, i), 10 + i
}

// writeGSM8K writes n generated problems in GSM8K's JSONL format.
func writeGSM8K(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		q, a := benchProblem(i)
		fmt.Fprintf(&b, "{\"question\": %q, \"answer\": \"10 + %d = %d\\n#### %d\"}\n", q, i, a, a)
	}
	path := filepath.Join(t.TempDir(), "test.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// knows says whether a model answers problem i right.
type knows func(i int) bool

// problemOf finds which generated problem a request is about. ok is false
// for requests that do not carry the problem, such as a sub-agent's
// subtask or a delegated question.
func problemOf(req *delegate.Request, n int) (int, bool) {
	for i := range n {
		if q, _ := benchProblem(i); modeltest.Contains(req, q) {
			return i, true
		}
	}
	return 0, false
}

// solver answers every stage of every strategy like a model. It gets the
// problems k says right, and is off by one elsewhere.
func solver(k knows, n int) modeltest.Func {
	return func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		ans := "7"
		if i, ok := problemOf(req, n); ok {
			_, a := benchProblem(i)
			if !k(i) {
				a++
			}
			ans = strconv.Itoa(a)
		}
		sys := modeltest.SystemPrompt(req)
		last := req.Messages[len(req.Messages)-1]
		switch {
		case len(req.Tools) > 0 && last.Role == delegate.RoleTool:
			return modeltest.Text("With the helper's part: Final answer: \\boxed{" + ans + "}"), nil
		case len(req.Tools) > 0:
			return modeltest.ToolCalls(delegate.ToolCall{ID: "c1", Name: "delegate", Arguments: `{"question":"What is 10 plus the rest?"}`}), nil
		case strings.Contains(sys, "break a user's request into subtasks"):
			return modeltest.Text("<|reasoning|>Two parts.</|reasoning|>\n<|subtask|>Count the first apples<|end_subtask|>\n<|subtask|>Count the bought apples<|end_subtask|>\n<|subtask|>Add them<|end_subtask|>"), nil
		case strings.Contains(sys, "Combine their results"):
			return modeltest.Text("Final Output: " + ans), nil
		case strings.Contains(sys, "<answer>"):
			return modeltest.Text("So <answer>" + ans + "</answer>"), nil
		}
		return modeltest.Text("Adding up.\nFinal answer: \\boxed{" + ans + "}"), nil
	}
}

// raterFunc answers the judge's pointwise rubric with a fixed reply.
func raterFunc(reply string) modeltest.Func {
	return func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text(reply), nil
	}
}

type benchServer struct {
	url               string
	big, small, judge *modeltest.Model
}

// calls is the number of requests each model has received so far.
func (s *benchServer) calls() [3]int {
	return [3]int{s.big.Calls(), s.small.Calls(), s.judge.Calls()}
}

// newBenchServer serves three models over HTTP through package server.
// big gets problems right except every fourth, small every other one. The
// judge answers with judgeFn.
func newBenchServer(t *testing.T, n int, judgeFn modeltest.Func) *benchServer {
	t.Helper()
	s := &benchServer{
		big:   modeltest.New("big", solver(func(i int) bool { return i%4 != 3 }, n)),
		small: modeltest.New("small", solver(func(i int) bool { return i%2 == 0 }, n)),
		judge: modeltest.New("judge", judgeFn),
	}
	srv, err := server.New(nil, s.big, s.small, s.judge)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	s.url = hs.URL
	return s
}

// writeBenchConfig assigns big to every role but the judge and the small
// ones: subagent, weak and peers. Every stage samples at temperature 0.
func writeBenchConfig(t *testing.T, url string) string {
	t.Helper()
	doc := `models:
  big:
    base_url: ` + url + `/v1
    model: big
    api_key_env: TEST_DELEGATE_KEY
    price: {input: 2, output: 8}
    max_retries: 0
  small:
    base_url: ` + url + `/v1
    model: small
    price: {input: 0.1, output: 0.4}
    max_retries: 0
  judge:
    base_url: ` + url + `/v1
    model: judge
    price: {input: 1, output: 1}
    max_retries: 0
roles:
  default: big
  subagent: small
  weak: small
  peers: [small, big]
  judge: judge
strategy:
  peers: 2
  rounds: 1
  min_subtasks: 2
  max_subtasks: 4
  single: {temperature: 0}
  plan: {temperature: 0}
  subagent: {temperature: 0}
  aggregate: {temperature: 0}
  strong: {temperature: 0}
  weak: {temperature: 0}
  peer: {temperature: 0}
  leader: {temperature: 0}
`
	path := filepath.Join(t.TempDir(), "delegate.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readCSV reads table.csv into one map per row, by column name.
func readCSV(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	out := map[string]map[string]string{}
	for _, r := range rows[1:] {
		m := map[string]string{}
		for j, h := range rows[0] {
			m[h] = r[j]
		}
		out[m["arm"]] = m
	}
	return out
}

// num parses a CSV cell; n/a is NaN.
func num(t *testing.T, s string) float64 {
	t.Helper()
	if s == bench.NA {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return v
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) || math.IsNaN(a) && math.IsNaN(b)
}

// byArm groups the records of a results file by arm, keyed by task.
func byArm(t *testing.T, path string) map[string]map[string]bench.Record {
	t.Helper()
	recs, repair, err := bench.ReadResults(path)
	if err != nil || repair != nil {
		t.Fatalf("read results: %v (repair %v)", err, repair)
	}
	out := map[string]map[string]bench.Record{}
	for _, r := range recs {
		if out[r.Arm] == nil {
			out[r.Arm] = map[string]bench.Record{}
		}
		if _, dup := out[r.Arm][r.TaskID]; dup {
			t.Errorf("arm %s task %s recorded twice", r.Arm, r.TaskID)
		}
		out[r.Arm][r.TaskID] = r
	}
	return out
}

func TestBenchFourStrategiesOverHTTP(t *testing.T) {
	const n = 12
	srv := newBenchServer(t, n, raterFunc("Score: 90"))
	cfg := writeBenchConfig(t, srv.url)
	data := writeGSM8K(t, n)
	out := filepath.Join(t.TempDir(), "bench")
	stdout, err := execute(t, testEnv, "bench", "--config", cfg, "--dataset", "gsm8k", "--data", data,
		"--strategies", "single,route,decompose,lead", "--n", "8", "--seed", "3", "--out", out, "--concurrency", "6")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stdout)
	}
	for _, name := range append([]string{benchResults}, bench.Files...) {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", name, err)
		}
	}
	var report struct {
		Frontier struct {
			Strong, Weak string
			Arms         []struct{ Name string }
		}
		Rows []struct {
			Arm        string
			CostOfPass *float64 `json:"cost_of_pass"`
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "report.json")); err != nil || json.Unmarshal(b, &report) != nil {
		t.Fatalf("report.json: %v", err)
	}
	if f := report.Frontier; f.Strong != armStrong || f.Weak != armWeak || len(f.Arms) != 6 {
		t.Errorf("report.json frontier between %q and %q with %d arms; want strong and weak, 6 arms", f.Strong, f.Weak, len(f.Arms))
	}
	if _, err := os.Stat(filepath.Join(out, benchCache)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a gsm8k run without --cache opened a response cache: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(out, "table.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, string(md)) {
		t.Errorf("the printed table differs from table.md:\n%s\n----\n%s", stdout, md)
	}
	for _, want := range []string{"bench 48/48 items (100%)  ", "Dataset: gsm8k (" + data + "), 8 of 12 items sampled with seed 3.", "48 items run now, 0 taken from"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	results := byArm(t, filepath.Join(out, benchResults))
	rows := readCSV(t, filepath.Join(out, "table.csv"))
	// By construction: big is wrong on problems 3, 7, 11; small on the odd
	// ones. Every strategy's final answer comes from big, except the weak
	// arm's.
	sample := dataset.Sample(mustLoad(t, data), 8, 3)
	wantCorrect := map[string]int{}
	for _, tk := range sample {
		i, _ := strconv.Atoi(strings.TrimPrefix(tk.ID, "gsm8k/test/"))
		i-- // IDs count lines from 1
		for _, arm := range []string{"single", "route", "decompose", "lead", armStrong} {
			if i%4 != 3 {
				wantCorrect[arm]++
			}
		}
		if i%2 == 0 {
			wantCorrect[armWeak]++
		}
	}
	base := results["single"]
	for _, arm := range []string{"single", "route", "decompose", "lead", armStrong, armWeak} {
		t.Run(arm, func(t *testing.T) {
			recs, row := results[arm], rows[arm]
			if len(recs) != len(sample) || row == nil {
				t.Fatalf("%d records, row %v; want %d records and a row", len(recs), row, len(sample))
			}
			var correct, b, c int
			var in, outTok, dollars, calls float64
			var lat []float64
			for id, r := range recs {
				if r.Error != "" || r.Failure != "" {
					t.Errorf("task %s: error %q failure %q", id, r.Error, r.Failure)
				}
				if r.Correct {
					correct++
				}
				switch br := base[id]; {
				case br.Correct && !r.Correct:
					b++
				case !br.Correct && r.Correct:
					c++
				}
				in += float64(r.Total.Usage.PromptTokens)
				outTok += float64(r.Total.Usage.CompletionTokens)
				dollars += r.Total.Cost
				calls += float64(r.Total.Calls)
				lat = append(lat, r.Latency.Seconds())
			}
			k := float64(len(recs))
			if correct != wantCorrect[arm] {
				t.Errorf("correct in the results = %d, want %d", correct, wantCorrect[arm])
			}
			iv, _ := bench.Wilson(correct, len(recs))
			p50, _ := bench.Quantile(lat, 0.5)
			p95, _ := bench.Quantile(lat, 0.95)
			checks := []check{
				{"n", k}, {"correct", float64(correct)}, {"accuracy", float64(correct) / k},
				{"accuracy_lo", iv.Lo}, {"accuracy_hi", iv.Hi},
				{"tokens_in", in / k}, {"tokens_out", outTok / k}, {"dollars", dollars / k}, {"calls", calls / k},
				{"latency_p50_s", p50}, {"latency_p95_s", p95}, {"failures", 0}, {"errors", 0},
			}
			if arm != "single" {
				m := bench.McNemarTest(b, c)
				checks = append(checks, check{"mcnemar_b", float64(b)}, check{"mcnemar_c", float64(c)}, check{"mcnemar_p", m.P})
			}
			for _, ch := range checks {
				if got := num(t, row[ch.col]); !near(got, ch.want) {
					t.Errorf("%s = %v, want %v (from the results)", ch.col, got, ch.want)
				}
			}
			// Every role's dollars follow from its usage and the configured
			// prices (peers are small and big in turn: left out).
			prices := map[string][2]float64{"baseline": {2, 8}, "strong": {2, 8}, "delegator": {2, 8}, "leader": {2, 8},
				"weak": {0.1, 0.4}, "subagent": {0.1, 0.4}}
			for id, r := range recs {
				for role, tot := range r.Roles {
					p, ok := prices[role]
					if !ok {
						continue
					}
					if want := (float64(tot.Usage.PromptTokens)*p[0] + float64(tot.Usage.CompletionTokens)*p[1]) / 1e6; !near(tot.Cost, want) {
						t.Errorf("task %s role %s: cost %v, want %v from the prices", id, role, tot.Cost, want)
					}
				}
			}
		})
	}
	// PGR and the oracle router, from the strong and weak arms.
	acc := func(arm string) float64 { return float64(wantCorrect[arm]) / float64(len(sample)) }
	if got, want := num(t, rows["route"]["pgr"]), (acc("route")-acc(armWeak))/(acc(armStrong)-acc(armWeak)); !near(got, want) {
		t.Errorf("route pgr = %v, want %v", got, want)
	}
	oracle := 0
	for id, w := range results[armWeak] {
		if w.Correct || results[armStrong][id].Correct {
			oracle++
		}
	}
	if got := num(t, rows[bench.OracleArm]["correct"]); got != float64(oracle) {
		t.Errorf("oracle router correct = %v, want %d", got, oracle)
	}
}

// check is one figure of a table row and the value it must have.
type check struct {
	col  string
	want float64
}

func mustLoad(t *testing.T, path string) []delegate.Task {
	t.Helper()
	tasks, _, err := dataset.Load("gsm8k", path, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// csvColumn returns one column of table.csv by arm.
func csvColumn(t *testing.T, dir, col string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for arm, row := range readCSV(t, filepath.Join(dir, "table.csv")) {
		out[arm] = row[col]
	}
	return out
}

func TestBenchCacheServesRerun(t *testing.T) {
	srv := newBenchServer(t, 0, raterFunc("Score: 85\nReasoning: relevant and clear."))
	cfg := writeBenchConfig(t, srv.url)
	tmp := t.TempDir()
	db := filepath.Join(tmp, "responses.sqlite")
	const items, arms = 3, 2
	runBench := func(name string, extra ...string) string {
		t.Helper()
		args := append([]string{"bench", "--config", cfg, "--dataset", "open", "--strategies", "single,lead",
			"--n", strconv.Itoa(items), "--out", filepath.Join(tmp, name), "--progress=none"}, extra...)
		out, err := execute(t, testEnv, args...)
		if err != nil {
			t.Fatalf("bench %s: %v\n%s", name, err, out)
		}
		return out
	}

	runBench("first", "--cache", "--cache-db", db, "--concurrency", "1") // no two equal judge requests in flight
	first := srv.calls()
	// The judge is asked once per distinct answer to a request: equal
	// answers of two arms make one request, served once.
	recs, _, err := bench.ReadResults(filepath.Join(tmp, "first", benchResults))
	if err != nil || len(recs) != items*arms {
		t.Fatalf("results: %d records (%v), want %d", len(recs), err, items*arms)
	}
	distinct := map[[2]string]bool{}
	for _, r := range recs {
		distinct[[2]string{r.TaskID, r.Answer}] = true
	}
	if first[2] != len(distinct) {
		t.Fatalf("judge calls = %d, want one per distinct answer: %d", first[2], len(distinct))
	}
	out := runBench("second", "--cache", "--cache-db", db)
	if got := srv.calls(); got != first {
		t.Errorf("a cached rerun made requests: calls (big, small, judge) = %v, want %v", got, first)
	}
	for _, want := range []string{
		fmt.Sprintf("response cache, judge: %d hits, 0 misses, 0 requests", items*arms),
		"response cache, strategies: ", // every call a hit: counted below
		"strategy calls made now were served from it (--cache); the latency of items served from it is the cache's",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the cached rerun's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "strategies: 0 hits") || !strings.Contains(out, " hits, 0 misses, 0 requests not cacheable (temperature above 0 without a seed)\nresponse cache, judge") {
		t.Errorf("the cached rerun's strategies were not all served from the cache:\n%s", out)
	}
	for _, col := range []string{"correct", "tokens_in", "tokens_out", "dollars", "calls"} {
		a, b := csvColumn(t, filepath.Join(tmp, "first"), col), csvColumn(t, filepath.Join(tmp, "second"), col)
		for arm := range a {
			if a[arm] != b[arm] {
				t.Errorf("%s of %s: first run %s, cached rerun %s", col, arm, a[arm], b[arm])
			}
		}
	}
	for _, col := range []struct{ name, want string }{{"correct", strconv.Itoa(items)}, {"score", "85"}, {"scored", strconv.Itoa(items)}} {
		for arm, got := range csvColumn(t, filepath.Join(tmp, "second"), col.name) {
			if got != col.want {
				t.Errorf("%s of %s = %s, want %s (every answer scored 85, which passes 70)", col.name, arm, got, col.want)
			}
		}
	}
	if !strings.Contains(out, "| 100.0 [43.9, 100.0] | 85.0 [85.0, 85.0] |") {
		t.Errorf("the table lacks the accuracy and judge score of an arm:\n%s", out)
	}

	// By default only the judge is cached: the strategies' models are asked
	// again.
	runBench("judge-only", "--cache-db", db)
	third := srv.calls()
	if third[2] != first[2] || third[0] <= first[0] || third[1] <= first[1] {
		t.Errorf("calls (big, small, judge) = %v after %v: want new strategy calls and no judge call", third, first)
	}
	// --no-cache asks the judge again, once per item.
	runBench("no-cache", "--no-cache")
	if got := srv.calls(); got[2] != third[2]+items*arms {
		t.Errorf("judge calls with --no-cache = %d, want %d", got[2], third[2]+items*arms)
	}
	if _, err := os.Stat(filepath.Join(tmp, "no-cache", benchCache)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--no-cache created a cache: %v", err)
	}
}

func TestBenchJudgeGarbageOrRefusal(t *testing.T) {
	tests := []struct {
		name, reply string
	}{
		{"refusal", "I'm sorry, but I can't evaluate this answer."},
		{"garbage", "<html><body>502 Bad Gateway</body></html>"},
		{"off scale", "Score: 150\nReasoning: superb."},
		{"no number", "Score: excellent\nReasoning: fine."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newBenchServer(t, 0, raterFunc(tt.reply))
			cfg := writeBenchConfig(t, srv.url)
			dir := t.TempDir()
			out, err := execute(t, testEnv, "bench", "--config", cfg, "--dataset", "open", "--strategies", "single",
				"--n", "2", "--out", dir, "--progress=none")
			// No item could be graded: the tables are written, and the
			// command fails, saying so.
			if err == nil || !strings.Contains(err.Error(), "nothing produced") {
				t.Fatalf("bench: err = %v, want nothing produced\n%s", err, out)
			}
			row := readCSV(t, filepath.Join(dir, "table.csv"))["single"]
			if row["correct"] != "0" || row["errors"] != "2" || row["scored"] != "0" {
				t.Errorf("correct, errors = %s, %s, want 0, 2: an unparseable judge counts wrong, never scored", row["correct"], row["errors"])
			}
			recs, _, err := bench.ReadResults(filepath.Join(dir, benchResults))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if !strings.Contains(r.Error, "judge") || !strings.Contains(r.Error, "parse") {
					t.Errorf("task %s: error %q, want the judge's parse failure", r.TaskID, r.Error)
				}
				if g := r.Grading["judge"]; g.Calls != 1 {
					t.Errorf("task %s: grading %+v, want the judge's one call", r.TaskID, r.Grading)
				}
			}
			if want := "- Grading (role judge, not in the rows): 2 calls"; !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		})
	}
}

func TestBenchResumes(t *testing.T) {
	const n = 6
	srv := newBenchServer(t, n, raterFunc("Score: 50"))
	cfg := writeBenchConfig(t, srv.url)
	data := writeGSM8K(t, n)
	dir := t.TempDir()
	runBench := func(strategies string) string {
		t.Helper()
		out, err := execute(t, testEnv, "bench", "--config", cfg, "--dataset", "gsm8k", "--data", data,
			"--strategies", strategies, "--out", dir, "--progress=false")
		if err != nil {
			t.Fatalf("bench: %v\n%s", err, out)
		}
		return out
	}
	runBench("single")
	before := srv.calls()
	if out := runBench("single"); !strings.Contains(out, fmt.Sprintf("0 items run now, %d taken from", n)) {
		t.Errorf("rerun output:\n%s", out)
	}
	if got := srv.calls(); got != before {
		t.Errorf("a rerun made requests: %v, want %v", got, before)
	}
	if out := runBench("single,decompose"); !strings.Contains(out, fmt.Sprintf("%d items run now, %d taken from", n, n)) {
		t.Errorf("output after adding an arm:\n%s", out)
	}
	recs, _, err := bench.ReadResults(filepath.Join(dir, benchResults))
	if err != nil || len(recs) != 2*n {
		t.Errorf("results hold %d records (%v), want %d", len(recs), err, 2*n)
	}
}

func TestBenchBadDataset(t *testing.T) {
	srv := newBenchServer(t, 0, raterFunc("Score: 50"))
	cfg := writeBenchConfig(t, srv.url)
	bad := filepath.Join("..", "..", "dataset", "testdata", "bad", "gsm8k_bad.jsonl")
	_, err := execute(t, testEnv, "bench", "--config", cfg, "--dataset", "gsm8k", "--data", bad, "--strategies", "single",
		"--out", t.TempDir(), "--progress=false")
	if err == nil || !strings.Contains(err.Error(), "gsm8k_bad.jsonl:2: invalid JSON") {
		t.Errorf("bad dataset: err = %v, want one naming the file and line 2", err)
	}
	out, err := execute(t, testEnv, "bench", "--config", cfg, "--dataset", "gsm8k", "--data", bad, "--strategies", "single",
		"--out", t.TempDir(), "--progress=false", "--skip-bad")
	if err != nil {
		t.Fatalf("bench --skip-bad: %v\n%s", err, out)
	}
	for _, want := range []string{"skipped " + bad + ":2: ", "dataset gsm8k " + bad + ": 2 records read, 4 malformed skipped", "4 malformed records skipped", "| single | single | 2 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	srv := newBenchServer(t, 0, raterFunc("Score: 50"))
	cfg := writeBenchConfig(t, srv.url)
	noJudge := filepath.Join(t.TempDir(), "nojudge.yaml")
	if err := os.WriteFile(noJudge, []byte("models:\n  m:\n    base_url: "+srv.url+"/v1\n    model: big\nroles:\n  baseline: m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no dataset", []string{"--out", out}, "--dataset is required"},
		{"unknown dataset", []string{"--dataset", "gsm9k", "--out", out}, `--dataset "gsm9k": unknown dataset`},
		{"no data", []string{"--dataset", "math", "--out", out}, "--data is required for --dataset math"},
		{"no out", []string{"--dataset", "open", "--out", ""}, "--out is empty"},
		{"unknown strategy", []string{"--dataset", "open", "--out", out, "--strategies", "single,vote"}, `unknown strategy "vote"`},
		{"strategy twice", []string{"--dataset", "open", "--out", out, "--strategies", "lead,lead"}, `"lead" named twice`},
		{"cache both ways", []string{"--dataset", "open", "--out", out, "--cache", "--no-cache"}, "contradict"},
		{"pass score", []string{"--dataset", "open", "--out", out, "--pass-score", "101"}, "--pass-score"},
		{"negative n", []string{"--dataset", "open", "--out", out, "--n", "-1"}, "--n: -1"},
		{"unknown baseline", []string{"--dataset", "open", "--out", out, "--strategies", "single", "--baseline", "lead"}, `no arm named "lead"`},
		{"no judge", []string{"--config", noJudge, "--dataset", "open", "--strategies", "single", "--out", out}, "roles.judge"},
		{"progress mode", []string{"--dataset", "open", "--out", out, "--progress", "loud"}, `--progress "loud": want auto, bar, plain or none`},
		{"frontier of one arm", []string{"--dataset", "open", "--out", out, "--frontier", "strong"}, `--frontier "strong": want two different arms`},
		{"frontier of no arm", []string{"--dataset", "open", "--out", out, "--strategies", "single,lead", "--frontier", "single,route"}, `--frontier: no arm "route"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"bench", "--config", cfg, "--progress=false"}, tt.args...)
			_, err := execute(t, testEnv, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.example.com/v1", "https://api.example.com/v1"},
		{"https://user:s3cret@api.example.com/v1", "https://user:xxxxx@api.example.com/v1"},
		{"https://api.example.com/v1?key=s3cret", "https://api.example.com/v1"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBenchInterruptedResumes cancels a run while one item hangs on the
// server. The finished items are kept, and the error says how to resume.
// The same command then runs only what is missing.
func TestBenchInterruptedResumes(t *testing.T) {
	const n = 6
	var hang atomic.Bool
	hang.Store(true)
	arrived := make(chan struct{}, 16)
	inner := solver(func(i int) bool { return true }, n)
	big := modeltest.New("big", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if i, ok := problemOf(req, n); ok && i == 4 && hang.Load() {
			arrived <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return inner(ctx, req)
	})
	srv, err := server.New(nil, big, modeltest.New("small", inner), modeltest.New("judge", raterFunc("Score: 1")))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg := writeBenchConfig(t, hs.URL)
	data := writeGSM8K(t, n)
	dir := t.TempDir()
	args := []string{"bench", "--config", cfg, "--dataset", "gsm8k", "--data", data, "--strategies", "single",
		"--out", dir, "--progress=false", "--concurrency", "1"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	var out bytes.Buffer
	cmd := newRootCmd(testEnv, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "bench interrupted") || !strings.Contains(err.Error(), "run the same command again") {
		t.Fatalf("interrupted bench: err = %v, want the resume hint\n%s", err, out.String())
	}
	recs, _, err := bench.ReadResults(filepath.Join(dir, benchResults))
	if err != nil || len(recs) != 4 {
		t.Fatalf("after the interrupt the results hold %d records (%v), want the 4 problems before the hanging one", len(recs), err)
	}

	hang.Store(false)
	stdout, err := execute(t, testEnv, args...)
	if err != nil {
		t.Fatalf("resumed bench: %v\n%s", err, stdout)
	}
	if want := "2 items run now, 4 taken from"; !strings.Contains(stdout, want) {
		t.Errorf("resumed output lacks %q:\n%s", want, stdout)
	}
	if want := "| single | single | 6 | 100.0 "; !strings.Contains(stdout, want) {
		t.Errorf("resumed table lacks %q:\n%s", want, stdout)
	}
}

// A resume into an --out written under other settings is refused, naming
// what differs. Else it would show the old results under the new labels.
func TestBenchRefusesOtherSettings(t *testing.T) {
	const n = 3
	srv := newBenchServer(t, n, raterFunc("Score: 50"))
	cfg := writeBenchConfig(t, srv.url)
	data := writeGSM8K(t, n)
	dir := t.TempDir()
	bench := func(cfg string, extra ...string) (string, error) {
		args := append([]string{"bench", "--config", cfg, "--dataset", "gsm8k", "--data", data, "--strategies", "single",
			"--out", dir, "--progress=none"}, extra...)
		return execute(t, testEnv, args...)
	}
	if out, err := bench(cfg); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	doc, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	changed := strings.Replace(string(doc), "model: big\n", "model: big-v2\n", 1)
	changed = strings.Replace(changed, "price: {input: 2, output: 8}", "price: {input: 3, output: 8}", 1)
	if err := os.WriteFile(other, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	before := srv.calls()
	tests := []struct {
		name  string
		cfg   string
		extra []string
		want  []string
	}{
		{"another model and price", other, nil, []string{`models.big.model: "big" there, "big-v2" now`, "models.big.price.input: 2 there, 3 now", "another --out", dir}},
		{"another sample", cfg, []string{"--n", "2"}, []string{"dataset.sample: 0 there, 2 now", "dataset.tasks: 3 there, 2 now"}},
		{"another seed", cfg, []string{"--n", "3", "--seed", "9"}, []string{"dataset.seed: 1 there, 9 now"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := bench(tt.cfg, tt.extra...)
			if err == nil {
				t.Fatalf("resume under other settings ran:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if got := srv.calls(); got != before {
		t.Errorf("a refused resume made requests: %v, want %v", got, before)
	}
	// Transport settings may change: the same run resumes.
	transport := strings.ReplaceAll(string(doc), "max_retries: 0", "max_retries: 2\n    timeout: 5s")
	if err := os.WriteFile(other, []byte(transport), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := bench(other); err != nil || !strings.Contains(out, fmt.Sprintf("0 items run now, %d taken from", n)) {
		t.Errorf("resume with other retries and timeout: %v\n%s", err, out)
	}
}
