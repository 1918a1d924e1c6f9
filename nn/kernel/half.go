package kernel

import (
	"fmt"
	"math"
	"sync"
)

// DType is how a Packed stores its values.
type DType uint8

const (
	Float32  DType = iota // 4 bytes a value
	BFloat16              // bfloat16: the high 16 bits of a float32
	Float16               // IEEE 754 binary16
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "f32"
	case BFloat16:
		return "bf16"
	case Float16:
		return "f16"
	case Q8_0:
		return "q8_0"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the bytes one value takes; for Q8_0, which takes 8.5 bits, 1.
func (d DType) Size() int {
	if d == Q8_0 {
		return 1
	}
	if d == Float32 {
		return 4
	}
	return 2
}

// NewPackedHalf is NewPacked for a matrix kept in BFloat16 or Float16.
// That is half the memory of float32 and half the bytes a product reads.
// Products widen each value exactly to float32 as they read it, so a
// product over a half-width Packed has the bits of the same product over a
// float32 Packed of the widened values. RepackHalf fills it.
func NewPackedHalf(dt DType, k int, rows ...int) *Packed {
	if dt != BFloat16 && dt != Float16 {
		panic("kernel.NewPackedHalf: not a 16-bit type") // a programming error
	}
	w := &Packed{k: k, dtype: dt, pairs: dt == BFloat16 && activeBF16Pairs8 != nil}
	for _, r := range rows {
		if r < 0 || k < 0 {
			panic("kernel.NewPackedHalf: negative dimension") // a programming error
		}
		w.parts = append(w.parts, packPart{row0: w.n, n: r})
		w.n += r
	}
	w.half = make([]uint16, w.panels()*nr*k)
	return w
}

// halfIndex is where a half-width panel keeps the value of column r at k step p.
// r counts 16 columns. The usual layout is p·16 + r, each step's 16 values
// side by side. Where the AVX-512 bfloat16 kernel runs, steps p and p+1, p
// even, are interleaved column by column instead, so one 32-bit lane holds
// both. The kernel then widens them with a shift and a mask instead of a
// shuffle. When k is odd the last step stays alone, in the usual order.
func (w *Packed) halfIndex(p, r int) int {
	if !w.pairs || p == w.k-1 && w.k%2 == 1 {
		return p*nr + r
	}
	return (p&^1)*nr + 2*r + p&1
}

// DType reports how w stores its values.
func (w *Packed) DType() DType { return w.dtype }

// Bytes is the memory w's values take.
func (w *Packed) Bytes() int64 {
	if w.half != nil {
		return 2 * int64(len(w.half))
	}
	if w.q8 != nil {
		return int64(len(w.q8))
	}
	return 4 * int64(len(w.data))
}

// RepackHalfPanels copies panels [q0, q1) of a half-width Packed from parts.
// The parts are row-major 16-bit matrices of the shapes given at creation,
// the raw bits of w's DType. Goroutines may fill disjoint ranges at once.
func (w *Packed) RepackHalfPanels(q0, q1 int, parts ...[]uint16) {
	if w.half == nil {
		panic("kernel.Packed.RepackHalfPanels: not a half-width Packed") // a programming error
	}
	if len(parts) != len(w.parts) {
		panic(fmt.Sprintf("kernel.Packed.RepackHalfPanels: %d matrices, packed from %d", len(parts), len(w.parts))) // a programming error
	}
	for i, p := range parts {
		if len(p) != w.parts[i].n*w.k {
			panic(fmt.Sprintf("kernel.Packed.RepackHalfPanels: matrix %d has %d values, want %d", i, len(p), w.parts[i].n*w.k)) // a programming error
		}
	}
	k := w.k
	for q := q0; q < q1; q++ {
		panel := w.half[q*nr*k : (q+1)*nr*k]
		for r := 0; r < nr; r++ {
			j := q*nr + r
			var row []uint16 // nil: padding, zeros
			if j < w.n {
				pi := w.partOf(j)
				row = parts[pi][(j-w.parts[pi].row0)*k : (j-w.parts[pi].row0+1)*k]
			}
			w.putColumn(panel, r, row)
		}
	}
}

// putColumn writes row (k values, or zeros when nil) as column r of one
// panel, in w's layout (halfIndex, unrolled).
func (w *Packed) putColumn(panel []uint16, r int, row []uint16) {
	k := w.k
	at := func(p int) uint16 {
		if row == nil {
			return 0
		}
		return row[p]
	}
	p := 0
	if w.pairs {
		for ; p+1 < k; p += 2 {
			i := p*nr + 2*r
			panel[i], panel[i+1] = at(p), at(p+1)
		}
	}
	for ; p < k; p++ {
		panel[p*nr+r] = at(p)
	}
}

// BF16ToFloat32 widens a bfloat16.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16ToFloat32 widens an IEEE 754 half-precision value, subnormals,
// infinities and NaNs included.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0: // zero
		return math.Float32frombits(sign)
	}
	// Subnormal: value man·2^-24, exactly representable in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// widenGo widens n = len(dst) values of src of type dt.
