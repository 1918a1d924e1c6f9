package bench

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Cost of pass is bootstrapped with this many resamples from this seed.
// A table is then the same every time it is written.
const (
	CostOfPassResamples = 2000
	CostOfPassSeed      = 1
)

// CostOfPass is the expected dollars per correct answer: Σ dollars / Σ correct.
// Its 95% interval is the percentile bootstrap over items, b resamples drawn from seed.
// It is +Inf with no correct answer.
// So is the interval's top when over 2.5% of the resamples have none.
// ok is false with no items.
func CostOfPass(dollars []float64, correct []bool, b int, seed uint64) (v float64, iv Interval, ok bool) {
	n := len(dollars)
	if n == 0 || n != len(correct) || b < 1 {
		return math.NaN(), Interval{math.NaN(), math.NaN()}, false
	}
	ratio := func(cost float64, k int) float64 {
		if k == 0 {
			return math.Inf(1)
		}
		return cost / float64(k)
	}
	var sum float64
	k := 0
	for i := range dollars {
		sum += dollars[i]
		if correct[i] {
			k++
		}
	}
	v = ratio(sum, k)
	rng := rand.New(rand.NewPCG(seed, 0x636f7374))
	vals := make([]float64, b)
	for r := range vals {
		var s float64
		k := 0
		for range n {
			i := rng.IntN(n)
			s += dollars[i]
			if correct[i] {
				k++
			}
		}
		vals[r] = ratio(s, k)
	}
	sort.Float64s(vals)
	return v, Interval{Lo: sortedQuantile(vals, 0.025), Hi: sortedQuantile(vals, 0.975)}, true
}

// sortedQuantile is Quantile of sorted s, +Inf where an infinite value
// takes part in the interpolation.
func sortedQuantile(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	i := int(math.Floor(h))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	frac := h - float64(i)
	switch {
	case frac == 0:
		return s[i]
	case math.IsInf(s[i], 1) || math.IsInf(s[i+1], 1):
		return math.Inf(1)
	}
	return s[i] + frac*(s[i+1]-s[i])
}
