package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// f32ToHalf rounds v to the nearest value of dt (ties to even); the test's
// own conversion, to make half-width operands.
func f32ToHalf(v float32, dt DType) uint16 {
	b := math.Float32bits(v)
	if dt == BFloat16 {
		return uint16((b + 0x7fff + (b>>16)&1) >> 16)
	}
	// float16 through float64 arithmetic: exact for the normal range used here.
	f := float64(v)
	sign := uint16(0)
	if f < 0 {
		sign, f = 0x8000, -f
	}
	if f < 1.0/(1<<14) { // below the normal range: zero is enough here
		return sign
	}
	e := math.Floor(math.Log2(f))
	m := math.RoundToEven(f/math.Pow(2, e)*1024) - 1024
	if m == 1024 {
		m, e = 0, e+1
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}

func TestWidenHalfValues(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x0001, 5.960464477539063e-08}, {0x7bff, 65504}, {0x0000, 0}, {0x3555, 0.33325195},
	} {
		if got := F16ToFloat32(tc.h); got != tc.want {
			t.Errorf("F16ToFloat32(%#04x) = %v, want %v", tc.h, got, tc.want)
		}
	}
	if got := F16ToFloat32(0x7c00); !math.IsInf(float64(got), 1) {
		t.Errorf("F16ToFloat32(0x7c00) = %v, want +Inf", got)
	}
	if got := F16ToFloat32(0x7e00); !math.IsNaN(float64(got)) {
		t.Errorf("F16ToFloat32(0x7e00) = %v, want NaN", got)
	}
	if got, want := BF16ToFloat32(0x3f80), float32(1); got != want {
		t.Errorf("BF16ToFloat32(0x3f80) = %v, want %v", got, want)
	}
	// The assembly widening agrees with the Go one on every value.
	for _, dt := range []DType{BFloat16, Float16} {
		src := make([]uint16, 1<<16)
		for i := range src {
			src[i] = uint16(i)
		}
		got, want := make([]float32, len(src)), make([]float32, len(src))
		widen(got, src, dt)
		widenGo(want, src, dt)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
				t.Fatalf("%v: widen(%#04x) = %v, Go gives %v", dt, i, got[i], want[i])
			}
		}
	}
}

// TestPackedHalfMatchesFloat32 checks half-width products against float32 ones, bit for bit.
// The float32 Packed holds the widened values. It checks one row, through
// the matrix-vector kernels, and several, through widened panels under the
// matrix kernels, whole and by column ranges.
//
// gemvSpaced's stream gap is the default, then small enough for these
// matrices to hold several spaced blocks: one panel apart, and a few.
func TestPackedHalfMatchesFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	saved := halfStreamGap
	t.Cleanup(func() { halfStreamGap = saved })
	for _, gap := range []int{saved, 1, 5000} {
		halfStreamGap = gap
		testPackedHalfMatchesFloat32(t, rng, gap)
	}
}

func testPackedHalfMatchesFloat32(t *testing.T, rng *rand.Rand, gap int) {
	for _, dt := range []DType{BFloat16, Float16} {
		for _, sh := range []struct{ m, k int }{{1, 1}, {1, 7}, {1, 64}, {3, 33}, {7, 100}, {1, 257}} {
			// {300, 20}: more panels than one widened chunk holds.
			for _, rows := range [][]int{{5}, {16}, {64, 16, 16}, {100, 3}, {130}, {300, 20}} {
				t.Run(fmt.Sprintf("gap%d/%v/m%d_k%d_%v", gap, dt, sh.m, sh.k, rows), func(t *testing.T) {
					k := sh.k
					var halves [][]uint16
					var wides [][]float32
					n := 0
					for _, r := range rows {
						h, f := make([]uint16, r*k), make([]float32, r*k)
						for i := range h {
							h[i] = f32ToHalf(float32(rng.NormFloat64()), dt)
							f[i] = widenOne(h[i], dt)
						}
						halves, wides = append(halves, h), append(wides, f)
						n += r
					}
					hw := NewPackedHalf(dt, k, rows...)
					hw.RepackHalfPanels(0, hw.Panels(), halves...)
					fw := Pack(k, wides...)
					if got, want := hw.Bytes(), fw.Bytes()/2; got != want {
						t.Errorf("Bytes() = %d, want half of float32's, %d", got, want)
					}
					a := make([]float32, sh.m*k)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					got, want := make([]float32, sh.m*n), make([]float32, sh.m*n)
					MatMulPacked(got, a, sh.m, hw)
					MatMulPacked(want, a, sh.m, fw)
					if !slices.Equal(got, want) {
						t.Fatalf("half product differs from float32's:\n got %v\nwant %v", got, want)
					}
					clear(got)
					for q := 0; q < hw.Panels(); q += 2 {
						j0, j1 := q*16, min(q*16+32, n)
						MatMulPackedCols(got, a, sh.m, hw, j0, j1)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("half product by column ranges differs from float32's")
					}
					row, wrow := make([]float32, k), make([]float32, k)
					for j := range n {
						hw.Row(row, j)
						fw.Row(wrow, j)
						if !slices.Equal(row, wrow) {
							t.Fatalf("Row(%d) = %v, want %v", j, row, wrow)
						}
					}
				})
			}
		}
	}
}

