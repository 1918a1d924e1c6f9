package judge

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fakeModel is a hand-written judge model, safe for concurrent use.
// Its answer function sees every request. It records the requests and
// counts the calls in flight. When gate is set, it holds each call until
// gate calls are in flight at once, or two seconds pass; the test then sees
// a lower peak.
type fakeModel struct {
	answer func(req *delegate.Request) (string, error)
	gate   int

	mu       sync.Mutex
	reqs     []*delegate.Request
	inFlight int
	peak     int
	reached  chan struct{}
	closed   bool
}

func (m *fakeModel) Name() string { return "fake-judge" }

func (m *fakeModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.inFlight++
	if m.inFlight > m.peak {
		m.peak = m.inFlight
	}
	if m.reached == nil {
		m.reached = make(chan struct{})
	}
	if m.gate > 0 && m.inFlight == m.gate && !m.closed {
		close(m.reached)
		m.closed = true
	}
	reached := m.reached
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inFlight--
		m.mu.Unlock()
	}()
	if m.gate > 0 {
		select {
		case <-reached:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	text, err := m.answer(req)
	if err != nil {
		return nil, err
	}
	return &delegate.Response{
		Model:   "fake-judge",
		Choices: []delegate.Choice{{Message: delegate.Assistant(text), FinishReason: "stop"}},
		Usage:   delegate.Usage{PromptTokens: 1000, CompletionTokens: 100},
	}, nil
}

// shown returns the answers a pairwise request showed as A and B.
// For a pointwise request it returns the one answer as a.
func shown(t testing.TB, req *delegate.Request) (a, b string) {
	t.Helper()
	u := req.Messages[len(req.Messages)-1].Content
	cut := func(start, end string) string {
		_, after, ok := strings.Cut(u, start+"\n")
		if !ok {
			return ""
		}
		s, _, _ := strings.Cut(after, "\n"+end)
		return s
	}
	if a := cut("[Answer]", "[End of answer]"); a != "" {
		return a, ""
	}
	return cut("[Answer A]", "[End of Answer A]"), cut("[Answer B]", "[End of Answer B]")
}

// scorer answers with quality(answer) plus bonus for the answer shown first.
func scorer(t testing.TB, quality map[string]float64, bonus float64) func(*delegate.Request) (string, error) {
	return func(req *delegate.Request) (string, error) {
		a, b := shown(t, req)
		if b == "" {
			return fmt.Sprintf("Score: %v\nReasoning: fine.", quality[a]), nil
		}
		return fmt.Sprintf("Score A: %v\nReasoning A: ok.\nScore B: %v\nReasoning B: ok.", quality[a]+bonus, quality[b]), nil
	}
}

func newJudge(t *testing.T, m delegate.Model, mod func(*Config)) *Judge {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	j, err := New(delegate.Agent{Model: m, Price: delegate.Price{Input: 1, Output: 10}}, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return j
}

func TestCompareOutcomes(t *testing.T) {
	good, bad := "a careful answer", "a sloppy answer"
	tests := []struct {
		name    string
		quality map[string]float64
		bonus   float64
		mod     func(*Config)
		// want
		outcome                 string
		cand, base, diff        float64
		paired, consistent      bool
		calls, candFirstInPlans int
	}{
		{
			name: "unbiased judge, candidate better", quality: map[string]float64{good: 90, bad: 40},
			outcome: Win, cand: 90, base: 40, diff: 50, paired: true, consistent: true, calls: 2,
		},
		{
			name: "unbiased judge, candidate worse", quality: map[string]float64{good: 30, bad: 60},
			outcome: Loss, cand: 30, base: 60, diff: -30, paired: true, consistent: true, calls: 2,
		},
		{
			// Always prefers A by 20 over equal answers: each order alone
			// would hand the win to whoever was first.
			name: "position bias, agree", quality: map[string]float64{good: 60, bad: 60}, bonus: 20,
			outcome: Tie, cand: 70, base: 70, diff: 0, paired: true, consistent: false, calls: 2,
		},
		{
			name: "position bias, average", quality: map[string]float64{good: 60, bad: 60}, bonus: 20,
			mod:     func(c *Config) { c.Combine = CombineAverage },
			outcome: Tie, cand: 70, base: 70, diff: 0, paired: true, consistent: false, calls: 2,
		},
		{
			// Orders disagree (90 vs 50, then 80 vs 60 for the baseline
			// shown first): agree says tie, the average says win by 10.
			name: "bias with a real gap, agree", quality: map[string]float64{good: 60, bad: 50}, bonus: 30,
			outcome: Tie, cand: 75, base: 65, diff: 10, paired: true, consistent: false, calls: 2,
		},
		{
			name: "bias with a real gap, average", quality: map[string]float64{good: 60, bad: 50}, bonus: 30,
			mod:     func(c *Config) { c.Combine = CombineAverage },
			outcome: Win, cand: 75, base: 65, diff: 10, paired: true, consistent: false, calls: 2,
		},
		{
			name: "average within tie margin", quality: map[string]float64{good: 60, bad: 50}, bonus: 30,
			mod:     func(c *Config) { c.Combine = CombineAverage; c.TieMargin = 10 },
			outcome: Tie, cand: 75, base: 65, diff: 10, paired: true, consistent: false, calls: 2,
		},
		{
			name: "agree with tie margin", quality: map[string]float64{good: 65, bad: 60},
			mod:     func(c *Config) { c.TieMargin = 5 },
			outcome: Tie, cand: 65, base: 60, diff: 5, paired: true, consistent: true, calls: 2,
		},
		{
			name: "pointwise", quality: map[string]float64{good: 80, bad: 55}, bonus: 30,
			mod:     func(c *Config) { c.Mode = ModePointwise },
			outcome: Win, cand: 80, base: 55, diff: 25, paired: false, consistent: false, calls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeModel{answer: scorer(t, tt.quality, tt.bonus)}
			j := newJudge(t, m, tt.mod)
			v, err := j.Compare(context.Background(), nil, nil, "a request", good, bad)
			if err != nil {
				t.Fatalf("Compare: %v", err)
			}
			if v.Outcome != tt.outcome {
				t.Errorf("Outcome = %q, want %q", v.Outcome, tt.outcome)
			}
			if v.Candidate != tt.cand || v.Baseline != tt.base || v.Diff != tt.diff {
				t.Errorf("scores = %v, %v, diff %v; want %v, %v, diff %v", v.Candidate, v.Baseline, v.Diff, tt.cand, tt.base, tt.diff)
			}
			if v.Paired != tt.paired || v.Consistent != tt.consistent {
				t.Errorf("Paired, Consistent = %v, %v; want %v, %v", v.Paired, v.Consistent, tt.paired, tt.consistent)
			}
			if len(v.Orders) != tt.calls || len(m.reqs) != tt.calls {
				t.Errorf("%d orders, %d model calls; want %d", len(v.Orders), len(m.reqs), tt.calls)
			}
			if v.ParseFailures != 0 || v.CallErrors != 0 || v.Unparseable {
				t.Errorf("ParseFailures %d, CallErrors %d, Unparseable %v; want none", v.ParseFailures, v.CallErrors, v.Unparseable)
			}
			// 2 calls of 1000 prompt and 100 completion tokens at $1 and $10 per million.
			if want := 2 * (1000*1 + 100*10) / 1e6; math.Abs(v.Cost-want) > 1e-12 || v.Usage.Total() != 2200 {
				t.Errorf("Cost %v, tokens %d; want %v, 2200", v.Cost, v.Usage.Total(), want)
			}
		})
	}
}

func TestCompareShowsBothOrders(t *testing.T) {
	m := &fakeModel{answer: scorer(t, map[string]float64{"cand": 70, "base": 50}, 0)}
	j := newJudge(t, m, nil)
	v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
	if err != nil {
		t.Fatalf("Compare: %v", err)
	}
	for _, o := range v.Orders {
		wantA, wantB := 70.0, 50.0
		if o.Order == BaselineFirst {
			wantA, wantB = 50, 70
		}
		if o.ScoreA != wantA || o.ScoreB != wantB || o.Candidate != 70 || o.Baseline != 50 {
			t.Errorf("%s: A %v B %v cand %v base %v; want A %v B %v cand 70 base 50", o.Order, o.ScoreA, o.ScoreB, o.Candidate, o.Baseline, wantA, wantB)
		}
	}
	var firsts []string
	for _, r := range m.reqs {
		a, _ := shown(t, r)
		firsts = append(firsts, a)
		if r.Temperature == nil || *r.Temperature != 0 || r.MaxTokens != 1024 || r.Seed != nil {
			t.Errorf("request temperature %v, max tokens %d, seed %v; want 0, 1024, nil", r.Temperature, r.MaxTokens, r.Seed)
		}
	}
	if len(firsts) != 2 || firsts[0] == firsts[1] {
		t.Errorf("answers shown first = %q, want each answer once", firsts)
	}
}

func TestCompareSingleOrder(t *testing.T) {
	m := &fakeModel{answer: scorer(t, map[string]float64{"cand": 70, "base": 50}, 0)}
	j := newJudge(t, m, func(c *Config) { c.BothOrders = false; c.Repeats = 3 })
	var orders []Order
	for range 2 {
		v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
		if err != nil {
			t.Fatalf("Compare: %v", err)
		}
		if len(v.Orders) != 3 || v.Paired || v.Outcome != Win {
			t.Fatalf("%d calls, Paired %v, Outcome %q; want 3, false, win", len(v.Orders), v.Paired, v.Outcome)
		}
		for _, o := range v.Orders {
			orders = append(orders, o.Order)
		}
	}
	for _, o := range orders {
		if o != orders[0] {
			t.Errorf("orders %v, want one order for every repeat and run", orders)
		}
	}
}

func TestCompareRepeats(t *testing.T) {
	// Scores vary with the seed: repeat r gives the candidate 60+2r and
	// the baseline 50.
	m := &fakeModel{answer: func(req *delegate.Request) (string, error) {
		if req.Seed == nil {
			return "", errors.New("no seed on a repeated call")
		}
		c := 60 + 2*float64(*req.Seed)
		a, _ := shown(t, req)
		if a == "cand" {
			return fmt.Sprintf("Score A: %v\nScore B: 50", c), nil
		}
		return fmt.Sprintf("Score A: 50\nScore B: %v", c), nil
	}}
	j := newJudge(t, m, func(c *Config) { c.Repeats = 3 })
	v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
	if err != nil {
		t.Fatalf("Compare: %v", err)
	}
	if len(v.Orders) != 6 || len(m.reqs) != 6 {
		t.Fatalf("%d orders, %d calls; want 6", len(v.Orders), len(m.reqs))
	}
	if v.Candidate != 62 || v.Baseline != 50 || v.Outcome != Win || !v.Consistent {
		t.Errorf("cand %v base %v outcome %q consistent %v; want 62, 50, win, true", v.Candidate, v.Baseline, v.Outcome, v.Consistent)
	}
	seen := map[string]bool{}
	for _, o := range v.Orders {
		key := fmt.Sprintf("%s/%d", o.Order, o.Repeat)
		if seen[key] {
			t.Errorf("call %s twice", key)
		}
		seen[key] = true
	}
}

func TestCompareUnparseable(t *testing.T) {
	refusal := "I'm sorry, but I can't help with comparing these."
	tests := []struct {
		name   string
		answer func(a string) string // by the answer shown first
		mod    func(*Config)
		// want
		err                  error
		outcome              string
		parseFailures, calls int
		unparseable          bool
	}{
		{
			name: "garbage", answer: func(string) string { return "}}{{ 0x7f lorem" },
			err: ErrUnparseable, parseFailures: 2, calls: 2, unparseable: true,
		},
		{
			name: "refusal", answer: func(string) string { return refusal },
			err: ErrUnparseable, parseFailures: 2, calls: 2, unparseable: true,
		},
		{
			name: "refusal, pointwise", answer: func(string) string { return refusal },
			mod: func(c *Config) { c.Mode = ModePointwise },
			err: ErrUnparseable, parseFailures: 2, calls: 2, unparseable: true,
		},
		{
			name: "pointwise, baseline refused", answer: func(a string) string {
				if a == "cand" {
					return "Score: 80"
				}
				return refusal
			},
			mod: func(c *Config) { c.Mode = ModePointwise },
			err: ErrUnparseable, parseFailures: 1, calls: 2, unparseable: true,
		},
		{
			// Only the candidate-first order parses: agreement is not
			// shown, so the win it claims becomes a tie.
			name: "one order garbage", answer: func(a string) string {
				if a == "cand" {
					return "Score A: 90\nScore B: 10"
				}
				return refusal
			},
			outcome: Tie, parseFailures: 1, calls: 2,
		},
		{
			name: "one order garbage, average", answer: func(a string) string {
				if a == "cand" {
					return "Score A: 90\nScore B: 10"
				}
				return refusal
			},
			mod:     func(c *Config) { c.Combine = CombineAverage },
			outcome: Tie, parseFailures: 1, calls: 2,
		},
		{
			// Both orders parse, each preferring whichever answer came first.
			name: "no garbage, always A", answer: func(string) string { return "Score A: 90\nScore B: 10" },
			outcome: Tie, calls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeModel{answer: func(req *delegate.Request) (string, error) {
				a, _ := shown(t, req)
				return tt.answer(a), nil
			}}
			j := newJudge(t, m, tt.mod)
			v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Compare error = %v, want %v", err, tt.err)
				}
			} else if err != nil {
				t.Fatalf("Compare: %v", err)
			}
			if v.Outcome != tt.outcome || v.ParseFailures != tt.parseFailures || len(v.Orders) != tt.calls || v.Unparseable != tt.unparseable {
				t.Errorf("Outcome %q, ParseFailures %d, calls %d, Unparseable %v; want %q, %d, %d, %v",
					v.Outcome, v.ParseFailures, len(v.Orders), v.Unparseable, tt.outcome, tt.parseFailures, tt.calls, tt.unparseable)
			}
			for _, o := range v.Orders {
				if !o.Parsed && (o.ParseError == "" || o.Raw == "") {
					t.Errorf("unparsed call %s: ParseError %q, Raw %q; want both kept", o.Order, o.ParseError, o.Raw)
				}
				if !o.Parsed && (o.ScoreA != 0 || o.ScoreB != 0 || o.Candidate != 0 || o.Baseline != 0) {
					t.Errorf("unparsed call %s carries scores %+v", o.Order, o)
				}
			}
			if tt.unparseable && (v.Candidate != 0 || v.Baseline != 0 || v.Diff != 0) {
				t.Errorf("unparseable verdict has scores %v, %v, %v", v.Candidate, v.Baseline, v.Diff)
			}
		})
	}
}

