package nn

import (
	"math"
	"testing"
)

// The forward of the per-row layers both engines share; their gradient
// checks are in package train, next to the backward pass that uses them.

func TestRMSNormForward(t *testing.T) {
	x := []float32{3, 4, 0, 0}
	g := []float32{1, 2, 1, 1}
	y := make([]float32, 4)
	r := RMSNorm(y, x, g, 0)
	// mean(x²) = 25/4, rms = 2.5
	if r != 0.4 {
		t.Errorf("r = %v, want 0.4", r)
	}
	want := []float32{1.2, 3.2, 0, 0}
	for i := range y {
		if math.Abs(float64(y[i]-want[i])) > 1e-6 {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want[i])
		}
	}
}

func TestRopeConvention(t *testing.T) {
	c := Config{Vocab: 4, Dim: 8, Layers: 1, Heads: 2, KVHeads: 2, Hidden: 4, Context: 16, RopeTheta: 10000, NormEps: 1e-5}
	r := NewRope(c)
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8} // two heads of width 4
	const pos = 7
	got := append([]float32(nil), x...)
	r.Forward(got, pos)
	for h := 0; h < 2; h++ {
		for i := 0; i < 2; i++ {
			a := float64(pos) * math.Pow(10000, -float64(2*i)/4)
			x0, x1 := float64(x[h*4+2*i]), float64(x[h*4+2*i+1])
			w0, w1 := x0*math.Cos(a)-x1*math.Sin(a), x0*math.Sin(a)+x1*math.Cos(a)
			if math.Abs(float64(got[h*4+2*i])-w0) > 1e-5 || math.Abs(float64(got[h*4+2*i+1])-w1) > 1e-5 {
				t.Errorf("head %d pair %d: got (%v, %v), want (%v, %v)", h, i, got[h*4+2*i], got[h*4+2*i+1], w0, w1)
			}
		}
	}
	zero := append([]float32(nil), x...)
	r.Forward(zero, 0)
	for i := range x {
		if zero[i] != x[i] {
			t.Errorf("position 0 changed x[%d]: got %v, want %v", i, zero[i], x[i])
		}
	}
}