func widenOne(h uint16, dt DType) float32 {
	if dt == BFloat16 {
		return BF16ToFloat32(h)
	}
	return F16ToFloat32(h)
}

// TestPackedHalfGeneric checks the portable half-width path against the float32 reference.
// The portable path widens a panel, then runs the float32 kernel. It covers
// both bfloat16 layouts of halfIndex: steps side by side, and pairs of steps
// interleaved, as the AVX-512 kernel reads them.
func TestPackedHalfGeneric(t *testing.T) {
	saved1, saved4, saved8, savedW := activeGemvHalf1, activeGemvHalf4, activeGemvHalf8, activeWiden
	savedP8, savedP4, savedP1, savedPW := activeBF16Pairs8, activeBF16Pairs4, activeBF16Pairs1, activeWidenBF16Pairs
	t.Cleanup(func() {
		activeGemvHalf1, activeGemvHalf4, activeGemvHalf8, activeWiden = saved1, saved4, saved8, savedW
		activeBF16Pairs8, activeBF16Pairs4, activeBF16Pairs1, activeWidenBF16Pairs = savedP8, savedP4, savedP1, savedPW
	})
	activeGemvHalf1, activeGemvHalf4, activeGemvHalf8 = [3]gemvHalf1Func{}, [3]gemvHalf4Func{}, [3]gemvHalf4Func{}
	activeWiden = [3]func([]float32, []uint16){}
	activeBF16Pairs8, activeBF16Pairs4, activeBF16Pairs1, activeWidenBF16Pairs = nil, nil, nil, nil
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		dt    DType
		pairs bool
	}{{BFloat16, false}, {BFloat16, true}, {Float16, false}} {
		for _, k := range []int{40, 41} {
			for _, m := range []int{1, 3} {
				n := 170
				h, f := make([]uint16, n*k), make([]float32, n*k)
				for i := range h {
					h[i] = f32ToHalf(float32(rng.NormFloat64()), tc.dt)
					f[i] = widenOne(h[i], tc.dt)
				}
				hw := NewPackedHalf(tc.dt, k, n)
				hw.pairs = tc.pairs
				hw.RepackHalfPanels(0, hw.Panels(), h)
				fw := Pack(k, f)
				a := make([]float32, m*k)
				for i := range a {
					a[i] = float32(rng.NormFloat64())
				}
				got, want := make([]float32, m*n), make([]float32, m*n)
				MatMulPacked(got, a, m, hw)
				MatMulPacked(want, a, m, fw)
				if !slices.Equal(got, want) {
					t.Errorf("%v pairs %v k %d m %d: portable half product differs from float32's:\n got %v\nwant %v", tc.dt, tc.pairs, k, m, got, want)
				}
				row, wrow := make([]float32, k), make([]float32, k)
				for j := range n {
					hw.Row(row, j)
					fw.Row(wrow, j)
					if !slices.Equal(row, wrow) {
						t.Fatalf("%v pairs %v k %d: Row(%d) = %v, want %v", tc.dt, tc.pairs, k, j, row, wrow)
					}
				}
			}
		}
	}
}

// BenchmarkGemvHalf compares one-row products over a 32768×1024 matrix by storage.
// The matrix is float32, bfloat16, float16 or q8_0, and a product reads 128,
// 64, 64 or 34 MiB, far over the caches.
func BenchmarkGemvHalf(b *testing.B) {
	const n, k = 32768, 1024
	rng := rand.New(rand.NewPCG(5, 6))
	f := make([]float32, n*k)
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	a := make([]float32, k)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, n)
	for _, dt := range []DType{Float32, BFloat16, Float16, Q8_0} {
		var w *Packed
		switch dt {
		case Float32:
			w = Pack(k, f)
		case Q8_0:
			q := make([]byte, n*Q8RowBytes(k))
			QuantizeQ8_0(q, f)
			w = NewPackedQ8(k, n)
			w.RepackQ8(q)
		default:
			h := make([]uint16, n*k)
			for i, v := range f {
				h[i] = f32ToHalf(v, dt)
			}
			w = NewPackedHalf(dt, k, n)
			w.RepackHalfPanels(0, w.Panels(), h)
		}
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(w.Bytes())
			for b.Loop() {
				MatMulPackedCols(dst, a, 1, w, 0, n)
			}
		})
	}
}

// BenchmarkPackedHalfPrefill compares a 64-row product (a prompt's
// prefill) over float32 and bfloat16 weights.
func BenchmarkPackedHalfPrefill(b *testing.B) {
	const n, k, m = 4096, 1024, 64
	rng := rand.New(rand.NewPCG(5, 6))
	f := make([]float32, n*k)
	h := make([]uint16, n*k)
	for i := range f {
		f[i] = float32(rng.NormFloat64())
		h[i] = f32ToHalf(f[i], BFloat16)
	}
	hw := NewPackedHalf(BFloat16, k, n)
	hw.RepackHalfPanels(0, hw.Panels(), h)
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, m*n)
	for _, w := range []*Packed{Pack(k, f), hw} {
		b.Run(w.DType().String(), func(b *testing.B) {
			for b.Loop() {
				MatMulPackedCols(dst, a, m, w, 0, n)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}
