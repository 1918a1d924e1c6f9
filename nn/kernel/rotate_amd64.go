//go:build !purego

package kernel

import "unsafe"

//go:noescape
func rotateAVX512(x *float32, n int, c, s *float32, w int)

// archRotate is the AVX-512 rotation, nil where the CPU lacks AVX-512.
var archRotate = func() func(x, c, s []float32, n, w int) {
	if !haveAVX512() {
		return nil
	}
	return func(x, c, s []float32, n, w int) {
		_ = x[n*w-1]
		_ = c[w-1]
		_ = s[w-1]
		rotateAVX512(unsafe.SliceData(x), n, unsafe.SliceData(c), unsafe.SliceData(s), w)
	}
}()
