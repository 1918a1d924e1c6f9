//go:build !purego

#include "textflag.h"

// func addAVX(x, y *float32, n int)
//
// x[i] += y[i] eight lanes a step, n a positive multiple of 8.
TEXT ·addAVX(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ n+16(FP), CX

loop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0               // x + y
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func scaleAVX(x *float32, s float32, n int)
//
// x[i] *= s eight lanes a step, n a positive multiple of 8.
TEXT ·scaleAVX(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	VBROADCASTSS s+8(FP), Y1
	MOVQ n+16(FP), CX

loop:
	VMULPS (DI), Y1, Y0               // x * s
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET
