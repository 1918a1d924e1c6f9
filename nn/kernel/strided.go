package kernel

// Products of small matrices read in place through strides, such as one
// attention head's columns of a fused projection. They need no packing of
// A and, with B row-major, none of B. They serve where the blocked
// product's packing and edge tiles cost as much as its arithmetic.

// stridedFunc computes c(r, 16·panels) = or += A(r, k)·B(k, 16·panels) for r of 1, 2, 4 or 8.
// A's element (i, p) is a[i·ars+p·aps]; step p of B's panel q is the 16
// floats at b[q·bps+p·ldb]; c has row stride ldc. Each element is one fused
// multiply-add per step of k in order, from zero or, with acc, from c.
type stridedFunc func(r, k int, a []float32, ars, aps int, b []float32, ldb, bps int, c []float32, ldc, panels int, acc bool)

// HaveStrided reports whether MatMulStrided runs on this machine.
// It needs AVX-512, and the assembly (no purego tag).
func HaveStrided() bool { return archStrided != nil }

// MatMulStrided computes dst(m, n) = A(m, k)·B(k, n), or adds A·B to dst when acc is set.
// A is read through strides: its element (i, p) is a[i·ars+p·aps], so a
// matrix and its transpose are read in place alike. B comes in panels of
// 16 columns: column 16q+c of row p is b[q·bps+p·ldb+c]. A row-major B
// with row stride ld has ldb = ld and bps = 16; PackPanels' layout has
// ldb = 16 and bps = 16·k. Row i of dst starts at dst[i·ldd]. n must be a
// multiple of 16 and the strides non-negative.
//
// Each element is a chain of fused multiply-adds over p in increasing
// order, from zero or from dst, as in MatMulNT, MatMulNN and MatMulTNAcc:
// on the same values it gives their bits. It reports false, and does
// nothing, where HaveStrided does.
func MatMulStrided(dst []float32, ldd int, a []float32, ars, aps int, b []float32, ldb, bps int, m, k, n int, acc bool) bool {
	f := archStrided
	if f == nil {
		return false
	}
	if m < 0 || k < 0 || n < 0 || n%nr != 0 || ars < 0 || aps < 0 || ldb < 0 || bps < 0 || ldd < 0 {
		panic("kernel.MatMulStrided: negative dimension or stride, or n not a multiple of 16") // a programming error
	}
	panels := n / nr
	if m == 0 || panels == 0 {
		return true
	}
	if k == 0 {
		if !acc {
			for i := range m {
				clear(dst[i*ldd : i*ldd+n])
			}
		}
		return true
	}
	for i := 0; i < m; {
		r := 8
		for r > m-i {
			r /= 2
		}
		f(r, k, a[i*ars:], ars, aps, b, ldb, bps, dst[i*ldd:], ldd, panels, acc)
		i += r
	}
	return true
}

// PackPanels packs b(n, k), row stride ld, into the panels MatMulStrided reads as Bᵀ.
// Panel q holds, for each step p, the 16 values b[16q+c][p] side by side,
// zero where 16q+c ≥ n. dst needs ⌈n/16⌉·16·k floats. Then
// MatMulStrided(dst, …, PackPanels' dst, 16, 16·k, …) computes A·bᵀ.
func PackPanels(dst, b []float32, n, k, ld int) {
	if k == 0 {
		return
	}
	full := n / nr
	for q := range full {
		activePackT16(dst[q*nr*k:(q+1)*nr*k], b[q*nr*ld:], ld, k)
	}
	if rest := n - full*nr; rest > 0 {
		panel := dst[full*nr*k : (full+1)*nr*k]
		for p := range k {
			out := panel[p*nr : (p+1)*nr]
			for c := range rest {
				out[c] = b[(full*nr+c)*ld+p]
			}
			clear(out[rest:])
		}
	}
}
