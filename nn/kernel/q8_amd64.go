//go:build !purego

package kernel

import "unsafe"

//go:noescape
func q8Dot4AVX2(blocks int, a0, a1, a2, a3, r0, r1, r2, r3 *byte, out *float32)

// archQ8Dot4 returns the AVX2 q8_0 dot products where the CPU also
// converts half-precision values (F16C, for the scales); nil otherwise.
// The bounds checks keep a bad caller from reading outside the slices.
func archQ8Dot4() q8Dot4Func {
	if !haveAVX2FMA() || !haveF16C() {
		return nil
	}
	return func(k int, a, r *[4][]byte, out *[4]float32) {
		blocks := k / Q8Block
		if blocks == 0 {
			*out = [4]float32{}
			return
		}
		for i := range 4 {
			_ = a[i][blocks*q8ActBytes-1]
			_ = r[i][blocks*Q8BlockBytes-1]
		}
		q8Dot4AVX2(blocks, unsafe.SliceData(a[0]), unsafe.SliceData(a[1]), unsafe.SliceData(a[2]), unsafe.SliceData(a[3]),
			unsafe.SliceData(r[0]), unsafe.SliceData(r[1]), unsafe.SliceData(r[2]), unsafe.SliceData(r[3]), &out[0])
	}
}
