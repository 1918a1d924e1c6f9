//go:build !purego

#include "textflag.h"

// func rotateAVX512(x *float32, n int, c, s *float32, w int)
//
// Turns the pairs of x (n rows of w floats, w a multiple of 16) by the
// table c, s (w floats each), the same for every row:
// x'[2i] = x[2i]·c[2i] + x[2i+1]·s[2i], x'[2i+1] = x[2i+1]·c[2i+1] + x[2i]·s[2i+1].
// Each product and the sum round on their own, no fused multiply-add.
TEXT ·rotateAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ c+16(FP), R8
	MOVQ s+24(FP), R9
	MOVQ w+32(FP), R10
	TESTQ CX, CX
	JZ done

row:
	XORQ AX, AX

step:
	VMOVUPS (DI)(AX*4), Z0
	VPERMILPS $0xb1, Z0, Z1           // the pairs swapped
	VMULPS (R8)(AX*4), Z0, Z0
	VMULPS (R9)(AX*4), Z1, Z1
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ $16, AX
	CMPQ AX, R10
	JLT step
	LEAQ (DI)(R10*4), DI
	DECQ CX
	JNZ row

done:
	VZEROUPPER
	RET