func TestCompareCallErrors(t *testing.T) {
	apiErr := &delegate.APIError{Status: 503, Type: "overloaded", Model: "fake-judge", Attempts: 3}
	t.Run("all fail", func(t *testing.T) {
		m := &fakeModel{answer: func(*delegate.Request) (string, error) { return "", apiErr }}
		j := newJudge(t, m, nil)
		rec := delegate.NewRecorder("test", "req", nil)
		v, err := j.Compare(context.Background(), rec, nil, "req", "cand", "base")
		var ae *delegate.APIError
		if !errors.As(err, &ae) || ae.Status != 503 {
			t.Fatalf("Compare error = %v, want the *APIError", err)
		}
		if errors.Is(err, ErrUnparseable) || v.Unparseable || v.CallErrors != 2 || v.ParseFailures != 0 {
			t.Errorf("Unparseable %v, CallErrors %d, ParseFailures %d; want false, 2, 0", v.Unparseable, v.CallErrors, v.ParseFailures)
		}
		tr := rec.Finish("", delegate.Failure{})
		if got := tr.Roles[Role]; got.Calls != 2 || got.Errors != 2 || got.Retries != 4 {
			t.Errorf("trace judge totals %+v, want 2 calls, 2 errors, 4 retries", got)
		}
	})
	t.Run("one fails", func(t *testing.T) {
		m := &fakeModel{answer: func(req *delegate.Request) (string, error) {
			if a, _ := shown(t, req); a == "base" {
				return "", apiErr
			}
			return "Score A: 80\nScore B: 20", nil
		}}
		j := newJudge(t, m, nil)
		v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
		if err != nil {
			t.Fatalf("Compare: %v", err)
		}
		if v.Outcome != Tie || v.CallErrors != 1 || v.Paired {
			t.Errorf("Outcome %q, CallErrors %d, Paired %v; want tie, 1, false", v.Outcome, v.CallErrors, v.Paired)
		}
	})
	t.Run("panic", func(t *testing.T) {
		m := &fakeModel{answer: func(*delegate.Request) (string, error) { panic("boom") }}
		j := newJudge(t, m, nil)
		_, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
		if err == nil || !strings.Contains(err.Error(), "panicked: boom") {
			t.Errorf("Compare error = %v, want the panic", err)
		}
	})
}

func TestCompareCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &fakeModel{answer: func(*delegate.Request) (string, error) {
		cancel()
		return "Score A: 1\nScore B: 2", nil
	}}
	j := newJudge(t, m, func(c *Config) { c.Concurrency = 1; c.Repeats = 3 })
	_, err := j.Compare(ctx, nil, nil, "req", "cand", "base")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compare error = %v, want context.Canceled", err)
	}
	if len(m.reqs) != 1 {
		t.Errorf("%d model calls after cancel, want 1", len(m.reqs))
	}
}

func TestCompareConcurrency(t *testing.T) {
	tests := []struct {
		limit, repeats, wantPeak int
	}{
		{limit: 4, repeats: 2, wantPeak: 4}, // every call in flight at once
		{limit: 2, repeats: 3, wantPeak: 2}, // the bound holds
		{limit: 1, repeats: 2, wantPeak: 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			m := &fakeModel{gate: tt.wantPeak, answer: scorer(t, map[string]float64{"cand": 50, "base": 40}, 0)}
			j := newJudge(t, m, func(c *Config) { c.Concurrency = tt.limit; c.Repeats = tt.repeats })
			if _, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base"); err != nil {
				t.Fatalf("Compare: %v", err)
			}
			if m.peak != tt.wantPeak {
				t.Errorf("peak calls in flight = %d, want %d", m.peak, tt.wantPeak)
			}
		})
	}
}

