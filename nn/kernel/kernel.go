// Package kernel holds the float32 matrix products the transformer spends its time in.
// It also holds the vector code of the elementwise steps: the exponential and
// softmax, SwiGLU, RMSNorm's elementwise halves, sums and scalings, the
// rotary turn, and AdamW; and, with AVX-512, small products read in place
// through strides (MatMulStrided). Each has a portable twin with the same bits,
// but for the exponential, whose lanes may differ from Exp in the last bit.
// Matrices are row-major; weights may also be bfloat16, float16 or
// llama.cpp's q8_0. Impl says which micro-kernel runs, Q8Impl which q8_0 kernel.
//
// Determinism: an element of the result is a multiply-add chain over k in
// increasing order. Its value depends only on its row of a, its column of b
// and k, not on m, on how the product is split, or on GOMAXPROCS. So one
// sequence's logits come out bitwise the same alone and in a batch. The
// assembly and pure-Go kernels round differently, since only one fuses the
// multiply-add, but a process uses one of them throughout.
//
// Aliasing: dst must not overlap a or b; a and b may overlap, as both are
// only read. Concurrent calls are safe as long as no call writes a dst that
// another call reads or writes.
package kernel

// MatMulNT computes dst(m,n) = a(m,k) · b(n,k)ᵀ, overwriting dst.
// This is a linear layer's forward pass: activations times weights stored
// (out, in).
func MatMulNT(dst, a, b []float32, m, k, n int) {
	checkLen("MatMulNT", m, k, n, dst, m*n, a, m*k, b, n*k)
	pr := problem{op: opNT, dst: dst, a: a, b: b, m: m, k: k, n: n, kern: active, kern2: activeKernel2, packT16: activePackT16}
	pr.do(defaultWorkers())
}

// MatMulNN computes dst(m,n) = a(m,k) · b(k,n), overwriting dst.
// This is a linear layer's input gradient: dx = dy · W.
func MatMulNN(dst, a, b []float32, m, k, n int) {
	checkLen("MatMulNN", m, k, n, dst, m*n, a, m*k, b, k*n)
	pr := problem{op: opNN, dst: dst, a: a, b: b, m: m, k: k, n: n, kern: active, kern2: activeKernel2, packT16: activePackT16}
	pr.do(defaultWorkers())
}

// MatMulTNAcc computes dst(m,n) += a(k,m)ᵀ · b(k,n), accumulating into dst.
// This is a linear layer's weight gradient: dW(out,in) += dyᵀ · x.
func MatMulTNAcc(dst, a, b []float32, m, k, n int) {
	checkLen("MatMulTNAcc", m, k, n, dst, m*n, a, k*m, b, k*n)
	pr := problem{op: opTN, dst: dst, a: a, b: b, m: m, k: k, n: n, acc: true, kern: active, kern2: activeKernel2, packT16: activePackT16}
	pr.do(defaultWorkers())
}

func checkLen(op string, m, k, n int, dst []float32, nd int, a []float32, na int, b []float32, nb int) {
	if m < 0 || k < 0 || n < 0 {
		panic("kernel." + op + ": negative dimension") // a programming error
	}
	if len(dst) < nd || len(a) < na || len(b) < nb {
		panic("kernel." + op + ": slice shorter than its shape") // a programming error, like an index out of range
	}
}
