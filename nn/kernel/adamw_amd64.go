//go:build !purego

package kernel

import "unsafe"

//go:noescape
func adamwAVX(theta, grad, m, v *float32, n int, s *AdamWStep)

// archAdamW is the AVX update where the CPU has AVX2 (the kernels' test).
var archAdamW = func() adamwFunc {
	if !haveAVX2FMA() {
		return nil
	}
	return func(theta, grad, m, v []float32, n int, s *AdamWStep) {
		_, _, _, _ = theta[n-1], grad[n-1], m[n-1], v[n-1]
		adamwAVX(unsafe.SliceData(theta), unsafe.SliceData(grad), unsafe.SliceData(m), unsafe.SliceData(v), n, s)
	}
}()
