// Package kernel holds the dense float32 matrix products the transformer
// spends its time in. All matrices are row-major. Each entry point picks the
// fastest implementation the machine supports and splits large products
// across cores; the portable pure-Go path is always available and is the
// reference the fast paths are tested against.
package kernel

// MatMulNT computes dst(m,n) = a(m,k) · b(n,k)ᵀ, overwriting dst.
// This is a linear layer's forward pass: activations times weights stored
// (out, in).
func MatMulNT(dst, a, b []float32, m, k, n int) {
	checkLen("MatMulNT", dst, m*n, a, m*k, b, n*k)
	refNT(dst, a, b, m, k, n)
}

// MatMulNN computes dst(m,n) = a(m,k) · b(k,n), overwriting dst.
// This is a linear layer's input gradient: dx = dy · W.
func MatMulNN(dst, a, b []float32, m, k, n int) {
	checkLen("MatMulNN", dst, m*n, a, m*k, b, k*n)
	refNN(dst, a, b, m, k, n)
}

// MatMulTNAcc computes dst(m,n) += a(k,m)ᵀ · b(k,n), accumulating into dst.
// This is a linear layer's weight gradient: dW(out,in) += dyᵀ · x.
func MatMulTNAcc(dst, a, b []float32, m, k, n int) {
	checkLen("MatMulTNAcc", dst, m*n, a, k*m, b, k*n)
	refTNAcc(dst, a, b, m, k, n)
}

func checkLen(op string, dst []float32, nd int, a []float32, na int, b []float32, nb int) {
	if len(dst) < nd || len(a) < na || len(b) < nb {
		panic("kernel." + op + ": slice shorter than its shape") // a programming error, like an index out of range
	}
}

func refNT(dst, a, b []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		ai := a[i*k : i*k+k]
		for j := 0; j < n; j++ {
			bj := b[j*k : j*k+k]
			var s float32
			for p, v := range ai {
				s += v * bj[p]
			}
			dst[i*n+j] = s
		}
	}
}

func refNN(dst, a, b []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		di := dst[i*n : i*n+n]
		for j := range di {
			di[j] = 0
		}
		for p := 0; p < k; p++ {
			v := a[i*k+p]
			bp := b[p*n : p*n+n]
			for j, w := range bp {
				di[j] += v * w
			}
		}
	}
}

func refTNAcc(dst, a, b []float32, m, k, n int) {
	for p := 0; p < k; p++ {
		ap := a[p*m : p*m+m]
		bp := b[p*n : p*n+n]
		for i, v := range ap {
			di := dst[i*n : i*n+n]
			for j, w := range bp {
				di[j] += v * w
			}
		}
	}
}
