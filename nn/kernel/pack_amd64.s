//go:build !purego

#include "textflag.h"

// Loads 8 consecutive floats from each of 8 rows: rows 0-3 from R8, rows
// 4-7 from R11, the row stride in R9 and three strides in R10.
#define LOAD8 \
	VMOVUPS (R8), Y0 \
	VMOVUPS (R8)(R9*1), Y1 \
	VMOVUPS (R8)(R9*2), Y2 \
	VMOVUPS (R8)(R10*1), Y3 \
	VMOVUPS (R11), Y4 \
	VMOVUPS (R11)(R9*1), Y5 \
	VMOVUPS (R11)(R9*2), Y6 \
	VMOVUPS (R11)(R10*1), Y7

// Transposes the 8x8 block in Y0-Y7 (row r in Yr) into Y8-Y15 (column q
// in Y(8+q)).
#define TRANSPOSE8 \
	VUNPCKLPS Y1, Y0, Y8 \
	VUNPCKHPS Y1, Y0, Y9 \
	VUNPCKLPS Y3, Y2, Y10 \
	VUNPCKHPS Y3, Y2, Y11 \
	VUNPCKLPS Y5, Y4, Y12 \
	VUNPCKHPS Y5, Y4, Y13 \
	VUNPCKLPS Y7, Y6, Y14 \
	VUNPCKHPS Y7, Y6, Y15 \
	VSHUFPS $0x44, Y10, Y8, Y0 \
	VSHUFPS $0xEE, Y10, Y8, Y1 \
	VSHUFPS $0x44, Y11, Y9, Y2 \
	VSHUFPS $0xEE, Y11, Y9, Y3 \
	VSHUFPS $0x44, Y14, Y12, Y4 \
	VSHUFPS $0xEE, Y14, Y12, Y5 \
	VSHUFPS $0x44, Y15, Y13, Y6 \
	VSHUFPS $0xEE, Y15, Y13, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y9 \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y12 \
	VPERM2F128 $0x31, Y5, Y1, Y13 \
	VPERM2F128 $0x31, Y6, Y2, Y14 \
	VPERM2F128 $0x31, Y7, Y3, Y15

// Stores column q of the transposed block at DI + q·64 + off.
#define STORE8(off) \
	VMOVUPS Y8, (off)(DI) \
	VMOVUPS Y9, (off+64)(DI) \
	VMOVUPS Y10, (off+128)(DI) \
	VMOVUPS Y11, (off+192)(DI) \
	VMOVUPS Y12, (off+256)(DI) \
	VMOVUPS Y13, (off+320)(DI) \
	VMOVUPS Y14, (off+384)(DI) \
	VMOVUPS Y15, (off+448)(DI)

// func packT16AVX(dst, src *float32, ld, blocks int)
//
// Transposes 16 rows (stride ld floats) of 8·blocks floats from src into dst
// laid out as 8·blocks groups of 16: dst[p·16+r] = src[r·ld+p].
TEXT ·packT16AVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ blocks+24(FP), CX
	TESTQ CX, CX
	JZ done

loop:
	MOVQ SI, R8
	LEAQ (R8)(R9*4), R11
	LOAD8
	TRANSPOSE8
	STORE8(0)
	LEAQ (R11)(R9*4), R8
	LEAQ (R8)(R9*4), R11
	LOAD8
	TRANSPOSE8
	STORE8(32)
	ADDQ $32, SI
	ADDQ $512, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET

// func packA6AVX(dst, a *float32, lda, kl int)
//
// Packs a full panel of six rows of a row-major A (row stride lda floats)
// over kl steps (a multiple of 8, at least 8): dst[p·6+r] = a[r·lda+p].
// Eight steps at a time: the six rows' 8 values are interleaved in pairs
// (unpack), the pairs of rows 0-1, 2-3, 4-5 put side by side within each
// 128-bit lane (steps j and j+4 in the two lanes), and the lanes
// reassembled into 48 consecutive floats.
TEXT ·packA6AVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R10
	MOVQ kl+24(FP), AX
	SHLQ $2, R10                      // row stride in bytes
	LEAQ (SI)(R10*1), BX              // row 1
	LEAQ (BX)(R10*1), CX              // row 2
	LEAQ (CX)(R10*1), DX              // row 3
	LEAQ (DX)(R10*1), R8              // row 4
	LEAQ (R8)(R10*1), R9              // row 5

loop:
	VMOVUPS (SI), Y0
	VMOVUPS (BX), Y1
	VMOVUPS (CX), Y2
	VMOVUPS (DX), Y3
	VMOVUPS (R8), Y4
	VMOVUPS (R9), Y5
	VUNPCKLPS Y1, Y0, Y6              // t01  = r0[0] r1[0] r0[1] r1[1] | steps 4, 5
	VUNPCKHPS Y1, Y0, Y7              // t01h = steps 2, 3 | 6, 7
	VUNPCKLPS Y3, Y2, Y8              // t23
	VUNPCKHPS Y3, Y2, Y9              // t23h
	VUNPCKLPS Y5, Y4, Y10             // t45
	VUNPCKHPS Y5, Y4, Y11             // t45h
	VUNPCKLPD Y8, Y6, Y0              // A = p01(0) p23(0) | p01(4) p23(4)
	VSHUFPD $0xA, Y6, Y10, Y1         // B = p45(0) p01(1) | p45(4) p01(5)
	VUNPCKHPD Y10, Y8, Y2             // C = p23(1) p45(1) | p23(5) p45(5)
	VUNPCKLPD Y9, Y7, Y3              // D = p01(2) p23(2) | p01(6) p23(6)
	VSHUFPD $0xA, Y7, Y11, Y4         // E = p45(2) p01(3) | p45(6) p01(7)
	VUNPCKHPD Y11, Y9, Y5             // F = p23(3) p45(3) | p23(7) p45(7)
	VPERM2F128 $0x20, Y1, Y0, Y6      // steps 0-1
	VPERM2F128 $0x20, Y3, Y2, Y7      // steps 1-2
	VPERM2F128 $0x20, Y5, Y4, Y8      // steps 2-3
	VPERM2F128 $0x31, Y1, Y0, Y9      // steps 4-5
	VPERM2F128 $0x31, Y3, Y2, Y10     // steps 5-6
	VPERM2F128 $0x31, Y5, Y4, Y11     // steps 6-7
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	VMOVUPS Y8, 64(DI)
	VMOVUPS Y9, 96(DI)
	VMOVUPS Y10, 128(DI)
	VMOVUPS Y11, 160(DI)
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, CX
	ADDQ $32, DX
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $192, DI
	SUBQ $8, AX
	JNZ loop
	VZEROUPPER
	RET
