//go:build !purego

#include "textflag.h"

// Half-width panel-vector products: as gemv4AVX2 and gemv1AVX2, with the
// panels stored as 16-bit values (16 per k step, 32 bytes) that are widened
// to float32 in registers before each fused multiply-add. Widening is
// exact, so every sum is the chain gemv4AVX2 computes over the widened
// panels.

// bfloat16: zero-extend to 32 bits and shift into the high half.
#define BWIDEN(src, dst) \
	VPMOVZXWD src, dst \
	VPSLLD $16, dst, dst

// float16: F16C's conversion.
#define HWIDEN(src, dst) \
	VCVTPH2PS src, dst

#define HSTEP4(W, off, boff) \
	VBROADCASTSS off(SI), Y8 \
	W(boff(DI), Y9) \
	W((boff+16)(DI), Y10) \
	W(boff(R9), Y11) \
	W((boff+16)(R9), Y12) \
	VFMADD231PS Y9, Y8, Y0 \
	VFMADD231PS Y10, Y8, Y1 \
	VFMADD231PS Y11, Y8, Y2 \
	VFMADD231PS Y12, Y8, Y3 \
	W(boff(R10), Y9) \
	W((boff+16)(R10), Y10) \
	W(boff(R11), Y11) \
	W((boff+16)(R11), Y12) \
	VFMADD231PS Y9, Y8, Y4 \
	VFMADD231PS Y10, Y8, Y5 \
	VFMADD231PS Y11, Y8, Y6 \
	VFMADD231PS Y12, Y8, Y7

#define GEMV4HALF(W) \
	MOVQ k+0(FP), CX \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DI \
	MOVQ stride+24(FP), R8 \
	SHLQ $1, R8 \
	LEAQ (DI)(R8*1), R9 \
	LEAQ (DI)(R8*2), R10 \
	LEAQ (R9)(R8*2), R11 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	CMPQ CX, $4 \
	JLT tail \
loop4: \
	HSTEP4(W, 0, 0) \
	HSTEP4(W, 4, 32) \
	HSTEP4(W, 8, 64) \
	HSTEP4(W, 12, 96) \
	ADDQ $16, SI \
	ADDQ $128, DI \
	ADDQ $128, R9 \
	ADDQ $128, R10 \
	ADDQ $128, R11 \
	SUBQ $4, CX \
	CMPQ CX, $4 \
	JGE loop4 \
tail: \
	TESTQ CX, CX \
	JZ store \
loop1: \
	HSTEP4(W, 0, 0) \
	ADDQ $4, SI \
	ADDQ $32, DI \
	ADDQ $32, R9 \
	ADDQ $32, R10 \
	ADDQ $32, R11 \
	DECQ CX \
	JNZ loop1 \
store: \
	MOVQ c+32(FP), DX \
	VMOVUPS Y0, (DX) \
	VMOVUPS Y1, 32(DX) \
	VMOVUPS Y2, 64(DX) \
	VMOVUPS Y3, 96(DX) \
	VMOVUPS Y4, 128(DX) \
	VMOVUPS Y5, 160(DX) \
	VMOVUPS Y6, 192(DX) \
	VMOVUPS Y7, 224(DX) \
	VZEROUPPER \
	RET

#define GEMV1HALF(W) \
	MOVQ k+0(FP), CX \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DI \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	TESTQ CX, CX \
	JZ store1 \
loop: \
	VBROADCASTSS (SI), Y8 \
	W((DI), Y9) \
	W(16(DI), Y10) \
	VFMADD231PS Y9, Y8, Y0 \
	VFMADD231PS Y10, Y8, Y1 \
	ADDQ $4, SI \
	ADDQ $32, DI \
	DECQ CX \
	JNZ loop \
store1: \
	MOVQ c+24(FP), DX \
	VMOVUPS Y0, (DX) \
	VMOVUPS Y1, 32(DX) \
	VZEROUPPER \
	RET

// func gemv4BF16AVX2(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv4BF16AVX2(SB), NOSPLIT, $0-40
	GEMV4HALF(BWIDEN)

// func gemv4F16AVX2(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv4F16AVX2(SB), NOSPLIT, $0-40
	GEMV4HALF(HWIDEN)

// func gemv1BF16AVX2(k int, a *float32, b *uint16, c *float32)
TEXT ·gemv1BF16AVX2(SB), NOSPLIT, $0-32
	GEMV1HALF(BWIDEN)

// func gemv1F16AVX2(k int, a *float32, b *uint16, c *float32)
TEXT ·gemv1F16AVX2(SB), NOSPLIT, $0-32
	GEMV1HALF(HWIDEN)

// func widenBF16AVX2(dst *float32, src *uint16, n int)
//
// dst[i] = the float32 of src[i] for i < n, n a positive multiple of 8.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
wloop:
	BWIDEN((SI), Y0)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ wloop
	VZEROUPPER
	RET

// func widenF16AVX2(dst *float32, src *uint16, n int)
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
hloop:
	HWIDEN((SI), Y0)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ hloop
	VZEROUPPER
	RET
