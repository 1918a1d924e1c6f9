//go:build !purego

#include "textflag.h"

// q8_0 dot products with AVX2, FMA and F16C: four independent pairs of a
// row of quantised activations (a float32 scale and 32 int8 values a
// block) and a q8_0 row, so that four dependency chains overlap. For each
// block, VPMADDUBSW and VPMADDWD give lane l of 8 the exact integer sum of
// x[t]·q[t] over t in [4l, 4l+4) (VPSIGNB moves x's sign onto q, as
// VPMADDUBSW wants its first operand unsigned; |x| and |q| are at most
// 127, so no sum saturates); then acc += (dx·dq)·sum, fused. The eight
// lanes of acc are added as reduce8 does (q8.go).

// BLOCK adds one block of pair (A, R) into accumulator ACC.
#define BLOCK(A, R, ACC) \
	VMOVDQU 4(A), Y0 \
	VMOVDQU 2(R), Y1 \
	VPSIGNB Y0, Y0, Y2 \
	VPSIGNB Y0, Y1, Y3 \
	VPMADDUBSW Y3, Y2, Y4 \
	VPMADDWD Y15, Y4, Y4 \
	VCVTDQ2PS Y4, Y4 \
	VPBROADCASTW (R), X6 \
	VCVTPH2PS X6, Y6 \
	VBROADCASTSS (A), Y5 \
	VMULPS Y6, Y5, Y5 \
	VFMADD231PS Y4, Y5, ACC \
	ADDQ $36, A \
	ADDQ $34, R

// REDUCE stores the sum of ACC's eight lanes at off(DX).
#define REDUCE(ACC, XACC, off) \
	VEXTRACTF128 $1, ACC, X0 \
	VADDPS X0, XACC, X0 \
	VMOVHLPS X0, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	VMOVSS X0, off(DX)

// func q8Dot4AVX2(blocks int, a0, a1, a2, a3, r0, r1, r2, r3 *byte, out *float32)
TEXT ·q8Dot4AVX2(SB), NOSPLIT, $0-80
	MOVQ blocks+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ a2+24(FP), R8
	MOVQ a3+32(FP), R9
	MOVQ r0+40(FP), R10
	MOVQ r1+48(FP), R11
	MOVQ r2+56(FP), R12
	MOVQ r3+64(FP), R13
	MOVQ out+72(FP), DX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15 // sixteen int16 ones
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	TESTQ CX, CX
	JZ done

loop:
	BLOCK(SI, R10, Y7)
	BLOCK(DI, R11, Y8)
	BLOCK(R8, R12, Y9)
	BLOCK(R9, R13, Y10)
	DECQ CX
	JNZ loop

done:
	REDUCE(Y7, X7, 0)
	REDUCE(Y8, X8, 4)
	REDUCE(Y9, X9, 8)
	REDUCE(Y10, X10, 12)
	VZEROUPPER
	RET
