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

//go:noescape
func q8GemvVNNI(blocks, panels int, w, x *byte, out *float32)

//go:noescape
func q8Gemm4VNNI(blocks, panels int, w, x *byte, xstride int, out *float32, ldo int)

//go:noescape
func quantizePanelActAVX512(blocks int, x *float32, dst *byte)

// archQuantizePanelAct returns the AVX-512 quantiser of activations for
// q8_0 panels; nil where the CPU lacks the VNNI kernels that read them.
func archQuantizePanelAct() func(dst []byte, x []float32) {
	if !haveAVX512VNNI() {
		return nil
	}
	return func(dst []byte, x []float32) {
		blocks := len(x) / Q8Block
		if blocks == 0 {
			return
		}
		_ = dst[blocks*q8PanelActBytes-1]
		quantizePanelActAVX512(blocks, unsafe.SliceData(x), unsafe.SliceData(dst))
	}
}

// haveAVX512VNNI reports whether the CPU has AVX-512F and AVX-512 VNNI, with the OS's support.
func haveAVX512VNNI() bool {
	if !haveAVX512() {
		return false
	}
	_, _, ecx7, _ := cpuid(7, 0)
	return ecx7&(1<<11) != 0 // AVX512_VNNI
}

// archQ8Panels returns the AVX-512 VNNI kernels over q8_0 panels; nil
// where the CPU lacks them. The bounds checks keep a bad caller from
// reading or writing outside the slices.
func archQ8Panels() (q8PanelsFunc, q8Panels4Func) {
	if !haveAVX512VNNI() {
		return nil, nil
	}
	g1 := func(blocks, panels int, w, x []byte, out []float32) {
		_ = w[panels*blocks*q8PanelBlockBytes-1]
		_ = x[blocks*q8PanelActBytes-1]
		_ = out[panels*nr-1]
		q8GemvVNNI(blocks, panels, unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(out))
	}
	g4 := func(blocks, panels int, w, x []byte, xstride int, out []float32, ldo int) {
		_ = w[panels*blocks*q8PanelBlockBytes-1]
		_ = x[3*xstride+blocks*q8PanelActBytes-1]
		_ = out[3*ldo+panels*nr-1]
		q8Gemm4VNNI(blocks, panels, unsafe.SliceData(w), unsafe.SliceData(x), xstride, unsafe.SliceData(out), ldo)
	}
	return g1, g4
}
