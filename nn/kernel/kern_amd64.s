//go:build !purego

#include "textflag.h"

// One k step of the 6x16 tile: two 8-wide loads of the packed B row, six
// broadcasts of the packed A column, twelve fused multiply-adds. Every
// accumulator gets exactly one FMA per k step, in k order.
#define STEP(aoff, boff) \
	VMOVUPS boff(DI), Y12 \
	VMOVUPS (boff+32)(DI), Y13 \
	VBROADCASTSS (aoff)(SI), Y14 \
	VBROADCASTSS (aoff+4)(SI), Y15 \
	VFMADD231PS Y12, Y14, Y0 \
	VFMADD231PS Y13, Y14, Y1 \
	VFMADD231PS Y12, Y15, Y2 \
	VFMADD231PS Y13, Y15, Y3 \
	VBROADCASTSS (aoff+8)(SI), Y14 \
	VBROADCASTSS (aoff+12)(SI), Y15 \
	VFMADD231PS Y12, Y14, Y4 \
	VFMADD231PS Y13, Y14, Y5 \
	VFMADD231PS Y12, Y15, Y6 \
	VFMADD231PS Y13, Y15, Y7 \
	VBROADCASTSS (aoff+16)(SI), Y14 \
	VBROADCASTSS (aoff+20)(SI), Y15 \
	VFMADD231PS Y12, Y14, Y8 \
	VFMADD231PS Y13, Y14, Y9 \
	VFMADD231PS Y12, Y15, Y10 \
	VFMADD231PS Y13, Y15, Y11

// func kern6x16AVX2(k int, a, b, c *float32, ldc int, acc bool)
//
// c(6,16) (row stride ldc floats) = [c +] a·b where a is a packed panel
// (k steps of 6 floats) and b a packed panel (k steps of 16 floats).
TEXT ·kern6x16AVX2(SB), NOSPLIT, $0-41
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	LEAQ (DX)(R8*1), R9
	LEAQ (DX)(R8*2), R10
	LEAQ (R9)(R8*2), R11
	LEAQ (R10)(R8*2), R12
	LEAQ (R11)(R8*2), R13
	MOVBLZX acc+40(FP), AX
	TESTQ AX, AX
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
	CMPQ CX, $4
	JLT tail

loop4:
	STEP(0, 0)
	STEP(24, 64)
	STEP(48, 128)
	STEP(72, 192)
	ADDQ $96, SI
	ADDQ $256, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop4

tail:
	TESTQ CX, CX
	JZ store

loop1:
	STEP(0, 0)
	ADDQ $24, SI
	ADDQ $64, DI
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
