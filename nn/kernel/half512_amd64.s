//go:build !purego

#include "textflag.h"

// Eight panels with AVX-512: one 16-float accumulator per panel (Z0-Z7),
// each panel's 16 values of a k step widened into a ZMM register. Twice
// the panels of gemv4BF16AVX2 in flight, the same chains per column.
#define ZBW(src, z) \
	VPMOVZXWD src, z \
	VPSLLD $16, z, z
#define ZHW(src, z) \
	VCVTPH2PS src, z

#define Z8STEP(W, off, boff) \
	VBROADCASTSS off(SI), Z8 \
	W(boff(DI), Z9) \
	W(boff(DI)(R8*1), Z10) \
	W(boff(DI)(R8*2), Z11) \
	W(boff(R9), Z12) \
	VFMADD231PS Z9, Z8, Z0 \
	VFMADD231PS Z10, Z8, Z1 \
	VFMADD231PS Z11, Z8, Z2 \
	VFMADD231PS Z12, Z8, Z3 \
	W(boff(R9)(R8*1), Z13) \
	W(boff(R9)(R8*2), Z14) \
	W(boff(R10), Z15) \
	W(boff(R10)(R8*1), Z16) \
	VFMADD231PS Z13, Z8, Z4 \
	VFMADD231PS Z14, Z8, Z5 \
	VFMADD231PS Z15, Z8, Z6 \
	VFMADD231PS Z16, Z8, Z7

#define GEMV8HALF(W) \
	MOVQ k+0(FP), CX \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DI \
	MOVQ stride+24(FP), R8 \
	SHLQ $1, R8 \
	LEAQ (DI)(R8*2), R9 \
	ADDQ R8, R9 \
	LEAQ (R9)(R8*2), R10 \
	ADDQ R8, R10 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	CMPQ CX, $4 \
	JLT ztail \
zloop4: \
	Z8STEP(W, 0, 0) \
	Z8STEP(W, 4, 32) \
	Z8STEP(W, 8, 64) \
	Z8STEP(W, 12, 96) \
	ADDQ $16, SI \
	ADDQ $128, DI \
	ADDQ $128, R9 \
	ADDQ $128, R10 \
	SUBQ $4, CX \
	CMPQ CX, $4 \
	JGE zloop4 \
ztail: \
	TESTQ CX, CX \
	JZ zstore \
zloop1: \
	Z8STEP(W, 0, 0) \
	ADDQ $4, SI \
	ADDQ $32, DI \
	ADDQ $32, R9 \
	ADDQ $32, R10 \
	DECQ CX \
	JNZ zloop1 \
zstore: \
	MOVQ c+32(FP), DX \
	VMOVUPS Z0, (DX) \
	VMOVUPS Z1, 64(DX) \
	VMOVUPS Z2, 128(DX) \
	VMOVUPS Z3, 192(DX) \
	VMOVUPS Z4, 256(DX) \
	VMOVUPS Z5, 320(DX) \
	VMOVUPS Z6, 384(DX) \
	VMOVUPS Z7, 448(DX) \
	VZEROUPPER \
	RET

// func gemv8BF16AVX512(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv8BF16AVX512(SB), NOSPLIT, $0-40
	GEMV8HALF(ZBW)

// func gemv8F16AVX512(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv8F16AVX512(SB), NOSPLIT, $0-40
	GEMV8HALF(ZHW)
