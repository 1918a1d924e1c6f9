//go:build !purego

#include "textflag.h"

// One k step of the 6x32 tile: one 16-wide load from each of the two packed
// B panels, six broadcasts of A, twelve fused multiply-adds. Every
// accumulator gets exactly one FMA per k step, in k order, as in the AVX2
// kernel (a fused multiply-add rounds once whatever the vector width, so the
// two kernels give the same bits).
#define STEP512 \
	VMOVUPS (DI), Z12 \
	VMOVUPS (R15), Z13 \
	VBROADCASTSS (SI), Z14 \
	VBROADCASTSS 4(SI), Z15 \
	VBROADCASTSS 8(SI), Z16 \
	VBROADCASTSS 12(SI), Z17 \
	VBROADCASTSS 16(SI), Z18 \
	VBROADCASTSS 20(SI), Z19 \
	VFMADD231PS Z12, Z14, Z0 \
	VFMADD231PS Z13, Z14, Z1 \
	VFMADD231PS Z12, Z15, Z2 \
	VFMADD231PS Z13, Z15, Z3 \
	VFMADD231PS Z12, Z16, Z4 \
	VFMADD231PS Z13, Z16, Z5 \
	VFMADD231PS Z12, Z17, Z6 \
	VFMADD231PS Z13, Z17, Z7 \
	VFMADD231PS Z12, Z18, Z8 \
	VFMADD231PS Z13, Z18, Z9 \
	VFMADD231PS Z12, Z19, Z10 \
	VFMADD231PS Z13, Z19, Z11 \
	ADDQ AX, SI \
	ADDQ BX, DI \
	ADDQ BX, R15

// func kern6x32AVX512(k int, a *float32, lda int, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool)
//
// c(6,32) (row stride ldc floats) = [c +] a·[b0 b1] where step p reads the 6
// floats of a at a + p·lda and 16 floats of each of b0 and b1 at p·ldb.
TEXT ·kern6x32AVX512(SB), NOSPLIT, $0-65
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), AX
	SHLQ $2, AX
	MOVQ b0+24(FP), DI
	MOVQ b1+32(FP), R15
	MOVQ ldb+40(FP), BX
	SHLQ $2, BX
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R8
	SHLQ $2, R8
	LEAQ (DX)(R8*1), R9
	LEAQ (DX)(R8*2), R10
	LEAQ (R9)(R8*2), R11
	LEAQ (R10)(R8*2), R12
	LEAQ (R11)(R8*2), R13
	MOVBLZX acc+64(FP), CX
	TESTQ CX, CX
	JZ zero
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS (R9), Z2
	VMOVUPS 64(R9), Z3
	VMOVUPS (R10), Z4
	VMOVUPS 64(R10), Z5
	VMOVUPS (R11), Z6
	VMOVUPS 64(R11), Z7
	VMOVUPS (R12), Z8
	VMOVUPS 64(R12), Z9
	VMOVUPS (R13), Z10
	VMOVUPS 64(R13), Z11
	JMP body

zero:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11

body:
	MOVQ k+0(FP), CX
	CMPQ CX, $4
	JLT tail

loop4:
	STEP512
	STEP512
	STEP512
	STEP512
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop4

tail:
	TESTQ CX, CX
	JZ store

loop1:
	STEP512
	DECQ CX
	JNZ loop1

store:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, (R9)
	VMOVUPS Z3, 64(R9)
	VMOVUPS Z4, (R10)
	VMOVUPS Z5, 64(R10)
	VMOVUPS Z6, (R11)
	VMOVUPS Z7, 64(R11)
	VMOVUPS Z8, (R12)
	VMOVUPS Z9, 64(R12)
	VMOVUPS Z10, (R13)
	VMOVUPS Z11, 64(R13)
	VZEROUPPER
	RET
