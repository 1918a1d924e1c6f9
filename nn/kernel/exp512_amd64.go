//go:build !purego

package kernel

import "unsafe"

//go:noescape
func expSumAVX512(dst, src *float32, n int, scale, shift float32) float32

// archExp512 is the AVX-512 exponential where the CPU has AVX-512F, else nil.
// Its lanes and sum have expSumAVX2's bits.
var archExp512 = func() expFunc {
	if !haveAVX512() {
		return nil
	}
	return func(dst, src []float32, n int, scale, shift float32) float32 {
		_ = dst[n-1]
		_ = src[n-1]
		return expSumAVX512(unsafe.SliceData(dst), unsafe.SliceData(src), n, scale, shift)
	}
}()
