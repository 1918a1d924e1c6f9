//go:build !purego

#include "textflag.h"

// func rmsApplyAVX(y, x, gain *float32, r float32, n int)
//
// y = g*(r*x) eight lanes a step, n a positive multiple of 8.
TEXT ·rmsApplyAVX(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gain+16(FP), DX
	VBROADCASTSS r+24(FP), Y1
	MOVQ n+32(FP), CX

loop:
	VMULPS (SI), Y1, Y0               // r*x
	VMULPS (DX), Y0, Y0               // g*(r*x)
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func rmsInputAVX(dx, dy, x, gain *float32, r, c float32, n int)
//
// dx += r*g*dy - c*x eight lanes a step, each operation rounded in that
// order, n a positive multiple of 8.
TEXT ·rmsInputAVX(SB), NOSPLIT, $0-48
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ gain+24(FP), DX
	VBROADCASTSS r+32(FP), Y1
	VBROADCASTSS c+36(FP), Y2
	MOVQ n+40(FP), CX

loop:
	VMULPS (DX), Y1, Y3               // r*g
	VMULPS (R8), Y3, Y3               // *dy
	VMULPS (SI), Y2, Y4               // c*x
	VSUBPS Y4, Y3, Y3                 // r*g*dy - c*x
	VADDPS (DI), Y3, Y3               // dx + that
	VMOVUPS Y3, (DI)
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func rmsGainAVX(dg, dy, x *float32, r float32, n int)
//
// dg += dy*x*r eight lanes a step, n a positive multiple of 8.
TEXT ·rmsGainAVX(SB), NOSPLIT, $0-40
	MOVQ dg+0(FP), DI
	MOVQ dy+8(FP), R8
	MOVQ x+16(FP), SI
	VBROADCASTSS r+24(FP), Y1
	MOVQ n+32(FP), CX

loop:
	VMOVUPS (R8), Y3
	VMULPS (SI), Y3, Y3               // dy*x
	VMULPS Y1, Y3, Y3                 // *r
	VADDPS (DI), Y3, Y3               // dg + that
	VMOVUPS Y3, (DI)
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET
