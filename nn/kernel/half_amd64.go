//go:build !purego

package kernel

import "unsafe"

//go:noescape
func gemv4BF16AVX2(k int, a *float32, b *uint16, stride int, c *float32)

//go:noescape
func gemv4F16AVX2(k int, a *float32, b *uint16, stride int, c *float32)

//go:noescape
func gemv1BF16AVX2(k int, a *float32, b *uint16, c *float32)

//go:noescape
func gemv1F16AVX2(k int, a *float32, b *uint16, c *float32)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func widenF16AVX2(dst *float32, src *uint16, n int)

// haveF16C reports whether the CPU converts half-precision values (F16C).
// It is checked on top of haveAVX2FMA, which checked the OS state.
func haveF16C() bool {
	_, _, ecx1, _ := cpuid(1, 0)
	return ecx1&(1<<29) != 0
}

// archGemvHalf returns the assembly half-width products: bfloat16 with
// AVX2, float16 where the CPU also has F16C. The bounds checks keep a bad
// caller from reading or writing outside the slices.
func archGemvHalf() (g1 [3]gemvHalf1Func, g4 [3]gemvHalf4Func, wd [3]func([]float32, []uint16)) {
	type asm struct {
		dt DType
		g4 func(k int, a *float32, b *uint16, stride int, c *float32)
		g1 func(k int, a *float32, b *uint16, c *float32)
		wd func(dst *float32, src *uint16, n int)
	}
	kinds := []asm{{BFloat16, gemv4BF16AVX2, gemv1BF16AVX2, widenBF16AVX2}}
	if haveF16C() {
		kinds = append(kinds, asm{Float16, gemv4F16AVX2, gemv1F16AVX2, widenF16AVX2})
	}
	for _, x := range kinds {
		g4[x.dt] = func(k int, a []float32, b []uint16, stride int, c []float32) {
			_ = a[k-1]
			_ = b[3*stride+k*nr-1]
			_ = c[4*nr-1]
			x.g4(k, unsafe.SliceData(a), unsafe.SliceData(b), stride, unsafe.SliceData(c))
		}
		g1[x.dt] = func(k int, a []float32, b []uint16, c []float32) {
			_ = a[k-1]
			_ = b[k*nr-1]
			if len(c) < nr {
				var t [nr]float32
				x.g1(k, unsafe.SliceData(a), unsafe.SliceData(b), &t[0])
				copy(c, t[:])
				return
			}
			x.g1(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c))
		}
		wd[x.dt] = func(dst []float32, src []uint16) {
			n := len(dst)
			_ = src[n-1]
			x.wd(unsafe.SliceData(dst), unsafe.SliceData(src), n)
		}
	}
	return g1, g4, wd
}

//go:noescape
func gemv8BF16AVX512(k int, a *float32, b *uint16, stride int, c *float32)

//go:noescape
func gemv8F16AVX512(k int, a *float32, b *uint16, stride int, c *float32)

// archGemvHalf8 returns the AVX-512 eight-panel products.
// The caller checked AVX-512F, which has every instruction they use,
// VCVTPH2PS on ZMM registers included. Sixteen panels at once read slower
// than eight: too many streams.
func archGemvHalf8() (g8 [3]gemvHalf4Func) {
	for dt, f := range map[DType]func(k int, a *float32, b *uint16, stride int, c *float32){BFloat16: gemv8BF16AVX512, Float16: gemv8F16AVX512} {
		g8[dt] = func(k int, a []float32, b []uint16, stride int, c []float32) {
			_ = a[k-1]
			_ = b[7*stride+k*nr-1]
			_ = c[8*nr-1]
			f(k, unsafe.SliceData(a), unsafe.SliceData(b), stride, unsafe.SliceData(c))
		}
	}
	return g8
}

//go:noescape
func gemv8BF16PairsAVX512(k int, a *float32, b *uint16, stride int, c *float32)

//go:noescape
func gemv4BF16PairsAVX512(k int, a *float32, b *uint16, stride int, c *float32)

//go:noescape
func gemv1BF16PairsAVX512(k int, a *float32, b *uint16, c *float32)

//go:noescape
func widenBF16PairsAVX512(dst *float32, src *uint16, k, panels int)

// archBF16Pairs returns the AVX-512 kernels over bfloat16 panels stored in pairs of k steps.
// Packed.halfIndex gives that layout. The kernels are the eight-, four- and
// one-panel products and the widening of whole panels.
func archBF16Pairs() (g8, g4 gemvHalf4Func, g1 gemvHalf1Func, wd func(dst []float32, src []uint16, k int)) {
	g8 = func(k int, a []float32, b []uint16, stride int, c []float32) {
		_ = a[k-1]
		_ = b[7*stride+k*nr-1]
		_ = c[8*nr-1]
		gemv8BF16PairsAVX512(k, unsafe.SliceData(a), unsafe.SliceData(b), stride, unsafe.SliceData(c))
	}
	g4 = func(k int, a []float32, b []uint16, stride int, c []float32) {
		_ = a[k-1]
		_ = b[3*stride+k*nr-1]
		_ = c[4*nr-1]
		gemv4BF16PairsAVX512(k, unsafe.SliceData(a), unsafe.SliceData(b), stride, unsafe.SliceData(c))
	}
	g1 = func(k int, a []float32, b []uint16, c []float32) {
		_ = a[k-1]
		_ = b[k*nr-1]
		if len(c) < nr {
			var t [nr]float32
			gemv1BF16PairsAVX512(k, unsafe.SliceData(a), unsafe.SliceData(b), &t[0])
			copy(c, t[:])
			return
		}
		gemv1BF16PairsAVX512(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c))
	}
	wd = func(dst []float32, src []uint16, k int) {
		panels := len(dst) / (nr * k)
		if panels == 0 {
			return
		}
		_ = src[panels*nr*k-1]
		widenBF16PairsAVX512(unsafe.SliceData(dst), unsafe.SliceData(src), k, panels)
	}
	return g8, g4, g1, wd
}
