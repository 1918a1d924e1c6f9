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

// bfloat16 panels stored in pairs of k steps (see Packed.halfIndex): the
// 64 bytes of steps p and p+1 of a panel hold, for each of its 16 columns,
// step p's value in the low and step p+1's in the high half of one 32-bit
// lane. Shifting a lane left by 16 gives step p's value as a float32,
// masking off its low half gives step p+1's: no shuffle, which
// VPMOVZXWD's widening is and which held the eight-panel kernel above to
// about 0.6 of float32's time. A panel's last step, when k is odd, is
// stored alone (16 values), as above. The sums are the same chains in the
// same order as gemv8BF16AVX512's.
#define P8ONE(addr, acc) \
	VMOVDQU32 addr, Z9 \
	VPSLLD $16, Z9, Z10 \
	VPANDD Z31, Z9, Z9 \
	VFMADD231PS Z10, Z8, acc \
	VFMADD231PS Z9, Z17, acc

#define P8STEP(off, boff) \
	VBROADCASTSS off(SI), Z8 \
	VBROADCASTSS (off+4)(SI), Z17 \
	P8ONE(boff(DI), Z0) \
	P8ONE(boff(DI)(R8*1), Z1) \
	P8ONE(boff(DI)(R8*2), Z2) \
	P8ONE(boff(R9), Z3) \
	P8ONE(boff(R9)(R8*1), Z4) \
	P8ONE(boff(R9)(R8*2), Z5) \
	P8ONE(boff(R10), Z6) \
	P8ONE(boff(R10)(R8*1), Z7)

// func gemv8BF16PairsAVX512(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv8BF16PairsAVX512(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $1, R8
	LEAQ (DI)(R8*2), R9
	ADDQ R8, R9
	LEAQ (R9)(R8*2), R10
	ADDQ R8, R10
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Z31
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	CMPQ CX, $4
	JLT ptail
ploop4:
	P8STEP(0, 0)
	P8STEP(8, 64)
	ADDQ $16, SI
	ADDQ $128, DI
	ADDQ $128, R9
	ADDQ $128, R10
	SUBQ $4, CX
	CMPQ CX, $4
	JGE ploop4
ptail:
	CMPQ CX, $2
	JLT pone
	P8STEP(0, 0)
	ADDQ $8, SI
	ADDQ $64, DI
	ADDQ $64, R9
	ADDQ $64, R10
	SUBQ $2, CX
pone:
	TESTQ CX, CX
	JZ pstore
	Z8STEP(ZBW, 0, 0)
pstore:
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

// func widenBF16PairsAVX512(dst *float32, src *uint16, k, panels int)
//
// widens whole panels stored in pairs into float32 panels in the usual
// order (16 values per k step).
TEXT ·widenBF16PairsAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ k+16(FP), BX
	MOVQ panels+24(FP), DX
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Z31
	TESTQ DX, DX
	JZ wdone
wpanel:
	MOVQ BX, CX
	CMPQ CX, $2
	JLT wone
wpair:
	VMOVDQU32 (SI), Z9
	VPSLLD $16, Z9, Z10
	VPANDD Z31, Z9, Z9
	VMOVUPS Z10, (DI)
	VMOVUPS Z9, 64(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE wpair
wone:
	TESTQ CX, CX
	JZ wnext
	VPMOVZXWD (SI), Z9
	VPSLLD $16, Z9, Z9
	VMOVUPS Z9, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
wnext:
	DECQ DX
	JNZ wpanel
wdone:
	VZEROUPPER
	RET

#define P4STEP(off, boff) \
	VBROADCASTSS off(SI), Z8 \
	VBROADCASTSS (off+4)(SI), Z17 \
	P8ONE(boff(DI), Z0) \
	P8ONE(boff(DI)(R8*1), Z1) \
	P8ONE(boff(DI)(R8*2), Z2) \
	P8ONE(boff(R9), Z3)

// func gemv4BF16PairsAVX512(k int, a *float32, b *uint16, stride int, c *float32)
TEXT ·gemv4BF16PairsAVX512(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ stride+24(FP), R8
	SHLQ $1, R8
	LEAQ (DI)(R8*2), R9
	ADDQ R8, R9
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Z31
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	CMPQ CX, $4
	JLT qtail
qloop4:
	P4STEP(0, 0)
	P4STEP(8, 64)
	ADDQ $16, SI
	ADDQ $128, DI
	ADDQ $128, R9
	SUBQ $4, CX
	CMPQ CX, $4
	JGE qloop4
qtail:
	CMPQ CX, $2
	JLT qone
	P4STEP(0, 0)
	ADDQ $8, SI
	ADDQ $64, DI
	ADDQ $64, R9
	SUBQ $2, CX
qone:
	TESTQ CX, CX
	JZ qstore
	VBROADCASTSS (SI), Z8
	ZBW((DI), Z9)
	ZBW((DI)(R8*1), Z10)
	ZBW((DI)(R8*2), Z11)
	ZBW((R9), Z12)
	VFMADD231PS Z9, Z8, Z0
	VFMADD231PS Z10, Z8, Z1
	VFMADD231PS Z11, Z8, Z2
	VFMADD231PS Z12, Z8, Z3
qstore:
	MOVQ c+32(FP), DX
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VZEROUPPER
	RET

// func gemv1BF16PairsAVX512(k int, a *float32, b *uint16, c *float32)
TEXT ·gemv1BF16PairsAVX512(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Z31
	VPXORD Z0, Z0, Z0
	CMPQ CX, $2
	JLT sone
sloop:
	VBROADCASTSS (SI), Z8
	VBROADCASTSS 4(SI), Z17
	P8ONE((DI), Z0)
	ADDQ $8, SI
	ADDQ $64, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE sloop
sone:
	TESTQ CX, CX
	JZ sstore
	VBROADCASTSS (SI), Z8
	ZBW((DI), Z9)
	VFMADD231PS Z9, Z8, Z0
sstore:
	MOVQ c+24(FP), DX
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET
