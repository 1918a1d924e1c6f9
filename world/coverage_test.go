package world

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCoverageCovers(t *testing.T) {
	digits := DigitsCoverage()
	tests := []struct {
		cov  Coverage
		op   Op
		x, y int64
		want bool
	}{
		{Coverage{}, Mul, 58, 83, true},
		{Coverage{}, Mul, 123, 45, false},
		{Coverage{}, Add, 4814, 88, true},
		{Coverage{}, Sub, 4902, 2960, false},
		{digits, Mul, 49, 99, true},
		{digits, Mul, 50, 11, false},
		{digits, Mul, 58, 83, false},
		{digits, Mul, 83, 8, false},
		{digits, Mul, 12, 7, true},
		{BandCoverage(), Mul, 29, 50, false},
		{BandCoverage(), Mul, 30, 99, true},
		{BandCoverage(), Mul, 69, 11, true},
		{BandCoverage(), Mul, 70, 11, false},
		{BandCoverage(), Add, 4814, 88, true},
		{BandCoverage(), Sub, 4902, 2960, false},
		{digits, Add, 4814, 88, true},
		{digits, Sub, 4902, 2960, false},
	}
	for _, tt := range tests {
		if got := tt.cov.Covers(tt.op, tt.x, tt.y); got != tt.want {
			t.Errorf("%+v covers %s: got %v, want %v", tt.cov, Expr(tt.op, tt.x, tt.y), got, tt.want)
		}
	}
}

func TestCoverageValidate(t *testing.T) {
	tests := []struct {
		cov  Coverage
		want string // "" for valid
	}{
		{Coverage{}, ""},
		{DigitsCoverage(), ""},
		{Coverage{MulFirstBelow: 10}, "mul_first_below 10"},
		{Coverage{MulFirstBelow: 100}, "mul_first_below 100"},
		{Coverage{MulFirstBelow: -3}, "mul_first_below -3"},
		{BandCoverage(), ""},
		{Coverage{MulFirstFrom: 10}, "mul_first_from 10"},
		{Coverage{MulFirstFrom: 60, MulFirstBelow: 40}, "mul_first_from 60, want below mul_first_below 40"},
	}
	for _, tt := range tests {
		err := tt.cov.Validate()
		if got := err != nil; got != (tt.want != "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v.Validate() = %v, want error containing %q", tt.cov, err, tt.want)
		}
	}
}

// TestCoverageQuestion checks that a narrowed class draws inside or
// outside the coverage as asked. The zero Coverage must draw what
// SolverSize.Question draws.
func TestCoverageQuestion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cov := range []Coverage{DigitsCoverage(), BandCoverage()} {
		for _, sz := range SolverSizes(true) {
			if got, want := cov.Narrows(sz), sz.Op == Mul; got != want {
				t.Errorf("%+v narrows %v: got %v, want %v", cov, sz, got, want)
			}
			if (Coverage{}).Narrows(sz) {
				t.Errorf("the zero coverage narrows %v", sz)
			}
			for _, in := range []bool{true, false} {
				if !in && !cov.Narrows(sz) {
					continue
				}
				for range 50 {
					x, y := cov.Question(sz, rng, in)
					if got := cov.Covers(sz.Op, x, y); got != in {
						t.Fatalf("%+v: %v drew %s, covered %v, want %v", cov, sz, Expr(sz.Op, x, y), got, in)
					}
				}
			}
		}
	}
	a, b := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4))
	for _, sz := range SolverSizes(true) {
		x1, y1 := (Coverage{}).Question(sz, a, true)
		x2, y2 := sz.Question(b)
		if x1 != x2 || y1 != y2 {
			t.Errorf("%v: zero coverage drew %d, %d, SolverSize.Question %d, %d", sz, x1, y1, x2, y2)
		}
	}
}

func TestNamed(t *testing.T) {
	for _, name := range WorldNames {
		cfg, cov, err := Named(name)
		if err != nil {
			t.Fatalf("Named(%q): %v", name, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("world %q config: %v", name, err)
		}
		if err := cov.Validate(); err != nil {
			t.Errorf("world %q coverage: %v", name, err)
		}
	}
	if _, cov, _ := Named("default"); cov != (Coverage{}) {
		t.Errorf("default world's coverage %+v, want the zero one", cov)
	}
	if _, cov, _ := Named("digits"); cov != DigitsCoverage() {
		t.Errorf("digits world's coverage %+v, want %+v", cov, DigitsCoverage())
	}
	if _, cov, _ := Named("band"); cov != BandCoverage() {
		t.Errorf("band world's coverage %+v, want %+v", cov, BandCoverage())
	}
	for _, tt := range []struct {
		name string
		want float64
	}{{"default", 0.001}, {"digits", 0.001}, {"band", BandLambda}} {
		if got := NamedReward(tt.name); got.Lambda != tt.want || got.Mu != DefaultReward().Mu {
			t.Errorf("NamedReward(%q) = %+v, want λ %v and the default μ", tt.name, got, tt.want)
		}
	}
	if _, _, err := Named("nowhere"); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("Named(nowhere): %v, want an error naming it", err)
	}
}

