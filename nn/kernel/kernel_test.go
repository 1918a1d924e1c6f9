package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

type impl struct {
	name  string
	kern  microKernel
	kern2 pairKernel
	pack  packFunc
}

// impls are the micro-kernels this machine can run.
// The pure-Go one always runs, and the assembly one where the CPU has it.
func impls() []impl {
	out := []impl{{"go", goKernel, nil, goPackT16}}
	if archName != "go" {
		out = append(out, impl{"avx2", archKernel, nil, archPackT16})
	}
	if archKernel2 != nil {
		out = append(out, impl{archName, archKernel, archKernel2, archPackT16})
	}
	return out
}

func randMat(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// exact computes the product in float64, adding dst0 when accumulating.
// For each element it also gives the bound |dst0| + Σ_p |A_ip·B_pj| that
// scales the rounding error.
func exact(o op, dst0, a, b []float32, m, k, n int) (want, mag []float64) {
	want = make([]float64, m*n)
	mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, g float64
			if dst0 != nil {
				s, g = float64(dst0[i*n+j]), math.Abs(float64(dst0[i*n+j]))
			}
			for p := 0; p < k; p++ {
				var x, y float64
				switch o {
				case opNT:
					x, y = float64(a[i*k+p]), float64(b[j*k+p])
				case opNN:
					x, y = float64(a[i*k+p]), float64(b[p*n+j])
				case opTN:
					x, y = float64(a[p*m+i]), float64(b[p*n+j])
				}
				s += x * y
				g += math.Abs(x * y)
			}
			want[i*n+j], mag[i*n+j] = s, g
		}
	}
	return want, mag
}

// checkClose asserts |got − want| ≤ 2·(k+1)·2⁻²⁴·mag for every element.
// That is the classical bound for a float32 sum of k+1 terms, with a factor
// two of slack.
func checkClose(t *testing.T, got []float32, want, mag []float64, k, n int) {
	t.Helper()
	const u = 1.0 / (1 << 24)
	bad := 0
	for idx, w := range want {
		tol := 2*float64(k+1)*u*mag[idx] + 1e-30
		if d := math.Abs(float64(got[idx]) - w); d > tol || math.IsNaN(d) {
			if bad < 5 {
				t.Errorf("dst[%d][%d] = %g, want %g (|diff| %g > tol %g)", idx/n, idx%n, got[idx], w, d, tol)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d elements out of tolerance", bad, len(want))
	}
}

// shapes are m, k, n that reach every edge of the blocking.
// They are degenerate, not multiples of the 6×16 tile, k = 1, k larger than
// the k block, n larger than the column block, m larger than the row block.
var shapes = [][3]int{
	{1, 1, 1}, {1, 0, 3}, {2, 1, 17}, {6, 1, 16}, {5, 3, 15}, {7, 17, 33},
	{13, 37, 29}, {1, 256, 96}, {33, 300, 47}, {7, 600, 9}, {100, 20, 530}, {97, 5, 3},
	{1030, 3, 40}, {2, 3, 1040}, // strides of 4 KiB and more: packed instead of read in place
}

func opName(o op) string { return [...]string{"NT", "NN", "TN"}[o] }

func shapesOf(o op, m, k, n int) (na, nb int) {
	if o == opNT {
		return m * k, n * k
	}
	return m * k, k * n
}

func TestKernelsMatchExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, im := range impls() {
		for _, o := range []op{opNT, opNN, opTN} {
			for _, s := range shapes {
				m, k, n := s[0], s[1], s[2]
				for _, workers := range []int{1, 3} {
					t.Run(fmt.Sprintf("%s/%s/m%dk%dn%d/w%d", im.name, opName(o), m, k, n, workers), func(t *testing.T) {
						na, nb := shapesOf(o, m, k, n)
						a, b := randMat(rng, na), randMat(rng, nb)
						dst := randMat(rng, m*n) // garbage to overwrite, or the sum to accumulate into
						var dst0 []float32
						acc := o == opTN
						if acc {
							dst0 = append([]float32(nil), dst...)
						}
						want, mag := exact(o, dst0, a, b, m, k, n)
						pr := problem{op: o, dst: dst, a: a, b: b, m: m, k: k, n: n, acc: acc, kern: im.kern, kern2: im.kern2, packT16: im.pack}
						pr.split(workers)
						checkClose(t, dst, want, mag, k, n)
					})
				}
			}
		}
	}
}

func TestEntryPointsMatchExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range [][3]int{{1, 1, 1}, {3, 5, 7}, {32, 64, 48}, {70, 130, 90}} {
		m, k, n := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("m%dk%dn%d", m, k, n), func(t *testing.T) {
			a, bt, b := randMat(rng, m*k), randMat(rng, n*k), randMat(rng, k*n)
			dst := randMat(rng, m*n)
			MatMulNT(dst, a, bt, m, k, n)
			want, mag := exact(opNT, nil, a, bt, m, k, n)
			checkClose(t, dst, want, mag, k, n)

			dst = randMat(rng, m*n)
			MatMulNN(dst, a, b, m, k, n)
			want, mag = exact(opNN, nil, a, b, m, k, n)
			checkClose(t, dst, want, mag, k, n)

			at := randMat(rng, k*m)
			dst = randMat(rng, m*n)
			dst0 := append([]float32(nil), dst...)
			MatMulTNAcc(dst, at, b, m, k, n)
			want, mag = exact(opTN, dst0, at, b, m, k, n)
			checkClose(t, dst, want, mag, k, n)
		})
	}
}

