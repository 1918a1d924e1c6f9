//go:build !purego

#include "textflag.h"

// Constants of Exp (exp.go), each broadcast to eight lanes.
DATA expLo<>+0(SB)/4, $0xc2aeac4f
DATA expLo<>+4(SB)/4, $0xc2aeac4f
DATA expLo<>+8(SB)/4, $0xc2aeac4f
DATA expLo<>+12(SB)/4, $0xc2aeac4f
DATA expLo<>+16(SB)/4, $0xc2aeac4f
DATA expLo<>+20(SB)/4, $0xc2aeac4f
DATA expLo<>+24(SB)/4, $0xc2aeac4f
DATA expLo<>+28(SB)/4, $0xc2aeac4f
GLOBL expLo<>(SB), RODATA|NOPTR, $32
DATA log2e<>+0(SB)/4, $0x3fb8aa3b
DATA log2e<>+4(SB)/4, $0x3fb8aa3b
DATA log2e<>+8(SB)/4, $0x3fb8aa3b
DATA log2e<>+12(SB)/4, $0x3fb8aa3b
DATA log2e<>+16(SB)/4, $0x3fb8aa3b
DATA log2e<>+20(SB)/4, $0x3fb8aa3b
DATA log2e<>+24(SB)/4, $0x3fb8aa3b
DATA log2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL log2e<>(SB), RODATA|NOPTR, $32
DATA ln2hi<>+0(SB)/4, $0x3f318000
DATA ln2hi<>+4(SB)/4, $0x3f318000
DATA ln2hi<>+8(SB)/4, $0x3f318000
DATA ln2hi<>+12(SB)/4, $0x3f318000
DATA ln2hi<>+16(SB)/4, $0x3f318000
DATA ln2hi<>+20(SB)/4, $0x3f318000
DATA ln2hi<>+24(SB)/4, $0x3f318000
DATA ln2hi<>+28(SB)/4, $0x3f318000
GLOBL ln2hi<>(SB), RODATA|NOPTR, $32
DATA ln2lo<>+0(SB)/4, $0xb95e8083
DATA ln2lo<>+4(SB)/4, $0xb95e8083
DATA ln2lo<>+8(SB)/4, $0xb95e8083
DATA ln2lo<>+12(SB)/4, $0xb95e8083
DATA ln2lo<>+16(SB)/4, $0xb95e8083
DATA ln2lo<>+20(SB)/4, $0xb95e8083
DATA ln2lo<>+24(SB)/4, $0xb95e8083
DATA ln2lo<>+28(SB)/4, $0xb95e8083
GLOBL ln2lo<>(SB), RODATA|NOPTR, $32
DATA expC0<>+0(SB)/4, $0x39506967
DATA expC0<>+4(SB)/4, $0x39506967
DATA expC0<>+8(SB)/4, $0x39506967
DATA expC0<>+12(SB)/4, $0x39506967
DATA expC0<>+16(SB)/4, $0x39506967
DATA expC0<>+20(SB)/4, $0x39506967
DATA expC0<>+24(SB)/4, $0x39506967
DATA expC0<>+28(SB)/4, $0x39506967
GLOBL expC0<>(SB), RODATA|NOPTR, $32
DATA expC1<>+0(SB)/4, $0x3ab743ce
DATA expC1<>+4(SB)/4, $0x3ab743ce
DATA expC1<>+8(SB)/4, $0x3ab743ce
DATA expC1<>+12(SB)/4, $0x3ab743ce
DATA expC1<>+16(SB)/4, $0x3ab743ce
DATA expC1<>+20(SB)/4, $0x3ab743ce
DATA expC1<>+24(SB)/4, $0x3ab743ce
DATA expC1<>+28(SB)/4, $0x3ab743ce
GLOBL expC1<>(SB), RODATA|NOPTR, $32
DATA expC2<>+0(SB)/4, $0x3c088908
DATA expC2<>+4(SB)/4, $0x3c088908
DATA expC2<>+8(SB)/4, $0x3c088908
DATA expC2<>+12(SB)/4, $0x3c088908
DATA expC2<>+16(SB)/4, $0x3c088908
DATA expC2<>+20(SB)/4, $0x3c088908
DATA expC2<>+24(SB)/4, $0x3c088908
DATA expC2<>+28(SB)/4, $0x3c088908
GLOBL expC2<>(SB), RODATA|NOPTR, $32
DATA expC3<>+0(SB)/4, $0x3d2aa9c1
DATA expC3<>+4(SB)/4, $0x3d2aa9c1
DATA expC3<>+8(SB)/4, $0x3d2aa9c1
DATA expC3<>+12(SB)/4, $0x3d2aa9c1
DATA expC3<>+16(SB)/4, $0x3d2aa9c1
DATA expC3<>+20(SB)/4, $0x3d2aa9c1
DATA expC3<>+24(SB)/4, $0x3d2aa9c1
DATA expC3<>+28(SB)/4, $0x3d2aa9c1
GLOBL expC3<>(SB), RODATA|NOPTR, $32
DATA expC4<>+0(SB)/4, $0x3e2aaaaa
DATA expC4<>+4(SB)/4, $0x3e2aaaaa
DATA expC4<>+8(SB)/4, $0x3e2aaaaa
DATA expC4<>+12(SB)/4, $0x3e2aaaaa
DATA expC4<>+16(SB)/4, $0x3e2aaaaa
DATA expC4<>+20(SB)/4, $0x3e2aaaaa
DATA expC4<>+24(SB)/4, $0x3e2aaaaa
DATA expC4<>+28(SB)/4, $0x3e2aaaaa
GLOBL expC4<>(SB), RODATA|NOPTR, $32
DATA expC5<>+0(SB)/4, $0x3f000000
DATA expC5<>+4(SB)/4, $0x3f000000
DATA expC5<>+8(SB)/4, $0x3f000000
DATA expC5<>+12(SB)/4, $0x3f000000
DATA expC5<>+16(SB)/4, $0x3f000000
DATA expC5<>+20(SB)/4, $0x3f000000
DATA expC5<>+24(SB)/4, $0x3f000000
DATA expC5<>+28(SB)/4, $0x3f000000
GLOBL expC5<>(SB), RODATA|NOPTR, $32
DATA one<>+0(SB)/4, $0x3f800000
DATA one<>+4(SB)/4, $0x3f800000
DATA one<>+8(SB)/4, $0x3f800000
DATA one<>+12(SB)/4, $0x3f800000
DATA one<>+16(SB)/4, $0x3f800000
DATA one<>+20(SB)/4, $0x3f800000
DATA one<>+24(SB)/4, $0x3f800000
DATA one<>+28(SB)/4, $0x3f800000
GLOBL one<>(SB), RODATA|NOPTR, $32
DATA bias<>+0(SB)/4, $127
DATA bias<>+4(SB)/4, $127
DATA bias<>+8(SB)/4, $127
DATA bias<>+12(SB)/4, $127
DATA bias<>+16(SB)/4, $127
DATA bias<>+20(SB)/4, $127
DATA bias<>+24(SB)/4, $127
DATA bias<>+28(SB)/4, $127
GLOBL bias<>(SB), RODATA|NOPTR, $32
DATA k127<>+0(SB)/4, $0x42fe0000
DATA k127<>+4(SB)/4, $0x42fe0000
DATA k127<>+8(SB)/4, $0x42fe0000
DATA k127<>+12(SB)/4, $0x42fe0000
DATA k127<>+16(SB)/4, $0x42fe0000
DATA k127<>+20(SB)/4, $0x42fe0000
DATA k127<>+24(SB)/4, $0x42fe0000
DATA k127<>+28(SB)/4, $0x42fe0000
GLOBL k127<>(SB), RODATA|NOPTR, $32
DATA clampHi<>+0(SB)/4, $0x42b1999a
DATA clampHi<>+4(SB)/4, $0x42b1999a
DATA clampHi<>+8(SB)/4, $0x42b1999a
DATA clampHi<>+12(SB)/4, $0x42b1999a
DATA clampHi<>+16(SB)/4, $0x42b1999a
DATA clampHi<>+20(SB)/4, $0x42b1999a
DATA clampHi<>+24(SB)/4, $0x42b1999a
DATA clampHi<>+28(SB)/4, $0x42b1999a
GLOBL clampHi<>(SB), RODATA|NOPTR, $32

