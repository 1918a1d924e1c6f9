package kernel

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// Q8_0 is llama.cpp's q8_0 format: rows in blocks of 32 int8 values with a scale.
// Each block is a float16 scale d followed by 32 int8 values q, the weights
// being d·q. A block takes 34 bytes, 8.5 bits a weight: 0.53 times
// bfloat16's bytes.
const Q8_0 DType = Float16 + 1

// Q8Block is the number of weights in one q8_0 block.
// Q8BlockBytes is the bytes it takes: the scale, then the values.
const (
	Q8Block      = 32
	Q8BlockBytes = 2 + Q8Block
)

// Q8RowBytes is the bytes one row of k values takes in q8_0.
func Q8RowBytes(k int) int { return k / Q8Block * Q8BlockBytes }

// QuantizeQ8_0 writes src as q8_0 blocks into dst.
// src is a multiple of 32 values, and dst is Q8RowBytes(len(src)) bytes. It
// rounds as ggml's reference quantize_row_q8_0 does: d = max|x|/127 in
// float32, q = round(x/d) away from zero, and d stored as float16. So it
// gives the bytes of llama.cpp's converters.
func QuantizeQ8_0(dst []byte, src []float32) {
	if len(src)%Q8Block != 0 || len(dst) < Q8RowBytes(len(src)) {
		panic("kernel.QuantizeQ8_0: length not a whole number of blocks") // a programming error
	}
	for b := 0; b < len(src)/Q8Block; b++ {
		x := src[b*Q8Block : (b+1)*Q8Block]
		out := dst[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, Float32ToF16(d))
		for i, v := range x {
			out[2+i] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

// Float32ToF16 rounds f to the nearest IEEE 754 binary16 value, ties to even.
// numpy's astype(float16) and the F16C instructions round the same way.
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN: keep it quiet
		return sign | 0x7e00
	case exp >= 31: // too large, or infinity
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero in binary16
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(h)
}

// NewPackedQ8 is NewPacked for a matrix kept in q8_0, with k a multiple of 32.
// Where the CPU has AVX-512 VNNI, the blocks are laid out in panels of 16
// rows with float32 scales (q8vnni.go). Elsewhere the rows stay in
// llama.cpp's layout, row after row, so a GGUF tensor is copied in as it is
// stored. RepackQ8 fills it.
func NewPackedQ8(k int, rows ...int) *Packed {
	return newPackedQ8(k, activeQ8Panels != nil, rows...)
}

// newPackedQ8 is NewPackedQ8 in q8_0 panels or in llama.cpp's layout.
func newPackedQ8(k int, panels bool, rows ...int) *Packed {
	if k%Q8Block != 0 {
		panic("kernel.NewPackedQ8: k not a multiple of 32") // a programming error
	}
	w := &Packed{k: k, dtype: Q8_0, q8panels: panels}
	for _, r := range rows {
		if r < 0 || k < 0 {
			panic("kernel.NewPackedQ8: negative dimension") // a programming error
		}
		w.parts = append(w.parts, packPart{row0: w.n, n: r})
		w.n += r
	}
	if panels {
		w.q8 = make([]byte, w.panels()*q8PanelBytes(k))
	} else {
		w.q8 = make([]byte, w.n*Q8RowBytes(k))
	}
	return w
}

// RepackQ8 copies parts, q8_0 matrices of the shapes given at creation
// (rows of Q8RowBytes(k) bytes), into w.
func (w *Packed) RepackQ8(parts ...[]byte) {
	if w.dtype != Q8_0 {
		panic("kernel.Packed.RepackQ8: not a q8_0 Packed") // a programming error
	}
	if len(parts) != len(w.parts) {
		panic(fmt.Sprintf("kernel.Packed.RepackQ8: %d matrices, packed from %d", len(parts), len(w.parts))) // a programming error
	}
	rb := Q8RowBytes(w.k)
	for i, p := range parts {
		if len(p) != w.parts[i].n*rb {
			panic(fmt.Sprintf("kernel.Packed.RepackQ8: matrix %d has %d bytes, want %d", i, len(p), w.parts[i].n*rb)) // a programming error
		}
		if !w.q8panels {
			copy(w.q8[w.parts[i].row0*rb:], p)
			continue
		}
		for r := range w.parts[i].n {
			w.setQ8PanelRow(w.parts[i].row0+r, p[r*rb:(r+1)*rb])
		}
	}
}

// q8RowValues writes row j's values, d·q exactly, into dst.
func (w *Packed) q8RowValues(dst []float32, j int) {
	if w.q8panels {
		w.q8PanelRow(dst[:w.k], j)
		return
	}
	DequantizeQ8_0(dst[:w.k], w.q8Row(j))
}

// q8Row returns row j's blocks in llama.cpp's layout.
func (w *Packed) q8Row(j int) []byte {
	rb := Q8RowBytes(w.k)
	return w.q8[j*rb : (j+1)*rb]
}

// DequantizeQ8_0 writes the values of q8_0 blocks src into dst
// (32 values a block): d·q, exactly, in float32.
func DequantizeQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/Q8Block; b++ {
		blk := src[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
		d := F16ToFloat32(binary.LittleEndian.Uint16(blk))
		for i := range Q8Block {
			dst[b*Q8Block+i] = d * float32(int8(blk[2+i]))
		}
	}
}

// Products over a q8_0 matrix first quantise each row of activations the same way.
// Each block of 32 gets a float32 scale, as in llama.cpp's q8_0 by q8_0 dot
// product but for the scale's width. A block's products are then exact
// integer sums, which the vector kernels compute faster than float32
// products of the widened weights.

// q8ActBytes is the bytes one block of quantised activations takes: a
// float32 scale, then 32 int8 values.
const q8ActBytes = 4 + Q8Block

// quantizeAct writes x (a multiple of 32 values) as activation blocks into
// dst, rounding as QuantizeQ8_0 does.
func quantizeAct(dst []byte, x []float32) {
	for b := 0; b < len(x)/Q8Block; b++ {
		out := dst[b*q8ActBytes : (b+1)*q8ActBytes]
		d := quantizeBlock(out[4:4+Q8Block], x[b*Q8Block:(b+1)*Q8Block])
		binary.LittleEndian.PutUint32(out, math.Float32bits(d))
	}
}

// quantizeBlock writes the 32 values v as int8 into q and returns their
// scale. It rounds as QuantizeQ8_0 does, except for the scale's width.
// It runs once a token for every product, so it rounds in float32:
// t - trunc(t) is exact, and a fraction of at least one half rounds away
// from zero, as math.Round does.
func quantizeBlock(q []byte, v []float32) float32 {
	v = v[:Q8Block]
	q = q[:Q8Block]
	var amax float32
	for _, f := range v {
		amax = max(amax, max(f, -f))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for i, f := range v {
		t := f * id
		r := int32(t)
		switch frac := t - float32(r); {
		case frac >= 0.5:
			r++
		case frac <= -0.5:
			r--
		}
		q[i] = byte(int8(r))
	}
	return d
}

// Q8Act is rows of activations quantised for products over q8_0 Packeds.
// Quantize fills it once per product; MatMulQ8ActCols reads it, from any
// number of goroutines at once, so that a product split by columns
// quantises its rows once rather than once a range.
type Q8Act struct {
	m, k   int
	panels bool   // the blocks are for q8_0 panels' kernels
	b      []byte // (m, k/32) blocks
}

// Quantize quantises a(m, k) into x for products over w, reusing x's memory.
func (x *Q8Act) Quantize(a []float32, m int, w *Packed) {
	if w.dtype != Q8_0 || len(a) < m*w.k {
		panic("kernel.Q8Act.Quantize: not a q8_0 Packed, or a too short") // a programming error
	}
	k := w.k
	x.m, x.k, x.panels = m, k, w.q8panels
	rb := x.rowBytes()
	if cap(x.b) < m*rb {
		x.b = make([]byte, m*rb)
	}
	x.b = x.b[:m*rb]
	for i := range m {
		if x.panels {
			quantizePanelAct(x.b[i*rb:(i+1)*rb], a[i*k:(i+1)*k])
		} else {
			quantizeAct(x.b[i*rb:(i+1)*rb], a[i*k:(i+1)*k])
		}
	}
}

// rowBytes is the bytes of one quantised row.
func (x *Q8Act) rowBytes() int {
	if x.panels {
		return x.k / Q8Block * q8PanelActBytes
	}
	return x.k / Q8Block * q8ActBytes
}

// MatMulQ8ActCols computes columns [j0, j1) of dst(m, n) = x · Wᵀ on the caller, for a q8_0 W.
// x holds m rows quantised for w by Quantize. Column ranges are as for
// MatMulPackedCols, and the bits are those of MatMulPackedCols over the
// rows x was quantised from.
func MatMulQ8ActCols(dst []float32, x *Q8Act, w *Packed, j0, j1 int) {
	if w.dtype != Q8_0 || x.k != w.k || x.panels != w.q8panels || len(dst) < x.m*w.n {
		panic("kernel.MatMulQ8ActCols: activations not quantised for this Packed, or dst too short") // a programming error
	}
	if j0%nr != 0 || j0 < 0 || j1 > w.n || (j1%nr != 0 && j1 != w.n) {
		panic("kernel.MatMulQ8ActCols: column range not whole panels") // a programming error
	}
	if j0 >= j1 || x.m == 0 {
		return
	}
	if w.q8panels {
		matMulQ8Panels(dst, x.b, x.m, w, j0, j1)
		return
	}
	matMulQ8Rows(dst, x.b, x.m, w, j0, j1)
}

// q8Scratch holds the quantised activations of one product.
var q8Scratch = sync.Pool{New: func() any { return new(Q8Act) }}

// matMulQ8Cols computes columns [j0, j1) of dst(m, n) = a(m, k) · Wᵀ for a q8_0 W.
// It quantises a, then runs matMulQ8Panels or matMulQ8Rows.
func matMulQ8Cols(dst, a []float32, m int, w *Packed, j0, j1 int) {
	x := q8Scratch.Get().(*Q8Act)
	defer q8Scratch.Put(x)
	x.Quantize(a, m, w)
	if w.q8panels {
		matMulQ8Panels(dst, x.b, m, w, j0, j1)
		return
	}
	matMulQ8Rows(dst, x.b, m, w, j0, j1)
}

// matMulQ8Rows computes columns [j0, j1) of dst(m, n) = x · Wᵀ for a q8_0 W.
// W is in llama.cpp's layout; x is m rows quantised by quantizeAct. Each
// element is the dot product of its quantised row and its row of W, as
// q8Dot4 computes it whichever pairs share the call. So it does not depend
// on m or on the column split. Rows of x go four at a time over 32 rows of
// W, which stay in cache meanwhile. A vector takes four rows of W at a
// time.
func matMulQ8Rows(dst []float32, xq []byte, m int, w *Packed, j0, j1 int) {
	k, n := w.k, w.n
	rb := k / Q8Block * q8ActBytes
	var (
		as  [4][]byte
		rs  [4][]byte
		out [4]float32
	)
	const tile = 32
	m4 := m / 4 * 4
	for t := j0; t < j1; t += tile {
		t1 := min(t+tile, j1)
		for i := 0; i < m4; i += 4 {
			for r := range 4 {
				as[r] = xq[(i+r)*rb : (i+r+1)*rb]
			}
			for j := t; j < t1; j++ {
				row := w.q8Row(j)
				rs = [4][]byte{row, row, row, row}
				activeQ8Dot4(k, &as, &rs, &out)
				for r := range 4 {
					dst[(i+r)*n+j] = out[r]
				}
			}
		}
	}
	for i := m4; i < m; i++ {
		x := xq[i*rb : (i+1)*rb]
		as = [4][]byte{x, x, x, x}
		for j := j0; j < j1; j += 4 {
			for r := range 4 {
				rs[r] = w.q8Row(min(j+r, j1-1))
			}
			activeQ8Dot4(k, &as, &rs, &out)
			copy(dst[i*n+j:i*n+min(j+4, j1)], out[:])
		}
	}
}

// q8Dot4Func computes four dot products, out[i] = a[i] · r[i].
// Each is a row of k quantised activations, q8ActBytes a block, against a
// q8_0 row of k weights.
type q8Dot4Func func(k int, a, r *[4][]byte, out *[4]float32)

var activeQ8Dot4 q8Dot4Func = goQ8Dot4

// This init runs after gemm.go's, which has settled activeName.
func init() {
	if activeName == "go" {
		return
	}
	if f := archQ8Dot4(); f != nil {
		activeQ8Dot4, q8Name = f, "avx2"
	}
	if g1, g4 := archQ8Panels(); g1 != nil {
		activeQ8Panels, activeQ8Panels4, q8Name = g1, g4, "avx512vnni"
		if q := archQuantizePanelAct(); q != nil {
			quantizePanelAct = q
		}
	}
}

var q8Name = "go"

// Q8Impl names the q8_0 products' kernel: "avx512vnni", "avx2" or "go".
// "avx512vnni" reads q8_0 panels; the others read llama.cpp's rows.
func Q8Impl() string { return q8Name }

func goQ8Dot4(k int, a, r *[4][]byte, out *[4]float32) {
	for i := range 4 {
		out[i] = goQ8Dot(k, a[i], r[i])
	}
}

// goQ8Dot is the portable q8_0 dot product. It sums as the vector kernel
// does. Lane l of 8 takes the exact integer sum of x[t]·q[t] over t in
// [4l, 4l+4) of a block. It adds that, times the product of the two
// scales, to its running total. The 8 totals are added pairwise at the end:
// 0+4, 1+5, 2+6, 3+7, then 0+2, 1+3, then 0+1. The multiply and the add
// are rounded separately, where the vector kernel fuses them.
func goQ8Dot(k int, x, row []byte) float32 {
	var acc [8]float32
	for b := 0; b < k/Q8Block; b++ {
		xb := x[b*q8ActBytes : (b+1)*q8ActBytes]
		wb := row[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
		d := math.Float32frombits(binary.LittleEndian.Uint32(xb)) * F16ToFloat32(binary.LittleEndian.Uint16(wb))
		xs, ws := xb[4:4+Q8Block], wb[2:2+Q8Block]
		for l := range 8 {
			var s int32
			for t := 4 * l; t < 4*l+4; t++ {
				s += int32(int8(xs[t])) * int32(int8(ws[t]))
			}
			acc[l] += float32(d * float32(s))
		}
	}
	return reduce8(acc)
}

// reduce8 adds eight lanes in the order the vector kernels do.
func reduce8(v [8]float32) float32 {
	for l := range 4 {
		v[l] += v[l+4]
	}
	v[0] += v[2]
	v[1] += v[3]
	return v[0] + v[1]
}
