//go:build !purego

#include "textflag.h"

// Products with strided operands, 16 columns of B at a time (strided.go).
// Row r of A starts at a + 4·r·ars and its step p is 4·p·aps bytes on;
// step p of B's panel q is 16 floats at b + 4·(q·bps + p·ldb). Each
// element of c is one fused multiply-add per step, in step order, from
// zero or from c: the bits of the blocked kernels.
//
// Registers: SI row 0 of A, R10 row 1, AX ars and R14 3·ars in bytes,
// BX aps in bytes, DI B's current step, R15 the panel's first step, R9 ldb
// and R11 bps in bytes, DX c's panel, R8 ldc in bytes, CX steps left,
// R12 panels left, R13 a row of c.

#define ARGS \
	MOVQ ars+16(FP), AX \
	SHLQ $2, AX \
	LEAQ (AX)(AX*2), R14 \
	MOVQ aps+24(FP), BX \
	SHLQ $2, BX \
	MOVQ b+32(FP), R15 \
	MOVQ ldb+40(FP), R9 \
	SHLQ $2, R9 \
	MOVQ bps+48(FP), R11 \
	SHLQ $2, R11 \
	MOVQ c+56(FP), DX \
	MOVQ ldc+64(FP), R8 \
	SHLQ $2, R8 \
	MOVQ panels+72(FP), R12

// PANEL resets A and B to their first step for the next panel.
#define PANEL \
	MOVQ a+8(FP), SI \
	LEAQ (SI)(AX*1), R10 \
	MOVQ R15, DI \
	MOVQ k+0(FP), CX


// func strided8AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)
//
// c(8, 16·panels) = or += a(8, k) · b(k, 16·panels).
TEXT ·strided8AVX512(SB), NOSPLIT, $0-81
	ARGS
	TESTQ R12, R12
	JZ done8

panel8:
	PANEL
	CMPB acc+80(FP), $0
	JEQ zero8
	MOVQ DX, R13
	VMOVUPS (R13), Z0
	ADDQ R8, R13
	VMOVUPS (R13), Z1
	ADDQ R8, R13
	VMOVUPS (R13), Z2
	ADDQ R8, R13
	VMOVUPS (R13), Z3
	ADDQ R8, R13
	VMOVUPS (R13), Z4
	ADDQ R8, R13
	VMOVUPS (R13), Z5
	ADDQ R8, R13
	VMOVUPS (R13), Z6
	ADDQ R8, R13
	VMOVUPS (R13), Z7
	JMP body8

zero8:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

body8:
	TESTQ CX, CX
	JZ store8

step8:
	VMOVUPS (DI), Z16
	VBROADCASTSS (SI), Z18
	VBROADCASTSS (SI)(AX*1), Z19
	VBROADCASTSS (SI)(AX*2), Z20
	VBROADCASTSS (SI)(R14*1), Z21
	VBROADCASTSS (SI)(AX*4), Z22
	VBROADCASTSS (R10)(AX*4), Z23
	VBROADCASTSS (SI)(R14*2), Z24
	VBROADCASTSS (R10)(R14*2), Z25
	VFMADD231PS Z16, Z18, Z0
	VFMADD231PS Z16, Z19, Z1
	VFMADD231PS Z16, Z20, Z2
	VFMADD231PS Z16, Z21, Z3
	VFMADD231PS Z16, Z22, Z4
	VFMADD231PS Z16, Z23, Z5
	VFMADD231PS Z16, Z24, Z6
	VFMADD231PS Z16, Z25, Z7
	ADDQ BX, SI
	ADDQ BX, R10
	ADDQ R9, DI
	DECQ CX
	JNZ step8

store8:
	MOVQ DX, R13
	VMOVUPS Z0, (R13)
	ADDQ R8, R13
	VMOVUPS Z1, (R13)
	ADDQ R8, R13
	VMOVUPS Z2, (R13)
	ADDQ R8, R13
	VMOVUPS Z3, (R13)
	ADDQ R8, R13
	VMOVUPS Z4, (R13)
	ADDQ R8, R13
	VMOVUPS Z5, (R13)
	ADDQ R8, R13
	VMOVUPS Z6, (R13)
	ADDQ R8, R13
	VMOVUPS Z7, (R13)
	ADDQ $64, DX
	ADDQ R11, R15
	DECQ R12
	JNZ panel8

