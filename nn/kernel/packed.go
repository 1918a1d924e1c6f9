package kernel

import "fmt"

// Packed is a weight matrix laid out once in the form the micro-kernels read.
// W is (n, k), stored (out, in) like every weight of the model. A panel
// holds 16 rows of W, the 16 output columns of x · Wᵀ. Panel q holds, for
// each step p of k, the values W[16q+r][p] side by side. Rows past n are
// zero. Products read a Packed in place, so a weight matrix used by many
// products, such as successive decode steps, is transposed once.
//
// A Packed is a copy: it does not follow later changes to the matrices it
// was packed from. Repack refreshes it. Products may read a Packed
// concurrently; Repack must not run concurrently with them.
type Packed struct {
	n, k  int
	data  []float32 // (panels, k, 16); nil when half-width
	parts []packPart
	dtype DType    // Float32, or the type of half
	half  []uint16 // (panels, k, 16) 16-bit values, for BFloat16 and Float16
	pairs bool     // half holds pairs of k steps interleaved (halfIndex)
	q8    []byte   // (n, k/32, 34) q8_0 rows, for Q8_0 (q8.go), or q8_0 panels
	// q8panels says q8 holds q8_0 panels (q8vnni.go).
	q8panels bool
}

// packPart is one source matrix stacked into a Packed: rows [row0, row0+n)
// of W.
type packPart struct {
	row0, n int
}

// NewPacked returns an empty Packed for source matrices stacked into n rows of k.
// rows gives the sources' row counts, which sum to n. Repack with matrices
// of those shapes fills it.
func NewPacked(k int, rows ...int) *Packed {
	w := &Packed{k: k}
	for _, r := range rows {
		if r < 0 || k < 0 {
			panic("kernel.NewPacked: negative dimension") // a programming error
		}
		w.parts = append(w.parts, packPart{row0: w.n, n: r})
		w.n += r
	}
	w.data = make([]float32, w.panels()*nr*k)
	return w
}

// Pack returns W, the matrices parts (each (rows_i, k), row-major) stacked
// along n, packed.
func Pack(k int, parts ...[]float32) *Packed {
	rows := make([]int, len(parts))
	for i, p := range parts {
		if k > 0 {
			rows[i] = len(p) / k
		}
	}
	w := NewPacked(k, rows...)
	w.Repack(parts...)
	return w
}

// N and K are the matrix's shape (rows, values per row).
func (w *Packed) N() int { return w.n }
func (w *Packed) K() int { return w.k }

// Panels is the number of 16-column panels; column ranges given to
// MatMulPackedCols are whole panels.
func (w *Packed) Panels() int { return w.panels() }

func (w *Packed) panels() int { return (w.n + nr - 1) / nr }

// Repack copies the current values of parts (the same shapes as at
// creation) into w.
func (w *Packed) Repack(parts ...[]float32) {
	w.RepackPanels(0, w.panels(), parts...)
}

// RepackPanels is Repack for panels [q0, q1) only.
// Several goroutines can so refresh disjoint ranges of one matrix at once.
func (w *Packed) RepackPanels(q0, q1 int, parts ...[]float32) {
	if w.half != nil || w.q8 != nil {
		panic("kernel.Packed.RepackPanels: a half-width or q8_0 Packed is filled by RepackHalfPanels or RepackQ8") // a programming error
	}
	if len(parts) != len(w.parts) {
		panic(fmt.Sprintf("kernel.Packed.Repack: %d matrices, packed from %d", len(parts), len(w.parts))) // a programming error
	}
	for i, p := range parts {
		if len(p) != w.parts[i].n*w.k {
			panic(fmt.Sprintf("kernel.Packed.Repack: matrix %d has %d values, want %d", i, len(p), w.parts[i].n*w.k)) // a programming error
		}
	}
	k := w.k
	pack := activePackT16
	if pack == nil {
		pack = goPackT16
	}
	for q := q0; q < q1; q++ {
		panel := w.data[q*nr*k : (q+1)*nr*k]
		j0 := q * nr
		// The common case: all 16 rows from one part, a full panel.
		if pi := w.partOf(j0); j0+nr <= w.parts[pi].row0+w.parts[pi].n && k > 0 {
			src := parts[pi][(j0-w.parts[pi].row0)*k:]
			pack(panel, src, k, k)
			continue
		}
		for r := 0; r < nr; r++ {
			j := j0 + r
			if j >= w.n {
				for p := 0; p < k; p++ {
					panel[p*nr+r] = 0
				}
				continue
			}
			pi := w.partOf(j)
			row := parts[pi][(j-w.parts[pi].row0)*k : (j-w.parts[pi].row0+1)*k]
			for p, v := range row {
				panel[p*nr+r] = v
			}
		}
	}
}

// partOf returns the index of the part holding row j (j < n).
func (w *Packed) partOf(j int) int {
	for i, p := range w.parts {
		if j < p.row0+p.n {
			return i
		}
	}
	return len(w.parts) - 1
}

// Row copies row j of W (k values) into dst: a gather of stride 16.
func (w *Packed) Row(dst []float32, j int) {
	if w.half != nil {
		w.halfRow(dst, j)
		return
	}
	if w.q8 != nil {
		w.q8RowValues(dst, j)
		return
	}
	k := w.k
	panel := w.data[(j/nr)*nr*k:]
	r := j % nr
	for p := range dst[:k] {
		dst[p] = panel[p*nr+r]
	}
}