// TestReferenceLoopsMatchExact keeps the benchmarks' baseline honest.
func TestReferenceLoopsMatchExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, k, n := 9, 31, 21
	a, bt, b, at := randMat(rng, m*k), randMat(rng, n*k), randMat(rng, k*n), randMat(rng, k*m)
	dst := make([]float32, m*n)
	refNT(dst, a, bt, m, k, n)
	want, mag := exact(opNT, nil, a, bt, m, k, n)
	checkClose(t, dst, want, mag, k, n)
	refNN(dst, a, b, m, k, n)
	want, mag = exact(opNN, nil, a, b, m, k, n)
	checkClose(t, dst, want, mag, k, n)
	dst0 := append([]float32(nil), dst...)
	refTNAcc(dst, at, b, m, k, n)
	want, mag = exact(opTN, dst0, at, b, m, k, n)
	checkClose(t, dst, want, mag, k, n)
}

func TestPackT16(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, im := range impls() {
		for _, kl := range []int{1, 7, 8, 9, 64, 77} {
			ld := kl + 3
			src := randMat(rng, nr*ld)
			got := make([]float32, kl*nr)
			im.pack(got, src, ld, kl)
			for p := 0; p < kl; p++ {
				for r := 0; r < nr; r++ {
					if got[p*nr+r] != src[r*ld+p] {
						t.Fatalf("%s kl=%d: dst[%d] = %g, want src[%d][%d] = %g", im.name, kl, p*nr+r, got[p*nr+r], r, p, src[r*ld+p])
					}
				}
			}
		}
	}
}

// packA lays out six rows of A step by step.
// It uses the assembly for whole blocks of 8 steps and Go for the rest.
func TestPackA(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, kl := range []int{1, 7, 8, 9, 16, 64, 77} {
		for _, o := range []op{opNT, opNN} {
			k := kl + 5
			a := randMat(rng, 2*mr*k)
			pr := problem{op: o, a: a, m: 2 * mr, k: k}
			got := make([]float32, 2*mr*kl)
			pr.packA(got, 0, 2*mr-1, 3, kl) // a full panel, then one of 5 rows
			for q := range 2 {
				for p := range kl {
					for r := range mr {
						want := float32(0)
						if q*mr+r < 2*mr-1 {
							want = a[(q*mr+r)*k+3+p]
						}
						if g := got[q*mr*kl+p*mr+r]; g != want {
							t.Fatalf("kl=%d panel %d: step %d row %d = %g, want %g", kl, q, p, r, g, want)
						}
					}
				}
			}
		}
	}
}

func TestTNAccAccumulates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	m, k, n := 11, 9, 19
	a, b := randMat(rng, k*m), randMat(rng, k*n)
	once := make([]float32, m*n)
	MatMulTNAcc(once, a, b, m, k, n)
	twice := append([]float32(nil), once...)
	MatMulTNAcc(twice, a, b, m, k, n)
	want, mag := exact(opTN, once, a, b, m, k, n)
	checkClose(t, twice, want, mag, k, n)
	for i := range once {
		if once[i] != 0 && twice[i] == once[i] {
			t.Fatalf("dst[%d] = %g after the second call, want it to have grown", i, twice[i])
		}
	}
	// k = 0 leaves dst as it was.
	keep := randMat(rng, m*n)
	got := append([]float32(nil), keep...)
	MatMulTNAcc(got, nil, nil, m, 0, n)
	for i := range keep {
		if got[i] != keep[i] {
			t.Fatalf("k=0: dst[%d] = %g, want unchanged %g", i, got[i], keep[i])
		}
	}
}

