package kernel

import "math"

// AdamWStep holds the per-step constants of one AdamW update (see AdamW).
type AdamWStep struct {
	B1, B2  float32 // moment decay rates β1, β2
	C1, C2  float32 // bias corrections 1/(1−β1ᵗ), 1/(1−β2ᵗ)
	LR, Eps float32 // learning rate and denominator floor
	Decay   float32 // 1 − lr·λ: the weight decay's shrink factor, 1 for no decay
}

// adamwFunc updates the first n values (n a multiple of 8).
type adamwFunc func(theta, grad, m, v []float32, n int, s *AdamWStep)

// activeAdamW is chosen with the matrix kernel (gemm.go's init).
var activeAdamW adamwFunc = goAdamWBlock

// AdamW takes one AdamW step on theta with gradients grad and moments m and v.
// All four have one length. For each index:
//
//	m = β1·m + (1−β1)·g,   v = β2·v + (1−β2)·g·g
//	θ = θ·Decay − LR·(m·C1) / (sqrt(v·C2) + Eps)
//
// Every operation is rounded to float32 in the order written: products left
// to right, no fused multiply-add. So the AVX code, eight lanes at a time,
// and the portable code give the same bits.
func AdamW(theta, grad, m, v []float32, s AdamWStep) {
	n := len(theta)
	grad, m, v = grad[:n], m[:n], v[:n]
	head := n &^ 7
	if head > 0 {
		activeAdamW(theta, grad, m, v, head, &s)
	}
	goAdamWBlock(theta[head:], grad[head:], m[head:], v[head:], n-head, &s)
}

// goAdamWBlock is the portable adamwFunc. The conversions to float32 round
// each operation on its own, so that no compiler fuses them.
func goAdamWBlock(theta, grad, m, v []float32, n int, s *AdamWStep) {
	theta, grad, m, v = theta[:n], grad[:n], m[:n], v[:n]
	b1, b2, nb1, nb2 := s.B1, s.B2, 1-s.B1, 1-s.B2
	for i, x := range theta {
		g := grad[i]
		mi := float32(b1*m[i]) + float32(nb1*g)
		vi := float32(b2*v[i]) + float32(float32(nb2*g)*g)
		m[i], v[i] = mi, vi
		den := float32(math.Sqrt(float64(float32(vi*s.C2)))) + s.Eps
		theta[i] = float32(x*s.Decay) - float32(s.LR*float32(mi*s.C1))/den
	}
}
