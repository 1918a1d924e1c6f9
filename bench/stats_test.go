package bench

import (
	"math"
	"slices"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Reference intervals from Newcombe 1998, "Two-sided confidence intervals for the single proportion".
// They are Table I, method 3: the score interval without continuity correction, given to 4 decimals.
func TestWilson(t *testing.T) {
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
		{29, 29, 0.8830, 1},
		{30, 40, 0.5981, 0.8581}, // by hand: center 0.72814, half 0.13003
	}
	for _, tt := range tests {
		got, ok := Wilson(tt.k, tt.n)
		if !ok {
			t.Errorf("Wilson(%d, %d): not ok", tt.k, tt.n)
			continue
		}
		if !near(got.Lo, tt.lo, 5e-5) || !near(got.Hi, tt.hi, 5e-5) {
			t.Errorf("Wilson(%d, %d) = [%.5f, %.5f], want [%.4f, %.4f]", tt.k, tt.n, got.Lo, got.Hi, tt.lo, tt.hi)
		}
	}
	for _, bad := range [][2]int{{0, 0}, {3, 2}, {-1, 5}} {
		if _, ok := Wilson(bad[0], bad[1]); ok {
			t.Errorf("Wilson(%d, %d): ok, want no interval", bad[0], bad[1])
		}
	}
}

func TestMcNemar(t *testing.T) {
	tests := []struct {
		name   string
		b, c   int
		p      float64
		method string
	}{
		// Exact: p = 2 * sum_{i<=min} C(n,i) / 2^n.
		{"no discordant pair", 0, 0, 1, McNemarExact},
		{"1 vs 6", 1, 6, 2 * 8.0 / 128, McNemarExact},
		{"5 vs 2", 5, 2, 2 * 29.0 / 128, McNemarExact},
		{"0 vs 10", 0, 10, 2.0 / 1024, McNemarExact},
		{"balanced is capped at 1", 3, 3, 1, McNemarExact},
		{"24 pairs still exact", 12, 12, 1, McNemarExact},
		// Chi-square: (|b-c|-1)^2/(b+c), P(chi2_1 >= x) = erfc(sqrt(x/2)).
		{"25 pairs use chi-square", 13, 12, 1, McNemarChiSquare},                 // (1-1)^2/25 = 0
		{"25 vs 2", 25, 2, 2.2967108733407425e-05, McNemarChiSquare},             // 484/27 = 17.9259
		{"textbook 121 vs 59", 121, 59, 5.450094825427123e-06, McNemarChiSquare}, // 61^2/180 = 20.672
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := McNemarTest(tt.b, tt.c)
			if got.Method != tt.method {
				t.Errorf("method = %s, want %s", got.Method, tt.method)
			}
			if !near(got.P, tt.p, 1e-12) {
				t.Errorf("p = %.15g, want %.15g", got.P, tt.p)
			}
			if got.B != tt.b || got.C != tt.c {
				t.Errorf("b, c = %d, %d, want %d, %d", got.B, got.C, tt.b, tt.c)
			}
		})
	}
}

func TestChiSquareSurvival(t *testing.T) {
	// Critical values of chi-square with 1 df from any table.
	tests := []struct{ x, p float64 }{
		{3.841458820694124, 0.05},
		{6.634896601021214, 0.01},
		{10.827566170662733, 0.001},
		{0, 1},
	}
	for _, tt := range tests {
		if got := chiSquare1Survival(tt.x); !near(got, tt.p, 1e-12) {
			t.Errorf("chiSquare1Survival(%v) = %.15g, want %v", tt.x, got, tt.p)
		}
	}
}

func TestBinomialCDFHalf(t *testing.T) {
	tests := []struct {
		k, n int
		want float64
	}{
		{20, 60, 0.00674464686559593}, // sum C(60,i), i<=20, over 2^60
		{1, 7, 8.0 / 128},
		{-1, 7, 0},
		{7, 7, 1},
		{0, 1000, math.Pow(0.5, 1000)},
		// The log-gamma path, against exact rational sums.
		{1100, 2000, 0.99999657191642},
		{900, 2000, 4.228544767751963e-06},
	}
	for _, tt := range tests {
		// Relative 1e-9: log-gamma near 2000 carries ~1e-12 relative error
		// in a value of ~1e4, exponentiated.
		if got := binomialCDFHalf(tt.k, tt.n); !near(got, tt.want, 1e-9*tt.want+1e-300) {
			t.Errorf("binomialCDFHalf(%d, %d) = %.15g, want %.15g", tt.k, tt.n, got, tt.want)
		}
	}
}

