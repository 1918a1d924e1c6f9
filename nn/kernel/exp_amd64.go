//go:build !purego

package kernel

import "unsafe"

//go:noescape
func expSumAVX2(dst, src *float32, n int, scale, shift float32) float32

// archExp is the AVX2+FMA exponential where the CPU has it.
var archExp = func() expFunc {
	if !haveAVX2FMA() {
		return nil
	}
	return func(dst, src []float32, n int, scale, shift float32) float32 {
		_ = dst[n-1]
		_ = src[n-1]
		return expSumAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n, scale, shift)
	}
}()
