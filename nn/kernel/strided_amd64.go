//go:build !purego

package kernel

import "unsafe"

//go:noescape
func strided8AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)

//go:noescape
func strided4AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)

//go:noescape
func strided2AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)

//go:noescape
func strided1AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)

// archStrided is the AVX-512 stridedFunc, nil where the CPU lacks AVX-512.
var archStrided = func() stridedFunc {
	if !haveAVX512() {
		return nil
	}
	return asmStrided
}()

// asmStrided checks bounds, then runs the kernel for r rows: 8, 4, 2 or 1.
func asmStrided(r, k int, a []float32, ars, aps int, b []float32, ldb, bps int, c []float32, ldc, panels int, acc bool) {
	if panels == 0 {
		return
	}
	if k > 0 {
		_ = a[(r-1)*ars+(k-1)*aps]
		_ = b[(panels-1)*bps+(k-1)*ldb+nr-1]
	}
	_ = c[(r-1)*ldc+panels*nr-1]
	pa, pb, pc := unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c)
	switch r {
	case 8:
		strided8AVX512(k, pa, ars, aps, pb, ldb, bps, pc, ldc, panels, acc)
	case 4:
		strided4AVX512(k, pa, ars, aps, pb, ldb, bps, pc, ldc, panels, acc)
	case 2:
		strided2AVX512(k, pa, ars, aps, pb, ldb, bps, pc, ldc, panels, acc)
	case 1:
		strided1AVX512(k, pa, ars, aps, pb, ldb, bps, pc, ldc, panels, acc)
	default:
		panic("kernel.asmStrided: rows not 1, 2, 4 or 8") // a programming error
	}
}