func TestWorldReward(t *testing.T) {
	band := NamedReward("band")
	for _, tt := range []struct {
		kind string
		gate float64
		err  string
	}{{"", 0, ""}, {RewardGraded, 0, ""}, {RewardGated, DefaultGate, ""}, {"lenient", 0, `"lenient"`}} {
		t.Run(tt.kind, func(t *testing.T) {
			got, err := WorldReward(band, tt.kind)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("WorldReward(%q) error = %v, want one naming %s", tt.kind, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("WorldReward(%q): %v", tt.kind, err)
			}
			want := band
			want.Gate = tt.gate
			if got != want {
				t.Errorf("WorldReward(%q) = %+v, want %+v", tt.kind, got, want)
			}
		})
	}
	// Every named world's own reward stays ungated.
	for _, name := range WorldNames {
		if g := NamedReward(name); g.Gate != 0 {
			t.Errorf("NamedReward(%q).Gate = %v, want 0", name, g.Gate)
		}
	}
}

// TestKindOf reads the kinds of the package doc's example from its
// generated twin. They are a product, an amount got, a second product and
// the parts' difference.
func TestKindOf(t *testing.T) {
	p := &Problem{Steps: []Step{
		{Op: Mul, X: Operand{Literal, 58}, Y: Operand{Literal, 83}, Part: 0},
		{Op: Add, X: Operand{0, 4814}, Y: Operand{Literal, 88}, Part: 0},
		{Op: Mul, X: Operand{Literal, 74}, Y: Operand{Literal, 40}, Part: 1},
		{Op: Sub, X: Operand{1, 4902}, Y: Operand{2, 2960}, Part: -1},
	}}
	want := []StepKind{FirstProduct, AmountGot, LaterProduct, PartsDifference}
	for i, w := range want {
		if got := KindOf(p, i); got != w {
			t.Errorf("step %d: kind %v, want %v", i+1, got, w)
		}
	}
	q := &Problem{Steps: []Step{
		{Op: Mul, X: Operand{Literal, 12}, Y: Operand{Literal, 30}, Part: 0},
		{Op: Sub, X: Operand{0, 360}, Y: Operand{Literal, 45}, Part: 0},
		{Op: Mul, X: Operand{1, 315}, Y: Operand{Literal, 3}, Part: 0},
		{Op: Mul, X: Operand{Literal, 20}, Y: Operand{Literal, 20}, Part: 1},
		{Op: Add, X: Operand{2, 945}, Y: Operand{3, 400}, Part: -1},
	}}
	want = []StepKind{FirstProduct, AmountGiven, TimesAsMany, LaterProduct, PartsSum}
	for i, w := range want {
		if got := KindOf(q, i); got != w {
			t.Errorf("second problem, step %d: kind %v, want %v", i+1, got, w)
		}
	}
	products := KindRule(1<<FirstProduct | 1<<LaterProduct)
	for i, w := range []bool{true, false, true, false} {
		if got := products(p, i); got != w {
			t.Errorf("products rule on step %d: got %v, want %v", i+1, got, w)
		}
	}
	if got, want := KindRuleName(1<<FirstProduct|1<<PartsSum), "delegate first product, in all"; got != want {
		t.Errorf("KindRuleName: got %q, want %q", got, want)
	}
	if got, want := KindRuleName(0), "never delegate"; got != want {
		t.Errorf("KindRuleName(0): got %q, want %q", got, want)
	}
}

// TestFirstFactorBelow checks that the threshold rule at 50 is the
// digits world's Selective policy on generated problems.
func TestFirstFactorBelow(t *testing.T) {
	ps, err := Generate(DefaultConfig(), 5, Validation, 300)
	if err != nil {
		t.Fatal(err)
	}
	rule, digits := FirstFactorBelow(50), DigitsCoverage()
	var yes int
	for _, p := range ps {
		for i := range p.Steps {
			got, want := rule(p, i), digits.Selective(p, i)
			if got != want {
				t.Fatalf("%q step %d (%s): threshold %v, selective %v", p.Text, i+1, p.Steps[i].Expr(), got, want)
			}
			if got {
				yes++
			}
		}
	}
	if yes == 0 {
		t.Error("the threshold rule delegated nothing on 300 problems")
	}
}
