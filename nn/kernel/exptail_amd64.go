//go:build !purego

package kernel

import "unsafe"

//go:noescape
func expTailAVX512(dst, src *float32, n int, scale, shift float32) (redo uint16)

// archExpTail is the AVX-512 expTailFunc, nil where the CPU lacks AVX-512.
var archExpTail = func() expTailFunc {
	if !haveAVX512() {
		return nil
	}
	return func(dst, src []float32, scale, shift float32) uint16 {
		n := len(src)
		_ = dst[n-1]
		return expTailAVX512(unsafe.SliceData(dst), unsafe.SliceData(src), n, scale, shift)
	}
}()