func widenGo(dst []float32, src []uint16, dt DType) {
	src = src[:len(dst)]
	if dt == BFloat16 {
		for i, h := range src {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	for i, h := range src {
		dst[i] = F16ToFloat32(h)
	}
}

// widenPanels widens whole panels of w, src, into dst in the float32 panels' order.
// That is 16 values per k step, undoing the pairs of halfIndex.
func (w *Packed) widenPanels(dst []float32, src []uint16) {
	if !w.pairs {
		widen(dst, src, w.dtype)
		return
	}
	if activeWidenBF16Pairs != nil {
		activeWidenBF16Pairs(dst, src, w.k)
		return
	}
	k := w.k
	for q := 0; q < len(dst)/(nr*k); q++ {
		d, s := dst[q*nr*k:(q+1)*nr*k], src[q*nr*k:(q+1)*nr*k]
		for p := range k {
			for r := range nr {
				d[p*nr+r] = BF16ToFloat32(s[w.halfIndex(p, r)])
			}
		}
	}
}

// widen widens src into dst (equal lengths), with the assembly where
// there is one.
func widen(dst []float32, src []uint16, dt DType) {
	n := len(dst)
	if f := activeWiden[dt]; f != nil && n >= 8 {
		m := n &^ 7
		f(dst[:m], src[:m])
		widenGo(dst[m:], src[m:n], dt)
		return
	}
	widenGo(dst, src[:n], dt)
}

// halfRow is Row for a half-width Packed.
func (w *Packed) halfRow(dst []float32, j int) {
	k := w.k
	panel := w.half[(j/nr)*nr*k:]
	r := j % nr
	if w.dtype == BFloat16 {
		for p := range dst[:k] {
			dst[p] = BF16ToFloat32(panel[w.halfIndex(p, r)])
		}
		return
	}
	for p := range dst[:k] {
		dst[p] = F16ToFloat32(panel[p*nr+r])
	}
}

// halfChunk is how many panels a product of several rows widens to float32 at a time.
// The matrix kernels then run over them; the buffer takes 1 KiB per input
// value k. Each chunk is a product of its own, which packs the rows of a
// again, so few panels per chunk are slow. docs/hf-models.md has the
// measurements behind 16.
const halfChunk = 16

var halfBufs = sync.Pool{New: func() any { return new([]float32) }}

// matMulHalfCols is MatMulPackedCols for a half-width w.
func matMulHalfCols(dst, a []float32, m int, w *Packed, j0, j1 int) {
	k := w.k
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(dst[i*w.n+j0 : i*w.n+j1])
		}
		return
	}
	if m == 1 {
		gemvHalf(dst, a, w, j0, j1)
		return
	}
	bp := halfBufs.Get().(*[]float32)
	defer halfBufs.Put(bp)
	if len(*bp) < halfChunk*nr*k {
		*bp = make([]float32, halfChunk*nr*k)
	}
	buf := *bp
	for q := j0 / nr; q*nr < j1; q += halfChunk {
		q1 := min(q+halfChunk, w.panels())
		wide := buf[:(q1-q)*nr*k]
		w.widenPanels(wide, w.half[q*nr*k:q1*nr*k])
		c0, c1 := q*nr, min(q1*nr, j1)
		pr := problem{op: opNT, dst: dst[c0:], a: a, m: m, k: k, n: w.n, kern: active, kern2: activeKernel2, packed: wide}
		pr.run(0, m, 0, c1-c0)
	}
}

