package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSoftmaxGradSameBits checks SoftmaxGrad against the scalar formula,
// bit for bit, for lengths around the vector step of 16.
func TestSoftmaxGradSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	for _, n := range []int{1, 7, 15, 16, 17, 33, 64, 100} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			d, p := randMat(rng, n), randMat(rng, n+3)
			dot, scale := float32(rng.NormFloat64()), float32(0.25)
			want := make([]float32, n)
			for j := range want {
				want[j] = p[j] * (d[j] - dot) * scale
			}
			SoftmaxGrad(d, p, dot, scale)
			for j := range want {
				if math.Float32bits(d[j]) != math.Float32bits(want[j]) {
					t.Fatalf("d[%d] = %v, want %v bit for bit", j, d[j], want[j])
				}
			}
		})
	}
}
