//go:build !purego

#include "textflag.h"

// q8_0 dot products with AVX2, FMA and F16C: four independent pairs of a
// float32 vector and a q8_0 row, so that four dependency chains overlap.
// For each block of 32 values, lane l of s sums a[t]·q[t] over the t ≡ l
// (mod 8) of the block (the first product is a plain multiply, the other
// three fused); then acc += d·s, fused. The eight lanes of acc are added
// as reduce8 does (q8.go).

// BLOCK adds one block of pair (A, R) into accumulator ACC, with S the
// block's sum and D the scale.
#define BLOCK(A, R, S, D, ACC) \
	VPBROADCASTW (R), X0 \
	VCVTPH2PS X0, D \
	VPMOVSXBD 2(R), Y1 \
	VCVTDQ2PS Y1, Y1 \
	VMULPS (A), Y1, S \
	VPMOVSXBD 10(R), Y1 \
	VCVTDQ2PS Y1, Y1 \
	VFMADD231PS 32(A), Y1, S \
	VPMOVSXBD 18(R), Y1 \
	VCVTDQ2PS Y1, Y1 \
	VFMADD231PS 64(A), Y1, S \
	VPMOVSXBD 26(R), Y1 \
	VCVTDQ2PS Y1, Y1 \
	VFMADD231PS 96(A), Y1, S \
	VFMADD231PS D, S, ACC \
	ADDQ $128, A \
	ADDQ $34, R

// REDUCE stores the sum of ACC's eight lanes at off(DX).
#define REDUCE(ACC, XACC, off) \
	VEXTRACTF128 $1, ACC, X0 \
	VADDPS X0, XACC, X0 \
	VMOVHLPS X0, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	MOVSS X0, off(DX)

// func q8Dot4AVX2(blocks int, a0, a1, a2, a3 *float32, r0, r1, r2, r3 *byte, out *float32)
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
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JZ done

loop:
	BLOCK(SI, R10, Y8, Y12, Y4)
	BLOCK(DI, R11, Y9, Y13, Y5)
	BLOCK(R8, R12, Y10, Y14, Y6)
	BLOCK(R9, R13, Y11, Y15, Y7)
	DECQ CX
	JNZ loop

done:
	REDUCE(Y4, X4, 0)
	REDUCE(Y5, X5, 4)
	REDUCE(Y6, X6, 8)
	REDUCE(Y7, X7, 12)
	VZEROUPPER
	RET
