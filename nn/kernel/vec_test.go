package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAddScaleSameBits checks Add and Scale against one Go operation per
// element, bit for bit, for lengths around the eight-lane step.
func TestAddScaleSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	draw := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			switch i % 9 {
			case 2:
				x[i] = float32(rng.NormFloat64() * 1e-40) // subnormal
			case 5:
				x[i] = float32(math.Copysign(0, rng.NormFloat64()))
			default:
				x[i] = float32(rng.NormFloat64() * 100)
			}
		}
		return x
	}
	for _, n := range []int{0, 1, 7, 8, 9, 16, 31, 64, 1001} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			x, y := draw(n), draw(n+3) // y may be longer
			got, want := append([]float32(nil), x...), append([]float32(nil), x...)
			Add(got, y)
			for i := range want {
				want[i] += y[i]
			}
			sameVec(t, "Add", got, want)

			for _, s := range []float32{0.37, -3, 0, 1e-30} {
				got, want := append([]float32(nil), x...), append([]float32(nil), x...)
				Scale(got, s)
				for i := range want {
					want[i] *= s
				}
				sameVec(t, fmt.Sprintf("Scale by %v", s), got, want)
			}
		})
	}
}

func sameVec(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s (%s): [%d] = %v, want %v bit for bit", what, Impl(), i, got[i], want[i])
		}
	}
}
