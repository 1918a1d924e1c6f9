package view

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rl"
)

// serve starts the view over cfg on loopback once it has indexed every file.
// The answers then cover the whole fixture.
func serve(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, hs := serveCold(t, cfg)
	<-s.indexed
	return s, hs
}

// serveCold starts the view over cfg on loopback at once.
func serveCold(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return s, hs
}

// get decodes the JSON answer to GET path into v and returns the status.
func get(t testing.TB, base, path string, v any) int {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: decode: %v", path, err)
		}
	}
	return resp.StatusCode
}

// runID finds the run of kind whose name ends with suffix.
func runID(t testing.TB, s *Server, kind, suffix string) int {
	t.Helper()
	for _, r := range s.Runs() {
		if r.Kind == kind && strings.HasSuffix(r.Name, suffix) {
			return r.ID
		}
	}
	t.Fatalf("no %s run named *%s", kind, suffix)
	return 0
}

func TestDiscover(t *testing.T) {
	dir := fixtureDir(t)
	s, err := New(config(func(c *Config) { c.Paths = []string{dir, filepath.Join(dir, "trace.json")} }))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Runs() {
		rel, _ := filepath.Rel(dir, r.Name)
		got = append(got, r.Kind+" "+rel)
	}
	want := []string{"trace trace.json", "bench bench/results.jsonl", "rollouts rollouts/artifacts.jsonl",
		"train train/a/metrics.jsonl", "train train/b/metrics.jsonl", "trace trace.json"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("runs:\n got %q\nwant %q", got, want)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"empty directory", t.TempDir(), "holds no trace"},
		{"missing", filepath.Join(dir, "nothing"), "no such file"},
		{"not a trace", filepath.Join(dir, "bench", "report.json"), "trace has no root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(config(func(c *Config) { c.Paths = []string{tc.path} })); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// config is DefaultConfig changed by set.
func config(set func(c *Config)) Config {
	c := DefaultConfig()
	set(&c)
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *Config)
		want string // "" for valid, else a part of the error
	}{
		{"default with a path", func(c *Config) { c.Paths = []string{"x"} }, ""},
		{"least poll", func(c *Config) { c.Paths, c.Poll = []string{"x"}, MinPoll }, ""},
		{"most poll", func(c *Config) { c.Paths, c.Poll = []string{"x"}, MaxPoll }, ""},
		{"nothing to serve", func(c *Config) {}, "no directory"},
		{"zero poll", func(c *Config) { c.Paths, c.Poll = []string{"x"}, 0 }, "poll"},
		{"poll too short", func(c *Config) { c.Paths, c.Poll = []string{"x"}, time.Millisecond }, "poll"},
		{"poll too long", func(c *Config) { c.Paths, c.Poll = []string{"x"}, time.Minute }, "poll"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := config(tt.set).Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Validate() = %q, want an error naming %q", got, tt.want)
			}
		})
	}
}

// walkNodes lists the nodes of a view tree by name.
func walkNodes(n *Node, out map[string]*Node) map[string]*Node {
	out[n.Name] = n
	for _, c := range n.Children {
		walkNodes(c, out)
	}
	return out
}

func TestTraceAPI(t *testing.T) {
	dir := fixtureDir(t)
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	var tv TraceView
	if code := get(t, hs.URL, fmt.Sprintf("/api/trace?run=%d", runID(t, s, KindTrace, "trace.json")), &tv); code != 200 {
		t.Fatalf("status %d", code)
	}
	nodes := walkNodes(tv.Root, map[string]*Node{})
	for name, want := range map[string]bool{"route": true, "plan": true, "subagents": true, "sub1": true, "sub2": false, "final": true} {
		if got := nodes[name].Critical; got != want {
			t.Errorf("%s critical: got %v, want %v", name, got, want)
		}
	}
	if got, want := tv.CriticalMS, 350.0; got != want {
		t.Errorf("critical path: got %v ms, want %v", got, want)
	}
	if got := nodes["sub2"]; got.Error != "upstream 500" || got.ErrorStatus != 500 {
		t.Errorf("sub2: got error %q status %d, want the failed call's", got.Error, got.ErrorStatus)
	}
	if got, want := nodes["subagents"].Subtotal, (delegate.Totals{Calls: 2, Errors: 1, Usage: delegate.Usage{PromptTokens: 70, CompletionTokens: 35},
		Cost: 0.003, Latency: 350 * time.Millisecond}); got.Calls != want.Calls || got.Errors != want.Errors || got.Usage != want.Usage || got.Latency != want.Latency {
		t.Errorf("subagents subtotal: got %+v, want %+v", got, want)
	}
	if got, want := tv.Root.Subtotal.Calls, tv.Total.Calls; got != want {
		t.Errorf("root subtotal: got %d calls, want the trace's %d", got, want)
	}
	if got := tv.Roles["weak"].Errors; got != 1 {
		t.Errorf("weak role errors: got %d, want 1", got)
	}
	if got := nodes["plan"].Output; got == nil || len(got.ToolCalls) != 1 {
		t.Errorf("plan output: got %+v, want its tool call", got)
	}
}

