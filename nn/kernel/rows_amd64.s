//go:build !purego

#include "textflag.h"

// The products of a few rows of activations with pairs of packed panels.
// A is read in place, row-major with row stride lda: step p of row r is
// the float at a + 4·(r·lda + p). B is two panels of a Packed, step p at
// b0 + 64·p and b1 + 64·p. Each element of c is one fused multiply-add
// per k step, in k order from zero, as in kern6x32AVX512: the same bits.

// One k step for rows 0-3: broadcast each row's A value, two FMAs each.
// B's two panels are in Z16 and Z17; offA is the step's byte offset in A.
#define ROWS4(offA) \
	VBROADCASTSS offA(SI), Z18 \
	VBROADCASTSS offA(SI)(AX*1), Z19 \
	VBROADCASTSS offA(SI)(AX*2), Z20 \
	VBROADCASTSS offA(SI)(R14*1), Z21 \
	VFMADD231PS Z16, Z18, Z0 \
	VFMADD231PS Z17, Z18, Z1 \
	VFMADD231PS Z16, Z19, Z2 \
	VFMADD231PS Z17, Z19, Z3 \
	VFMADD231PS Z16, Z20, Z4 \
	VFMADD231PS Z17, Z20, Z5 \
	VFMADD231PS Z16, Z21, Z6 \
	VFMADD231PS Z17, Z21, Z7

// The same for rows 4-7: row 4 at 4·lda, 5 at R10 (row 1) + 4·lda, 6 at
// 6·lda, 7 at R10 + 6·lda.
#define ROWS8(offA) \
	VBROADCASTSS offA(SI)(AX*4), Z22 \
	VBROADCASTSS offA(R10)(AX*4), Z23 \
	VBROADCASTSS offA(SI)(R14*2), Z24 \
	VBROADCASTSS offA(R10)(R14*2), Z25 \
	VFMADD231PS Z16, Z22, Z8 \
	VFMADD231PS Z17, Z22, Z9 \
	VFMADD231PS Z16, Z23, Z10 \
	VFMADD231PS Z17, Z23, Z11 \
	VFMADD231PS Z16, Z24, Z12 \
	VFMADD231PS Z17, Z24, Z13 \
	VFMADD231PS Z16, Z25, Z14 \
	VFMADD231PS Z17, Z25, Z15

#define LOADB(offB) \
	VMOVUPS offB(DI), Z16 \
	VMOVUPS offB(R15), Z17

// Arguments of every kernel below, and the registers they live in:
// SI a, AX lda in bytes, R14 3·lda in bytes, R10 a + lda, DI b0, R15 b1,
// CX k, DX c, R8 ldc in bytes.
#define ARGS \
	MOVQ k+0(FP), CX \
	MOVQ a+8(FP), SI \
	MOVQ lda+16(FP), AX \
	SHLQ $2, AX \
	LEAQ (AX)(AX*2), R14 \
	LEAQ (SI)(AX*1), R10 \
	MOVQ b0+24(FP), DI \
	MOVQ b1+32(FP), R15 \
	MOVQ c+40(FP), DX \
	MOVQ ldc+48(FP), R8 \
	SHLQ $2, R8

#define ADVANCE(steps) \
	ADDQ $(4*steps), SI \
	ADDQ $(4*steps), R10 \
	ADDQ $(64*steps), DI \
	ADDQ $(64*steps), R15

// func rows8x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int, pf *byte)
//
// c(8,32) (row stride ldc floats) = a(8,k) · [b0 b1](k,32). It prefetches
// four cache lines from pf on every four k steps, 64·(k/4) bytes in all:
// the caller points it at the next pair of panels, which would otherwise
// come from memory only when the first tile over them asks.
TEXT ·rows8x32AVX512(SB), NOSPLIT, $0-64
	ARGS
	MOVQ pf+56(FP), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	CMPQ CX, $4
	JLT tail8

loop8:
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	PREFETCHT0 128(BX)
	PREFETCHT0 192(BX)
	ADDQ $256, BX
	LOADB(0)
	ROWS4(0)
	ROWS8(0)
	LOADB(64)
	ROWS4(4)
	ROWS8(4)
	LOADB(128)
	ROWS4(8)
	ROWS8(8)
	LOADB(192)
	ROWS4(12)
	ROWS8(12)
	ADVANCE(4)
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop8

