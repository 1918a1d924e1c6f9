package reward

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/judge"
)

func judged(diff float64) Outcome {
	return Outcome{FormatOK: true, Verdict: &judge.Verdict{Outcome: judge.Win, Candidate: 50 + diff/2, Baseline: 50 - diff/2, Diff: diff}}
}

func TestParityBuckets(t *testing.T) {
	const eps = 1e-9
	tests := []struct {
		diff, want float64
	}{
		{-100, -3},
		{-20 - eps, -3},
		{-20, -2}, // the reference: diff < -20 is -3, so -20 itself is -2
		{-20 + eps, -2},
		{-15, -2},
		{-10 - eps, -2},
		{-10, -1},
		{-10 + eps, -1},
		{-5, -1},
		{-eps, -1},
		{0, 0.1},
		{eps, 1},
		{5, 1},
		{10 - eps, 1},
		{10, 1}, // diff > 10 is +2, so 10 itself is +1
		{10 + eps, 2},
		{15, 2},
		{20 - eps, 2},
		{20, 2},
		{20 + eps, 3},
		{100, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.diff), func(t *testing.T) {
			if got := Parity(judged(tt.diff)); got != tt.want {
				t.Errorf("Parity(diff %v) = %v, want %v", tt.diff, got, tt.want)
			}
		})
	}
}

