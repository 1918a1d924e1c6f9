package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// adamwInputs draws parameters, gradients and moments of length n with
// some zeros, subnormals and large values among them.
func adamwInputs(rng *rand.Rand, n int) (theta, grad, m, v []float32) {
	pick := func(i int, scale float64) float32 {
		switch i % 11 {
		case 3:
			return 0
		case 5:
			return float32(rng.NormFloat64() * 1e-40) // subnormal
		case 7:
			return float32(rng.NormFloat64() * 1e6)
		}
		return float32(rng.NormFloat64() * scale)
	}
	theta, grad, m, v = make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		theta[i], grad[i], m[i] = pick(i, 0.1), pick(i+1, 1e-3), pick(i+2, 1e-3)
		v[i] = float32(math.Abs(float64(pick(i+3, 1e-6))))
	}
	return theta, grad, m, v
}

// The AVX update and the portable one must agree bit for bit.
// Both must agree with the formula in float64, to float32 rounding.
func TestAdamWSameBits(t *testing.T) {
	steps := []AdamWStep{
		{B1: 0.9, B2: 0.95, C1: 10, C2: 20, LR: 1e-3, Eps: 1e-8, Decay: 1 - 1e-4},
		{B1: 0.9, B2: 0.999, C1: 1.5, C2: 300, LR: 3e-2, Eps: 1e-8, Decay: 1},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 8, 9, 64, 1001} {
		for si, s := range steps {
			t.Run(fmt.Sprintf("n=%d/step%d", n, si), func(t *testing.T) {
				theta, grad, m, v := adamwInputs(rng, n)
				th2, m2, v2 := append([]float32(nil), theta...), append([]float32(nil), m...), append([]float32(nil), v...)
				th0, m0, v0 := append([]float32(nil), theta...), append([]float32(nil), m...), append([]float32(nil), v...)
				AdamW(theta, grad, m, v, s)
				goAdamWBlock(th2, grad, m2, v2, n, &s)
				for i := range n {
					if math.Float32bits(theta[i]) != math.Float32bits(th2[i]) || m[i] != m2[i] || v[i] != v2[i] {
						t.Fatalf("index %d (%s): AdamW gives θ %v m %v v %v, the portable code θ %v m %v v %v",
							i, Impl(), theta[i], m[i], v[i], th2[i], m2[i], v2[i])
					}
					g := float64(grad[i])
					wm := float64(s.B1)*float64(m0[i]) + (1-float64(s.B1))*g
					wv := float64(s.B2)*float64(v0[i]) + (1-float64(s.B2))*g*g
					kept, upd := float64(th0[i])*float64(s.Decay), float64(s.LR)*wm*float64(s.C1)/(math.Sqrt(wv*float64(s.C2))+float64(s.Eps))
					wt := kept - upd
					// rounding errors scale with the terms, not their difference
					if d := math.Abs(float64(theta[i]) - wt); d > 1e-6*(math.Abs(kept)+math.Abs(upd))+1e-30 {
						t.Errorf("index %d: θ = %v, float64 formula %v", i, theta[i], wt)
					}
				}
			})
		}
	}
}
