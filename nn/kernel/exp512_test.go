//go:build amd64 && !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp512SameBitsAsAVX2 checks the AVX-512 exponential against the AVX2
// one, bit for bit, in every value and in the sum.
func TestExp512SameBitsAsAVX2(t *testing.T) {
	if archExp512 == nil || !haveAVX2FMA() {
		t.Skip("the CPU has no AVX-512")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	edges := []float32{0, float32(math.Copysign(0, -1)), -87.3, -87.4, -100, 88.7, 88.8, 89, nan, -inf, inf, 1e-40}
	for _, n := range []int{8, 16, 24, 32, 40, 64, 168, 256, 1000} {
		for _, c := range []struct{ scale, shift float32 }{{1, 0}, {0.25, 3.5}, {-1, 0}, {0.7, -2}} {
			t.Run(fmt.Sprintf("n=%d/scale=%v/shift=%v", n, c.scale, c.shift), func(t *testing.T) {
				src := make([]float32, n)
				for i := range src {
					src[i] = float32(rng.NormFloat64() * 30)
				}
				if n <= 64 { // short rows carry the edge values
					copy(src[n/2:], edges[:min(len(edges), n/2)])
				}
				got, want := make([]float32, n), make([]float32, n)
				gs := archExp512(got, src, n, c.scale, c.shift)
				ws := expAVX2(want, src, n, c.scale, c.shift)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("e^(%v·%v − %v) = %v, AVX2 gives %v", c.scale, src[i], c.shift, got[i], want[i])
					}
				}
				if math.Float32bits(gs) != math.Float32bits(ws) {
					t.Errorf("sum = %v, AVX2 gives %v", gs, ws)
				}
			})
		}
	}
}
