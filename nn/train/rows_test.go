package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// TestRMSNormRowsSameBits checks the batched norms against package nn's
// one-row functions, bit for bit, for row counts around the four-row step.
func TestRMSNormRowsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{1, 5, 16, 64} {
		for _, n := range []int{1, 3, 4, 5, 8, 11, 130} {
			t.Run(fmt.Sprintf("n=%d/d=%d", n, d), func(t *testing.T) {
				x, dy := randn(rng, n*d, 1), randn(rng, n*d, 1)
				g := randn(rng, d, 0.5)
				dx0 := randn(rng, n*d, 1) // backward accumulates into it
				dg0 := randn(rng, d, 1)
				const eps = 1e-5

				y, r := make([]float32, n*d), make([]float32, n)
				rmsNormForward(y, r, x, g, n, d, eps)
				dx, dg := append([]float32(nil), dx0...), append([]float32(nil), dg0...)
				rmsNormBackward(dx, dg, dy, x, g, r, n, d)

				wantY, wantR := make([]float32, n*d), make([]float32, n)
				wantDx, wantDg := append([]float32(nil), dx0...), append([]float32(nil), dg0...)
				for i := range n {
					row := func(s []float32) []float32 { return s[i*d : (i+1)*d] }
					wantR[i] = nn.RMSNorm(row(wantY), row(x), g, eps)
					nn.RMSNormBackward(row(wantDx), row(dy), row(x), g, wantR[i])
					nn.RMSNormGainGrad(wantDg, row(dy), row(x), wantR[i])
				}
				for _, c := range []struct {
					name      string
					got, want []float32
				}{{"y", y, wantY}, {"r", r, wantR}, {"dx", dx, wantDx}, {"dg", dg, wantDg}} {
					for i := range c.want {
						if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
							t.Fatalf("%s[%d] = %v, want %v bit for bit", c.name, i, c.got[i], c.want[i])
						}
					}
				}
			})
		}
	}
}
