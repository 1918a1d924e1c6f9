package scripted

import (
	"context"
	"slices"
	"testing"

	"github.com/delegatelab/delegate/world"
)

// wantCue is the cue a step's template gives it, from the problem's
// structure. StepCues must read it from the text alone. times says the
// world's products are all "times" sentences.
func wantCue(p *world.Problem, i int, times bool) Cue {
	s := p.Steps[i]
	switch {
	case s.Part < 0 && s.Op == world.Add:
		return CueInAll
	case s.Part < 0:
		return CueMoreThan
	case s.Op == world.Mul && times:
		return CueTimes
	case s.Op == world.Mul:
		return CueOf
	case s.Op == world.Add:
		return CueGets
	}
	return CueGivesAway
}

func TestStepCues(t *testing.T) {
	times := world.Levels()[4]
	times.Times, times.MulStart = 0.5, 0 // every product a "times" sentence
	worlds := map[string]world.Config{
		"default":                    world.DefaultConfig(),
		"one quantity":               world.Levels()[world.OneQuantityLevel],
		"long, with two distractors": world.Levels()[4],
		"times and plain starts":     times,
	}
	for name, cfg := range worlds {
		t.Run(name, func(t *testing.T) {
			ps, err := world.Generate(cfg, 1, world.Train, 300)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				got := StepCues(p)
				for i := range p.Steps {
					if want := wantCue(p, i, cfg.Times > 0); got[i] != want {
						t.Fatalf("%s: step %d: got %v, want %v", p.Text, i+1, got[i], want)
					}
				}
			}
		})
	}
}

func TestKeywordRuleDecider(t *testing.T) {
	p := &world.Problem{
		Text: "Ann has 12 bags of 34 pens. Bob is 40 years old. Ann gives away 15. Bob has 21 jars of 11 pens. How many more pens does Ann have than Bob?",
		Steps: []world.Step{
			{Op: world.Mul, X: world.Operand{Ref: world.Literal, Value: 12}, Y: world.Operand{Ref: world.Literal, Value: 34}, Part: 0},
			{Op: world.Sub, X: world.Operand{Ref: 0, Value: 408}, Y: world.Operand{Ref: world.Literal, Value: 15}, Part: 0},
			{Op: world.Mul, X: world.Operand{Ref: world.Literal, Value: 21}, Y: world.Operand{Ref: world.Literal, Value: 11}, Part: 1},
			{Op: world.Sub, X: world.Operand{Ref: 1, Value: 393}, Y: world.Operand{Ref: 2, Value: 231}, Part: -1},
		},
	}
	of := uint(1) << CueOf
	tests := []struct {
		name string
		rule KeywordRule
		x, y []int64 // the operands of each step as the policy holds them
		want []bool
	}{
		{"never", KeywordRule{}, []int64{12, 408, 21, 393}, []int64{34, 15, 11, 231}, []bool{false, false, false, false}},
		{"products", KeywordRule{Cues: of}, []int64{12, 408, 21, 393}, []int64{34, 15, 11, 231}, []bool{true, false, true, false}},
		{"products of 12 or more", KeywordRule{Cues: of, MinOperand: 12}, []int64{12, 408, 21, 393}, []int64{34, 15, 11, 231}, []bool{true, false, false, false}},
		{"gives away and the difference", KeywordRule{Cues: 1<<CueGivesAway | 1<<CueMoreThan}, []int64{12, 408, 21, 393}, []int64{34, 15, 11, 231}, []bool{false, true, false, true}},
		{"difference of the held operands", KeywordRule{Cues: 1 << CueMoreThan, MinOperand: 300}, []int64{12, 408, 21, 393}, []int64{34, 15, 11, 299}, []bool{false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.rule.Decider()
			for i := range p.Steps {
				got, err := d(context.Background(), p, i, tt.x[i], tt.y[i])
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want[i] {
					t.Errorf("step %d: got %v, want %v", i+1, got, tt.want[i])
				}
			}
		})
	}
}

func TestKeywordRuleName(t *testing.T) {
	tests := []struct {
		rule KeywordRule
		want string
	}{
		{KeywordRule{}, "never delegate"},
		{KeywordRule{Cues: 1 << CueOf}, `delegate steps stated with "of"`},
		{KeywordRule{Cues: 1<<CueGets | 1<<CueInAll, MinOperand: 100}, `delegate steps stated with "gets", "in all" when both operands ≥ 100`},
	}
	for _, tt := range tests {
		if got := tt.rule.Name(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestKeywordRules(t *testing.T) {
	rules := KeywordRules()
	if got, want := len(rules), 1+63*len(Thresholds); got != want {
		t.Fatalf("got %d rules, want %d", got, want)
	}
	if rules[0] != (KeywordRule{}) {
		t.Errorf("first rule %+v, want never", rules[0])
	}
	names := map[string]bool{}
	for i, k := range rules {
		if k.Cues&1 != 0 {
			t.Errorf("rule %d delegates steps without a keyword", i)
		}
		if i > 0 && bitsOf(k.Cues) < bitsOf(rules[i-1].Cues) {
			t.Errorf("rule %d has fewer keywords than rule %d", i, i-1)
		}
		if names[k.Name()] {
			t.Errorf("two rules named %q", k.Name())
		}
		names[k.Name()] = true
	}
}

func bitsOf(m uint) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

func TestDistinct(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 1, world.Train, 200)
	if err != nil {
		t.Fatal(err)
	}
	rules := KeywordRules()
	got := Distinct(rules, ps)
	if len(got) >= len(rules) || len(got) < 2 {
		t.Fatalf("got %d distinct of %d rules", len(got), len(rules))
	}
	t.Logf("%d distinct of %d rules on %d problems", len(got), len(rules), len(ps))
	// The default world has no "times" sentence: adding the keyword
	// changes nothing, and the simpler rule stands for both.
	of, ofTimes := KeywordRule{Cues: 1 << CueOf}, KeywordRule{Cues: 1<<CueOf | 1<<CueTimes}
	if !slices.Contains(got, of) || slices.Contains(got, ofTimes) {
		t.Errorf("got %v: want %v kept and %v merged into it", got, of, ofTimes)
	}
	// Products of two 2-digit numbers: a threshold of 10 changes nothing.
	if slices.Contains(got, KeywordRule{Cues: 1 << CueOf, MinOperand: 10}) {
		t.Errorf("products with a threshold of 10 kept apart from products")
	}
}

func TestBest(t *testing.T) {
	rules := []KeywordRule{{}, {Cues: 1 << CueOf}, {Cues: 1 << CueGets}}
	tests := []struct {
		name    string
		rewards []float64
		want    KeywordRule
		ok      bool
	}{
		{"highest", []float64{0.5, 0.8, 0.7}, rules[1], true},
		{"first on a tie", []float64{0.5, 0.8, 0.8}, rules[1], true},
		{"lengths differ", []float64{0.5}, KeywordRule{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, ok := Best(rules, tt.rewards)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
