package nn

import "github.com/delegatelab/delegate/nn/kernel"

// SwiGLU joins the two hidden projections of the MLP:
//
//	h = silu(a) · b,   silu(a) = a·σ(a),   a = W1·x (gate), b = W3·x (up)
//
// and the block's output is W2·h. Both engines compute it with these
// functions over any run of values, one row or many rows back to back.
// Package kernel runs them eight lanes at a time.

// SwiGLU writes h = silu(a) · b elementwise. h must not alias a.
func SwiGLU(h, a, b []float32) { kernel.SwiGLU(h, a, b) }

// SwiGLUBackward writes da and db from dh, overwriting them. da must not
// alias a or dh. The derivatives are:
//
//	∂h/∂a = b·σ(a)·(1 + a·(1−σ(a))),   ∂h/∂b = silu(a)
func SwiGLUBackward(da, db, dh, a, b []float32) { kernel.SwiGLUBackward(da, db, dh, a, b) }
