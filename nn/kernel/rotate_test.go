package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRotateSameBits checks Rotate against the scalar formulas of a
// rotary embedding, x·cos − y·sin and x·sin + y·cos and the turn back,
// bit for bit, on the vector path and the Go one.
func TestRotateSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, vec := range []bool{false, true} {
		if vec && archRotate == nil {
			continue
		}
		for _, w := range []int{2, 16, 32, 48} {
			for _, n := range []int{1, 3, 8} {
				t.Run(fmt.Sprintf("vector=%v/w=%d/n=%d", vec, w, n), func(t *testing.T) {
					saved := archRotate
					defer func() { archRotate = saved }()
					if !vec {
						archRotate = nil
					}
					cos, sin := make([]float32, w/2), make([]float32, w/2)
					c, s, sBack := make([]float32, w), make([]float32, w), make([]float32, w)
					for i := range cos {
						a := rng.Float64() * 100
						cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
						c[2*i], c[2*i+1] = cos[i], cos[i]
						s[2*i], s[2*i+1] = -sin[i], sin[i]
						sBack[2*i], sBack[2*i+1] = sin[i], -sin[i]
					}
					x := randMat(rng, n*w)
					x[0], x[1] = 0, float32(math.Copysign(0, -1))
					want, wantBack := append([]float32(nil), x...), append([]float32(nil), x...)
					for r := range n {
						for i := range w / 2 {
							j := r*w + 2*i
							a, b := want[j], want[j+1]
							want[j] = a*cos[i] - b*sin[i]
							want[j+1] = a*sin[i] + b*cos[i]
							a, b = wantBack[j], wantBack[j+1]
							wantBack[j] = a*cos[i] + b*sin[i]
							wantBack[j+1] = -a*sin[i] + b*cos[i]
						}
					}
					got, gotBack := append([]float32(nil), x...), append([]float32(nil), x...)
					Rotate(got, c, s)
					Rotate(gotBack, c, sBack)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("turn: x[%d] = %v, want %v bit for bit", i, got[i], want[i])
						}
						if math.Float32bits(gotBack[i]) != math.Float32bits(wantBack[i]) {
							t.Fatalf("turn back: x[%d] = %v, want %v bit for bit", i, gotBack[i], wantBack[i])
						}
					}
				})
			}
		}
	}
}
