//go:build !purego

#include "textflag.h"

// func expTailAVX512(dst, src *float32, n int, scale, shift float32) (redo uint16)
//
// Sets dst[i] = Exp(scale·src[i] − shift) for i < n ≤ 16, with Exp's
// scalar operations in its order: no fused multiply-add, rounding to
// nearest as the reduction's truncation of t ± 0.5, so every lane has
// Exp's bits. Lanes under expLo give 0. Lanes that Exp takes through
// another branch (NaN, above expHi, 2^k outside the normal exponents) are
// not stored; their bits in redo say so, for Exp to compute them.
TEXT ·expTailAVX512(SB), NOSPLIT, $0-34
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1                      // the n lanes
	VMOVUPS.Z (SI), K1, Z0
	VBROADCASTSS scale+24(FP), Z1
	VMULPS Z1, Z0, Z0
	VBROADCASTSS shift+28(FP), Z1
	VSUBPS Z1, Z0, Z0                 // x = scale·src − shift

	MOVL $0x3fb8aa3b, AX              // log2e
	VPBROADCASTD AX, Z1
	VMULPS Z1, Z0, Z3                 // t = x·log2e
	MOVL $0x3f000000, AX              // 0.5, also c5
	VPBROADCASTD AX, Z2
	VPXORD Z4, Z4, Z4
	VCMPPS $1, Z4, Z3, K2             // t < 0
	VADDPS Z2, Z3, Z4
	VSUBPS Z2, Z3, K2, Z4             // t + 0.5, or t − 0.5 where t < 0
	VCVTTPS2DQ Z4, Z5                 // k, truncated
	VCVTDQ2PS Z5, Z6                  // fk

	MOVL $0x3f318000, AX              // ln2hi
	VPBROADCASTD AX, Z1
	VMULPS Z1, Z6, Z7
	VSUBPS Z7, Z0, Z8
	MOVL $0xb95e8083, AX              // ln2lo
	VPBROADCASTD AX, Z1
	VMULPS Z1, Z6, Z7
	VSUBPS Z7, Z8, Z8                 // r = x − fk·ln2hi − fk·ln2lo

	MOVL $0x39506967, AX              // c0
	VPBROADCASTD AX, Z9
	VMULPS Z8, Z9, Z9
	MOVL $0x3ab743ce, AX              // c1
	VPBROADCASTD AX, Z1
	VADDPS Z1, Z9, Z9
	VMULPS Z8, Z9, Z9
	MOVL $0x3c088908, AX              // c2
	VPBROADCASTD AX, Z1
	VADDPS Z1, Z9, Z9
	VMULPS Z8, Z9, Z9
	MOVL $0x3d2aa9c1, AX              // c3
	VPBROADCASTD AX, Z1
	VADDPS Z1, Z9, Z9
	VMULPS Z8, Z9, Z9
	MOVL $0x3e2aaaaa, AX              // c4
	VPBROADCASTD AX, Z1
	VADDPS Z1, Z9, Z9
	VMULPS Z8, Z9, Z9
	VADDPS Z2, Z9, Z9                 // p
	VMULPS Z8, Z9, Z9
	VMULPS Z8, Z9, Z9
	VADDPS Z8, Z9, Z9
	MOVL $0x3f800000, AX              // 1
	VPBROADCASTD AX, Z1
	VADDPS Z1, Z9, Z9                 // e = p·r·r + r + 1

	MOVL $127, AX
	VPBROADCASTD AX, Z10
	VPADDD Z10, Z5, Z11
	VPSLLD $23, Z11, Z11
	VMULPS Z11, Z9, Z9                // e·2^k

	MOVL $0xc2aeac4f, AX              // expLo
	VPBROADCASTD AX, Z1
	VCMPPS $1, Z1, Z0, K3             // x < expLo: 0
	VPXORD Z9, Z9, K3, Z9
	VCMPPS $13, Z1, Z0, K4            // x ≥ expLo, false for NaN
	MOVL $0x42b17217, AX              // expHi
	VPBROADCASTD AX, Z1
	VCMPPS $2, Z1, Z0, K4, K4         // and x ≤ expHi
	VPCMPGTD Z10, Z5, K4, K5          // k > 127
	MOVL $-125, AX
	VPBROADCASTD AX, Z1
	VPCMPGTD Z5, Z1, K4, K6           // k < −125
	KORW K5, K6, K5                   // 2^k outside the normal exponents
	KORW K3, K4, K7
	KNOTW K7, K7                      // NaN or above expHi
	KORW K5, K7, K5
	KANDW K1, K5, K5                  // the lanes to redo
	KANDNW K1, K5, K6                 // the lanes to store
	VMOVUPS Z9, K6, (DI)
	KMOVW K5, AX
	MOVW AX, redo+32(FP)
	VZEROUPPER
	RET