// The marked calls' latencies sum to what delegate.CriticalPath measures.
func TestMarkCriticalMatchesCriticalPath(t *testing.T) {
	seq := func(names ...string) []*delegate.Node {
		var out []*delegate.Node
		for i, n := range names {
			out = append(out, call(i+10, n, "r", 100*i, 100, 0, ""))
		}
		return out
	}
	overlapping := &delegate.Node{Name: "fan", Start: t0, Children: []*delegate.Node{
		call(1, "a", "r", 0, 300, 0, ""), call(2, "b", "r", 10, 100, 0, ""), call(3, "c", "r", 20, 400, 0, "")}}
	nested := &delegate.Node{Name: "outer", Start: t0, Children: []*delegate.Node{overlapping, call(4, "after", "r", 500, 10, 0, "")}}
	for _, tc := range []struct {
		name string
		root *delegate.Node
	}{
		{"fixture", fixtureTrace().Root},
		{"sequence", &delegate.Node{Name: "seq", Start: t0, Children: seq("x", "y", "z")}},
		{"fan-out", overlapping},
		{"nested", nested},
		{"empty group", &delegate.Node{Name: "none", Start: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crit := map[*delegate.Node]bool{}
			markCritical(tc.root, crit)
			var sum time.Duration
			calls := 0
			var walk func(n *delegate.Node)
			walk = func(n *delegate.Node) {
				if crit[n] && n.IsCall() {
					sum += n.Latency
					calls++
				}
				for _, c := range n.Children {
					walk(c)
				}
			}
			walk(tc.root)
			d, k := delegate.CriticalPath(tc.root)
			if sum != d || calls != k {
				t.Errorf("marked %v over %d calls, want %v over %d", sum, calls, d, k)
			}
		})
	}
}

