package kernel

// swigluFunc and swigluBackFunc are the elementwise halves of SwiGLU and its backward.
// They run over the first n values, n a multiple of 8, after the
// exponential.
type (
	swigluFunc     func(h, a, b []float32, n int)
	swigluBackFunc func(da, db, dh, a, b []float32, n int)
)

// activeSwiGLU and activeSwiGLUBack are chosen with the matrix kernel
// (gemm.go's init).
var (
	activeSwiGLU     swigluFunc     = goSwiGLU
	activeSwiGLUBack swigluBackFunc = goSwiGLUBack
)

// SwiGLU writes h = silu(a)·b = a/(1+e^−a)·b elementwise; h must not alias
// a. The AVX code, eight lanes at a time, rounds every operation as the
// portable code does, so the two give the same bits.
func SwiGLU(h, a, b []float32) {
	n := len(a)
	h, b = h[:n], b[:n]
	ExpSum(h, a, -1, 0) // h = e^−a
	head := n &^ 7
	if head > 0 {
		activeSwiGLU(h, a, b, head)
	}
	goSwiGLU(h[head:], a[head:], b[head:], n-head)
}

// SwiGLUBackward overwrites da and db from dh and SwiGLU's inputs a and b.
// da must not alias a or dh. With σ = 1/(1+e^−a):
//
//	da = dh·b·σ·(1 + a·(1−σ)),   db = dh·a·σ
func SwiGLUBackward(da, db, dh, a, b []float32) {
	n := len(a)
	da, db, dh, b = da[:n], db[:n], dh[:n], b[:n]
	ExpSum(da, a, -1, 0) // da = e^−a until overwritten
	head := n &^ 7
	if head > 0 {
		activeSwiGLUBack(da, db, dh, a, b, head)
	}
	goSwiGLUBack(da[head:], db[head:], dh[head:], a[head:], b[head:], n-head)
}

// goSwiGLU is the portable swigluFunc: h holds e^−a on entry.
func goSwiGLU(h, a, b []float32, n int) {
	h, a, b = h[:n], a[:n], b[:n]
	for i, x := range a {
		h[i] = float32(x/(1+h[i])) * b[i]
	}
}

// goSwiGLUBack is the portable swigluBackFunc: da holds e^−a on entry.
func goSwiGLUBack(da, db, dh, a, b []float32, n int) {
	da, db, dh, a, b = da[:n], db[:n], dh[:n], a[:n], b[:n]
	for i, x := range a {
		sig := 1 / (1 + da[i])
		db[i] = float32(dh[i]*x) * sig
		da[i] = float32(float32(dh[i]*b[i])*sig) * (1 + float32(x*(1-sig)))
	}
}
