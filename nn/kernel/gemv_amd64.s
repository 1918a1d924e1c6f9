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
