package world

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var number = regexp.MustCompile(`\d+`)

// numbersIn returns the set of numbers written in text.
func numbersIn(text string) map[int64]bool {
	m := map[int64]bool{}
	for _, s := range number.FindAllString(text, -1) {
		v, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			m[v] = true
		}
	}
	return m
}

func TestGenerateDeterministic(t *testing.T) {
	for lvl, cfg := range Levels() {
		a, err := Generate(cfg, 42, Train, 200)
		if err != nil {
			t.Fatalf("level %d: %v", lvl, err)
		}
		b, err := Generate(cfg, 42, Train, 200)
		if err != nil {
			t.Fatalf("level %d: %v", lvl, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("level %d: two runs with seed 42 differ", lvl)
		}
		c, err := Generate(cfg, 43, Train, 200)
		if err != nil {
			t.Fatalf("level %d: %v", lvl, err)
		}
		if reflect.DeepEqual(a, c) {
			t.Errorf("level %d: seeds 42 and 43 give the same problems", lvl)
		}
	}
}

func TestSplitsDisjoint(t *testing.T) {
	cfg := Levels()[1] // the smallest world, where collisions would show first
	train, err := Generate(cfg, 1, Train, 3000)
	if err != nil {
		t.Fatal(err)
	}
	test, err := Generate(cfg, 1, Test, 1000)
	if err != nil {
		t.Fatal(err)
	}
	inTrain := map[string]bool{}
	for _, p := range train {
		if p.Split != Train || SplitOf(p.Text, cfg.TestPermille) != Train {
			t.Fatalf("training problem %q has split %v", p.Text, p.Split)
		}
		inTrain[p.Text] = true
	}
	for _, p := range test {
		if p.Split != Test || SplitOf(p.Text, cfg.TestPermille) != Test {
			t.Fatalf("test problem %q has split %v", p.Text, p.Split)
		}
		if inTrain[p.Text] {
			t.Fatalf("test problem %q is also a training problem", p.Text)
		}
	}
	// Another seed's training set never meets this test set either.
	other, err := Generate(cfg, 99, Train, 3000)
	if err != nil {
		t.Fatal(err)
	}
	inTest := map[string]bool{}
	for _, p := range test {
		inTest[p.Text] = true
	}
	for _, p := range other {
		if inTest[p.Text] {
			t.Fatalf("seed 99 training problem %q is in the test set", p.Text)
		}
	}
}

// TestProblemsConsistent checks each generated solution against its text.
// Refs point back, results are exact, literals are in the text, parts are
// independent, and Answer is the last result.
func TestProblemsConsistent(t *testing.T) {
	for lvl, cfg := range Levels() {
		ps, err := Generate(cfg, 7, Train, 500)
		if err != nil {
			t.Fatalf("level %d: %v", lvl, err)
		}
		ids := map[string]bool{}
		for _, p := range ps {
			if ids[p.ID] {
				t.Fatalf("level %d: duplicate problem %q", lvl, p.Text)
			}
			ids[p.ID] = true
			if n := len(p.Steps); n < cfg.MinSteps || n > cfg.MaxSteps {
				t.Errorf("level %d: %q has %d steps, want %d..%d", lvl, p.Text, n, cfg.MinSteps, cfg.MaxSteps)
			}
			for i, s := range p.Steps {
				for _, o := range []Operand{s.X, s.Y} {
					switch {
					case o.Ref == Literal:
						if !numbersIn(p.Text)[o.Value] {
							t.Errorf("level %d: literal %d of step %d not in %q", lvl, o.Value, i, p.Text)
						}
					case o.Ref >= i || o.Ref < 0:
						t.Errorf("level %d: step %d of %q refers to step %d", lvl, i, p.Text, o.Ref)
					case p.Steps[o.Ref].Result != o.Value:
						t.Errorf("level %d: step %d of %q uses %d from step %d, which made %d", lvl, i, p.Text, o.Value, o.Ref, p.Steps[o.Ref].Result)
					}
				}
				if s.Result != s.Op.Apply(s.X.Value, s.Y.Value) || s.Result < 0 {
					t.Errorf("level %d: step %s = %d in %q", lvl, s.Expr(), s.Result, p.Text)
				}
				if _, _, err := Scratchpad(s.Op, s.X.Value, s.Y.Value); err != nil {
					t.Errorf("level %d: %v", lvl, err)
				}
			}
			for i := range p.Steps {
				for j := range p.Steps {
					pi, pj := p.Steps[i].Part, p.Steps[j].Part
					if pi >= 0 && pj >= 0 && pi != pj && !p.Independent(i, j) {
						t.Errorf("level %d: steps %d and %d of different parts depend on each other in %q", lvl, i, j, p.Text)
					}
				}
			}
			if last := p.Steps[len(p.Steps)-1]; p.Answer != last.Result {
				t.Errorf("level %d: answer %d, last step made %d", lvl, p.Answer, last.Result)
			}
			if want := "?"; !strings.HasSuffix(p.Text, want) {
				t.Errorf("level %d: %q does not end with a question", lvl, p.Text)
			}
		}
	}
}

func TestParallelPartsAppear(t *testing.T) {
	cfg := Levels()[3]
	cfg.Parallel = 0.8
	ps, err := Generate(cfg, 5, Train, 300)
	if err != nil {
		t.Fatal(err)
	}
	parallel := 0
	for _, p := range ps {
		if p.Steps[len(p.Steps)-1].Part == -1 {
			parallel++
			if !p.Independent(0, len(p.Steps)-2) {
				t.Errorf("the two parts of %q are not independent", p.Text)
			}
		}
	}
	if parallel < 100 || parallel > 290 {
		t.Errorf("%d of 300 problems have two parts, want about 80%% of those with 3 steps", parallel)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		key  string
	}{
		{"steps", func(c *Config) { c.MinSteps = 0 }, "min_steps"},
		{"max below min", func(c *Config) { c.MinSteps, c.MaxSteps = 2, 1 }, "max_steps"},
		{"parallel", func(c *Config) { c.Parallel = 1.5 }, "parallel"},
		{"mul sizes", func(c *Config) { c.MulSizes = nil }, "mul_sizes"},
		{"mul size digits", func(c *Config) { c.MulSizes[0].Y = 9 }, "mul_sizes[0]"},
		{"add digits", func(c *Config) { c.AddDigits = [2]int{3, 2} }, "add_digits"},
		{"distractors", func(c *Config) { c.Distractors = -1 }, "distractors"},
		{"test share", func(c *Config) { c.TestPermille = 0 }, "test_permille"},
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.MulSizes = append([]MulSize(nil), c.MulSizes...)
			tt.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.key+":") {
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.key)
			}
			if _, gerr := NewGenerator(c, 1, Train); gerr == nil {
				t.Errorf("NewGenerator accepted an invalid config")
			}
		})
	}
}