func TestParityPrecedence(t *testing.T) {
	unparseable := &judge.Verdict{Unparseable: true}
	win := &judge.Verdict{Outcome: judge.Win, Diff: 30}
	tests := []struct {
		name string
		o    Outcome
		want float64 // NaN for no reward
	}{
		{"plan format failure", Outcome{FormatFailure: "2 subtasks, want 3-5", FailedStage: StagePlan}, -10},
		{"format failure without stage", Outcome{FormatFailure: "no reasoning"}, -10},
		{"plan failure beats verdict", Outcome{FailedStage: StagePlan, Verdict: win}, -10},
		{"plan truncated", Outcome{FormatOK: true, Truncated: true, FailedStage: StagePlan}, -10},
		{"judge unparseable", Outcome{FormatOK: true, Verdict: unparseable}, -10},
		{"judge unparseable beats baseline failure", Outcome{FormatOK: true, BaselineFailure: "no Final Output:", Verdict: unparseable}, -10},
		{"judge unparseable beats answer failure", Outcome{FailedStage: StageAnswer, Verdict: unparseable}, -10},
		{"answer format failure", Outcome{FailedStage: StageAnswer, FormatFailure: "no Final Output:"}, 0},
		{"answer truncated", Outcome{FormatOK: true, Truncated: true, FailedStage: StageAnswer}, 0},
		{"baseline failure", Outcome{FormatOK: true, BaselineFailure: "empty", Verdict: win}, 0},
		{"baseline failure without verdict", Outcome{FormatOK: true, BaselineFailure: "empty"}, 0},
		{"win", Outcome{FormatOK: true, Verdict: win}, 3},
		{"rollout error", Outcome{FormatOK: true, Error: "sub-agent 3: status 500", Verdict: win}, math.NaN()},
		{"no verdict", Outcome{FormatOK: true}, math.NaN()},
		{"correctness only", Outcome{FormatOK: true, Correct: new(true)}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parity(tt.o)
			if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
				t.Errorf("Parity = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGradedReward(t *testing.T) {
	g := Graded{Lambda: 1e-4, CostUnit: CostTokens, Mu: 0.05, FormatPenalty: -1}
	d := Graded{Lambda: 10, CostUnit: CostDollars, Mu: 0, FormatPenalty: -1}
	tests := []struct {
		name string
		g    Graded
		o    Outcome
		want float64
	}{
		// cost = 1e-4 × 1000 + 0.05 × 4 = 0.3
		{"judge diff", g, Outcome{FormatOK: true, Tokens: 1000, Calls: 4, Verdict: &judge.Verdict{Diff: 40}}, 0.4 - 0.3},
		{"judge loss", g, Outcome{FormatOK: true, Tokens: 1000, Calls: 4, Verdict: &judge.Verdict{Diff: -100}}, -1 - 0.3},
		{"judge tie, no cost", g, Outcome{FormatOK: true, Verdict: &judge.Verdict{Diff: 0}}, 0},
		{"continuous, not bucketed", g, Outcome{FormatOK: true, Verdict: &judge.Verdict{Diff: 7.5}}, 0.075},
		{"correct", g, Outcome{FormatOK: true, Tokens: 1000, Calls: 4, Correct: new(true)}, 1 - 0.3},
		{"wrong", g, Outcome{FormatOK: true, Tokens: 1000, Calls: 4, Correct: new(false)}, -0.3},
		{"correctness beats verdict", g, Outcome{FormatOK: true, Correct: new(true), Verdict: &judge.Verdict{Diff: -50}}, 1},
		{"format failure", g, Outcome{FailedStage: StagePlan, Tokens: 1000, Calls: 0}, -1 - 0.1},
		{"answer format failure", g, Outcome{FailedStage: StageAnswer, Tokens: 1000, Calls: 4}, -1 - 0.3},
		{"truncated", g, Outcome{FormatOK: true, Truncated: true, Tokens: 1000, Calls: 4, Correct: new(true)}, -1 - 0.3},
		{"baseline failure is judged", g, Outcome{FormatOK: true, BaselineFailure: "empty", Verdict: &judge.Verdict{Diff: 60}}, 0.6},
		// cost = 10 × $0.004 = 0.04
		{"dollars", d, Outcome{FormatOK: true, Cost: 0.004, Tokens: 1e6, Calls: 9, Verdict: &judge.Verdict{Diff: 20}}, 0.2 - 0.04},
		{"error", g, Outcome{Error: "cancelled", FormatOK: true, Correct: new(true)}, math.NaN()},
		{"unparseable verdict", g, Outcome{FormatOK: true, Verdict: &judge.Verdict{Unparseable: true}}, math.NaN()},
		{"no verdict", g, Outcome{FormatOK: true}, math.NaN()},
		{"unknown unit", Graded{CostUnit: "calls"}, Outcome{FormatOK: true, Correct: new(true)}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.g.Reward(tt.o)
			if math.IsNaN(tt.want) {
				if !math.IsNaN(got) {
					t.Errorf("Reward = %v, want NaN", got)
				}
				return
			}
			if !near(got, tt.want, 1e-12) {
				t.Errorf("Reward = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGradedRange checks every reward lies in [FormatPenalty, 1], with the default settings and no cost.
// A format failure is never better than any judged or checked answer.
func TestGradedRange(t *testing.T) {
	g := DefaultGraded()
	if err := g.Validate(); err != nil {
		t.Fatalf("DefaultGraded invalid: %v", err)
	}
	fail := g.Reward(Outcome{FailedStage: StagePlan})
	for diff := -100.0; diff <= 100; diff += 0.5 {
		r := g.Reward(judged(diff))
		if r < g.FormatPenalty || r > 1 || r < fail {
			t.Fatalf("Reward(diff %v) = %v, outside [%v, 1] or below a format failure's %v", diff, r, g.FormatPenalty, fail)
		}
	}
	if w := g.Reward(Outcome{FormatOK: true, Correct: new(false)}); w <= fail {
		t.Errorf("wrong answer %v not above format failure %v", w, fail)
	}
}

// TestGatedReward checks the success-gated form on the band world's
// weights (λ 0.003 a token, μ 0.02 a call) and a gate of 2.
func TestGatedReward(t *testing.T) {
	g := Graded{Lambda: 0.003, CostUnit: CostTokens, Mu: 0.02, Gate: 2}
	tests := []struct {
		name string
		o    Outcome
		want float64
	}{
		// 416 tokens inline: 1 − 1.248.
		{"right inline", Outcome{FormatOK: true, Tokens: 416, Correct: new(true)}, 1 - 1.248},
		// 281 tokens and a call: 1 − 0.843 − 0.02.
		{"right delegated", Outcome{FormatOK: true, Tokens: 281, Calls: 1, Correct: new(true)}, 1 - 0.863},
		{"right past the gate", Outcome{FormatOK: true, Tokens: 1000, Calls: 2, Correct: new(true)}, -1},
		{"wrong and cheap", Outcome{FormatOK: true, Tokens: 5, Correct: new(false)}, -2},
		{"wrong and dear", Outcome{FormatOK: true, Tokens: 900, Calls: 3, Correct: new(false)}, -2},
		{"broken tool call", Outcome{FailedStage: StageAnswer, FormatFailure: "bad call", Tokens: 69, Calls: 1}, -2},
		{"truncated right", Outcome{FormatOK: true, Truncated: true, Tokens: 10, Correct: new(true)}, -2},
		{"judge win", Outcome{FormatOK: true, Tokens: 100, Verdict: &judge.Verdict{Diff: 40}}, 0.4 - 0.3},
		{"judge tie", Outcome{FormatOK: true, Tokens: 100, Verdict: &judge.Verdict{Diff: 0}}, -2},
		{"error", Outcome{Error: "cancelled", FormatOK: true, Correct: new(true)}, math.NaN()},
		{"no verdict", Outcome{FormatOK: true}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := g.Reward(tt.o)
			if math.IsNaN(tt.want) {
				if !math.IsNaN(got) {
					t.Errorf("Reward = %v, want NaN", got)
				}
				return
			}
			if !near(got, tt.want, 1e-12) {
				t.Errorf("Reward = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGatedLexicographic checks that under a gate every right answer
// beats every wrong or broken one, whatever either spent, and that among
// right answers below the gate the cheaper scores higher.
func TestGatedLexicographic(t *testing.T) {
	g := Graded{Lambda: 0.003, CostUnit: CostTokens, Mu: 0.02, Gate: 2}
	var worst, best float64 = math.Inf(1), math.Inf(-1)
	prev := math.Inf(1)
	for tokens := 0; tokens <= 4000; tokens += 7 {
		for calls := range 5 {
			r := g.Reward(Outcome{FormatOK: true, Tokens: tokens, Calls: calls, Correct: new(true)})
			worst = min(worst, r)
			w := g.Reward(Outcome{FormatOK: true, Tokens: tokens, Calls: calls, Correct: new(false)})
			f := g.Reward(Outcome{FailedStage: StageAnswer, Tokens: tokens, Calls: calls})
			best = max(best, w, f)
		}
		if r := g.Reward(Outcome{FormatOK: true, Tokens: tokens, Correct: new(true)}); g.Lambda*float64(tokens) < g.Gate && r >= prev {
			t.Fatalf("right at %d tokens = %v, not below %v at fewer", tokens, r, prev)
		} else {
			prev = r
		}
	}
	if worst <= best {
		t.Errorf("worst right answer %v, best wrong or broken %v: want every right above", worst, best)
	}
}

func TestGradedValidate(t *testing.T) {
	tests := []struct {
		name string
		g    Graded
		want string
	}{
		{"default", DefaultGraded(), ""},
		{"dollars", Graded{Lambda: 50, CostUnit: CostDollars, FormatPenalty: -1}, ""},
		{"negative lambda", Graded{Lambda: -1, CostUnit: CostTokens}, "lambda -1"},
		{"nan mu", Graded{Mu: math.NaN(), CostUnit: CostTokens}, "mu NaN"},
		{"unit", Graded{CostUnit: "euros"}, `cost_unit "euros"`},
		{"positive penalty", Graded{CostUnit: CostTokens, FormatPenalty: 1}, "format_penalty 1"},
		{"inf penalty", Graded{CostUnit: CostTokens, FormatPenalty: math.Inf(-1)}, "format_penalty -Inf"},
		{"gate", Graded{CostUnit: CostTokens, Gate: 2}, ""},
		{"negative gate", Graded{CostUnit: CostTokens, Gate: -1}, "gate -1"},
		{"nan gate", Graded{CostUnit: CostTokens, Gate: math.NaN()}, "gate NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNeedsJudge(t *testing.T) {
	tests := []struct {
		name string
		o    Outcome
		want bool
	}{
		{"format ok, open-ended", Outcome{FormatOK: true}, true},
		{"baseline failed", Outcome{FormatOK: true, BaselineFailure: "empty"}, true},
		{"plan format failure", Outcome{FailedStage: StagePlan}, false},
		{"answer format failure", Outcome{FailedStage: StageAnswer}, false},
		{"truncated", Outcome{FormatOK: true, Truncated: true}, false},
		{"dataset answer", Outcome{FormatOK: true, Correct: new(false)}, false},
		{"error", Outcome{FormatOK: true, Error: "boom"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsJudge(tt.o); got != tt.want {
				t.Errorf("NeedsJudge = %v, want %v", got, tt.want)
			}
			// Whenever no judge is needed, both rewards are fixed without
			// a verdict (or have no basis at all).
			if !tt.want {
				g := DefaultGraded()
				for _, v := range []*judge.Verdict{{Diff: 80}, {Diff: -80}, {Unparseable: true}} {
					o := tt.o
					o.Verdict = v
					same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
					if !same(g.Reward(o), g.Reward(tt.o)) {
						t.Errorf("Graded reward changed with verdict %+v: %v vs %v", v, g.Reward(o), g.Reward(tt.o))
					}
					if !v.Unparseable && tt.o.Correct == nil && !same(Parity(o), Parity(tt.o)) {
						t.Errorf("Parity changed with verdict %+v: %v vs %v", v, Parity(o), Parity(tt.o))
					}
				}
			}
		})
	}
}
