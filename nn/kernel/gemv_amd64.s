//go:build !purego

#include "textflag.h"

// One k step of four panels: broadcast a[p] (at off(SI)) into Y8 and add
// its products with the 16 floats of each panel at boff into Y0-Y7, one
// fused multiply-add per accumulator, in k order.
#define GSTEP4(off, boff) \
	VBROADCASTSS off(SI), Y8 \
	VFMADD231PS boff(DI), Y8, Y0 \
	VFMADD231PS (boff+32)(DI), Y8, Y1 \
	VFMADD231PS boff(R9), Y8, Y2 \
	VFMADD231PS (boff+32)(R9), Y8, Y3 \
	VFMADD231PS boff(R10), Y8, Y4 \
	VFMADD231PS (boff+32)(R10), Y8, Y5 \
	VFMADD231PS boff(R11), Y8, Y6 \
	VFMADD231PS (boff+32)(R11), Y8, Y7

// func gemv4AVX2(k int, a, b *float32, stride int, c *float32)
//
// c[16i+r] = Σ_p a[p]·b[i·stride + 16p + r] for the four panels i < 4,
// each sum a chain of fused multiply-adds in p order starting from zero.
TEXT ·gemv4AVX2(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
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
	CMPQ CX, $4
	JLT tail

loop4:
	GSTEP4(0, 0)
	GSTEP4(4, 64)
	GSTEP4(8, 128)
	GSTEP4(12, 192)
	ADDQ $16, SI
	ADDQ $256, DI
	ADDQ $256, R9
	ADDQ $256, R10
	ADDQ $256, R11
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop4

tail:
	TESTQ CX, CX
	JZ store

loop1:
	GSTEP4(0, 0)
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	DECQ CX
	JNZ loop1

store:
	MOVQ c+32(FP), DX
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func gemv1AVX2(k int, a, b, c *float32)
//
// c[r] = Σ_p a[p]·b[16p + r] for r < 16, as gemv4AVX2 for one panel.
TEXT ·gemv1AVX2(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	TESTQ CX, CX
	JZ store1

loop:
	VBROADCASTSS (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y8, Y1
	ADDQ $4, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop

store1:
	MOVQ c+24(FP), DX
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// One k step of eight panels: broadcast a[p] (at off(SI)) into Z8 and add
// its products with the 16 floats of panel i at boff into Zi, one fused
// multiply-add per accumulator, in k order. Panels 0-7 are at DI, R9, R10,
// R11, R13, R12, AX and BX.
#define ZSTEP8(off, boff) \
	VBROADCASTSS off(SI), Z8 \
	VFMADD231PS boff(DI), Z8, Z0 \
	VFMADD231PS boff(R9), Z8, Z1 \
	VFMADD231PS boff(R10), Z8, Z2 \
	VFMADD231PS boff(R11), Z8, Z3 \
	VFMADD231PS boff(R13), Z8, Z4 \
	VFMADD231PS boff(R12), Z8, Z5 \
	VFMADD231PS boff(AX), Z8, Z6 \
	VFMADD231PS boff(BX), Z8, Z7

// func gemv8AVX512(k int, a, b *float32, stride int, c *float32)
//
// c[16i+r] = Σ_p a[p]·b[i·stride + 16p + r] for the eight panels i < 8,
// as gemv4AVX2 computes four: the same chains, so the same bits. Eight
// streams keep more of the weights in flight than four.
TEXT ·gemv8AVX512(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	LEAQ (DI)(R8*1), R9
	LEAQ (DI)(R8*2), R10
	LEAQ (R9)(R8*2), R11
	LEAQ (DI)(R8*4), R13
	LEAQ (R9)(R8*4), R12
	LEAQ (R10)(R8*4), AX
	LEAQ (R11)(R8*4), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	CMPQ CX, $4
	JLT tail8

loop8x4:
	ZSTEP8(0, 0)
	ZSTEP8(4, 64)
	ZSTEP8(8, 128)
	ZSTEP8(12, 192)
	ADDQ $16, SI
	ADDQ $256, DI
	ADDQ $256, R9
	ADDQ $256, R10
	ADDQ $256, R11
	ADDQ $256, R13
	ADDQ $256, R12
	ADDQ $256, AX
	ADDQ $256, BX
	SUBQ $4, CX
	CMPQ CX, $4
	JGE loop8x4

tail8:
	TESTQ CX, CX
	JZ store8

loop8x1:
	ZSTEP8(0, 0)
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R13
	ADDQ $64, R12
	ADDQ $64, AX
	ADDQ $64, BX
	DECQ CX
	JNZ loop8x1

store8:
	MOVQ c+32(FP), DX
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	VMOVUPS Z6, 384(DX)
	VMOVUPS Z7, 448(DX)
	VZEROUPPER
	RET