func TestDistinctCountsGrowWithLevel(t *testing.T) {
	small, _, err := Distinct(Levels()[1], 3, 2000)
	if err != nil {
		t.Fatal(err)
	}
	big, _, err := Distinct(Levels()[3], 3, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if small <= 2000 || big < small {
		t.Errorf("distinct estimates: level 1 %v, level 3 %v; want more than the sample and growing", small, big)
	}
}

func TestConfigSummary(t *testing.T) {
	l2 := Levels()[2]
	l2.Distractors = MLPODistractors
	for _, tt := range []struct {
		c    Config
		want string
	}{
		{l2, "2 steps, products of 2x2 digits, amounts of 2 digits, up to 4 distractors"},
		{DefaultConfig(), "3-4 steps, two parts, products of 2x2 digits, amounts of 2 digits, up to 1 distractor"},
		{Levels()[4], "4-6 steps, two parts, products of 2x2 digits, amounts of 2 digits, up to 2 distractors"},
		{Levels()[OneQuantityLevel], "1-3 steps, products of 2x2 digits, amounts of 2 digits, up to 1 distractor"},
		{Config{MinSteps: 2, MaxSteps: 4, Parallel: 0.5, AddDigits: [2]int{2, 2}}, "2-4 steps, two parts in 50% of those of 3 or more, amounts of 2 digits, no distractors"},
		{Config{MinSteps: 1, MaxSteps: 2, Times: 0.25, AddDigits: [2]int{1, 3}}, `1-2 steps, amounts of 1-3 digits, "times as many" in 25% of later steps, no distractors`},
	} {
		if got := tt.c.Summary(); got != tt.want {
			t.Errorf("Summary() = %q\nwant        %q", got, tt.want)
		}
	}
}

// TestDistinctPerLevel estimates how many distinct problems each level
// draws, the counts docs/world.md gives. Each must exceed the sample, so
// training sets barely repeat. Print them with
//
//	go test ./world -run TestDistinctPerLevel -v
func TestDistinctPerLevel(t *testing.T) {
	for lvl := 1; lvl <= len(Levels()); lvl++ {
		est, ok, err := Distinct(Levels()[lvl], 7, 20000)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("level %d: distinct problems ~%s (%s)", lvl, sigFigs(est), map[bool]string{true: "capture-recapture estimate", false: "no repeat in two samples: a lower bound"}[ok])
		if est <= 20000 {
			t.Errorf("level %d: about %v distinct problems, want more than a sample of 20000", lvl, est)
		}
	}
}

// sigFigs formats v with two significant figures, for the doc's counts.
func sigFigs(v float64) string {
	if v <= 0 {
		return "0"
	}
	e := math.Floor(math.Log10(v))
	return strings.TrimSuffix(fmt.Sprintf("%.1fe%d", v/math.Pow(10, e), int(e)), "e0")
}
