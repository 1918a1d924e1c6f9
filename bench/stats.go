package bench

import (
	"math"
	"math/rand/v2"
	"sort"
)

// z95 is the 0.975 quantile of the standard normal distribution, the z of
// a two-sided 95% interval.
const z95 = 1.959963984540054

// Interval is a confidence interval [Lo, Hi].
type Interval struct {
	Lo, Hi float64
}

// Wilson returns the Wilson score 95% interval of a proportion with k
// successes in n trials. It stays inside [0, 1] and is sensible at k = 0
// and k = n, where Wald's normal interval collapses to a point.
// ok is false when n is 0, where no interval exists, or k is outside [0, n].
func Wilson(k, n int) (iv Interval, ok bool) {
	if n <= 0 || k < 0 || k > n {
		return Interval{}, false
	}
	fn := float64(n)
	p := float64(k) / fn
	z2 := z95 * z95
	denom := 1 + z2/fn
	center := (p + z2/(2*fn)) / denom
	half := z95 / denom * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
	lo, hi := center-half, center+half
	// Rounding can push the bounds a hair past what is true at k = 0 and k = n.
	if k == 0 || lo < 0 {
		lo = 0
	}
	if k == n || hi > 1 {
		hi = 1
	}
	return Interval{lo, hi}, true
}

// McNemar methods.
const (
	McNemarExact      = "exact"  // two-sided exact binomial test on the discordant pairs
	McNemarChiSquare  = "chi2cc" // chi-square with 1 df and Yates' continuity correction
	mcNemarExactBelow = 25       // discordant pairs under which the exact test is used
)

// McNemar is a paired test of two arms' correctness on the same items.
type McNemar struct {
	// B counts items the baseline got right and the arm wrong; C the reverse.
	// Only these discordant pairs carry information.
	B, C int
	// P is the two-sided p-value of "both arms have the same accuracy".
	P float64
	// Method is McNemarExact or McNemarChiSquare.
	Method string
}

// McNemarTest tests b against c, the two discordant counts. Under the null
// hypothesis each discordant pair goes either way with probability 1/2.
// Below 25 discordant pairs the exact two-sided binomial p-value is used:
// min(1, 2 P(X <= min(b, c))), X ~ Binomial(b+c, 1/2); from 25 on the
// chi-square statistic (|b-c|-1)^2/(b+c) with one degree of freedom. With
// no discordant pair at all the arms cannot be told apart: p is 1 (exact).
func McNemarTest(b, c int) McNemar {
	m := McNemar{B: b, C: c}
	n := b + c
	if n < mcNemarExactBelow {
		m.Method = McNemarExact
		m.P = math.Min(1, 2*binomialCDFHalf(min(b, c), n))
		return m
	}
	m.Method = McNemarChiSquare
	d := math.Abs(float64(b-c)) - 1
	if d < 0 {
		d = 0
	}
	m.P = chiSquare1Survival(d * d / float64(n))
	return m
}

// binomialCDFHalf returns P(X <= k) for X ~ Binomial(n, 1/2). Up to n =
// 1000 it sums the terms C(n,i)/2^n by the recurrence t(i+1) = t(i)
// (n-i)/(i+1), exact to rounding; beyond, where 2^-n underflows, through
// log-gamma.
func binomialCDFHalf(k, n int) float64 {
	if k < 0 {
		return 0
	}
	if k >= n {
		return 1
	}
	if n <= 1000 {
		term := math.Pow(0.5, float64(n))
		sum := term
		for i := 0; i < k; i++ {
			term *= float64(n-i) / float64(i+1)
			sum += term
		}
		return math.Min(1, sum)
	}
	lnHalfN := float64(n) * math.Log(0.5)
	lgN1, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for i := 0; i <= k; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN1 - a - b + lnHalfN)
	}
	return math.Min(1, sum)
}