func TestBenchAPI(t *testing.T) {
	dir := fixtureDir(t)
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	id := runID(t, s, KindBench, "results.jsonl")
	var rep BenchReport
	if code := get(t, hs.URL, fmt.Sprintf("/api/bench?run=%d", id), &rep); code != 200 {
		t.Fatalf("status %d", code)
	}
	rows := map[string]BenchRow{}
	for _, r := range rep.Rows {
		rows[r.Arm] = r
	}
	if got := rows["strong"]; got.Accuracy == nil || *got.Accuracy != 1 || got.Role != "strong" || got.CostOfPass == nil || math.Abs(*got.CostOfPass-0.01) > 1e-12 {
		t.Errorf("strong row: got %+v", got)
	}
	if got := rows["weak"]; got.Accuracy == nil || *got.Accuracy != 0.5 || got.AccuracyCI[0] == nil || got.CostOfPassCI[1] == nil {
		t.Errorf("weak row: got %+v", got)
	}
	if got := rows["broken"]; got.Errors != 20 || !got.NoneCorrect || got.CostOfPass != nil {
		t.Errorf("broken row: got %+v", got)
	}
	f := rep.Frontier
	if f == nil || f.Strong != "strong" || f.Weak != "weak" || f.Oracle == nil || len(f.Arms) != 2 || len(f.LeftOut) != 1 {
		t.Fatalf("frontier: got %+v", f)
	}
	if got, want := f.Oracle.Accuracy, 1.0; got != want {
		t.Errorf("oracle accuracy: got %v, want %v", got, want)
	}

	t.Run("items paged", func(t *testing.T) {
		var p listPage[BenchItem]
		get(t, hs.URL, fmt.Sprintf("/api/bench/items?run=%d&arm=weak&offset=5&limit=5", id), &p)
		if p.Total != 20 || len(p.Items) != 5 || p.Items[0].TaskID != "t005" {
			t.Errorf("got total %d, %d items from %+v", p.Total, len(p.Items), p.Items)
		}
		get(t, hs.URL, fmt.Sprintf("/api/bench/items?run=%d&arm=weak&correct=false", id), &p)
		if p.Total != 10 {
			t.Errorf("wrong items: got %d, want 10", p.Total)
		}
	})
	t.Run("item side by side", func(t *testing.T) {
		var it struct {
			Arms []BenchItem `json:"arms"`
		}
		get(t, hs.URL, fmt.Sprintf("/api/bench/item?run=%d&task=t000", id), &it)
		if len(it.Arms) != 3 || it.Arms[0].Answer != "the answer is 0" || !it.Arms[0].HasTrace || it.Arms[2].Error == "" {
			t.Errorf("got %+v", it.Arms)
		}
		var tv TraceView
		if code := get(t, hs.URL, fmt.Sprintf("/api/trace?run=%d&rec=%d", id, it.Arms[0].Rec), &tv); code != 200 || tv.Strategy != "route" {
			t.Errorf("the item's trace: status %d, strategy %q", code, tv.Strategy)
		}
	})
	t.Run("grows", func(t *testing.T) {
		appendLines(t, filepath.Join(dir, "bench", "results.jsonl"), benchRecord("strong", 20, false), benchRecord("weak", 20, false), benchRecord("broken", 20, false))
		get(t, hs.URL, fmt.Sprintf("/api/bench?run=%d", id), &rep)
		if rep.Tasks != 21 {
			t.Errorf("after appending a task: got %d tasks, want 21", rep.Tasks)
		}
	})
}

func TestAPIErrors(t *testing.T) {
	dir := fixtureDir(t)
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	b := runID(t, s, KindBench, "results.jsonl")
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/api/bench/items?run=" + fmt.Sprint(b) + "&limit=501", 400},
		{"/api/bench/items?run=" + fmt.Sprint(b) + "&limit=0", 400},
		{"/api/bench/items?run=" + fmt.Sprint(b) + "&offset=-1", 400},
		{"/api/bench/items?run=" + fmt.Sprint(b) + "&limit=500", 200},
		{"/api/bench?run=99", 404},
		{"/api/bench?run=x", 404},
		{"/api/rollouts?run=" + fmt.Sprint(b), 400},
		{"/api/trace?run=" + fmt.Sprint(b) + "&rec=3", 404}, // kept without a trace
		{"/api/trace?run=" + fmt.Sprint(b) + "&rec=9999", 404},
		{"/api/bench/item?run=" + fmt.Sprint(b) + "&task=nope", 404},
		{"/nothing", 404},
	} {
		if got := get(t, hs.URL, tc.path, nil); got != tc.want {
			t.Errorf("GET %s: got %d, want %d", tc.path, got, tc.want)
		}
	}
}