// gemvHalf is gemv for a half-width w.
func gemvHalf(dst, a []float32, w *Packed, j0, j1 int) {
	k := w.k
	g8, g4, g1 := activeGemvHalf8[w.dtype], activeGemvHalf4[w.dtype], activeGemvHalf1[w.dtype]
	q := j0 / nr
	if w.pairs {
		// Only the pairs kernels read pairs; without them, panels
		// are widened, then go through the float32 kernel.
		g8, g4, g1 = activeBF16Pairs8, activeBF16Pairs4, activeBF16Pairs1
		q = gemvSpaced(dst, a, w, g4, q, j1)
	} else {
		q = gemvSpaced(dst, a, w, g4, q, j1)
	}
	var wide []float32
	if g1 == nil {
		bp := halfBufs.Get().(*[]float32)
		defer halfBufs.Put(bp)
		if len(*bp) < nr*k {
			*bp = make([]float32, nr*k)
		}
		wide = (*bp)[:nr*k]
	}
	for q*nr < j1 {
		panel := w.half[q*nr*k:]
		if q*nr+8*nr <= j1 && g8 != nil {
			g8(k, a, panel, nr*k, dst[q*nr:q*nr+8*nr])
			q += 8
			continue
		}
		if q*nr+4*nr <= j1 && g4 != nil {
			g4(k, a, panel, nr*k, dst[q*nr:q*nr+4*nr])
			q += 4
			continue
		}
		c := dst[q*nr : min(q*nr+nr, j1)]
		if g1 != nil {
			g1(k, a, panel, c)
		} else {
			w.widenPanels(wide, panel[:nr*k])
			activeGemv1(k, a, wide, c)
		}
		q++
	}
}

// halfStreamGap is the least distance in bytes between the panels gemvSpaced streams.
// It streams four at once. Half-width streams further apart read faster;
// docs/hf-models.md has the measurements.
var halfStreamGap = 128 << 10

// gemvSpaced computes whole panels of a half-width w from panel q on, four at a time.
// g4 is a four-panel kernel that reads w's layout; the four panels lie
// halfStreamGap apart in memory. It returns the first panel it left; the
// caller does the rest, under four spaced blocks' worth, and a partial last
// panel. Each panel's sums are the eight-panel kernel's, so which call
// reads a panel changes nothing in its columns.
func gemvSpaced(dst, a []float32, w *Packed, g4 gemvHalf4Func, q, j1 int) int {
	if g4 == nil {
		return q
	}
	k := w.k
	size := nr * k // values in a panel
	gap := max(1, (halfStreamGap+2*size-1)/(2*size))
	var c [4 * nr]float32
	for (q+4*gap)*nr <= j1 {
		for j := range gap {
			g4(k, a, w.half[(q+j)*size:], gap*size, c[:])
			for i := range 4 {
				p := q + j + i*gap
				copy(dst[p*nr:(p+1)*nr], c[i*nr:(i+1)*nr])
			}
		}
		q += 4 * gap
	}
	return q
}

// gemvHalf1Func and gemvHalf4Func are gemv1Func and gemv4Func over
// half-width panels.
type (
	gemvHalf1Func func(k int, a []float32, b []uint16, c []float32)
	gemvHalf4Func func(k int, a []float32, b []uint16, stride int, c []float32)
)

// The half-width kernels in use, by DType; nil where there is none.
// Without one, the portable path widens a panel, then runs activeGemv1. The
// eight-panel kernels are AVX-512's: eight streams read 16-bit weights
// faster than four, as docs/hf-models.md records.
var (
	activeGemvHalf1 [3]gemvHalf1Func
	activeGemvHalf4 [3]gemvHalf4Func
	activeGemvHalf8 [3]gemvHalf4Func // c holds 128 values
	activeWiden     [3]func(dst []float32, src []uint16)

	// These read bfloat16 panels stored in pairs of k steps, as halfIndex
	// lays them. They are the eight-panel product and the widening of whole
	// panels. A Packed made while activeBF16Pairs8 is nil keeps the usual
	// layout.
	activeBF16Pairs8     gemvHalf4Func
	activeBF16Pairs4     gemvHalf4Func // four panels, any stride (gemvSpaced)
	activeBF16Pairs1     gemvHalf1Func
	activeWidenBF16Pairs func(dst []float32, src []uint16, k int)
)

// This init runs after gemm.go's (a package's files initialize in name
// order), which has settled activeName.
func init() {
	if activeName != "go" {
		activeGemvHalf1, activeGemvHalf4, activeWiden = archGemvHalf()
	}
	if activeName == "avx512" {
		activeGemvHalf8 = archGemvHalf8()
		activeBF16Pairs8, activeBF16Pairs4, activeBF16Pairs1, activeWidenBF16Pairs = archBF16Pairs()
	}
}
