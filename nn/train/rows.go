package train

import (
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// The per-row layers of package nn over a batch's N rows, split across
// cores by rows. Each row gets the arithmetic of package nn's function, in
// the same order, so the two engines agree bit for bit on them.
//
// RMSNorm's sums over a row are chains of dependent adds, as long as the
// row. One chain at a time leaves the core waiting on each add. So the
// norms here take four rows at a time: four independent chains, each in
// its row's own order. The elementwise rest runs eight lanes at a time in
// package kernel, one rounding per operation as in package nn.

// rmsNormForward writes y (N, D) from x (N, D) and g (D), and saves each
// row's r (N).
func rmsNormForward(y, r, x, g []float32, n, d int, eps float32) {
	parallel(n, rowChunk(d, 64), func(lo, hi int) {
		i := lo
		for ; i+4 <= hi; i += 4 {
			rmsNorm4(y[i*d:(i+4)*d], r[i:i+4], x[i*d:(i+4)*d], g[:d], eps)
		}
		for ; i < hi; i++ {
			r[i] = nn.RMSNorm(y[i*d:(i+1)*d], x[i*d:(i+1)*d], g, eps)
		}
	})
}

// rmsNorm4 is nn.RMSNorm on the four rows of x (4, D) into y (4, D).
// It writes their r (4); g is (D).
func rmsNorm4(y, r, x, g []float32, eps float32) {
	d := len(g)
	x0, x1, x2, x3 := x[:d], x[d:2*d], x[2*d:3*d], x[3*d:4*d]
	x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)] // no bounds checks in the loop
	var s0, s1, s2, s3 float32
	for j, v := range x0 {
		s0 += v * v
		s1 += x1[j] * x1[j]
		s2 += x2[j] * x2[j]
		s3 += x3[j] * x3[j]
	}
	fd := float32(d)
	r0 := 1 / float32(math.Sqrt(float64(s0/fd+eps)))
	r1 := 1 / float32(math.Sqrt(float64(s1/fd+eps)))
	r2 := 1 / float32(math.Sqrt(float64(s2/fd+eps)))
	r3 := 1 / float32(math.Sqrt(float64(s3/fd+eps)))
	r = r[:4]
	r[0], r[1], r[2], r[3] = r0, r1, r2, r3
	kernel.RMSNormApply(y[:d], x0, g, r0)
	kernel.RMSNormApply(y[d:2*d], x1, g, r1)
	kernel.RMSNormApply(y[2*d:3*d], x2, g, r2)
	kernel.RMSNormApply(y[3*d:4*d], x3, g, r3)
}

// rmsNormBackward accumulates dx (N, D) += ∂L/∂x and dg (D) += ∂L/∂g from
// dy (N, D). Rows are independent for dx and run in parallel. dg is summed
// over rows in order, so the result does not depend on the number of
// goroutines.
func rmsNormBackward(dx, dg, dy, x, g, r []float32, n, d int) {
	parallel(n, rowChunk(d, 64), func(lo, hi int) {
		i := lo
		for ; i+4 <= hi; i += 4 {
			rmsNormBackward4(dx[i*d:(i+4)*d], dy[i*d:(i+4)*d], x[i*d:(i+4)*d], g[:d], r[i:i+4])
		}
		for ; i < hi; i++ {
			nn.RMSNormBackward(dx[i*d:(i+1)*d], dy[i*d:(i+1)*d], x[i*d:(i+1)*d], g, r[i])
		}
	})
	for i := range n {
		kernel.RMSNormGain(dg[:d], dy[i*d:(i+1)*d], x[i*d:(i+1)*d], r[i])
	}
}

// rmsNormBackward4 is nn.RMSNormBackward on four rows: dx, dy and x are
// (4, D), g is (D) and r (4).
func rmsNormBackward4(dx, dy, x, g, r []float32) {
	d := len(g)
	x0, x1, x2, x3 := x[:d], x[d:2*d], x[2*d:3*d], x[3*d:4*d]
	dy0, dy1, dy2, dy3 := dy[:d], dy[d:2*d], dy[2*d:3*d], dy[3*d:4*d]
	x0, x1, x2, x3 = x0[:len(g)], x1[:len(g)], x2[:len(g)], x3[:len(g)] // no bounds checks in the loop
	dy0, dy1, dy2, dy3 = dy0[:len(g)], dy1[:len(g)], dy2[:len(g)], dy3[:len(g)]
	var s0, s1, s2, s3 float32
	for j, gj := range g {
		s0 += dy0[j] * gj * x0[j]
		s1 += dy1[j] * gj * x1[j]
		s2 += dy2[j] * gj * x2[j]
		s3 += dy3[j] * gj * x3[j]
	}
	r = r[:4]
	r0, r1, r2, r3 := r[0], r[1], r[2], r[3]
	fd := float32(d)
	c0 := r0 * r0 * r0 * s0 / fd
	c1 := r1 * r1 * r1 * s1 / fd
	c2 := r2 * r2 * r2 * s2 / fd
	c3 := r3 * r3 * r3 * s3 / fd
	kernel.RMSNormInput(dx[:d], dy0, x0, g, r0, c0)
	kernel.RMSNormInput(dx[d:2*d], dy1, x1, g, r1, c1)
	kernel.RMSNormInput(dx[2*d:3*d], dy2, x2, g, r2, c2)
	kernel.RMSNormInput(dx[3*d:4*d], dy3, x3, g, r3, c3)
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
