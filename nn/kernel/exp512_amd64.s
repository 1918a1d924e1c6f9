//go:build !purego

#include "textflag.h"

// Constants of Exp (exp.go) and of expSumAVX2, one float32 or int32 each.
DATA exp512c<>+0(SB)/4, $0xc2aeac4f  // expLo
DATA exp512c<>+4(SB)/4, $0x42b1999a  // clampHi
DATA exp512c<>+8(SB)/4, $0x3fb8aa3b  // log2e
DATA exp512c<>+12(SB)/4, $0x3f318000 // ln2hi
DATA exp512c<>+16(SB)/4, $0xb95e8083 // ln2lo
DATA exp512c<>+20(SB)/4, $0x3f800000 // 1
DATA exp512c<>+24(SB)/4, $0x39506967 // c0
DATA exp512c<>+28(SB)/4, $0x3ab743ce // c1
DATA exp512c<>+32(SB)/4, $0x3c088908 // c2
DATA exp512c<>+36(SB)/4, $0x3d2aa9c1 // c3
DATA exp512c<>+40(SB)/4, $0x3e2aaaaa // c4
DATA exp512c<>+44(SB)/4, $0x3f000000 // c5
DATA exp512c<>+48(SB)/4, $0x42fe0000 // 127.0
DATA exp512c<>+52(SB)/4, $127        // exponent bias
GLOBL exp512c<>(SB), RODATA|NOPTR, $56

// EXP16 computes Z5 = e^(Z0*Z2 - Z1) in sixteen lanes, with expSumAVX2's
// operations in its order, so that every lane rounds as there. Lanes under
// expLo give 0, NaN lanes all ones, as there. It clobbers Z2 to Z6, K1, K2.
#define EXP16 \
	VMULPS Z0, Z2, Z2 \
	VSUBPS Z1, Z2, Z2 \
	VCMPPS $0x11, Z9, Z2, K1 \
	VCMPPS $3, Z2, Z2, K2 \
	VMINPS Z10, Z2, Z2 \
	VMAXPS Z9, Z2, Z2 \
	VMULPS Z11, Z2, Z3 \
	VRNDSCALEPS $0, Z3, Z3 \
	VFNMADD231PS Z12, Z3, Z2 \
	VFNMADD231PS Z13, Z3, Z2 \
	VMOVAPS Z16, Z5 \
	VFMADD213PS Z17, Z2, Z5 \
	VFMADD213PS Z18, Z2, Z5 \
	VFMADD213PS Z19, Z2, Z5 \
	VFMADD213PS Z20, Z2, Z5 \
	VFMADD213PS Z21, Z2, Z5 \
	VMULPS Z2, Z2, Z4 \
	VFMADD213PS Z2, Z4, Z5 \
	VADDPS Z14, Z5, Z5 \
	VMINPS Z22, Z3, Z4 \
	VSUBPS Z4, Z3, Z3 \
	VADDPS Z14, Z3, Z3 \
	VMULPS Z3, Z5, Z5 \
	VCVTPS2DQ Z4, Z6 \
	VPADDD Z23, Z6, Z6 \
	VPSLLD $23, Z6, Z6 \
	VMULPS Z6, Z5, Z5 \
	VPXORD Z5, Z5, K1, Z5 \
	VMOVDQU32 Z24, K2, Z5