func TestQuantile(t *testing.T) {
	ten := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"median of 1..10", ten, 0.5, 5.5},
		{"p95 of 1..10", ten, 0.95, 9.55}, // rank 0.95*9 = 8.55: 9 + 0.55*(10-9)
		{"min", ten, 0, 1},
		{"max", ten, 1, 10},
		{"one value", []float64{3}, 0.95, 3},
		{"median of odd count", []float64{5, 1, 3}, 0.5, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.xs)
			got, ok := Quantile(tt.xs, tt.q)
			if !ok || !near(got, tt.want, 1e-12) {
				t.Errorf("Quantile = %v, %v, want %v, true", got, ok, tt.want)
			}
			if !slices.Equal(tt.xs, before) {
				t.Errorf("Quantile changed its input: %v, want %v", tt.xs, before)
			}
		})
	}
	if _, ok := Quantile(nil, 0.5); ok {
		t.Error("Quantile(nil): ok, want false")
	}
	if _, ok := Quantile(ten, 1.5); ok {
		t.Error("Quantile(q = 1.5): ok, want false")
	}
}

func TestPGR(t *testing.T) {
	got, ok := PGR(0.875, 0.725, 0.9)
	if want := 0.15 / 0.175; !ok || !near(got, want, 1e-12) {
		t.Errorf("PGR = %v, %v, want %v, true", got, ok, want)
	}
	if _, ok := PGR(0.8, 0.7, 0.7); ok {
		t.Error("PGR with equal weak and strong: ok, want false")
	}
}

func TestCells(t *testing.T) {
	tests := []struct{ got, want string }{
		{dollarsCell(0.0013), "$0.001300"},
		{dollarsCell(3.16875e-05), "$0.00003169"},
		{dollarsCell(0.000689), "$0.0006890"},
		{dollarsCell(0), "$0.000000"},
		{dollarsCell(math.NaN()), "n/a"},
		{secondsCell(2.1), "2.10 s"},
		{secondsCell(0.4), "400.0 ms"},
		{secondsCell(7.4e-6), "7.4 µs"},
		{secondsCell(math.Inf(1)), "n/a"},
		{pValue(2.2967e-05), "2.3e-05"},
		{pValue(0.125), "0.1250"},
		{pValue(math.NaN()), "n/a"},
		{percentCI(0.725, Interval{0.5716, 0.8389}), "72.5 [57.2, 83.9]"},
		{percentCI(math.NaN(), Interval{}), "n/a"},
		{fixed(math.NaN(), 3), "n/a"},
		{full(math.Inf(-1)), "n/a"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// Hand-worked cases of the paired Wald bound. 3 and 3 discordant of 100:
// d = 0, s² = 6/99, bound −1.645·√(6/99/100) = −0.04049. 8 against 2:
// d = −0.06, s² = (10 − 0.36)/99, bound −0.06 − 1.645·0.03121 = −0.11133.
func TestNonInferiorityTest(t *testing.T) {
	tests := []struct {
		name        string
		b, c, n     int
		margin      float64
		diff, low   float64
		nonInferior bool
	}{
		{"even swaps within 5 points", 3, 3, 100, 0.05, 0, -0.04049, true},
		{"even swaps outside 4 points", 3, 3, 100, 0.04, 0, -0.04049, false},
		{"six more lost than won", 8, 2, 100, 0.05, -0.06, -0.11133, false},
		{"no discordant pair", 0, 0, 50, 0.05, 0, 0, true},
		{"more won than lost", 1, 9, 100, 0.05, 0.08, 0.02942, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NonInferiorityTest(tt.b, tt.c, tt.n, tt.margin)
			if !ok {
				t.Fatal("not ok")
			}
			if !near(got.Diff, tt.diff, 1e-12) || !near(got.Lower, tt.low, 5e-5) || got.NonInferior != tt.nonInferior {
				t.Errorf("got diff %.5f lower %.5f non-inferior %v, want %.5f %.5f %v", got.Diff, got.Lower, got.NonInferior, tt.diff, tt.low, tt.nonInferior)
			}
		})
	}
	for _, bad := range [][3]int{{0, 0, 0}, {-1, 2, 10}, {6, 6, 10}} {
		if _, ok := NonInferiorityTest(bad[0], bad[1], bad[2], 0.05); ok {
			t.Errorf("NonInferiorityTest(%d, %d, %d): ok, want none", bad[0], bad[1], bad[2])
		}
	}
}
