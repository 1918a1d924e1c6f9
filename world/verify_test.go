package world

import (
	"errors"
	"math"
	"testing"

	"github.com/delegatelab/delegate"
)

func TestParseAnswer(t *testing.T) {
	tests := []struct {
		text string
		want int64
		ok   bool
	}{
		{`6179` + "\n" + `\boxed{9716}`, 9716, true},
		{`\boxed{1} then \boxed{ 2 }`, 2, true},
		{`\boxed{-42}`, -42, true},
		{`\boxed{1,000}`, 1000, true},
		{`\boxed{12.}`, 12, true},
		{`\boxed{2.5}`, 0, false},
		{`\boxed{x}`, 0, false},
		{`<answer>17</answer>`, 17, true},
		{"steps\nFinal Output: 996", 996, true},
		{"Final answer: -3", -3, true},
		{"Final Output: about 5", 0, false},
		{"the sum is 12 and then 34", 34, true},
		{"a1b", 0, false},
		{"", 0, false},
		{`\boxed{99999999999999999999}`, 0, false},
	}
	for _, tt := range tests {
		got, err := ParseAnswer(tt.text)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseAnswer(%q) = %d, %v; want %d, ok %v", tt.text, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrNoAnswer) {
			t.Errorf("ParseAnswer(%q) error %v does not wrap ErrNoAnswer", tt.text, err)
		}
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`\boxed{9716}`, `<answer>1</answer>`, "Final Output: 3", "12 34", `\boxed{\boxed{1}`, "-0", "1,00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseAnswer(s)
		if err != nil && v != 0 {
			t.Errorf("ParseAnswer(%q) = %d with error %v", s, v, err)
		}
		if err == nil && Correct(s, v) != true {
			t.Errorf("Correct(%q, %d) = false after ParseAnswer gave it", s, v)
		}
	})
}

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{"347*28", "1+2", "10-3", "*", "1*", "-5+3", "12345678901*2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, x, y, err := ParseExpr(s)
		if err != nil {
			return
		}
		if got := Expr(op, x, y); got != s && !leadingZeros(s) && (op == Mul || len(s) == 2*Width+1) {
			t.Errorf("Expr(ParseExpr(%q)) = %q", s, got)
		}
	})
}

// leadingZeros reports whether s has a number written with a leading 0,
// which Expr does not reproduce.
func leadingZeros(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '0' && (i == 0 || s[i-1] < '0' || s[i-1] > '9') && s[i+1] >= '0' && s[i+1] <= '9' {
			return true
		}
	}
	return false
}

func TestRewardAndCost(t *testing.T) {
	r := DefaultReward()
	a := Account{Delegator: delegate.Usage{CompletionTokens: 200}, SubagentCalls: 2}
	if got, want := RewardOf(r, true, a), 1-0.2-0.04; math.Abs(got-want) > 1e-12 {
		t.Errorf("RewardOf(true) = %v, want %v", got, want)
	}
	if got, want := RewardOf(r, false, a), -0.24; math.Abs(got-want) > 1e-12 {
		t.Errorf("RewardOf(false) = %v, want %v", got, want)
	}
	prices := Prices{Delegator: delegate.Price{Input: 1, Output: 5}, Solver: delegate.Price{Input: 0.2, Output: 1}}
	b := Account{Delegator: delegate.Usage{PromptTokens: 1e6, CompletionTokens: 1e6}, Solver: delegate.Usage{CompletionTokens: 1e6}}
	if got, want := b.Cost(prices), 7.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("Cost = %v, want %v", got, want)
	}
}

func TestVerify(t *testing.T) {
	task := delegate.Task{ID: "w", Dataset: "world", Answer: "1329"}
	tests := []struct {
		response  string
		want      bool
		extracted string
	}{
		{"Final answer: \\boxed{1329}", true, "1329"},
		{"It is 1,329.", true, "1329"},
		{"Final answer: 1328", false, "1328"},
		{"no idea", false, ""},
	}
	for _, tt := range tests {
		got, err := Verify(task, tt.response)
		if err != nil || got.Correct != tt.want || got.Extracted != tt.extracted || got.Found != (tt.extracted != "") {
			t.Errorf("Verify(%q) = %+v, %v; want correct %v, extracted %q, nil", tt.response, got, err, tt.want, tt.extracted)
		}
	}
	if _, err := Verify(delegate.Task{ID: "w", Answer: "many"}, "1"); err == nil {
		t.Error("a reference that is not an integer: no error")
	}
}

func TestProblemTaskVerifies(t *testing.T) {
	p := &Problem{ID: "p1", Text: "Ann has 3 boxes of 4 pens. How many pens?", Answer: -12}
	task := p.Task()
	if task.Dataset != Dataset || task.Prompt != p.Text || task.ID != p.ID {
		t.Fatalf("Task() = %+v", task)
	}
	if v, err := Verify(task, `\boxed{-12}`); err != nil || !v.Correct {
		t.Errorf("Verify(Task(), the answer) = %+v, %v; want correct", v, err)
	}
}