// func expSumAVX512(dst, src *float32, n int, scale, shift float32) float32
//
// expSumAVX2 sixteen lanes a step (n a multiple of 8, at least 8): the
// same lanes' bits, and the same sum. Each step adds its low eight lanes
// and then its high eight to expSumAVX2's eight running sums, as that code
// adds two steps of eight, and the last eight values go through a masked
// step.
TEXT ·expSumAVX512(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Z0
	VBROADCASTSS shift+28(FP), Z1
	VBROADCASTSS exp512c<>+0(SB), Z9
	VBROADCASTSS exp512c<>+4(SB), Z10
	VBROADCASTSS exp512c<>+8(SB), Z11
	VBROADCASTSS exp512c<>+12(SB), Z12
	VBROADCASTSS exp512c<>+16(SB), Z13
	VBROADCASTSS exp512c<>+20(SB), Z14
	VBROADCASTSS exp512c<>+24(SB), Z16
	VBROADCASTSS exp512c<>+28(SB), Z17
	VBROADCASTSS exp512c<>+32(SB), Z18
	VBROADCASTSS exp512c<>+36(SB), Z19
	VBROADCASTSS exp512c<>+40(SB), Z20
	VBROADCASTSS exp512c<>+44(SB), Z21
	VBROADCASTSS exp512c<>+48(SB), Z22
	VPBROADCASTD exp512c<>+52(SB), Z23
	VPTERNLOGD $0xff, Z24, Z24, Z24   // all ones: the NaN lanes' bits
	VXORPS Y15, Y15, Y15              // eight running sums
	CMPQ CX, $16
	JLT tail

loop:
	VMOVUPS (SI), Z2
	EXP16
	VMOVUPS Z5, (DI)
	VADDPS Y5, Y15, Y15               // lanes 0-7 first
	VEXTRACTF64X4 $1, Z5, Y7
	VADDPS Y7, Y15, Y15               // then lanes 8-15
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	CMPQ CX, $16
	JGE loop

tail:
	TESTQ CX, CX
	JZ sum
	MOVL $0xff, AX                    // the last eight values
	KMOVW AX, K3
	VMOVUPS.Z (SI), K3, Z2
	EXP16
	VMOVUPS Z5, K3, (DI)
	VADDPS Y5, Y15, Y15

sum:
	// lanes summed as goExpBlock does: (l0+l4)+(l1+l5), (l2+l6)+(l3+l7)
	VEXTRACTF128 $1, Y15, X0
	VADDPS X0, X15, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func expRowsAVX512(p *float32, ld, n0, rows int, scale float32, shift, sums *float32, redo *uint16)
//
// ExpSum in place on rows rows: row r holds n0+r values at p + 4·r·ld.
// Its head, the first (n0+r) &^ 7, goes as in expSumAVX512; its last
// (n0+r) mod 8 values as in expTailAVX512, added to the head's sum in
// order. Each row gets the bits of ExpSum, its sum in sums[r]. A row
// whose last values take another branch of Exp sets those lanes' bits in
// redo[r], leaves them unwritten and puts only its head's sum in sums[r],
// for the caller to finish.
TEXT ·expRowsAVX512(SB), NOSPLIT, $0-64
	MOVQ p+0(FP), R11
	MOVQ ld+8(FP), R12
	SHLQ $2, R12
	MOVQ n0+16(FP), R13
	MOVQ rows+24(FP), R14
	VBROADCASTSS scale+32(FP), Z0
	MOVQ shift+40(FP), R8
	MOVQ sums+48(FP), R9
	MOVQ redo+56(FP), R10
	VBROADCASTSS exp512c<>+0(SB), Z9
	VBROADCASTSS exp512c<>+4(SB), Z10
	VBROADCASTSS exp512c<>+8(SB), Z11
	VBROADCASTSS exp512c<>+12(SB), Z12
	VBROADCASTSS exp512c<>+16(SB), Z13
	VBROADCASTSS exp512c<>+20(SB), Z14
	VBROADCASTSS exp512c<>+24(SB), Z16
	VBROADCASTSS exp512c<>+28(SB), Z17
	VBROADCASTSS exp512c<>+32(SB), Z18
	VBROADCASTSS exp512c<>+36(SB), Z19
	VBROADCASTSS exp512c<>+40(SB), Z20
	VBROADCASTSS exp512c<>+44(SB), Z21
	VBROADCASTSS exp512c<>+48(SB), Z22
	VPBROADCASTD exp512c<>+52(SB), Z23
	VPTERNLOGD $0xff, Z24, Z24, Z24
	MOVL $0xff, AX
	KMOVW AX, K3
	TESTQ R14, R14
	JZ rdone

rrow:
	MOVW $0, (R10)
	MOVQ R13, CX
	ANDQ $-8, CX                      // the row's head
	VBROADCASTSS (R8), Z1
	VXORPS Y15, Y15, Y15
	MOVQ R11, SI
	CMPQ CX, $16
	JLT rtail

rloop:
	VMOVUPS (SI), Z2
	EXP16
	VMOVUPS Z5, (SI)
	VADDPS Y5, Y15, Y15
	VEXTRACTF64X4 $1, Z5, Y7
	VADDPS Y7, Y15, Y15
	ADDQ $64, SI
	SUBQ $16, CX
	CMPQ CX, $16
	JGE rloop

rtail:
	TESTQ CX, CX
	JZ rsum
	VMOVUPS.Z (SI), K3, Z2
	EXP16
	VMOVUPS Z5, K3, (SI)
	VADDPS Y5, Y15, Y15

rsum:
	VEXTRACTF128 $1, Y15, X2
	VADDPS X2, X15, X2
	VHADDPS X2, X2, X2
	VHADDPS X2, X2, X2                // the head's sum
	MOVQ R13, BX
	ANDQ $7, BX                       // the last values, as expTailAVX512
	JZ rstore
	MOVQ R13, DI
	ANDQ $-8, DI
	LEAQ (R11)(DI*4), DI
	MOVL $1, AX
	MOVQ BX, CX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K4
	VMOVUPS.Z (DI), K4, Z25
	VMULPS Z0, Z25, Z25
	VSUBPS Z1, Z25, Z25               // x
	VMULPS Z11, Z25, Z26              // t = x·log2e
	VPXORD Z27, Z27, Z27
	VCMPPS $1, Z27, Z26, K5
	VADDPS Z21, Z26, Z27
	VSUBPS Z21, Z26, K5, Z27          // t ± 0.5
	VCVTTPS2DQ Z27, Z28               // k
	VCVTDQ2PS Z28, Z29                // fk
	VMULPS Z12, Z29, Z30
	VSUBPS Z30, Z25, Z31
	VMULPS Z13, Z29, Z30
	VSUBPS Z30, Z31, Z31              // r
	VMULPS Z31, Z16, Z30
	VADDPS Z17, Z30, Z30
	VMULPS Z31, Z30, Z30
	VADDPS Z18, Z30, Z30
	VMULPS Z31, Z30, Z30
	VADDPS Z19, Z30, Z30
	VMULPS Z31, Z30, Z30
	VADDPS Z20, Z30, Z30
	VMULPS Z31, Z30, Z30
	VADDPS Z21, Z30, Z30              // p
	VMULPS Z31, Z30, Z30
	VMULPS Z31, Z30, Z30
	VADDPS Z31, Z30, Z30
	VADDPS Z14, Z30, Z30              // e = p·r·r + r + 1
	VPADDD Z23, Z28, Z29
	VPSLLD $23, Z29, Z29
	VMULPS Z29, Z30, Z30              // e·2^k
	VCMPPS $1, Z9, Z25, K5            // x < expLo: 0
	VPXORD Z30, Z30, K5, Z30
	VCMPPS $13, Z9, Z25, K6           // expLo ≤ x
	MOVL $0x42b17217, AX              // expHi
	VPBROADCASTD AX, Z29
	VCMPPS $2, Z29, Z25, K6, K6       // ≤ expHi
	VPCMPGTD Z23, Z28, K6, K7         // k > 127
	MOVL $-125, AX
	VPBROADCASTD AX, Z29
	VPCMPGTD Z28, Z29, K6, K1         // k < −125
	KORW K7, K1, K7
	KORW K5, K6, K1
	KNOTW K1, K1                      // NaN or above expHi
	KORW K7, K1, K7
	KANDW K4, K7, K7                  // the lanes to redo
	KANDNW K4, K7, K1                 // the lanes to store
	VMOVUPS Z30, K1, (DI)
	KMOVW K7, AX
	MOVW AX, (R10)
	TESTL AX, AX
	JNZ rstore                        // the caller finishes this row

radd:
	VADDSS (DI), X2, X2               // in order, as ExpSum adds them
	ADDQ $4, DI
	DECQ BX
	JNZ radd

rstore:
	VMOVSS X2, (R9)
	ADDQ $2, R10
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ R12, R11
	INCQ R13
	DECQ R14
	JNZ rrow

rdone:
	VZEROUPPER
	RET
