//go:build !purego

package kernel

import "unsafe"

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax, edx uint32)

//go:noescape
func kern6x16AVX2(k int, a, b, c *float32, ldc int, acc bool)

// haveAVX2FMA reports whether the CPU has AVX2 and FMA and the operating
// system saves the YMM registers across context switches (OSXSAVE set and
// XCR0 enabling both the SSE and the AVX state).
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

// asmKernel is the AVX2+FMA micro-kernel over packed panels.
// The bounds checks keep a bad caller from writing outside the slices.
func asmKernel(k int, a, b, c []float32, ldc int, acc bool) {
	_ = c[5*ldc+nr-1]
	if k > 0 {
		_ = a[k*mr-1]
		_ = b[k*nr-1]
	}
	kern6x16AVX2(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c), ldc, acc)
}

func init() {
	if haveAVX2FMA() {
		archKernel = asmKernel
		archName = "avx2"
	}
}
