package nn

import "github.com/delegatelab/delegate/nn/kernel"

// SwiGLU joins the two hidden projections of the MLP:
//
//	h = silu(a) · b,   silu(a) = a·σ(a),   a = W1·x (gate), b = W3·x (up)
//
// and the block's output is W2·h. Both engines compute it with these
// functions over any run of values (one row, or many rows back to back).

// SwiGLU writes h = silu(a) · b elementwise. h must not alias a (it holds
// e^−a before a is read).
func SwiGLU(h, a, b []float32) {
	h, b = h[:len(a)], b[:len(a)]
	kernel.ExpSum(h, a, -1, 0) // h = e^−a, then silu(a)·b
	for i, x := range a {
		h[i] = x / (1 + h[i]) * b[i]
	}
}

// SwiGLUBackward writes da and db, overwriting them, from dh; da must not
// alias a or dh (it holds e^−a before they are read):
//
//	∂h/∂a = b·σ(a)·(1 + a·(1−σ(a))),   ∂h/∂b = silu(a)
func SwiGLUBackward(da, db, dh, a, b []float32) {
	da, db, dh, b = da[:len(a)], db[:len(a)], dh[:len(a)], b[:len(a)]
	kernel.ExpSum(da, a, -1, 0) // da = e^−a until overwritten below
	for i, x := range a {
		sig := 1 / (1 + da[i])
		db[i] = dh[i] * x * sig
		da[i] = dh[i] * b[i] * sig * (1 + x*(1-sig))
	}
}