// chiSquare1Survival returns P(X >= x) for X chi-square with one degree of freedom.
// X is Z^2 for a standard normal Z, so it is erfc(sqrt(x/2)).
func chiSquare1Survival(x float64) float64 {
	if x <= 0 {
		return 1
	}
	return math.Erfc(math.Sqrt(x / 2))
}

// Quantile returns the q-quantile of xs by linear interpolation between order statistics.
// It is the value at rank q*(n-1) counted from 0: R's type 7, the default of numpy and R.
// xs is not modified. ok is false for an empty xs or q outside [0, 1].
func Quantile(xs []float64, q float64) (v float64, ok bool) {
	if len(xs) == 0 || q < 0 || q > 1 || math.IsNaN(q) {
		return 0, false
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	h := q * float64(len(s)-1)
	i := int(math.Floor(h))
	if i >= len(s)-1 {
		return s[len(s)-1], true
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i]), true
}

// PGR is the performance gap recovered: where acc lies between the weak
// model's accuracy (0) and the strong model's (1). ok is false when the two
// are equal, where the ratio does not exist.
func PGR(acc, weak, strong float64) (v float64, ok bool) {
	gap := strong - weak
	if gap == 0 || math.IsNaN(gap) {
		return 0, false
	}
	return (acc - weak) / gap, true
}

// PairedBootstrap is the percentile bootstrap 95% interval of stat over items resampled with replacement.
// Both arms get the same items, so the comparison is paired.
// stat receives the indices of one resample.
// It uses B resamples drawn from seed, so the interval is reproducible.
// ok is false with no items.
func PairedBootstrap(n, b int, seed uint64, stat func(idx []int) float64) (iv Interval, ok bool) {
	if n == 0 || b < 1 {
		return Interval{math.NaN(), math.NaN()}, false
	}
	rng := rand.New(rand.NewPCG(seed, 0x626f6f74))
	idx := make([]int, n)
	vals := make([]float64, b)
	for r := range vals {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		vals[r] = stat(idx)
	}
	lo, _ := Quantile(vals, 0.025)
	hi, _ := Quantile(vals, 0.975)
	return Interval{Lo: lo, Hi: hi}, true
}

// z95OneSided is the 0.95 quantile of the standard normal distribution,
// the z of a one-sided 95% bound.
const z95OneSided = 1.6448536269514722

// NonInferiority is a one-sided paired test of an arm against a baseline.
// It tests that the arm's accuracy is no more than Margin below the baseline's on the same items.
type NonInferiority struct {
	// B counts items the baseline got right and the arm wrong; C the
	// reverse; N all the items.
	B, C, N int
	// Diff is the arm's accuracy minus the baseline's, (C−B)/N.
	Diff float64
	// Lower is Wald's one-sided 95% lower bound of Diff: Diff − 1.645·s/√N.
	// s is the sample standard deviation of the per-item differences.
	Lower float64
	// Margin is the accuracy the arm may lose, a proportion (0.05 is 5
	// points).
	Margin float64
	// NonInferior says Lower lies above −Margin.
	NonInferior bool
}

// NonInferiorityTest tests an arm against a baseline from the discordant counts b and c over n items.
// b and c are as in McNemarTest.
// Each item's difference is +1 for c, −1 for b or 0; the bound is Wald's on their mean.
// With no discordant pair the differences have no spread and Lower is 0.
// ok is false when n is 0, b or c is negative or b+c exceeds n.
func NonInferiorityTest(b, c, n int, margin float64) (NonInferiority, bool) {
	if n <= 0 || b < 0 || c < 0 || b+c > n {
		return NonInferiority{}, false
	}
	fn := float64(n)
	d := float64(c-b) / fn
	var s2 float64
	if n > 1 {
		// Σ(dᵢ − d)² = Σdᵢ² − n·d², with Σdᵢ² = b + c.
		s2 = (float64(b+c) - fn*d*d) / (fn - 1)
	}
	lower := d - z95OneSided*math.Sqrt(max(s2, 0)/fn)
	return NonInferiority{B: b, C: c, N: n, Diff: d, Lower: lower, Margin: margin, NonInferior: lower > -margin}, true
}
