//go:build !purego

#include "textflag.h"

// func softmaxGradAVX512(d, p *float32, n int, dot, scale float32)
//
// d[j] = p[j]·(d[j] − dot)·scale for j < n, sixteen lanes a step and a
// masked last step; each operation rounds on its own, in that order.
TEXT ·softmaxGradAVX512(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS dot+24(FP), Z1
	VBROADCASTSS scale+28(FP), Z2
	CMPQ CX, $16
	JLT last

loop:
	VMOVUPS (DI), Z0
	VSUBPS Z1, Z0, Z0
	VMULPS (SI), Z0, Z0
	VMULPS Z2, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	SUBQ $16, CX
	CMPQ CX, $16
	JGE loop

last:
	TESTQ CX, CX
	JZ done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z (SI), K1, Z3
	VSUBPS Z1, Z0, Z0
	VMULPS Z3, Z0, Z0
	VMULPS Z2, Z0, Z0
	VMOVUPS Z0, K1, (DI)

done:
	VZEROUPPER
	RET