func TestCompareRecordsTrace(t *testing.T) {
	m := &fakeModel{answer: scorer(t, map[string]float64{"cand": 70, "base": 50}, 0)}
	j := newJudge(t, m, func(c *Config) { c.Repeats = 2 })
	rec := delegate.NewRecorder("decompose", "req", nil)
	parent := rec.Group(nil, "score")
	v, err := j.Compare(context.Background(), rec, parent, "req", "cand", "base")
	if err != nil {
		t.Fatalf("Compare: %v", err)
	}
	rec.EndGroup(parent)
	tr := rec.Finish("answer", delegate.Failure{})

	got := tr.Roles[Role]
	if got.Calls != 4 || got.Usage.Total() != 4400 || math.Abs(got.Cost-v.Cost) > 1e-12 || got.Cost == 0 {
		t.Errorf("trace judge totals %+v, verdict cost %v; want 4 calls, 4400 tokens, equal cost", got, v.Cost)
	}
	if len(parent.Children) != 1 || parent.Children[0].Name != "judge compare" {
		t.Fatalf("parent children %v, want one judge group", parent.Children)
	}
	calls := parent.Children[0].Children
	if len(calls) != 4 {
		t.Fatalf("judge group has %d calls, want 4", len(calls))
	}
	for _, n := range calls {
		if n.Role != Role || n.Model != "fake-judge" || n.Output == nil || len(n.Messages) != 2 {
			t.Errorf("call node %q: role %q model %q output %v, %d messages", n.Name, n.Role, n.Model, n.Output, len(n.Messages))
		}
	}
}

