package train

import (
	"github.com/delegatelab/delegate/nn"
)

// The per-row layers of package nn over a batch's N rows, split across
// cores by rows. Each row is computed by the same function as in the
// inference engine, so the two engines agree bit for bit on them.

// rmsNormForward writes y (N, D) from x (N, D) and g (D), and saves each
// row's r (N).
func rmsNormForward(y, r, x, g []float32, n, d int, eps float32) {
	parallel(n, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r[i] = nn.RMSNorm(y[i*d:(i+1)*d], x[i*d:(i+1)*d], g, eps)
		}
	})
}

// rmsNormBackward accumulates dx (N, D) += ∂L/∂x and dg (D) += ∂L/∂g from
// dy (N, D). Rows are independent for dx and run in parallel. dg is summed
// over rows in order, so the result does not depend on the number of
// goroutines.
func rmsNormBackward(dx, dg, dy, x, g, r []float32, n, d int) {
	parallel(n, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			nn.RMSNormBackward(dx[i*d:(i+1)*d], dy[i*d:(i+1)*d], x[i*d:(i+1)*d], g, r[i])
		}
	})
	for i := 0; i < n; i++ {
		nn.RMSNormGainGrad(dg, dy[i*d:(i+1)*d], x[i*d:(i+1)*d], r[i])
	}
}

// swiGLUForward writes h (N, Hidden) = silu(a) · b elementwise; h must not
// alias a.
func swiGLUForward(h, a, b []float32) {
	parallel(len(h), 4096, func(lo, hi int) {
		nn.SwiGLU(h[lo:hi], a[lo:hi], b[lo:hi])
	})
}

// swiGLUBackward writes da and db (N, Hidden), overwriting them, from dh;
// da must not alias a or dh.
func swiGLUBackward(da, db, dh, a, b []float32) {
	parallel(len(dh), 4096, func(lo, hi int) {
		nn.SwiGLUBackward(da[lo:hi], db[lo:hi], dh[lo:hi], a[lo:hi], b[lo:hi])
	})
}
