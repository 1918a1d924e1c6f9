//go:build !purego

package kernel

import "unsafe"

//go:noescape
func max8AVX(x *float32, n int) float32

// archMax8 is the AVX maximum where the CPU has AVX2.
var archMax8 = func() func(x []float32) float32 {
	if !haveAVX2FMA() {
		return nil
	}
	return func(x []float32) float32 {
		_ = x[len(x)-1]
		return max8AVX(unsafe.SliceData(x), len(x))
	}
}()

//go:noescape
func expSumAVX2(dst, src *float32, n int, scale, shift float32) float32

// archExp is the AVX2+FMA exponential where the CPU has it.
// Where it also has AVX-512 it is archExp512, with the same bits.
var archExp = func() expFunc {
	if !haveAVX2FMA() {
		return nil
	}
	if archExp512 != nil {
		return archExp512
	}
	return expAVX2
}()

// expAVX2 is the AVX2+FMA expFunc.
func expAVX2(dst, src []float32, n int, scale, shift float32) float32 {
	_ = dst[n-1]
	_ = src[n-1]
	return expSumAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n, scale, shift)
}
