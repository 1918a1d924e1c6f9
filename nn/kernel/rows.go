package kernel

// Products of a few rows of activations with a Packed, the decoder's batch.
// A batch of up to 64 rows is read in place, with no packing, and each pair
// of panels is computed for all rows before the next: a tile of up to 8
// rows by 32 columns over the whole of k. The general path packs A in
// blocks and runs the 6-row kernel, whose last tile of a 32-row batch is
// 2 rows computed as 6 by the 16-column kernel.

// rowsInPlace is the most rows a product over a Packed reads in place.
// Above it A is packed as for any product, and B's panels stay in L1.
const rowsInPlace = 64

// rowsFunc computes c(r, 32) = a(r, k) · [b0 b1](k, 32) for r of 1, 2, 4 or 8.
// a has row stride lda and c row stride ldc; b0 and b1 are panels of a
// Packed, 16 floats a step. Each element is one fused multiply-add per
// step of k in order from zero, as the AVX-512 micro-kernel computes it.
// With 8 rows it prefetches the first 16·k floats of pf, if any.
type rowsFunc func(r, k int, a []float32, lda int, b0, b1, c []float32, ldc int, pf []float32)

// matMulRows computes the leading columns of [j0, j1) of dst = a · Wᵀ that
// whole pairs of full panels cover, and returns the end of those columns.
// The caller computes the rest.
func matMulRows(dst, a []float32, m int, w *Packed, j0, j1 int) int {
	k, n := w.k, w.n
	stop := min(j1, n) / nr // panels below stop are full and in range
	q := j0 / nr
	for ; q+2 <= stop; q += 2 {
		b0 := w.data[q*nr*k : (q+1)*nr*k]
		b1 := w.data[(q+1)*nr*k : (q+2)*nr*k]
		// The next pair, 32·k floats, comes from memory in two halves,
		// during the first two tiles over this pair.
		next := w.data[min((q+2)*nr*k, len(w.data)):]
		for i, t := 0, 0; i < m; t++ {
			r := 8
			for r > m-i {
				r /= 2
			}
			var pf []float32
			if t < 2 {
				pf = next[min(t*16*k, len(next)):]
			}
			archRows(r, k, a[i*k:], k, b0, b1, dst[i*n+q*nr:], n, pf)
			i += r
		}
	}
	return q * nr
}
