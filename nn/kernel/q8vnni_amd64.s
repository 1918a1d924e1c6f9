//go:build !purego

#include "textflag.h"

// q8_0 products with AVX-512 VNNI over q8_0 panels (q8vnni.go). One ZMM
// register holds a panel's 16 rows. For each block, VPDPBUSD multiplies a
// chunk of 64 unsigned weights (four a row, each plus 128) by four signed
// activations broadcast from memory, and adds each row's four products to
// its int32 lane. The lane starts at -128 times the block's activation sum,
// so after the block's eight chunks it holds the exact integer dot product.
// Two accumulators, even and odd chunks, halve the chain. Then
// acc += (dw·dx)·sum, one fused multiply-add a row.

// CHUNK1 adds chunk c (weights at woff(SI), activations at xoff(R9)) into A.
#define CHUNK1(woff, xoff, ZW, A) \
	VMOVDQU64 woff(SI), ZW \
	VPDPBUSD.BCST xoff(R9), ZW, A

// func q8GemvVNNI(blocks, panels int, w, x *byte, out *float32)
TEXT ·q8GemvVNNI(SB), NOSPLIT, $0-40
	MOVQ blocks+0(FP), CX
	MOVQ panels+8(FP), BX
	MOVQ w+16(FP), SI
	MOVQ x+24(FP), R8
	MOVQ out+32(FP), DX

panel1:
	VPXORD Z0, Z0, Z0
	MOVQ R8, R9
	MOVQ CX, R10

block1:
	VPBROADCASTD 4(R9), Z1
	VPXORD Z2, Z2, Z2
	CHUNK1(64, 8, Z3, Z1)
	CHUNK1(128, 12, Z4, Z2)
	CHUNK1(192, 16, Z5, Z1)
	CHUNK1(256, 20, Z6, Z2)
	CHUNK1(320, 24, Z7, Z1)
	CHUNK1(384, 28, Z8, Z2)
	CHUNK1(448, 32, Z9, Z1)
	CHUNK1(512, 36, Z10, Z2)
	VPADDD Z2, Z1, Z1
	VCVTDQ2PS Z1, Z1
	VMOVUPS (SI), Z11
	VMULPS.BCST (R9), Z11, Z11
	VFMADD231PS Z11, Z1, Z0
	ADDQ $576, SI
	ADDQ $40, R9
	DECQ R10
	JNZ block1

	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	DECQ BX
	JNZ panel1
	VZEROUPPER
	RET

// CHUNK4 adds chunk c into the accumulators of four activation rows.
#define CHUNK4(woff, xoff, ZW, A0, A1, A2, A3) \
	VMOVDQU64 woff(SI), ZW \
	VPDPBUSD.BCST xoff(R9), ZW, A0 \
	VPDPBUSD.BCST xoff(R11), ZW, A1 \
	VPDPBUSD.BCST xoff(R12), ZW, A2 \
	VPDPBUSD.BCST xoff(R13), ZW, A3

// FINISH adds row X's block, even sum EV and odd sum OD, into ACC.
// Z20 holds the panel's scales.
#define FINISH(X, EV, OD, ACC) \
	VPADDD OD, EV, EV \
	VCVTDQ2PS EV, EV \
	VMULPS.BCST (X), Z20, Z21 \
	VFMADD231PS Z21, EV, ACC

// func q8Gemm4VNNI(blocks, panels int, w, x *byte, xstride int, out *float32, ldo int)
TEXT ·q8Gemm4VNNI(SB), NOSPLIT, $0-56
	MOVQ blocks+0(FP), CX
	MOVQ panels+8(FP), BX
	MOVQ w+16(FP), SI
	MOVQ x+24(FP), R8
	MOVQ xstride+32(FP), R14
	MOVQ out+40(FP), DX
	MOVQ ldo+48(FP), DI
	SHLQ $2, DI // bytes between rows of out

panel4:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R8, R9
	LEAQ (R8)(R14*1), R11
	LEAQ (R8)(R14*2), R12
	LEAQ (R11)(R14*2), R13
	MOVQ CX, R10

block4:
	VPBROADCASTD 4(R9), Z4
	VPBROADCASTD 4(R11), Z5
	VPBROADCASTD 4(R12), Z6
	VPBROADCASTD 4(R13), Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	CHUNK4(64, 8, Z12, Z4, Z5, Z6, Z7)
	CHUNK4(128, 12, Z13, Z8, Z9, Z10, Z11)
	CHUNK4(192, 16, Z14, Z4, Z5, Z6, Z7)
	CHUNK4(256, 20, Z15, Z8, Z9, Z10, Z11)
	CHUNK4(320, 24, Z16, Z4, Z5, Z6, Z7)
	CHUNK4(384, 28, Z17, Z8, Z9, Z10, Z11)
	CHUNK4(448, 32, Z18, Z4, Z5, Z6, Z7)
	CHUNK4(512, 36, Z19, Z8, Z9, Z10, Z11)
	VMOVUPS (SI), Z20
	FINISH(R9, Z4, Z8, Z0)
	FINISH(R11, Z5, Z9, Z1)
	FINISH(R12, Z6, Z10, Z2)
	FINISH(R13, Z7, Z11, Z3)
	ADDQ $576, SI
	ADDQ $40, R9
	ADDQ $40, R11
	ADDQ $40, R12
	ADDQ $40, R13
	DECQ R10
	JNZ block4

	VMOVUPS Z0, (DX)
	VMOVUPS Z1, (DX)(DI*1)
	LEAQ (DX)(DI*2), AX
	VMOVUPS Z2, (AX)
	VMOVUPS Z3, (AX)(DI*1)
	ADDQ $64, DX
	DECQ BX
	JNZ panel4
	VZEROUPPER
	RET