// MatMulPacked computes dst(m,n) = a(m,k) · Wᵀ, overwriting dst, split
// across runtime.GOMAXPROCS(0) goroutines when large, like MatMulNT. Every
// element has the bits MatMulNT gives for the same operands. A product of
// one row is split by columns among helpers that spin between products
// (team.go); while one call holds them, a concurrent one runs on its caller.
func MatMulPacked(dst, a []float32, m int, w *Packed) {
	if w.half != nil || w.q8 != nil {
		checkLen("MatMulPacked", m, w.k, w.n, dst, m*w.n, a, m*w.k, nil, 0)
		MatMulPackedCols(dst, a, m, w, 0, w.n)
		return
	}
	checkLen("MatMulPacked", m, w.k, w.n, dst, m*w.n, a, m*w.k, w.data, 0)
	if m == 1 {
		if w.k*w.n < oneRowSplit || !rowTeam.matVec(dst, a, w, defaultWorkers()) {
			MatMulPackedCols(dst, a, m, w, 0, w.n)
		}
		return
	}
	if 2*m*w.k*w.n < parallelFlops {
		MatMulPackedCols(dst, a, m, w, 0, w.n)
		return
	}
	pr := problem{op: opNT, dst: dst, a: a, m: m, k: w.k, n: w.n, kern: active, kern2: activeKernel2, packed: w.data}
	pr.split(defaultWorkers())
}

// PanelRange returns the columns [j0, j1) of part g of a product split by panels.
// The product's n columns in panels are cut into parts pieces of whole
// panels, an even number of them where it can, for the paired kernel.
func PanelRange(panels, parts, g, n int) (j0, j1 int) {
	pairs := (panels + 1) / 2
	q0 := 2 * (g * pairs / parts)
	q1 := 2 * ((g + 1) * pairs / parts)
	return min(q0*nr, n), min(q1*nr, n)
}

// MatMulPackedCols computes columns [j0, j1) of dst(m,n) = a(m,k) · Wᵀ on the caller.
// j0 is a multiple of 16 and j1 is one or n. Goroutines computing disjoint
// column ranges of one dst may run at once.
func MatMulPackedCols(dst, a []float32, m int, w *Packed, j0, j1 int) {
	checkLen("MatMulPackedCols", m, w.k, w.n, dst, m*w.n, a, m*w.k, w.data, 0)
	if j0%nr != 0 || j0 < 0 || j1 > w.n || (j1%nr != 0 && j1 != w.n) {
		panic("kernel.MatMulPackedCols: column range not whole panels") // a programming error
	}
	if j0 >= j1 || m == 0 {
		return
	}
	if w.half != nil {
		matMulHalfCols(dst, a, m, w, j0, j1)
		return
	}
	if w.q8 != nil {
		matMulQ8Cols(dst, a, m, w, j0, j1)
		return
	}
	if m == 1 {
		gemv(dst, a, w, j0, j1)
		return
	}
	// A batch reads A in place where the AVX-512 kernels are the active
	// ones: they round as the row kernels do.
	if m <= rowsInPlace && w.k > 0 && activeKernel2 != nil && archRows != nil {
		if j0 = matMulRows(dst, a, m, w, j0, j1); j0 >= j1 {
			return
		}
	}
	pr := problem{op: opNT, dst: dst, a: a, m: m, k: w.k, n: w.n, kern: active, kern2: activeKernel2, packed: w.data}
	pr.run(0, m, j0, j1)
}

// gemv computes columns [j0, j1) of the row vector dst(n) = a(k) · Wᵀ.
// Each element is a chain of multiply-adds over k in order from zero, as in
// the micro-kernels.
func gemv(dst, a []float32, w *Packed, j0, j1 int) {
	k := w.k
	if k == 0 {
		clear(dst[j0:j1])
		return
	}
	for q := j0 / nr; q*nr < j1; {
		panel := w.data[q*nr*k:]
		if q*nr+8*nr <= j1 && activeGemv8 != nil {
			activeGemv8(k, a, panel, nr*k, dst[q*nr:q*nr+8*nr])
			q += 8
			continue
		}
		if q*nr+4*nr <= j1 && activeGemv4 != nil {
			activeGemv4(k, a, panel, nr*k, dst[q*nr:q*nr+4*nr])
			q += 4
			continue
		}
		activeGemv1(k, a, panel, dst[q*nr:min(q*nr+nr, j1)])
		q++
	}
}

// gemv1Func computes c = a(k) · panel, the panel (k, 16), for the first
// len(c) <= 16 columns.
type gemv1Func func(k int, a, b, c []float32)

// gemv4Func computes c(64) = a(k) · four panels (k, 16) each stride floats
// apart.
type gemv4Func func(k int, a, b []float32, stride int, c []float32)

var (
	activeGemv1 gemv1Func = goGemv1
	activeGemv4 gemv4Func // nil: four goGemv1 calls
	activeGemv8 gemv4Func // eight panels, c holds 128 values; nil: activeGemv4
)

// goGemv1 is the portable panel-vector product.
// The explicit float32 conversion keeps the multiply and the add separately
// rounded, as in goKernel.
func goGemv1(k int, a, b, c []float32) {
	_ = a[k-1]
	_ = b[k*nr-1]
	var s [nr]float32
	for p, av := range a[:k] {
		bv := (*[nr]float32)(b[p*nr : p*nr+nr])
		for r := range s {
			s[r] += float32(av * bv[r])
		}
	}
	copy(c, s[:])
}
