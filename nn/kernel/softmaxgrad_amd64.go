//go:build !purego

package kernel

import "unsafe"

//go:noescape
func softmaxGradAVX512(d, p *float32, n int, dot, scale float32)

// archSoftmaxGrad is the AVX-512 loop of SoftmaxGrad, nil where the CPU lacks AVX-512.
var archSoftmaxGrad = func() func(d, p []float32, dot, scale float32) {
	if !haveAVX512() {
		return nil
	}
	return func(d, p []float32, dot, scale float32) {
		n := len(d)
		_ = p[n-1]
		softmaxGradAVX512(unsafe.SliceData(d), unsafe.SliceData(p), n, dot, scale)
	}
}()
