//go:build !purego

#include "textflag.h"

// One k step of the 6x16 tile: two 8-wide loads of the packed B row, six
// broadcasts of the packed A column, twelve fused multiply-adds. Every
// accumulator gets exactly one FMA per k step, in k order.
#define STEP \
	VMOVUPS (DI), Y12 \
	VMOVUPS 32(DI), Y13 \
	VBROADCASTSS (SI), Y14 \
	VBROADCASTSS 4(SI), Y15 \
	VFMADD231PS Y12, Y14, Y0 \
	VFMADD231PS Y13, Y14, Y1 \
	VFMADD231PS Y12, Y15, Y2 \
	VFMADD231PS Y13, Y15, Y3 \
	VBROADCASTSS 8(SI), Y14 \
	VBROADCASTSS 12(SI), Y15 \
	VFMADD231PS Y12, Y14, Y4 \
	VFMADD231PS Y13, Y14, Y5 \
	VFMADD231PS Y12, Y15, Y6 \
	VFMADD231PS Y13, Y15, Y7 \
	VBROADCASTSS 16(SI), Y14 \
	VBROADCASTSS 20(SI), Y15 \
	VFMADD231PS Y12, Y14, Y8 \
	VFMADD231PS Y13, Y14, Y9 \
	VFMADD231PS Y12, Y15, Y10 \
	VFMADD231PS Y13, Y15, Y11 \
	ADDQ AX, SI \
	ADDQ BX, DI

// func kern6x16AVX2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// c(6,16) (row stride ldc floats) = [c +] a·b where step p reads the 6
// floats of a at a + p·lda and the 16 floats of b at b + p·ldb.
TEXT ·kern6x16AVX2(SB), NOSPLIT, $0-57
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), AX
	SHLQ $2, AX
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), BX
	SHLQ $2, BX
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8
	LEAQ (DX)(R8*1), R9
	LEAQ (DX)(R8*2), R10
	LEAQ (R9)(R8*2), R11
	LEAQ (R10)(R8*2), R12
	LEAQ (R11)(R8*2), R13
	MOVBLZX acc+56(FP), CX
	TESTQ CX, CX
	JZ zero
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS (R9), Y2
	VMOVUPS 32(R9), Y3
	VMOVUPS (R10), Y4
	VMOVUPS 32(R10), Y5
	VMOVUPS (R11), Y6
	VMOVUPS 32(R11), Y7
	VMOVUPS (R12), Y8
	VMOVUPS 32(R12), Y9
	VMOVUPS (R13), Y10
	VMOVUPS 32(R13), Y11
	JMP body

zero:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

body:
	MOVQ k+0(FP), CX
	CMPQ CX, $4
	JLT tail

loop4:
	STEP
	STEP
	STEP
	STEP
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop4

tail:
	TESTQ CX, CX
	JZ store

loop1:
	STEP
	DECQ CX
	JNZ loop1

store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, (R9)
	VMOVUPS Y3, 32(R9)
	VMOVUPS Y4, (R10)
	VMOVUPS Y5, 32(R10)
	VMOVUPS Y6, (R11)
	VMOVUPS Y7, 32(R11)
	VMOVUPS Y8, (R12)
	VMOVUPS Y9, 32(R12)
	VMOVUPS Y10, (R13)
	VMOVUPS Y11, 32(R13)
	VZEROUPPER
	RET