done8:
	VZEROUPPER
	RET

// func strided4AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)
//
// c(4, 16·panels) = or += a(4, k) · b(k, 16·panels).
TEXT ·strided4AVX512(SB), NOSPLIT, $0-81
	ARGS
	TESTQ R12, R12
	JZ done4

panel4:
	PANEL
	CMPB acc+80(FP), $0
	JEQ zero4
	MOVQ DX, R13
	VMOVUPS (R13), Z0
	ADDQ R8, R13
	VMOVUPS (R13), Z1
	ADDQ R8, R13
	VMOVUPS (R13), Z2
	ADDQ R8, R13
	VMOVUPS (R13), Z3
	JMP body4

zero4:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

body4:
	TESTQ CX, CX
	JZ store4

step4:
	VMOVUPS (DI), Z16
	VBROADCASTSS (SI), Z18
	VBROADCASTSS (SI)(AX*1), Z19
	VBROADCASTSS (SI)(AX*2), Z20
	VBROADCASTSS (SI)(R14*1), Z21
	VFMADD231PS Z16, Z18, Z0
	VFMADD231PS Z16, Z19, Z1
	VFMADD231PS Z16, Z20, Z2
	VFMADD231PS Z16, Z21, Z3
	ADDQ BX, SI
	ADDQ BX, R10
	ADDQ R9, DI
	DECQ CX
	JNZ step4

store4:
	MOVQ DX, R13
	VMOVUPS Z0, (R13)
	ADDQ R8, R13
	VMOVUPS Z1, (R13)
	ADDQ R8, R13
	VMOVUPS Z2, (R13)
	ADDQ R8, R13
	VMOVUPS Z3, (R13)
	ADDQ $64, DX
	ADDQ R11, R15
	DECQ R12
	JNZ panel4

done4:
	VZEROUPPER
	RET

// func strided2AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)
//
// c(2, 16·panels) = or += a(2, k) · b(k, 16·panels).
TEXT ·strided2AVX512(SB), NOSPLIT, $0-81
	ARGS
	TESTQ R12, R12
	JZ done2

panel2:
	PANEL
	CMPB acc+80(FP), $0
	JEQ zero2
	MOVQ DX, R13
	VMOVUPS (R13), Z0
	ADDQ R8, R13
	VMOVUPS (R13), Z1
	JMP body2

zero2:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1

body2:
	TESTQ CX, CX
	JZ store2

step2:
	VMOVUPS (DI), Z16
	VBROADCASTSS (SI), Z18
	VBROADCASTSS (SI)(AX*1), Z19
	VFMADD231PS Z16, Z18, Z0
	VFMADD231PS Z16, Z19, Z1
	ADDQ BX, SI
	ADDQ BX, R10
	ADDQ R9, DI
	DECQ CX
	JNZ step2

store2:
	MOVQ DX, R13
	VMOVUPS Z0, (R13)
	ADDQ R8, R13
	VMOVUPS Z1, (R13)
	ADDQ $64, DX
	ADDQ R11, R15
	DECQ R12
	JNZ panel2

done2:
	VZEROUPPER
	RET

// func strided1AVX512(k int, a *float32, ars, aps int, b *float32, ldb, bps int, c *float32, ldc, panels int, acc bool)
//
// c(1, 16·panels) = or += a(1, k) · b(k, 16·panels).
TEXT ·strided1AVX512(SB), NOSPLIT, $0-81
	ARGS
	TESTQ R12, R12
	JZ done1

panel1:
	PANEL
	CMPB acc+80(FP), $0
	JEQ zero1
	MOVQ DX, R13
	VMOVUPS (R13), Z0
	JMP body1

zero1:
	VPXORD Z0, Z0, Z0

body1:
	TESTQ CX, CX
	JZ store1

step1:
	VMOVUPS (DI), Z16
	VBROADCASTSS (SI), Z18
	VFMADD231PS Z16, Z18, Z0
	ADDQ BX, SI
	ADDQ R9, DI
	DECQ CX
	JNZ step1

store1:
	MOVQ DX, R13
	VMOVUPS Z0, (R13)
	ADDQ $64, DX
	ADDQ R11, R15
	DECQ R12
	JNZ panel1

done1:
	VZEROUPPER
	RET
