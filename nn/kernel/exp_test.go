package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// expImpls are the exponentials this machine can run.
func expImpls() map[string]expFunc {
	out := map[string]expFunc{"go": goExpBlock}
	if archExp != nil {
		out["asm"] = archExp
	}
	return out
}

func TestExpSumMatchesMathExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for name, f := range expImpls() {
		t.Run(name, func(t *testing.T) {
			saved := activeExp
			activeExp = f
			defer func() { activeExp = saved }()
			for _, n := range []int{0, 1, 7, 8, 9, 16, 61, 272} {
				src := make([]float32, n)
				for i := range src {
					src[i] = float32(rng.NormFloat64() * 20)
				}
				dst := make([]float32, n)
				scale, shift := float32(0.7), float32(3)
				sum := ExpSum(dst, src, scale, shift)
				var want float64
				for i, x := range src {
					w := math.Exp(float64(scale*x - shift))
					want += w
					if w < 1.2e-38 {
						if dst[i] != 0 && math.Abs(float64(dst[i])-w) > 1e-38 {
							t.Fatalf("n=%d: exp(%v) = %v, want about %v", n, scale*x-shift, dst[i], w)
						}
						continue
					}
					if rel := math.Abs(float64(dst[i])-w) / w; rel > 1e-6 {
						t.Fatalf("n=%d: exp(%v) = %v, want %v (relative error %.2g)", n, scale*x-shift, dst[i], w, rel)
					}
				}
				if want > 0 && math.Abs(float64(sum)-want)/want > 1e-5 {
					t.Errorf("n=%d: sum = %v, want %v", n, sum, want)
				}
			}
		})
	}
}

func TestExpSumEdges(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	src := []float32{0, -100, -87.4, 1, nan, 88.8, -inf, 2, 0.5}
	for name, f := range expImpls() {
		t.Run(name, func(t *testing.T) {
			saved := activeExp
			activeExp = f
			defer func() { activeExp = saved }()
			dst := append([]float32(nil), src...)
			ExpSum(dst, dst, 1, 0) // in place
			if dst[0] != 1 {
				t.Errorf("exp(0) = %v, want 1", dst[0])
			}
			for _, i := range []int{1, 2, 6} {
				if dst[i] != 0 {
					t.Errorf("exp(%v) = %v, want 0", src[i], dst[i])
				}
			}
			if dst[4] == dst[4] {
				t.Errorf("exp(NaN) = %v, want NaN", dst[4])
			}
			if !math.IsInf(float64(dst[5]), 1) {
				t.Errorf("exp(88.8) = %v, want +Inf", dst[5])
			}
			if got, want := float64(dst[8]), math.Exp(0.5); math.Abs(got-want) > 1e-6 {
				t.Errorf("exp(0.5) in the tail = %v, want %v", got, want)
			}
		})
	}
}

func BenchmarkExpSum(b *testing.B) {
	src := make([]float32, 4096)
	for i := range src {
		src[i] = float32(i%200) * -0.05
	}
	dst := make([]float32, len(src))
	for name, f := range expImpls() {
		b.Run(name, func(b *testing.B) {
			saved := activeExp
			activeExp = f
			defer func() { activeExp = saved }()
			b.SetBytes(int64(4 * len(src)))
			for b.Loop() {
				ExpSum(dst, src, 1, 0)
			}
		})
	}
}