// TestDeterministic checks that an element's bits depend on neither m nor the split.
// Nor do they depend on the number of workers: row i computed in a batch of
// 41 rows equals row i computed alone.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, k, n := 41, 300, 70
	for _, im := range impls() {
		for _, o := range []op{opNT, opNN, opTN} {
			t.Run(im.name+"/"+opName(o), func(t *testing.T) {
				na, nb := shapesOf(o, m, k, n)
				a, b := randMat(rng, na), randMat(rng, nb)
				init := randMat(rng, m*n)
				acc := o == opTN
				run := func(workers int) []float32 {
					dst := append([]float32(nil), init...)
					pr := problem{op: o, dst: dst, a: a, b: b, m: m, k: k, n: n, acc: acc, kern: im.kern, kern2: im.kern2, packT16: im.pack}
					pr.split(workers)
					return dst
				}
				base := run(1)
				for _, w := range []int{2, 3, 4, 7, 16} {
					got := run(w)
					for i := range base {
						if math.Float32bits(got[i]) != math.Float32bits(base[i]) {
							t.Fatalf("workers=%d: dst[%d] = %g, want %g bit for bit", w, i, got[i], base[i])
						}
					}
				}
				for _, i := range []int{0, 5, 6, 40} {
					row := make([]float32, k)
					if o == opTN {
						for p := 0; p < k; p++ {
							row[p] = a[p*m+i]
						}
					} else {
						copy(row, a[i*k:(i+1)*k])
					}
					dst := append([]float32(nil), init[i*n:(i+1)*n]...)
					pr := problem{op: o, dst: dst, a: row, b: b, m: 1, k: k, n: n, acc: acc, kern: im.kern, kern2: im.kern2, packT16: im.pack}
					pr.split(2)
					for j := range dst {
						if math.Float32bits(dst[j]) != math.Float32bits(base[i*n+j]) {
							t.Fatalf("row %d alone: dst[%d] = %g, want %g as in the batch", i, j, dst[j], base[i*n+j])
						}
					}
				}
			})
		}
	}
}

// TestWideKernelSameBits checks that the AVX-512 pair kernel rounds as AVX2's does.
// Mixing them then keeps results deterministic.
func TestWideKernelSameBits(t *testing.T) {
	if archKernel2 == nil {
		t.Skip("no AVX-512 on this machine")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, o := range []op{opNT, opNN, opTN} {
		m, k, n := 19, 290, 75
		na, nb := shapesOf(o, m, k, n)
		a, b := randMat(rng, na), randMat(rng, nb)
		init := randMat(rng, m*n)
		var got [2][]float32
		for v, k2 := range []pairKernel{nil, archKernel2} {
			got[v] = append([]float32(nil), init...)
			pr := problem{op: o, dst: got[v], a: a, b: b, m: m, k: k, n: n, acc: o == opTN, kern: archKernel, kern2: k2, packT16: archPackT16}
			pr.split(1)
		}
		for i := range got[0] {
			if math.Float32bits(got[1][i]) != math.Float32bits(got[0][i]) {
				t.Fatalf("%s: dst[%d] = %g with AVX-512, want %g as with AVX2", opName(o), i, got[1][i], got[0][i])
			}
		}
	}
}

func TestShortSlicePanics(t *testing.T) {
	tests := []struct {
		name string
		call func()
	}{
		{"NT short dst", func() { MatMulNT(make([]float32, 5), make([]float32, 6), make([]float32, 9), 2, 3, 3) }},
		{"NN short b", func() { MatMulNN(make([]float32, 6), make([]float32, 6), make([]float32, 8), 2, 3, 3) }},
		{"TN short a", func() { MatMulTNAcc(make([]float32, 6), make([]float32, 5), make([]float32, 9), 2, 3, 3) }},
		{"negative", func() { MatMulNT(nil, nil, nil, -1, 2, -1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tt.call()
		})
	}
}

func TestSerialCallsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	m, k, n := 32, 64, 48
	a, b, dst := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	MatMulNT(dst, a, b, m, k, n)
	if got := testing.AllocsPerRun(20, func() { MatMulNT(dst, a, b, m, k, n) }); got != 0 {
		t.Errorf("allocations per call = %v, want 0", got)
	}
}

// TestDeterministicAcrossGOMAXPROCS checks the entry points under GOMAXPROCS 1, 2 and 3.
// A product large enough to be split gives the same bits under each, and
// its rows equal the rows computed one at a time.
func TestDeterministicAcrossGOMAXPROCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m, k, n := 64, 256, 136 // 2·m·k·n above parallelFlops
	if 2*m*k*n < parallelFlops {
		t.Fatalf("shape too small to be split: %d flops", 2*m*k*n)
	}
	a, w := randMat(rng, m*k), randMat(rng, n*k)
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	var base []float32
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		got := make([]float32, m*n)
		MatMulNT(got, a, w, m, k, n)
		if base == nil {
			base = got
			continue
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(base[i]) {
				t.Fatalf("GOMAXPROCS=%d: dst[%d] = %g, want %g as with GOMAXPROCS=1", procs, i, got[i], base[i])
			}
		}
	}
	row := make([]float32, n)
	for _, i := range []int{0, 31, 63} {
		MatMulNT(row, a[i*k:(i+1)*k], w, 1, k, n)
		for j := range row {
			if math.Float32bits(row[j]) != math.Float32bits(base[i*n+j]) {
				t.Fatalf("row %d alone: dst[%d] = %g, want %g as in the batch", i, j, row[j], base[i*n+j])
			}
		}
	}
}
