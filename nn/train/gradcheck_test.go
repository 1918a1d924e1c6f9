package train

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randn returns n normal draws of standard deviation std.
func randn(rng *rand.Rand, n int, std float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * std)
	}
	return s
}

// dot64 is Σ r_i·y_i in float64: the scalar test loss whose gradient
// with respect to y is r.
func dot64(r, y []float32) float64 {
	var s float64
	for i, v := range y {
		s += float64(r[i]) * float64(v)
	}
	return s
}

// checkGrad compares analytic[i] with the central difference for the indices idx of x.
// The difference is (loss(x_i+h) − loss(x_i−h)) / 2h; a nil idx means all
// of x. It passes when |fd − analytic| ≤ atol + rtol·max(|fd|, |analytic|).
// loss must recompute from x each call; x is restored afterwards.
func checkGrad(t *testing.T, name string, x, analytic []float32, idx []int, loss func() float64, h, atol, rtol float64) {
	t.Helper()
	if idx == nil {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	}
	bad := 0
	for _, i := range idx {
		orig := x[i]
		x[i] = orig + float32(h)
		up := loss()
		x[i] = orig - float32(h)
		down := loss()
		x[i] = orig
		// the step actually taken in float32
		step := float64(orig+float32(h)) - float64(orig-float32(h))
		fd := (up - down) / step
		an := float64(analytic[i])
		if d := math.Abs(fd - an); d > atol+rtol*math.Max(math.Abs(fd), math.Abs(an)) || math.IsNaN(d) {
			bad++
			if bad <= 5 {
				t.Errorf("%s[%d]: analytic gradient %.6g, finite difference %.6g", name, i, an, fd)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d gradients off", name, bad, len(idx))
	}
}

// sampleIndices picks about k indices of [0, n) spread evenly, all when n ≤ k.
func sampleIndices(n, k int) []int {
	if n <= k {
		return nil
	}
	idx := make([]int, 0, k)
	for i := 0; i < k; i++ {
		idx = append(idx, i*n/k+(i*7)%max(1, n/k))
	}
	return idx
}
