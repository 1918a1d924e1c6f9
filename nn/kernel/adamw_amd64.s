//go:build !purego

#include "textflag.h"

// func adamwAVX(theta, grad, m, v *float32, n int, s *AdamWStep)
//
// goAdamWBlock eight lanes a step (n a multiple of 8, at least 8): the
// same operations in the same order, each rounded (no fused multiply-add),
// so the bits are the same. AdamWStep is B1, B2, C1, C2, LR, Eps, Decay.
TEXT ·adamwAVX(SB), NOSPLIT, $0-48
	MOVQ theta+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ s+40(FP), AX
	VBROADCASTSS 0(AX), Y0            // b1
	VBROADCASTSS 4(AX), Y2            // b2
	VBROADCASTSS 8(AX), Y4            // c1
	VBROADCASTSS 12(AX), Y5           // c2
	VBROADCASTSS 16(AX), Y6           // lr
	VBROADCASTSS 20(AX), Y7           // eps
	VBROADCASTSS 24(AX), Y8           // decay
	MOVL $0x3f800000, BX              // 1.0
	VMOVD BX, X15
	VBROADCASTSS X15, Y15
	VSUBPS Y0, Y15, Y1                // 1 - b1
	VSUBPS Y2, Y15, Y3                // 1 - b2

loop:
	VMOVUPS (SI), Y9                  // g
	VMULPS (R8), Y0, Y10              // b1*m
	VMULPS Y9, Y1, Y11                // (1-b1)*g
	VADDPS Y11, Y10, Y10              // m
	VMOVUPS Y10, (R8)
	VMULPS (R9), Y2, Y11              // b2*v
	VMULPS Y9, Y3, Y12                // (1-b2)*g
	VMULPS Y9, Y12, Y12               // *g
	VADDPS Y12, Y11, Y11              // v
	VMOVUPS Y11, (R9)
	VMULPS Y5, Y11, Y12               // v*c2
	VSQRTPS Y12, Y12
	VADDPS Y7, Y12, Y12               // + eps
	VMULPS Y4, Y10, Y13               // m*c1
	VMULPS Y13, Y6, Y13               // lr*(m*c1)
	VDIVPS Y12, Y13, Y13              // / (sqrt(v*c2) + eps)
	VMULPS (DI), Y8, Y14              // theta*decay
	VSUBPS Y13, Y14, Y14
	VMOVUPS Y14, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET
