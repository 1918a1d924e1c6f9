package nn

import "github.com/delegatelab/delegate/nn/kernel"

// SwiGLU joins the two hidden projections of the MLP:
//
//	h = silu(a) · b,   silu(a) = a·σ(a),   a = W1·x (gate), b = W3·x (up)
//
// and the block's output is W2·h.

// trainSwiGLUForward writes h (N, Hidden) = silu(a) · b elementwise. h
// must not alias a (it holds e^−a before a is read).
func trainSwiGLUForward(h, a, b []float32) {
	trainParallel(len(h), 4096, func(lo, hi int) {
		kernel.ExpSum(h[lo:hi], a[lo:hi], -1, 0) // h = e^−a, then silu(a)·b
		for i := lo; i < hi; i++ {
			h[i] = a[i] / (1 + h[i]) * b[i]
		}
	})
}

// trainSwiGLUBackward writes da and db (N, Hidden), overwriting them, from
// dh; da must not alias a or dh (it holds e^−a before they are read):
//
//	∂h/∂a = b·σ(a)·(1 + a·(1−σ(a))),   ∂h/∂b = silu(a)
func trainSwiGLUBackward(da, db, dh, a, b []float32) {
	trainParallel(len(dh), 4096, func(lo, hi int) {
		kernel.ExpSum(da[lo:hi], a[lo:hi], -1, 0) // da = e^−a until overwritten below
		for i := lo; i < hi; i++ {
			x := a[i]
			sig := 1 / (1 + da[i])
			db[i] = dh[i] * x * sig
			da[i] = dh[i] * b[i] * sig * (1 + x*(1-sig))
		}
	})
}