func TestAgentRoleKept(t *testing.T) {
	m := &fakeModel{answer: scorer(t, map[string]float64{"cand": 70, "base": 50}, 0)}
	j, err := New(delegate.Agent{Role: "judge-large", Model: m}, DefaultConfig())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := delegate.NewRecorder("x", "req", nil)
	if _, err := j.Compare(context.Background(), rec, nil, "req", "cand", "base"); err != nil {
		t.Fatalf("Compare: %v", err)
	}
	if got := rec.Finish("", delegate.Failure{}).Roles["judge-large"].Calls; got != 2 {
		t.Errorf("calls under the agent's role = %d, want 2", got)
	}
}

func TestRate(t *testing.T) {
	n := 0
	var mu sync.Mutex
	m := &fakeModel{answer: func(req *delegate.Request) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if *req.Seed == 1 {
			return "no score here", nil
		}
		return fmt.Sprintf("Score: %d\nReasoning: fine.", 60+10*int(*req.Seed)), nil
	}}
	j := newJudge(t, m, func(c *Config) { c.Repeats = 3 })
	rt, err := j.Rate(context.Background(), nil, nil, "req", "the answer")
	if err != nil {
		t.Fatalf("Rate: %v", err)
	}
	// Seeds 0 and 2 parse (60, 80); seed 1 does not.
	if rt.Score != 70 || rt.ParseFailures != 1 || len(rt.Calls) != 3 {
		t.Errorf("Score %v, ParseFailures %d, %d calls; want 70, 1, 3", rt.Score, rt.ParseFailures, len(rt.Calls))
	}
	if a, _ := shown(t, m.reqs[0]); a != "the answer" {
		t.Errorf("rated answer shown as %q", a)
	}

	refuse := &fakeModel{answer: func(*delegate.Request) (string, error) { return "No.", nil }}
	rt, err = newJudge(t, refuse, nil).Rate(context.Background(), nil, nil, "req", "x")
	if !errors.Is(err, ErrUnparseable) || !rt.Unparseable {
		t.Errorf("Rate of a refusing judge: %v, Unparseable %v; want ErrUnparseable", err, rt.Unparseable)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error, "" for valid
	}{
		{"default", func(*Config) {}, ""},
		{"pointwise average", func(c *Config) { c.Mode = ModePointwise; c.Combine = CombineAverage }, ""},
		{"mode", func(c *Config) { c.Mode = "listwise" }, `mode "listwise"`},
		{"empty combine", func(c *Config) { c.Combine = "" }, `combine ""`},
		{"repeats", func(c *Config) { c.Repeats = 0 }, "repeats 0"},
		{"concurrency", func(c *Config) { c.Concurrency = -1 }, "concurrency -1"},
		{"temperature", func(c *Config) { c.Temperature = math.NaN() }, "temperature NaN"},
		{"max tokens", func(c *Config) { c.MaxTokens = -5 }, "max_tokens -5"},
		{"tie margin", func(c *Config) { c.TieMargin = 100 }, "tie_margin 100"},
		{"unknown prompt", func(c *Config) { c.Prompts = map[string]string{"pairwise": "x"} }, `prompt "pairwise": unknown key`},
		{"prompt syntax", func(c *Config) { c.Prompts = map[string]string{PromptPairwiseUser: "{{.A"} }, `prompt "pairwise_user"`},
		{"prompt field", func(c *Config) { c.Prompts = map[string]string{PromptPairwiseUser: "{{.Request}} {{.C}}"} }, "can't evaluate field C"},
		{"prompt hides answer", func(c *Config) { c.Prompts = map[string]string{PromptPairwiseUser: "{{.Request}} {{.A}}"} }, "never shows the b"},
		{"prompt override ok", func(c *Config) {
			c.Prompts = map[string]string{PromptPointwiseUser: "Q: {{.Request}}\nA: {{.Answer}}", PromptPairwiseSystem: "Judge. Score A: n, Score B: n."}
		}, ""},
		{"several", func(c *Config) { c.Mode = ""; c.Repeats = 0 }, "repeats 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mod(&cfg)
			err := cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := New(delegate.Agent{Model: &fakeModel{}}, cfg); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate error = %v, want one containing %q", err, tt.want)
			}
			if _, err := New(delegate.Agent{Model: &fakeModel{}}, cfg); err == nil {
				t.Errorf("New accepted an invalid config")
			}
		})
	}
	if _, err := New(delegate.Agent{}, DefaultConfig()); err == nil {
		t.Errorf("New accepted an agent without a model")
	}
}

