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
