package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotsMixMatchExact checks Dots and Mix against float64 sums.
// It runs this machine's kernels and the portable ones. Head sizes take the
// vector paths, as multiples of 8, and the others; sequence lengths fall
// around the 8-position groups; and one row stride is wider than a head.
func TestDotsMixMatchExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	variants := []struct {
		name  string
		dots8 func(sc, q, keys []float32, stride int, scale float32)
		mix   func(out, w, vals []float32, stride int)
	}{{"go", nil, nil}, {"machine", archDots8, archMix}}
	for _, v := range variants {
		d0, m0 := activeDots8, activeMix
		activeDots8, activeMix = v.dots8, v.mix
		for _, hd := range []int{4, 6, 8, 16, 40, 48, 64, 72} {
			for _, n := range []int{1, 7, 8, 9, 16, 23, 100} {
				stride := hd*3 + 8
				keys := randMat(rng, (n-1)*stride+hd) // as short as allowed
				q := randMat(rng, hd)
				sc := make([]float32, n)
				Dots(sc, q, keys, stride, 0.5)
				for tt := range n {
					var want, mag float64
					for i := range hd {
						want += float64(q[i]) * float64(keys[tt*stride+i])
						mag += math.Abs(float64(q[i]) * float64(keys[tt*stride+i]))
					}
					want *= 0.5
					if d := math.Abs(float64(sc[tt]) - want); d > 1e-6*mag+1e-7 {
						t.Fatalf("%s Dots hd=%d n=%d: sc[%d] = %g, want %g", v.name, hd, n, tt, sc[tt], want)
					}
				}
				w := randMat(rng, n)
				out := randMat(rng, hd) // overwritten
				Mix(out, w, keys, stride)
				for i := range hd {
					var want, mag float64
					for tt := range n {
						want += float64(w[tt]) * float64(keys[tt*stride+i])
						mag += math.Abs(float64(w[tt]) * float64(keys[tt*stride+i]))
					}
					if d := math.Abs(float64(out[i]) - want); d > 1e-6*mag+1e-7 {
						t.Fatalf("%s Mix hd=%d n=%d: out[%d] = %g, want %g", v.name, hd, n, i, out[i], want)
					}
				}
			}
		}
		activeDots8, activeMix = d0, m0
	}
}

// TestDotsDeterministic checks that the same call to Dots gives the same bits.
// The engine relies on that. A position's score also does not depend on the
// slice of sc it is computed in, beyond the sequence length.
func TestDotsDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	hd, n, stride := 48, 37, 96
	keys, q := randMat(rng, n*stride), randMat(rng, hd)
	a, b := make([]float32, n), make([]float32, n)
	Dots(a, q, keys, stride, 0.25)
	Dots(b, q, keys, stride, 0.25)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("sc[%d] = %g then %g", i, a[i], b[i])
		}
	}
}

func BenchmarkAttention(b *testing.B) {
	rng := rand.New(rand.NewPCG(35, 36))
	for _, hd := range []int{8, 48} {
		n, stride := 256, hd*6
		keys, q, sc, out := randMat(rng, n*stride), randMat(rng, hd), make([]float32, n), make([]float32, hd)
		b.Run(fmt.Sprintf("Dots/hd%d/n%d", hd, n), func(b *testing.B) {
			for b.Loop() {
				Dots(sc, q, keys, stride, 0.1)
			}
			b.ReportMetric(2*float64(hd*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
		b.Run(fmt.Sprintf("Mix/hd%d/n%d", hd, n), func(b *testing.B) {
			for b.Loop() {
				Mix(out, sc, keys, stride)
			}
			b.ReportMetric(2*float64(hd*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}