// func expSumAVX2(dst, src *float32, n int, scale, shift float32) float32
//
// dst[i] = e^(scale*src[i] - shift) for i < n (n a multiple of 8, at least
// 8), eight lanes a step, the same reduction and polynomial as Exp; returns
// the sum of the results. Lanes below expLo give 0, NaN lanes give NaN.
TEXT ·expSumAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y0
	VBROADCASTSS shift+28(FP), Y1
	VXORPS Y15, Y15, Y15
	VMOVUPS expLo<>(SB), Y9
	VMOVUPS clampHi<>(SB), Y10         // above ln(MaxFloat32): such lanes overflow to +Inf
	VMOVUPS log2e<>(SB), Y11
	VMOVUPS ln2hi<>(SB), Y12
	VMOVUPS ln2lo<>(SB), Y13
	VMOVUPS one<>(SB), Y14

loop:
	VMOVUPS (SI), Y2
	VMULPS Y0, Y2, Y2                 // x = scale*src
	VSUBPS Y1, Y2, Y2                 // x -= shift
	VCMPPS $0x11, Y9, Y2, Y7          // under: x < expLo (ordered, quiet)
	VCMPPS $3, Y2, Y2, Y8             // nan: x unordered with itself
	VMINPS Y10, Y2, Y2                // clamp to [expLo, 88.8]
	VMAXPS Y9, Y2, Y2
	VMULPS Y11, Y2, Y3                // t = x*log2e
	VROUNDPS $0, Y3, Y3               // k = round(t)
	VFNMADD231PS Y12, Y3, Y2          // r = x - k*ln2hi
	VFNMADD231PS Y13, Y3, Y2          // r -= k*ln2lo
	VMOVUPS expC0<>(SB), Y5           // Horner: p = ((((c0 r + c1) r + c2) r + c3) r + c4) r + c5
	VFMADD213PS expC1<>(SB), Y2, Y5
	VFMADD213PS expC2<>(SB), Y2, Y5
	VFMADD213PS expC3<>(SB), Y2, Y5
	VFMADD213PS expC4<>(SB), Y2, Y5
	VFMADD213PS expC5<>(SB), Y2, Y5
	VMULPS Y2, Y2, Y4                 // r2 = r*r
	VFMADD213PS Y2, Y4, Y5            // e = p*r2 + r
	VADDPS Y14, Y5, Y5                // e += 1
	VMINPS k127<>(SB), Y3, Y4         // k = 128 (x near expHi) splits as 2^127 * 2
	VSUBPS Y4, Y3, Y3                 // d = k - min(k, 127), 0 or 1
	VADDPS Y14, Y3, Y3                // 1 + d
	VMULPS Y3, Y5, Y5                 // e *= 1 + d
	VCVTPS2DQ Y4, Y6                  // 2^min(k, 127) from the exponent bits
	VPADDD bias<>(SB), Y6, Y6
	VPSLLD $23, Y6, Y6
	VMULPS Y6, Y5, Y5
	VANDNPS Y5, Y7, Y5                // under lanes give 0
	VORPS Y8, Y5, Y5                  // NaN lanes give NaN
	VMOVUPS Y5, (DI)
	VADDPS Y5, Y15, Y15
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loop

	// lanes summed as goExpBlock does: (l0+l4)+(l1+l5), (l2+l6)+(l3+l7)
	VEXTRACTF128 $1, Y15, X0
	VADDPS X0, X15, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func max8AVX(x *float32, n int) float32
//
// The largest of x[0:n] (n a positive multiple of 8), NaN if any value is
// NaN: eight running maxima, and a mask of the lanes that met a NaN, which
// VMAXPS alone would drop.
TEXT ·max8AVX(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0                  // running maxima
	VCMPPS $3, Y0, Y0, Y1             // lanes that met a NaN
	ADDQ $32, SI
	SUBQ $8, CX
	JZ done

loop:
	VMOVUPS (SI), Y2
	VCMPPS $3, Y2, Y2, Y3
	VORPS Y3, Y1, Y1
	VMAXPS Y0, Y2, Y0
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ loop

done:
	VEXTRACTF128 $1, Y0, X2
	VMAXPS X2, X0, X0
	VPERMILPS $0x4E, X0, X2
	VMAXPS X2, X0, X0
	VPERMILPS $0xB1, X0, X2
	VMAXPS X2, X0, X0
	VEXTRACTF128 $1, Y1, X3
	VORPS X3, X1, X1
	VPTEST X1, X1
	JZ ok
	MOVL $0x7fc00000, AX              // NaN
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

ok:
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET
