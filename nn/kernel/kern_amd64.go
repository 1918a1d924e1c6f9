//go:build !purego

package kernel

import "unsafe"

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax, edx uint32)

//go:noescape
func packT16AVX(dst, src *float32, ld, blocks int)

//go:noescape
func kern6x32AVX512(k int, a *float32, lda int, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func kern6x16AVX2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// haveAVX2FMA reports whether the CPU has AVX2 and FMA and the OS saves YMM registers.
// The OS saves them across context switches when OSXSAVE is set and XCR0
// enables both the SSE and the AVX state.
func haveAVX2FMA() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
	)
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&0x6 != 0x6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0 // AVX2
}

// asmKernel is the AVX2+FMA micro-kernel. The bounds checks keep a bad
// caller from reading or writing outside the slices.
func asmKernel(k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	_ = c[(mr-1)*ldc+nr-1]
	if k > 0 {
		_ = a[(k-1)*lda+mr-1]
		_ = b[(k-1)*ldb+nr-1]
	}
	kern6x16AVX2(k, unsafe.SliceData(a), lda, unsafe.SliceData(b), ldb, unsafe.SliceData(c), ldc, acc)
}

// asmPackT16 packs a full panel of 16 rows of b (stride ld) over kl
// steps: dst[p·16+r] = src[r·ld+p]. The assembly moves whole 8×8 blocks and
// Go finishes the last kl mod 8 steps.
func asmPackT16(dst, src []float32, ld, kl int) {
	_ = dst[kl*nr-1]
	_ = src[(nr-1)*ld+kl-1]
	blocks := kl / 8
	if blocks > 0 {
		packT16AVX(unsafe.SliceData(dst), unsafe.SliceData(src), ld, blocks)
	}
	for r := 0; r < nr; r++ {
		row := src[r*ld : r*ld+kl]
		for p := blocks * 8; p < kl; p++ {
			dst[p*nr+r] = row[p]
		}
	}
}

// haveAVX512 reports whether the CPU has AVX-512F and the OS saves its state.
// That is the opmask and ZMM state, XCR0 bits 5 to 7, besides SSE and AVX.
func haveAVX512() bool {
	if !haveAVX2FMA() {
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&0xe6 != 0xe6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<16) != 0 // AVX512F
}

// asmKernel2 is the AVX-512 kernel for two adjacent 16-column panels.
func asmKernel2(k int, a []float32, lda int, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool) {
	_ = c[(mr-1)*ldc+2*nr-1]
	if k > 0 {
		_ = a[(k-1)*lda+mr-1]
		_ = b0[(k-1)*ldb+nr-1]
		_ = b1[(k-1)*ldb+nr-1]
	}
	kern6x32AVX512(k, unsafe.SliceData(a), lda, unsafe.SliceData(b0), unsafe.SliceData(b1), ldb, unsafe.SliceData(c), ldc, acc)
}

func archImpl() (microKernel, pairKernel, packFunc, string) {
	switch {
	case haveAVX512():
		return asmKernel, asmKernel2, asmPackT16, "avx512"
	case haveAVX2FMA():
		return asmKernel, nil, asmPackT16, "avx2"
	}
	return goKernel, nil, goPackT16, "go"
}

//go:noescape
func gemv4AVX2(k int, a, b *float32, stride int, c *float32)

//go:noescape
func gemv1AVX2(k int, a, b, c *float32)

// asmGemv4 and asmGemv1 check bounds, then run the AVX2 panel-vector
// products.
func asmGemv4(k int, a, b []float32, stride int, c []float32) {
	_ = a[k-1]
	_ = b[3*stride+k*nr-1]
	_ = c[4*nr-1]
	gemv4AVX2(k, unsafe.SliceData(a), unsafe.SliceData(b), stride, unsafe.SliceData(c))
}

func asmGemv1(k int, a, b, c []float32) {
	_ = a[k-1]
	_ = b[k*nr-1]
	if len(c) < nr {
		var t [nr]float32 // on the stack: the assembly does not keep it
		gemv1AVX2(k, unsafe.SliceData(a), unsafe.SliceData(b), &t[0])
		copy(c, t[:])
		return
	}
	gemv1AVX2(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c))
}

// archGemv1 and archGemv4 are the panel-vector products that go with the
// assembly micro-kernels (gemm.go's init picks them with those).
var archGemv1, archGemv4 = gemv1Func(asmGemv1), gemv4Func(asmGemv4)

//go:noescape
func gemv8AVX512(k int, a, b *float32, stride int, c *float32)

// archGemv8 is the AVX-512 eight-panel product, which gemm.go's init
// picks with the AVX-512 micro-kernel. Its c holds 128 values.
var archGemv8 = gemv4Func(func(k int, a, b []float32, stride int, c []float32) {
	_ = a[k-1]
	_ = b[7*stride+k*nr-1]
	_ = c[8*nr-1]
	gemv8AVX512(k, unsafe.SliceData(a), unsafe.SliceData(b), stride, unsafe.SliceData(c))
})

// archDots8 and archMix are the attention products that go with them.
var (
	archDots8 = asmDots8
	archMix   = asmMix
)

//go:noescape
func dots8AVX2(sc, q, keys *float32, stride, chunks, groups int, scale float32)

//go:noescape
func mix32AVX2(out, w, vals *float32, stride, n int)

//go:noescape
func mix8AVX2(out, w, vals *float32, stride, n int)

// asmDots8 is Dots for len(sc) and len(q) multiples of 8 (checked by Dots,
// with the bounds of keys).
func asmDots8(sc, q, keys []float32, stride int, scale float32) {
	dots8AVX2(unsafe.SliceData(sc), unsafe.SliceData(q), unsafe.SliceData(keys), stride, len(q)/8, len(sc)/8, scale)
}

// asmMix is Mix for len(out) a multiple of 8 and len(w) > 0.
// Mix checks those and the bounds of vals. It does 32 outputs at a time,
// then 8.
func asmMix(out, w, vals []float32, stride int) {
	i := 0
	for ; i+32 <= len(out); i += 32 {
		mix32AVX2(&out[i], unsafe.SliceData(w), &vals[i], stride, len(w))
	}
	for ; i < len(out); i += 8 {
		mix8AVX2(&out[i], unsafe.SliceData(w), &vals[i], stride, len(w))
	}
}

//go:noescape
func packA6AVX(dst, a *float32, lda, kl int)

// archPackA6 is the AVX packer of A panels where the CPU has AVX2.
var archPackA6 = func() packA6Func {
	if !haveAVX2FMA() {
		return nil
	}
	return func(dst, a []float32, lda, kl int) {
		_ = dst[kl*mr-1]
		_ = a[(mr-1)*lda+kl-1]
		packA6AVX(unsafe.SliceData(dst), unsafe.SliceData(a), lda, kl)
	}
}()
