//go:build !purego

#include "textflag.h"

// func swigluAVX(h, a, b *float32, n int)
//
// goSwiGLU eight lanes a step (n a multiple of 8, at least 8): h = a/(1+h)*b
// with h = e^-a on entry, each operation rounded as in Go.
TEXT ·swigluAVX(SB), NOSPLIT, $0-32
	MOVQ h+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL $0x3f800000, BX              // 1.0
	VMOVD BX, X15
	VBROADCASTSS X15, Y15

loop:
	VADDPS (DI), Y15, Y1              // 1 + e^-a
	VMOVUPS (SI), Y0
	VDIVPS Y1, Y0, Y0                 // a / (1 + e^-a)
	VMULPS (DX), Y0, Y0               // * b
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func swigluBackAVX(da, db, dh, a, b *float32, n int)
//
// goSwiGLUBack eight lanes a step (n a multiple of 8, at least 8), with
// da = e^-a on entry: s = 1/(1+da), db = dh*a*s,
// da = dh*b*s*(1 + a*(1-s)), each operation rounded in that order.
TEXT ·swigluBackAVX(SB), NOSPLIT, $0-48
	MOVQ da+0(FP), DI
	MOVQ db+8(FP), R8
	MOVQ dh+16(FP), R9
	MOVQ a+24(FP), SI
	MOVQ b+32(FP), DX
	MOVQ n+40(FP), CX
	MOVL $0x3f800000, BX              // 1.0
	VMOVD BX, X15
	VBROADCASTSS X15, Y15

loop:
	VMOVUPS (SI), Y0                  // x = a
	VADDPS (DI), Y15, Y1              // 1 + e^-a
	VDIVPS Y1, Y15, Y3                // s = 1 / (1 + e^-a)
	VMOVUPS (R9), Y4                  // dh
	VMULPS Y0, Y4, Y5                 // dh*x
	VMULPS Y3, Y5, Y5                 // *s
	VMOVUPS Y5, (R8)                  // db
	VMULPS (DX), Y4, Y6               // dh*b
	VMULPS Y3, Y6, Y6                 // *s
	VSUBPS Y3, Y15, Y7                // 1 - s
	VMULPS Y7, Y0, Y7                 // x*(1-s)
	VADDPS Y15, Y7, Y7                // 1 + x*(1-s)
	VMULPS Y7, Y6, Y6
	VMOVUPS Y6, (DI)                  // da
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET
