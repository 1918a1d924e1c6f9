package kernel

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestFloat32ToF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"a tenth", 0.1, 0x2e66},
		{"largest", 65504, 0x7bff},
		{"rounds to infinity", 65520, 0x7c00},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half the smallest subnormal: tie to even zero", 0x1p-25, 0x0000},
		{"three halves of it: tie to even two", 0x1.8p-24, 0x0002},
		{"largest subnormal", 0x1.ff8p-15, 0x03ff},
		{"tie in the normal range, to even", 1 + 0x1p-11, 0x3c00},
		{"tie in the normal range, up to even", 1 + 3*0x1p-11, 0x3c02},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Float32ToF16(tc.f); got != tc.want {
				t.Errorf("Float32ToF16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
			}
		})
	}
	// Every finite float16 value comes back as itself.
	for h := range 1 << 16 {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := Float32ToF16(F16ToFloat32(uint16(h))); got != uint16(h) {
			t.Fatalf("Float32ToF16(F16ToFloat32(%#04x)) = %#04x", h, got)
		}
	}
	if got := Float32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("Float32ToF16(NaN) = %#04x, want a NaN", got)
	}
}

func TestQuantizeQ8_0(t *testing.T) {
	ramp := make([]float32, 32)
	for i := range ramp {
		ramp[i] = float32(i-16) / 16 // -1 .. 0.9375
	}
	half := make([]float32, 32)
	half[0], half[1], half[2] = 127, 0.5, -1.5 // d = 1: ties round away from zero
	for _, tc := range []struct {
		name  string
		src   []float32
		wantD float32
		wantQ map[int]int8 // index → value; others as computed below
	}{
		{"zeros", make([]float32, 32), 0, map[int]int8{0: 0, 31: 0}},
		{"ramp", ramp, float32(F16ToFloat32(Float32ToF16(float32(1) / 127))), map[int]int8{0: -127, 16: 0, 31: 119}},
		{"ties", half, 1, map[int]int8{0: 127, 1: 1, 2: -2, 3: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, Q8BlockBytes)
			QuantizeQ8_0(dst, tc.src)
			if got := F16ToFloat32(binary.LittleEndian.Uint16(dst)); got != tc.wantD {
				t.Errorf("scale = %v, want %v", got, tc.wantD)
			}
			for i, want := range tc.wantQ {
				if got := int8(dst[2+i]); got != want {
					t.Errorf("q[%d] = %d, want %d", i, got, want)
				}
			}
		})
	}
}

// TestQuantizeAct checks that the activations' values round as QuantizeQ8_0's do.
// Both quantisers of activations share quantizeBlock, which rounds in
// float32, where QuantizeQ8_0 rounds with math.Round. Ties (127 and halves
// over a largest value of 127) and random blocks of many magnitudes must
// give the same bytes, and quantizePanelAct the same scale and the sum.
func TestQuantizeAct(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	src := make([]float32, 32*200)
	for i := range src {
		src[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(i/32%8)-4))
	}
	for i := range 32 { // block 0: ties at every half
		src[i] = float32(i*4-64) + 0.5
	}
	src[31] = 127
	src[32] = float32(math.Copysign(0, -1)) // block 1 starts with -0
	want := make([]byte, Q8RowBytes(len(src)))
	QuantizeQ8_0(want, src)
	act := make([]byte, len(src)/32*q8ActBytes)
	quantizeAct(act, src)
	pan := make([]byte, len(src)/32*q8PanelActBytes)
	quantizePanelAct(pan, src)
	for b := range len(src) / 32 {
		var sum int32
		for i := range 32 {
			wq := want[b*Q8BlockBytes+2+i]
			if got := act[b*q8ActBytes+4+i]; got != wq {
				t.Fatalf("block %d value %d: quantizeAct %d, QuantizeQ8_0 %d (of %v)", b, i, int8(got), int8(wq), src[b*32+i])
			}
			if got := pan[b*q8PanelActBytes+8+i]; got != wq {
				t.Fatalf("block %d value %d: quantizePanelAct %d, QuantizeQ8_0 %d", b, i, int8(got), int8(wq))
			}
			sum += int32(int8(wq))
		}
		if got, want := binary.LittleEndian.Uint32(pan[b*q8PanelActBytes:]), binary.LittleEndian.Uint32(act[b*q8ActBytes:]); got != want {
			t.Errorf("block %d: quantizePanelAct's scale %#x, quantizeAct's %#x", b, got, want)
		}
		if got := int32(binary.LittleEndian.Uint32(pan[b*q8PanelActBytes+4:])); got != -128*sum {
			t.Errorf("block %d: correction %d, want -128·%d", b, got, sum)
		}
	}
}

// TestQuantizePanelActTwins checks the active quantiser of activations for panels against the portable one.
// It must give the same bytes: ties, zero blocks, random blocks of many
// magnitudes, subnormals and infinities. A block with a NaN has a NaN scale
// in both and the same values.
func TestQuantizePanelActTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		set  func(x []float32) // fills one block
	}{
		{"zeros", func(x []float32) {}},
		{"negative zeros", func(x []float32) {
			for i := range x {
				x[i] = float32(math.Copysign(0, -1))
			}
		}},
		{"ties", func(x []float32) {
			for i := range x {
				x[i] = float32(i*4-64) + 0.5
			}
			x[31] = 127
		}},
		{"random", func(x []float32) {
			scale := float32(math.Pow(10, float64(r.IntN(12)-6)))
			for i := range x {
				x[i] = float32(r.NormFloat64()) * scale
			}
		}},
		{"subnormal", func(x []float32) {
			for i := range x {
				x[i] = float32(r.NormFloat64()) * 0x1p-140
			}
		}},
		{"an infinity", func(x []float32) {
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x[r.IntN(32)] = -inf
		}},
		{"a NaN", func(x []float32) {
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x[r.IntN(32)] = nan
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, blocks := range []int{1, 3, 28} {
				x := make([]float32, blocks*Q8Block)
				for b := range blocks {
					tc.set(x[b*Q8Block : (b+1)*Q8Block])
				}
				got := make([]byte, blocks*q8PanelActBytes)
				want := make([]byte, len(got))
				quantizePanelAct(got, x)
				goQuantizePanelAct(want, x)
				for b := range blocks {
					g, w := got[b*q8PanelActBytes:(b+1)*q8PanelActBytes], want[b*q8PanelActBytes:(b+1)*q8PanelActBytes]
					gd := math.Float32frombits(binary.LittleEndian.Uint32(g))
					wd := math.Float32frombits(binary.LittleEndian.Uint32(w))
					if gd != wd && !(gd != gd && wd != wd) {
						t.Fatalf("%d blocks, block %d: scale %v, want %v", blocks, b, gd, wd)
					}
					for i := 4; i < q8PanelActBytes; i++ {
						if g[i] != w[i] {
							t.Fatalf("%d blocks, block %d byte %d: %#x, want %#x (values %v)", blocks, b, i, g[i], w[i], x[b*Q8Block:(b+1)*Q8Block])
						}
					}
				}
			}
		})
	}
}

// TestQuantizeQ8_0Error checks that dequantised values are within half a step of the originals.
// Half a step is d/2, plus 127 times the float16 rounding of d, which is
// coarse where d is subnormal in float16.
func TestQuantizeQ8_0Error(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 32*64)
	for i := range src {
		src[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(i/32%6)-3))
	}
	q := make([]byte, Q8RowBytes(len(src)))
	QuantizeQ8_0(q, src)
	back := make([]float32, len(src))
	DequantizeQ8_0(back, q)
	for b := 0; b < len(src)/32; b++ {
		var amax float64
		for _, v := range src[b*32 : (b+1)*32] {
			amax = max(amax, math.Abs(float64(v)))
		}
		d := amax / 127
		d16 := float64(F16ToFloat32(binary.LittleEndian.Uint16(q[b*34:])))
		tol := d/2 + 127*math.Abs(d16-d) + 1e-12
		for i := b * 32; i < (b+1)*32; i++ {
			if got, want := float64(back[i]), float64(src[i]); math.Abs(got-want) > tol {
				t.Fatalf("value %d: dequantised %v, was %v (tolerance %v)", i, got, want, tol)
			}
		}
	}
}

// q8Impl is one q8_0 kernel and the layout it reads.
type q8Impl struct {
	name   string
	panels bool       // q8_0 panels, for the VNNI kernels
	dot4   q8Dot4Func // for llama.cpp's layout
}

// q8Impls lists the q8_0 kernels this machine runs: pure Go always, the
// AVX2 and the AVX-512 VNNI assembly where the CPU has them.
func q8Impls() []q8Impl {
	impls := []q8Impl{{name: "go", dot4: goQ8Dot4}}
	if f := archQ8Dot4(); f != nil {
		impls = append(impls, q8Impl{name: "avx2", dot4: f})
	}
	if activeQ8Panels != nil {
		impls = append(impls, q8Impl{name: "avx512vnni", panels: true})
	}
	return impls
}

// use makes im the kernel of q8_0 Packeds in llama.cpp's layout until the test ends.
func (im q8Impl) use(t testing.TB) {
	t.Helper()
	if im.panels {
		return
	}
	prev := activeQ8Dot4
	activeQ8Dot4 = im.dot4
	t.Cleanup(func() { activeQ8Dot4 = prev })
}

// TestMatMulQ8 checks each q8_0 kernel against float64 sums of dequantised weights.
// The sums are over the activations as the product quantises them; the
// tolerance is 1e-5 of the sum of the products' magnitudes, for float32
// rounding. It also checks that an element's bits do not depend on the rows
// batched with it or on the column split.
func TestMatMulQ8(t *testing.T) {
	for _, im := range q8Impls() {
		t.Run(im.name, func(t *testing.T) {
			im.use(t)
			testMatMulQ8(t, im.panels)
		})
	}
}

func testMatMulQ8(t *testing.T, panels bool) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name string
		m, k int
		rows []int
		j0   int // a column split to compare with the whole product
	}{
		{"vector", 1, 64, []int{40}, 16},
		{"batch of 7, stacked parts", 7, 96, []int{16, 8, 9}, 16},
		{"batch of 4, one block", 4, 32, []int{33}, 32},
		{"batch of 9", 9, 256, []int{50}, 48},
		{"batch of 5, several tiles of panels", 5, 4096, []int{100}, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			var parts [][]byte
			var deq []float32 // (n, k)
			for _, n := range tc.rows {
				f := make([]float32, n*k)
				for i := range f {
					f[i] = float32(r.NormFloat64())
				}
				q := make([]byte, n*Q8RowBytes(k))
				for j := range n {
					QuantizeQ8_0(q[j*Q8RowBytes(k):(j+1)*Q8RowBytes(k)], f[j*k:(j+1)*k])
				}
				parts = append(parts, q)
				d := make([]float32, n*k)
				DequantizeQ8_0(d, q)
				deq = append(deq, d...)
			}
			w := newPackedQ8(k, panels, tc.rows...)
			w.RepackQ8(parts...)
			n := w.N()
			want := int64(n * k / 32 * 34)
			if panels {
				want = int64((n + 15) / 16 * 16 * k / 32 * 36)
			}
			if got := w.Bytes(); got != want {
				t.Errorf("Bytes() = %d, want %d", got, want)
			}
			row := make([]float32, k)
			for _, j := range []int{0, n / 2, n - 1} {
				w.Row(row, j)
				for p := range k {
					if got, want := row[p], deq[j*k+p]; got != want {
						t.Fatalf("Row(%d)[%d] = %v, want %v", j, p, got, want)
					}
				}
			}
			a := make([]float32, tc.m*k)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			dst := make([]float32, tc.m*n)
			MatMulPacked(dst, a, tc.m, w)
			xq := make([]byte, k/32*q8ActBytes)
			for i := range tc.m {
				// The activations as the product quantises them.
				quantizeAct(xq, a[i*k:(i+1)*k])
				x := make([]float64, k)
				dx := make([]float64, k)
				for p := range k {
					blk := xq[p/32*q8ActBytes:]
					dx[p] = float64(math.Float32frombits(binary.LittleEndian.Uint32(blk)))
					x[p] = dx[p] * float64(int8(blk[4+p%32]))
				}
				for j := range n {
					var want, exact, mag, bound float64
					for p := range k {
						wv := float64(deq[j*k+p])
						want += x[p] * wv
						exact += float64(a[i*k+p]) * wv
						mag += math.Abs(x[p] * wv)
						bound += math.Abs(wv) * dx[p] / 2 // half a step of the activation
					}
					got := float64(dst[i*n+j])
					if math.Abs(got-want) > 1e-5*mag+1e-6 {
						t.Fatalf("dst[%d][%d] = %v, want %v over the quantised activations", i, j, got, want)
					}
					if math.Abs(got-exact) > bound+1e-5*mag+1e-6 {
						t.Fatalf("dst[%d][%d] = %v, %v over float32 activations: off by more than %v", i, j, got, exact, bound)
					}
				}
				// The same row alone gives the same bits.
				one := make([]float32, n)
				MatMulPacked(one, a[i*k:(i+1)*k], 1, w)
				for j := range n {
					if one[j] != dst[i*n+j] {
						t.Fatalf("row %d column %d: %v alone, %v in a batch of %d", i, j, one[j], dst[i*n+j], tc.m)
					}
				}
			}
			// Two column ranges give the bits of the whole, and so do
			// they over activations quantised once.
			split := make([]float32, tc.m*n)
			MatMulPackedCols(split, a, tc.m, w, 0, tc.j0)
			MatMulPackedCols(split, a, tc.m, w, tc.j0, n)
			var x Q8Act
			x.Quantize(a, tc.m, w)
			once := make([]float32, tc.m*n)
			MatMulQ8ActCols(once, &x, w, tc.j0, n)
			MatMulQ8ActCols(once, &x, w, 0, tc.j0)
			for i := range split {
				if split[i] != dst[i] {
					t.Fatalf("element %d: %v split at column %d, %v whole", i, split[i], tc.j0, dst[i])
				}
				if once[i] != dst[i] {
					t.Fatalf("element %d: %v over Q8Act split at column %d, %v whole", i, once[i], tc.j0, dst[i])
				}
			}
		})
	}
}