// TestPromptsGolden pins the rendered prompts; run with -update after a
// deliberate change and review the diff.
func TestPromptsGolden(t *testing.T) {
	m := &fakeModel{answer: scorer(t, map[string]float64{}, 0)}
	request := "Plan a three-day trip to Rome."
	cand, base := "Day 1: the Colosseum.", "Visit Rome."
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"pairwise", nil},
		{"pointwise", func(c *Config) { c.Mode = ModePointwise }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m.reqs = nil
			j := newJudge(t, m, func(c *Config) {
				c.Concurrency = 1
				if tt.mod != nil {
					tt.mod(c)
				}
			})
			if _, err := j.Compare(context.Background(), nil, nil, request, cand, base); err != nil {
				t.Fatalf("Compare: %v", err)
			}
			var sb strings.Builder
			for i, r := range m.reqs {
				for _, msg := range r.Messages {
					fmt.Fprintf(&sb, "=== call %d, %s ===\n%s\n", i, msg.Role, msg.Content)
				}
			}
			golden(t, filepath.Join("testdata", tt.name+".golden"), sb.String())
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs; got:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestSummarize(t *testing.T) {
	pair := func(candA, baseA, candB, baseB float64) []OrderResult {
		return []OrderResult{
			{Order: CandidateFirst, Parsed: true, ScoreA: candA, ScoreB: baseA, Candidate: candA, Baseline: baseA},
			{Order: BaselineFirst, Parsed: true, ScoreA: baseB, ScoreB: candB, Candidate: candB, Baseline: baseB},
		}
	}
	vs := []Verdict{
		{Outcome: Win, Diff: 20, Paired: true, Consistent: true, Orders: pair(80, 60, 80, 60)},
		{Outcome: Tie, Diff: 0, Paired: true, Orders: pair(80, 60, 60, 80)},
		{Outcome: Tie, Diff: 0, Paired: true, Consistent: true, Orders: pair(70, 70, 70, 70)},
		{Outcome: Loss, Diff: -40, Orders: []OrderResult{{Order: CandidateFirst, Parsed: true, ScoreA: 30, ScoreB: 70}, {Order: BaselineFirst, ParseError: "x"}}},
		{Unparseable: true, Orders: []OrderResult{{Order: CandidateFirst, ParseError: "x"}, {Order: BaselineFirst, CallError: "503"}}},
	}
	got := Summarize(vs)
	want := Stats{
		Verdicts: 5, Wins: 1, Losses: 1, Ties: 2, Unparseable: 1, TieRate: 0.5,
		Paired: 3, Consistent: 2, ConsistencyRate: 2.0 / 3,
		Calls: 10, CallErrors: 1, ParseFailures: 2, ParseFailureRate: 2.0 / 9,
		// Decisive calls, A against B: 80>60, 60<80; 80>60, 80>60; 30<70.
		FirstPreferred: 3, Decisive: 5, FirstPreferenceRate: 0.6,
		MeanDiff: -20.0 / 4,
	}
	if got != want {
		t.Errorf("Summarize =\n%+v\nwant\n%+v", got, want)
	}
	if (Summarize(nil) != Stats{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", Summarize(nil))
	}
}

// cutModel answers every call with text cut at max_tokens.
type cutModel struct{ text string }

func (m cutModel) Name() string { return "cut" }

func (m cutModel) Chat(context.Context, *delegate.Request) (*delegate.Response, error) {
	return &delegate.Response{Choices: []delegate.Choice{{Message: delegate.Assistant(m.text), FinishReason: delegate.FinishLength}}}, nil
}

func TestCompareTruncatedJudge(t *testing.T) {
	t.Run("scores before the cut", func(t *testing.T) {
		j := newJudge(t, cutModel{"Score A: 70\nReasoning A: ok\nScore B: 60\nReasoning B: the answer omits"}, nil)
		v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
		if err != nil {
			t.Fatalf("Compare: %v", err)
		}
		if v.Orders[0].FinishReason != delegate.FinishLength || !v.Orders[0].Parsed {
			t.Errorf("order %+v, want parsed with finish reason length", v.Orders[0])
		}
	})
	t.Run("cut before Score B", func(t *testing.T) {
		j := newJudge(t, cutModel{"Score A: 70\nReasoning A: the first answer"}, nil)
		v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
		if !errors.Is(err, ErrUnparseable) {
			t.Fatalf("Compare error = %v, want ErrUnparseable", err)
		}
		if pe := v.Orders[0].ParseError; !strings.Contains(pe, "missing Score B") || !strings.Contains(pe, "cut at max_tokens") {
			t.Errorf("ParseError %q, want it to name the missing score and the cut", pe)
		}
	})
}

// TestSummarizeBiasedJudge runs a judge that always prefers the answer shown first.
// Over many comparisons every verdict is a tie, no verdict survives the
// swap, and the first position wins every decisive call.
func TestSummarizeBiasedJudge(t *testing.T) {
	m := &fakeModel{answer: func(*delegate.Request) (string, error) { return "Score A: 75\nScore B: 55", nil }}
	j := newJudge(t, m, func(c *Config) { c.Repeats = 2 })
	var vs []Verdict
	for i := range 10 {
		v, err := j.Compare(context.Background(), nil, nil, fmt.Sprint("request ", i), "cand", "base")
		if err != nil {
			t.Fatalf("Compare: %v", err)
		}
		vs = append(vs, v)
	}
	s := Summarize(vs)
	if s.Verdicts != 10 || s.Ties != 10 || s.TieRate != 1 || s.Paired != 10 || s.ConsistencyRate != 0 ||
		s.Calls != 40 || s.FirstPreferenceRate != 1 || s.ParseFailureRate != 0 || s.MeanDiff != 0 {
		t.Errorf("Summarize = %+v", s)
	}
}

// TestVerdictJSONGolden pins the verdict's JSON, which rollout records
// embed; run with -update after a deliberate change.
func TestVerdictJSONGolden(t *testing.T) {
	m := &fakeModel{answer: func(req *delegate.Request) (string, error) {
		if a, _ := shown(t, req); a == "cand" {
			return "Score A: 80\nReasoning A: complete.\nScore B: 60\nReasoning B: thin.", nil
		}
		return "I cannot judge this.", nil
	}}
	j := newJudge(t, m, func(c *Config) { c.Concurrency = 1 })
	v, err := j.Compare(context.Background(), nil, nil, "req", "cand", "base")
	if err != nil {
		t.Fatalf("Compare: %v", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("marshal verdict: %v", err)
	}
	golden(t, filepath.Join("testdata", "verdict.golden"), string(b)+"\n")
	var back Verdict
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal verdict: %v", err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Errorf("round trip changed the verdict:\n%+v\n%+v", back, v)
	}
}