func TestRolloutsAPI(t *testing.T) {
	dir := fixtureDir(t)
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	id := runID(t, s, KindRollouts, "artifacts.jsonl")
	var sum RolloutSummary
	if code := get(t, hs.URL, fmt.Sprintf("/api/rollouts?run=%d", id), &sum); code != 200 {
		t.Fatalf("status %d", code)
	}
	if sum.All.N != 40 || sum.All.Failed != 4 || sum.Groups != 10 || sum.Dropped["equal_scores"] != 4 || len(sum.Strategies) != 2 {
		t.Errorf("summary: got %+v", sum)
	}
	hist := 0
	for _, c := range sum.Histogram {
		hist += c
	}
	if hist != 36 || sum.Min != 0 || sum.Max != 1 {
		t.Errorf("histogram: got %d rewards in [%v, %v], want 36 in [0, 1]", hist, sum.Min, sum.Max)
	}
	var p listPage[RolloutItem]
	get(t, hs.URL, fmt.Sprintf("/api/rollouts/list?run=%d&sort=reward&limit=3&offset=36", id), &p)
	if p.Total != 40 || len(p.Items) != 3 || p.Items[0].Reward != 1 {
		t.Errorf("sorted list: got %+v", p)
	}
	get(t, hs.URL, fmt.Sprintf("/api/rollouts/list?run=%d&failed=true", id), &p)
	if p.Total != 4 || !p.Items[0].Failed {
		t.Errorf("failed list: got %+v", p)
	}
	var item struct {
		Traces  []string       `json:"traces"`
		Rollout map[string]any `json:"rollout"`
	}
	get(t, hs.URL, fmt.Sprintf("/api/rollouts/item?run=%d&rec=0", id), &item)
	if len(item.Traces) != 1 || item.Rollout["prompt"] != "what is 2+2?" || item.Rollout["trace"] != nil {
		t.Errorf("item: got %+v", item)
	}
	var tv TraceView
	if code := get(t, hs.URL, fmt.Sprintf("/api/trace?run=%d&rec=0&which=trace", id), &tv); code != 200 || tv.Root == nil {
		t.Errorf("rollout trace: status %d", code)
	}
}

// A line not yet ended is not indexed until its newline comes.
func TestLinesWaitForNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	if err := os.WriteFile(path, []byte("{\"a\":1}\n\n{\"a\":2}\n{\"a\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := lines{path: path}
	var seen []string
	add := func(_ int, raw []byte) error {
		seen = append(seen, strings.TrimSpace(string(raw)))
		return nil
	}
	if err := l.update(0, add); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(seen, " "), `{"a":1} {"a":2}`; got != want {
		t.Errorf("first pass: got %q, want %q", got, want)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "3}\n")
	f.Close()
	if err := l.update(0, add); err != nil {
		t.Fatal(err)
	}
	if got, want := l.count(), 3; got != want {
		t.Errorf("lines: got %d, want %d", got, want)
	}
	for i, want := range []string{`{"a":1}`, `{"a":2}`, `{"a":3}`} {
		got, err := l.read(i)
		if err != nil || string(got) != want {
			t.Errorf("line %d: got %q (%v), want %q", i, got, err, want)
		}
	}
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.update(0, add); err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Errorf("a rewritten file: got %v, want an error saying it shrank", err)
	}
}

func TestMetricsVersion(t *testing.T) {
	dir := t.TempDir()
	m := metrics(1, 1)
	m.Version = rl.MetricsVersion + 1
	appendLines(t, filepath.Join(dir, rl.MetricsFile), m)
	s, hs := serve(t, config(func(c *Config) { c.Paths = []string{dir} }))
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	get(t, hs.URL, fmt.Sprintf("/api/train?runs=%d", s.Runs()[0].ID), &body)
	if want := fmt.Sprintf("metrics version %d, this program reads version %d", rl.MetricsVersion+1, rl.MetricsVersion); !strings.Contains(body.Error.Message, want) {
		t.Errorf("got %q, want it to say %q", body.Error.Message, want)
	}
}