tail8:
	TESTQ CX, CX
	JZ store8

one8:
	LOADB(0)
	ROWS4(0)
	ROWS8(0)
	ADVANCE(1)
	DECQ CX
	JNZ one8

store8:
	LEAQ (R8)(R8*2), R9
	LEAQ (DX)(R8*1), R11
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, (DX)(R8*1)
	VMOVUPS Z3, 64(DX)(R8*1)
	VMOVUPS Z4, (DX)(R8*2)
	VMOVUPS Z5, 64(DX)(R8*2)
	VMOVUPS Z6, (DX)(R9*1)
	VMOVUPS Z7, 64(DX)(R9*1)
	VMOVUPS Z8, (DX)(R8*4)
	VMOVUPS Z9, 64(DX)(R8*4)
	VMOVUPS Z10, (R11)(R8*4)
	VMOVUPS Z11, 64(R11)(R8*4)
	VMOVUPS Z12, (DX)(R9*2)
	VMOVUPS Z13, 64(DX)(R9*2)
	VMOVUPS Z14, (R11)(R9*2)
	VMOVUPS Z15, 64(R11)(R9*2)
	VZEROUPPER
	RET

// func rows4x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int)
//
// c(4,32) = a(4,k) · [b0 b1](k,32), as rows8x32AVX512.
TEXT ·rows4x32AVX512(SB), NOSPLIT, $0-56
	ARGS
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	CMPQ CX, $4
	JLT tail4

loop4:
	LOADB(0)
	ROWS4(0)
	LOADB(64)
	ROWS4(4)
	LOADB(128)
	ROWS4(8)
	LOADB(192)
	ROWS4(12)
	ADVANCE(4)
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop4

tail4:
	TESTQ CX, CX
	JZ store4

one4:
	LOADB(0)
	ROWS4(0)
	ADVANCE(1)
	DECQ CX
	JNZ one4

store4:
	LEAQ (R8)(R8*2), R9
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, (DX)(R8*1)
	VMOVUPS Z3, 64(DX)(R8*1)
	VMOVUPS Z4, (DX)(R8*2)
	VMOVUPS Z5, 64(DX)(R8*2)
	VMOVUPS Z6, (DX)(R9*1)
	VMOVUPS Z7, 64(DX)(R9*1)
	VZEROUPPER
	RET

// One k step for rows 0 and 1 into Z0-Z3, for the narrow kernels.
#define ROWS2(offA) \
	VBROADCASTSS offA(SI), Z18 \
	VBROADCASTSS offA(SI)(AX*1), Z19 \
	VFMADD231PS Z16, Z18, Z0 \
	VFMADD231PS Z17, Z18, Z1 \
	VFMADD231PS Z16, Z19, Z2 \
	VFMADD231PS Z17, Z19, Z3

// func rows2x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int)
//
// c(2,32) = a(2,k) · [b0 b1](k,32), as rows8x32AVX512.
TEXT ·rows2x32AVX512(SB), NOSPLIT, $0-56
	ARGS
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	TESTQ CX, CX
	JZ store2

one2:
	LOADB(0)
	ROWS2(0)
	ADVANCE(1)
	DECQ CX
	JNZ one2

store2:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, (DX)(R8*1)
	VMOVUPS Z3, 64(DX)(R8*1)
	VZEROUPPER
	RET

// func rows1x32AVX512(k int, a *float32, lda int, b0, b1 *float32, c *float32, ldc int)
//
// c(1,32) = a(1,k) · [b0 b1](k,32), as rows8x32AVX512. Even and odd k
// steps cannot share an accumulator chain, so this one is latency-bound:
// it serves the last row of an odd count only.
TEXT ·rows1x32AVX512(SB), NOSPLIT, $0-56
	ARGS
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	TESTQ CX, CX
	JZ store1

one1:
	LOADB(0)
	VBROADCASTSS (SI), Z18
	VFMADD231PS Z16, Z18, Z0
	VFMADD231PS Z17, Z18, Z1
	ADVANCE(1)
	DECQ CX
	JNZ one1

store1:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VZEROUPPER
	RET
