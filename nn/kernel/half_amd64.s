//go:build !purego

#include "textflag.h"

// Half-width panel-vector products: as gemv4AVX2 and gemv1AVX2, with the
// panels stored as 16-bit values (16 per k step, 32 bytes) that are widened
// to float32 in registers before each fused multiply-add. Widening is
// exact, so every sum is the chain gemv4AVX2 computes over the widened
// panels. float16 uses the generic macros below with F16C's conversion;
// bfloat16 has its own (at the end), with fewer instructions per value.

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

// func gemv4F16AVX2(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv4F16AVX2(SB), NOSPLIT, $0-40
	GEMV4HALF(HWIDEN)

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

// bfloat16, four panels: one 32-byte load holds a panel's 16 values of a
// k step; interleaving them with zeros (VPUNPCKLWD/VPUNPCKHWD, which work
// within each 128-bit lane) puts each in the high half of a float32, in
// the column order [0-3, 8-11] and [4-7, 12-15]. Each accumulator keeps
// that order; the store puts the columns back in place. Every column is
// still one chain of fused multiply-adds in k order.
#define BSTEP4(off, boff) \
	VBROADCASTSS off(SI), Y8 \
	VMOVDQU boff(DI), Y9 \
	VMOVDQU boff(R9), Y10 \
	VPUNPCKLWD Y9, Y15, Y11 \
	VPUNPCKHWD Y9, Y15, Y12 \
	VPUNPCKLWD Y10, Y15, Y13 \
	VPUNPCKHWD Y10, Y15, Y14 \
	VFMADD231PS Y11, Y8, Y0 \
	VFMADD231PS Y12, Y8, Y1 \
	VFMADD231PS Y13, Y8, Y2 \
	VFMADD231PS Y14, Y8, Y3 \
	VMOVDQU boff(R10), Y9 \
	VMOVDQU boff(R11), Y10 \
	VPUNPCKLWD Y9, Y15, Y11 \
	VPUNPCKHWD Y9, Y15, Y12 \
	VPUNPCKLWD Y10, Y15, Y13 \
	VPUNPCKHWD Y10, Y15, Y14 \
	VFMADD231PS Y11, Y8, Y4 \
	VFMADD231PS Y12, Y8, Y5 \
	VFMADD231PS Y13, Y8, Y6 \
	VFMADD231PS Y14, Y8, Y7

// BSTORE writes accumulators lo ([0-3, 8-11]) and hi ([4-7, 12-15]) as 16
// columns in order at off(DX).
#define BSTORE(lo, hi, off) \
	VPERM2F128 $0x20, hi, lo, Y13 \
	VPERM2F128 $0x31, hi, lo, Y14 \
	VMOVUPS Y13, off(DX) \
	VMOVUPS Y14, (off+32)(DX)

// func gemv4BF16AVX2(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv4BF16AVX2(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $1, R8
	LEAQ (DI)(R8*1), R9
	LEAQ (DI)(R8*2), R10
	LEAQ (R9)(R8*2), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VPXOR Y15, Y15, Y15
	CMPQ CX, $4
	JLT btail

bloop4:
	BSTEP4(0, 0)
	BSTEP4(4, 32)
	BSTEP4(8, 64)
	BSTEP4(12, 96)
	ADDQ $16, SI
	ADDQ $128, DI
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $128, R11
	SUBQ $4, CX
	CMPQ CX, $4
	JGE bloop4

btail:
	TESTQ CX, CX
	JZ bstore

bloop1:
	BSTEP4(0, 0)
	ADDQ $4, SI
	ADDQ $32, DI
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, R11
	DECQ CX
	JNZ bloop1

bstore:
	MOVQ c+32(FP), DX
	BSTORE(Y0, Y1, 0)
	BSTORE(Y2, Y3, 64)
	BSTORE(Y4, Y5, 128)
	BSTORE(Y6, Y7, 192)
	VZEROUPPER
	RET

// func gemv1BF16AVX2(k int, a *float32, b *uint16, c *float32)
TEXT ·gemv1BF16AVX2(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VPXOR Y15, Y15, Y15
	TESTQ CX, CX
	JZ bstore1

bloop:
	VBROADCASTSS (SI), Y8
	VMOVDQU (DI), Y9
	VPUNPCKLWD Y9, Y15, Y11
	VPUNPCKHWD Y9, Y15, Y12
	VFMADD231PS Y11, Y8, Y0
	VFMADD231PS Y12, Y8, Y1
	ADDQ $4, SI
	ADDQ $32, DI
	DECQ CX
	JNZ bloop

bstore1:
	MOVQ c+24(FP), DX
	BSTORE(Y0, Y1, 0)
	VZEROUPPER
	RET
