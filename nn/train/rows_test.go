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

// TestRopeTableSameBits checks the training engine's rotation against
// nn.Rope bit for bit, forward and back, for head widths on and off the
// vector path and with the context's scaling.
func TestRopeTableSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, c := range []nn.Config{
		{Vocab: 8, Dim: 64, Layers: 1, Heads: 4, KVHeads: 4, Hidden: 8, Context: 64, RopeTheta: 10000, NormEps: 1e-5},
		{Vocab: 8, Dim: 256, Layers: 1, Heads: 8, KVHeads: 4, Hidden: 8, Context: 40, RopeTheta: 500000, NormEps: 1e-5},
		{Vocab: 8, Dim: 16, Layers: 1, Heads: 4, KVHeads: 2, Hidden: 8, Context: 9, RopeTheta: 10000, NormEps: 1e-5},
	} {
		t.Run(fmt.Sprintf("dim=%d/heads=%d/kv=%d", c.Dim, c.Heads, c.KVHeads), func(t *testing.T) {
			rope, table := nn.NewRope(c), newRopeTable(c)
			b, tt := 2, c.Context
			n, w := b*tt, c.Dim+c.KVDim()
			s := w + c.KVDim() // values follow, unrotated
			x := randn(rng, n*s, 1)
			for _, back := range []bool{false, true} {
				got, want := append([]float32(nil), x...), append([]float32(nil), x...)
				if back {
					table.backward(got, n, tt, s, w)
				} else {
					table.forward(got, n, tt, s, w)
				}
				for i := range n {
					if back {
						rope.Backward(want[i*s:i*s+w], i%tt)
					} else {
						rope.Forward(want[i*s:i*s+w], i%tt)
					}
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("back=%v: x[%d] = %v, want %v bit for bit", back, i, got[i], want[i])
					}
				}
			}
		})
	}
}
