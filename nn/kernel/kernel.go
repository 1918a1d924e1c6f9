// Package kernel holds the dense float32 matrix products the transformer
// spends its time in, and the vector code of its elementwise steps (the
// exponential and softmax, SwiGLU, AdamW; each with a portable twin that
// gives the same bits, except the exponential, whose lanes and Exp may
// differ in the last bit). All matrices are row-major. Weights may also
// be held in bfloat16 or float16 (half.go) or in llama.cpp's q8_0 blocks
// (q8.go).
//
// Each entry point packs its operands into cache-sized panels (or reads
// them in place where their layout already fits) and runs a
// register-blocked micro-kernel over them: on amd64 an assembly kernel,
// 6×32 tiles with AVX-512 where the CPU and the operating system support it
// and 6×16 tiles with AVX2 and FMA otherwise (detected at run time with
// CPUID and XGETBV, which checks that the OS saves the vector state);
// elsewhere a portable pure-Go kernel. The build tag purego (go build
// -tags purego) leaves the assembly out of the build and selects the
// pure-Go kernels everywhere; Impl reports which one runs. Products above
// about four million floating-point operations are split across
// runtime.GOMAXPROCS(0) goroutines; smaller ones run on the caller's
// goroutine.
//
// Determinism: an element of the result is a multiply-add chain over k in
// increasing order, its value a function of its row of a, its column of b
// and k only. It does not depend on m, on how the product is split across
// goroutines, or on GOMAXPROCS: one sequence's logits come out bitwise the
// same alone and in a batch. (The assembly and the pure-Go kernels differ
// from each other in rounding, since one fuses the multiply-add and the
// other does not; a process uses one of them throughout.)
//
// Aliasing: dst must not overlap a or b. a and b may overlap each other
// (both are only read). Concurrent calls are safe as long as no call writes
// a dst that another call reads or writes.
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
