package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRMSNormHalvesSameBits checks RMSNormApply, RMSNormInput and
// RMSNormGain against their formulas in Go, one rounding per operation,
// bit for bit.
func TestRMSNormHalvesSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	draw := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if i%7 == 3 {
				x[i] *= 1e-38 // subnormal products
			}
		}
		return x
	}
	for _, n := range []int{1, 7, 8, 9, 16, 64, 100} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			x, g, dy, dx0 := draw(n), draw(n), draw(n), draw(n)
			r, c := float32(1.7), float32(-0.23)

			got, want := make([]float32, n), make([]float32, n)
			RMSNormApply(got, x, g, r)
			for i := range want {
				want[i] = g[i] * (r * x[i])
			}
			sameVec(t, "RMSNormApply", got, want)

			got, want = append([]float32(nil), dx0...), append([]float32(nil), dx0...)
			RMSNormInput(got, dy, x, g, r, c)
			for i := range want {
				want[i] += r*g[i]*dy[i] - c*x[i]
			}
			sameVec(t, "RMSNormInput", got, want)

			got, want = append([]float32(nil), dx0...), append([]float32(nil), dx0...)
			RMSNormGain(got, dy, x, r)
			for i := range want {
				want[i] += dy[i] * x[i] * r
			}
			sameVec(t, "RMSNormGain", got, want)
		})
	}
}