// Exp and every ExpSum implementation stay within 3e-7 relative error of
// math.Exp over the whole normal range.
func TestExpSweep(t *testing.T) {
	var xs []float32
	for x := float32(-87); x < 88.7; x += 0.00731 {
		xs = append(xs, x)
	}
	check := func(name string, got []float32) {
		t.Helper()
		worst := 0.0
		for i, x := range xs {
			want := math.Exp(float64(x))
			rel := math.Abs(float64(got[i])-want) / want
			worst = max(worst, rel)
			if rel > 3e-7 {
				t.Fatalf("%s: exp(%v) = %v, want %v (relative error %.2g)", name, x, got[i], want, rel)
			}
		}
		t.Logf("%s: worst relative error %.3g", name, worst)
	}
	scalar := make([]float32, len(xs))
	for i, x := range xs {
		scalar[i] = Exp(x)
	}
	check("Exp", scalar)
	for name, f := range expImpls() {
		saved := activeExp
		activeExp = f
		got := make([]float32, len(xs))
		ExpSum(got, xs, 1, 0)
		activeExp = saved
		check("ExpSum "+name, got)
	}
	tests := []struct{ x, want float32 }{
		{0, 1},
		{1, float32(math.E)},
		{89, float32(math.Inf(1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{-88, 0},
		{float32(math.Inf(-1)), 0},
	}
	for _, tt := range tests {
		if got := Exp(tt.x); got != tt.want && math.Abs(float64(got-tt.want)) > 1e-6 {
			t.Errorf("Exp(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	if got := Exp(float32(math.NaN())); got == got {
		t.Errorf("Exp(NaN) = %v, want NaN", got)
	}
}

func TestSoftmax(t *testing.T) {
	x := []float32{0.5, -3, 2.25, 40, -100, 39.5, 0}
	want := make([]float64, len(x))
	var total float64
	for i, v := range x {
		want[i] = math.Exp(float64(v) - 40)
		total += want[i]
	}
	sum, shift := Softmax(x, 1)
	if shift != 40 {
		t.Errorf("shift = %v, want the maximum 40", shift)
	}
	inv := 1 / sum
	for i := range x {
		if w := want[i] / total; math.Abs(float64(x[i]*inv)-w) > 1e-7 {
			t.Errorf("softmax[%d] = %v, want %v", i, x[i], w)
		}
	}
}

// The AVX halves of SwiGLU and SwiGLUBackward must give the portable code's bits.
// That holds at every length, whole blocks of 8 and the rest.
func TestSwiGLUSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 7, 8, 9, 100, 1027} {
		a, b, dh := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i], dh[i] = float32(rng.NormFloat64()*4), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		a[0] = -100 // e^-a overflows: silu(a) = -0
		h, da, db := make([]float32, n), make([]float32, n), make([]float32, n)
		SwiGLU(h, a, b)
		SwiGLUBackward(da, db, dh, a, b)
		wh, wda, wdb := make([]float32, n), make([]float32, n), make([]float32, n)
		ExpSum(wh, a, -1, 0)
		goSwiGLU(wh, a, b, n)
		ExpSum(wda, a, -1, 0)
		goSwiGLUBack(wda, wdb, dh, a, b, n)
		for i := range n {
			if math.Float32bits(h[i]) != math.Float32bits(wh[i]) || math.Float32bits(da[i]) != math.Float32bits(wda[i]) || math.Float32bits(db[i]) != math.Float32bits(wdb[i]) {
				t.Fatalf("n=%d index %d (%s): h %v da %v db %v, portable %v %v %v", n, i, Impl(), h[i], da[i], db[i], wh[i], wda[i], wdb[i])
			}
			sig := 1 / (1 + math.Exp(-float64(a[i])))
			if want := float64(a[i]) * sig * float64(b[i]); math.Abs(float64(h[i])-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("n=%d index %d: h = %v, want %v", n, i, h[i], want)
			}
		}
	}
}

// Max must find the largest value wherever it is, and NaN wherever one
// is.
func TestMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{1, 3, 8, 9, 16, 31, 64, 257} {
		for trial := range 20 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 10)
			}
			at := rng.IntN(n)
			switch trial % 4 {
			case 1:
				x[at] = float32(math.Inf(1))
			case 2:
				x[at] = float32(math.NaN())
			case 3:
				for i := range x {
					x[i] = float32(math.Inf(-1))
				}
			}
			want := float32(math.Inf(-1))
			nan := false
			for _, v := range x {
				nan = nan || v != v
				want = max(want, v)
			}
			got := Max(x)
			if nan {
				if got == got {
					t.Fatalf("n=%d trial %d: Max = %v, want NaN", n, trial, got)
				}
				continue
			}
			if got != want {
				t.Fatalf("n=%d trial %d: Max = %v, want %v", n, trial, got, want)
			}
		}
	}
}