// TestQ8DotTwins checks the active q8_0 dot products against the portable one.
// The active ones are assembly where the CPU has it. They are equal but for
// the rounding the fused multiply-add saves, and each of the four has the
// same bits whatever the other three are.
func TestQ8DotTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{32, 64, 288, 2048} {
		var (
			as, rs [4][]byte
			out    [4]float32
		)
		mags := [4]float64{}
		for i := range 4 {
			x, f := make([]float32, k), make([]float32, k)
			for p := range k {
				x[p] = float32(r.NormFloat64())
				f[p] = float32(r.NormFloat64())
				mags[i] += math.Abs(float64(x[p] * f[p]))
			}
			as[i] = make([]byte, k/32*q8ActBytes)
			quantizeAct(as[i], x)
			rs[i] = make([]byte, Q8RowBytes(k))
			QuantizeQ8_0(rs[i], f)
		}
		activeQ8Dot4(k, &as, &rs, &out)
		for i := range 4 {
			want := goQ8Dot(k, as[i], rs[i])
			if math.Abs(float64(out[i]-want)) > 1e-5*mags[i] {
				t.Errorf("k=%d pair %d: active %v, portable %v", k, i, out[i], want)
			}
			// The same pair in every slot gives the same bits.
			same := [4][]byte{as[i], as[i], as[i], as[i]}
			rows := [4][]byte{rs[i], rs[i], rs[i], rs[i]}
			var o [4]float32
			activeQ8Dot4(k, &same, &rows, &o)
			for s := range 4 {
				if o[s] != out[i] {
					t.Errorf("k=%d pair %d in slot %d: %v, in slot %d: %v", k, i, s, o[s], i, out[i])
				}
			}
		}
	}
}

// BenchmarkMatVecQ8 reports GB/s of weights read by one-row products over
// Qwen2.5-0.5B's MLP matrices, for each q8_0 kernel and, as the reference
// in the same run, bfloat16. The MLP matrices fit a 32 MB L3; the last
// shape, 65536 rows of 896, does not, and is read from memory as in
// decoding. Run with GOMAXPROCS=1 for one core:
//
//	GOMAXPROCS=1 go test -run=^$ -bench=MatVecQ8 ./nn/kernel
func BenchmarkMatVecQ8(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][2]int{{896, 4864}, {4864, 896}, {896, 65536}} {
		k, n := s[0], s[1]
		f := make([]float32, n*k)
		for i := range f {
			f[i] = float32(r.NormFloat64())
		}
		q := make([]byte, n*Q8RowBytes(k))
		for j := range n {
			QuantizeQ8_0(q[j*Q8RowBytes(k):(j+1)*Q8RowBytes(k)], f[j*k:(j+1)*k])
		}
		a := make([]float32, k)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		dst := make([]float32, n)
		run := func(b *testing.B, w *Packed) {
			for b.Loop() {
				MatMulPacked(dst, a, 1, w)
			}
			b.ReportMetric(float64(w.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		}
		for _, im := range q8Impls() {
			b.Run(fmt.Sprintf("k%dn%d/q8_0/%s", k, n, im.name), func(b *testing.B) {
				im.use(b)
				w := newPackedQ8(k, im.panels, n)
				w.RepackQ8(q)
				run(b, w)
			})
		}
		b.Run(fmt.Sprintf("k%dn%d/bf16", k, n), func(b *testing.B) {
			h := make([]uint16, len(f))
			for i, v := range f {
				h[i] = uint16(math.Float32bits(v) >> 16)
			}
			w := NewPackedHalf(BFloat16, k, n)
			w.RepackHalfPanels(0, w.panels(), h)
			run(b, w)
		})
	}
}
