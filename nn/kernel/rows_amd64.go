//go:build !purego

package kernel

import "unsafe"

//go:noescape
func rows8x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int, pf *float32)

//go:noescape
func rows4x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int)

//go:noescape
func rows2x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int)

//go:noescape
func rows1x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int)

// archRows is the AVX-512 rowsFunc, nil where the CPU lacks AVX-512.
var archRows = func() rowsFunc {
	if !haveAVX512() {
		return nil
	}
	return asmRows
}()

// asmRows checks bounds, then runs the kernel for r rows: 8, 4, 2 or 1.
// The 8-row kernel prefetches 64·(k/4) bytes from the start of pf, or of
// b0 when pf is empty. They need not all be in pf: a prefetch never faults.
func asmRows(r, k int, a []float32, lda int, b0, b1, c []float32, ldc int, pf []float32) {
	_ = a[(r-1)*lda+k-1]
	_ = b0[k*nr-1]
	_ = b1[k*nr-1]
	_ = c[(r-1)*ldc+2*nr-1]
	pa, p0, p1, pc := unsafe.SliceData(a), unsafe.SliceData(b0), unsafe.SliceData(b1), unsafe.SliceData(c)
	switch r {
	case 8:
		pp := p0
		if len(pf) > 0 {
			pp = &pf[0]
		}
		rows8x32AVX512(k, pa, lda, p0, p1, pc, ldc, pp)
	case 4:
		rows4x32AVX512(k, pa, lda, p0, p1, pc, ldc)
	case 2:
		rows2x32AVX512(k, pa, lda, p0, p1, pc, ldc)
	case 1:
		rows1x32AVX512(k, pa, lda, p0, p1, pc, ldc)
	default:
		panic("kernel.asmRows: rows not 1, 2, 4 or 8") // a programming error
	}
}
