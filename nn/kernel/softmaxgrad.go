package kernel

// SoftmaxGrad sets d[j] = p[j]·(d[j] − dot)·scale for every index of d.
// With p a softmax row, d the gradient of its outputs and dot = Σ p·d,
// this is the gradient of its scaled inputs. p must be at least as long
// as d. Each operation rounds on its own, in that order, so the AVX-512
// code and the Go loop give the same bits.
func SoftmaxGrad(d, p []float32, dot, scale float32) {
	if len(d) == 0 {
		return
	}
	p = p[:len(d)]
	if archSoftmaxGrad != nil {
		archSoftmaxGrad(d, p, dot, scale)
		return
	}
	for j, pj := range p {
		// The conversion rounds the product on its own, so that no
		// compiler fuses it.
		d[j] = float32(pj*(d[j]-dot)) * scale
	}
}
