package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpTailSameBits checks the vector tail against Exp bit for bit.
// The arguments cover the whole range, the ends where Exp changes branch
// (expLo, expHi, 2^k below the normal exponents), zeros, infinities and
// NaN, in every count of lanes, with the output over the input as
// attention and the loss call it.
func TestExpTailSameBits(t *testing.T) {
	if archExpTail == nil {
		t.Skip("no vector tail on this machine")
	}
	rng := rand.New(rand.NewPCG(51, 52))
	special := []float32{0, float32(math.Copysign(0, -1)), expLo, expHi, -86.5, -86.64, -86.7, -86.9, -87, -87.3, -87.33654, -87.34, -88,
		88.3, 88.38, 88.4, 88.7, 88.72283, 88.73, -200, 200, 1e-30, -1e-30, 0.5, -0.5, 0.34657359, -0.34657359,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	draw := func() float32 {
		switch rng.IntN(4) {
		case 0:
			return special[rng.IntN(len(special))]
		case 1:
			return special[rng.IntN(len(special))] + float32(rng.NormFloat64())*1e-3
		case 2:
			return float32(rng.Float64()*200 - 100)
		}
		return float32(rng.NormFloat64() * 3)
	}
	for _, tc := range []struct{ scale, shift float32 }{{1, 0}, {0.25, 1.5}, {0.17677669, -3}, {3, 40}} {
		for n := 1; n < 16; n++ {
			t.Run(fmt.Sprintf("scale=%g/shift=%g/n=%d", tc.scale, tc.shift, n), func(t *testing.T) {
				for range 2000 {
					src := make([]float32, n)
					for i := range src {
						src[i] = draw()
					}
					var wantSum float32
					want := make([]float32, n)
					for i, x := range src {
						want[i] = Exp(tc.scale*x - tc.shift)
						wantSum += want[i]
					}
					got := append([]float32(nil), src...)
					gotSum := expTail(got, got, tc.scale, tc.shift, 0) // in place
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("Exp(%g·%g − %g) = %g (%#x), want %g (%#x)", tc.scale, src[i], tc.shift, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
					if math.Float32bits(gotSum) != math.Float32bits(wantSum) {
						t.Fatalf("sum %g, want %g", gotSum, wantSum)
					}
				}
			})
		}
	}
}