func TestTrainAPIAndEvents(t *testing.T) {
	dir := fixtureDir(t)
	s, hs := serve(t, config(func(c *Config) { c.Paths, c.Poll = []string{dir}, 20*time.Millisecond }))
	a, b := runID(t, s, KindTrain, "a/metrics.jsonl"), runID(t, s, KindTrain, "b/metrics.jsonl")
	var got struct {
		Series []TrainSeries `json:"series"`
	}
	get(t, hs.URL, fmt.Sprintf("/api/train?runs=%d,%d", a, b), &got)
	if len(got.Series) != 2 || len(got.Series[0].Points) != 10 || len(got.Series[1].Points) != 8 {
		t.Fatalf("series: got %+v", got.Series)
	}
	if p := got.Series[0].Points[9]; p.Step != 10 || p.Cost == nil || math.Abs(*p.Cost-0.01) > 1e-12 || p.Reward != 0.1 {
		t.Errorf("step 10: got %+v", p)
	}
	// Each kind's delegation rate is its delegated steps over its steps; a
	// kind without steps has none. Staleness is the run's mean.
	if p := got.Series[0].Points[9]; fmt.Sprint(p.Delegated) != "map[product:0.5 sum:0]" || p.Staleness != 0.5 {
		t.Errorf("step 10: delegated %v, staleness %v; want map[product:0.5 sum:0] and 0.5", p.Delegated, p.Staleness)
	}

	resp, err := http.Get(fmt.Sprintf("%s/api/train/events?run=%d&after=10", hs.URL, a))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	appendLines(t, filepath.Join(dir, "train", "a", rl.MetricsFile), metrics(11, 1))
	events := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		var ev []string
		for sc.Scan() {
			if sc.Text() == "" && len(ev) > 0 {
				events <- strings.Join(ev, "\n")
				return
			}
			if !strings.HasPrefix(sc.Text(), ":") {
				ev = append(ev, sc.Text())
			}
		}
	}()
	select {
	case ev := <-events:
		if !strings.HasPrefix(ev, "id: 11\ndata: ") || !strings.Contains(ev, `"step":11`) {
			t.Errorf("event: got %q", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after appending a step")
	}
}

func TestToken(t *testing.T) {
	dir := fixtureDir(t)
	_, hs := serve(t, config(func(c *Config) { c.Paths, c.Token = []string{dir}, "s3cret" }))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(path string, set func(*http.Request)) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", hs.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if set != nil {
			set(req)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	cookie := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: tokenCookie, Value: v}) }
	}
	for _, tc := range []struct {
		name string
		path string
		set  func(*http.Request)
		want int
	}{
		{"nothing", "/api/runs", nil, 401},
		{"bearer", "/api/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, 200},
		{"wrong bearer", "/api/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401},
		{"cookie", "/api/runs", cookie("s3cret"), 200},
		{"wrong cookie", "/", cookie("nope"), 401},
		{"query on a page", "/?token=s3cret", nil, 303},
		{"wrong query", "/?token=nope", nil, 401},
		{"cross-site with the cookie", "/api/runs", func(r *http.Request) {
			cookie("s3cret")(r)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(tc.path, tc.set)
			if resp.StatusCode != tc.want {
				t.Errorf("got %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == 303 {
				var c *http.Cookie
				for _, k := range resp.Cookies() {
					if k.Name == tokenCookie {
						c = k
					}
				}
				if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || resp.Header.Get("Location") != "/" {
					t.Errorf("got cookie %+v, location %q; want an HttpOnly strict cookie and / again", c, resp.Header.Get("Location"))
				}
			}
		})
	}
}

func TestPagesServed(t *testing.T) {
	_, hs := serve(t, config(func(c *Config) { c.Paths = []string{fixtureDir(t)} }))
	for _, tc := range []struct{ path, ctype, has string }{
		{"/", "text/html", "/static/app.js"},
		{"/static/app.js", "text/javascript", "EventSource"},
		{"/static/style.css", "text/css", ".node"},
	} {
		resp, err := http.Get(hs.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, err = bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(b.String(), tc.has) {
			t.Errorf("GET %s: status %d, type %q, err %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), err)
		}
	}
}

// An update stops at its budget and the next goes on where it stopped.
func TestLinesBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "{\"i\":%d}\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	l := lines{path: path}
	next := 0
	check := func(i int, raw []byte) error {
		if want := fmt.Sprintf("{\"i\":%d}\n", next); i != next || string(raw) != want {
			return fmt.Errorf("line %d: got %q, want %q", i, raw, want)
		}
		next++
		return nil
	}
	if err := l.update(time.Nanosecond, check); err != nil {
		t.Fatal(err)
	}
	if p := l.progress(); p.Complete || l.count() >= 1000 || p.Of != int64(b.Len()) {
		t.Fatalf("after one short update: %d lines, progress %+v; want some lines and not complete", l.count(), p)
	}
	for rounds := 0; !l.progress().Complete; rounds++ {
		if rounds > 1000/updateStride+1 {
			t.Fatal("updates never complete")
		}
		if err := l.update(time.Nanosecond, check); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.count(); got != 1000 {
		t.Errorf("got %d lines, want 1000", got)
	}
}
