//go:build !purego

#include "textflag.h"

// func dots8AVX2(sc, q, keys *float32, stride, chunks, groups int, scale float32)
//
// For each of 8·groups positions t: sc[t] = scale · Σ_i q[i]·keys[t·stride+i]
// over i < 8·chunks. Eight positions at a time: position j of a group
// accumulates in Yj, one fused multiply-add per 8-float chunk of q in
// order; the eight lanes of Yj are then summed pairwise
// ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) and the eight sums stored together.
TEXT ·dots8AVX2(SB), NOSPLIT, $0-52
	MOVQ sc+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ keys+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R13
	MOVQ groups+40(FP), CX
	VBROADCASTSS scale+48(FP), Y15
	TESTQ CX, CX
	JZ done

group:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ DX, R10             // position 0 of the group, at chunk c
	LEAQ (DX)(R8*4), R11     // position 4
	MOVQ SI, R12             // q at chunk c
	MOVQ chunks+32(FP), R9

chunk:
	VMOVUPS (R12), Y8
	VFMADD231PS (R10), Y8, Y0
	VFMADD231PS (R10)(R8*1), Y8, Y1
	VFMADD231PS (R10)(R8*2), Y8, Y2
	VFMADD231PS (R10)(R13*1), Y8, Y3
	VFMADD231PS (R11), Y8, Y4
	VFMADD231PS (R11)(R8*1), Y8, Y5
	VFMADD231PS (R11)(R8*2), Y8, Y6
	VFMADD231PS (R11)(R13*1), Y8, Y7
	ADDQ $32, R10
	ADDQ $32, R11
	ADDQ $32, R12
	DECQ R9
	JNZ chunk

	// Horizontal sums: hadd pairs lanes within each accumulator.
	VHADDPS Y1, Y0, Y0       // [0:01 0:23 1:01 1:23 | 0:45 0:67 1:45 1:67]
	VHADDPS Y3, Y2, Y2
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y2, Y0, Y0       // [0:0-3 1:0-3 2:0-3 3:0-3 | 0:4-7 ... 3:4-7]
	VHADDPS Y6, Y4, Y4       // positions 4-7
	VPERM2F128 $0x20, Y4, Y0, Y1 // low halves: lanes 0-3 of positions 0-7
	VPERM2F128 $0x31, Y4, Y0, Y2 // high halves: lanes 4-7
	VADDPS Y2, Y1, Y1
	VMULPS Y15, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, DI
	LEAQ (DX)(R8*8), DX
	DECQ CX
	JNZ group

done:
	VZEROUPPER
	RET

// func mix32AVX2(out, w, vals *float32, stride, n int)
//
// out[i] = Σ_t w[t]·vals[t·stride+i] for i < 32 over t < n: even t
// accumulate in Y0-Y3, odd t in Y4-Y7, each in t order; out = even + odd.
TEXT ·mix32AVX2(SB), NOSPLIT, $0-40
	MOVQ w+8(FP), SI
	MOVQ vals+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	CMPQ CX, $2
	JLT tail

pair:
	VBROADCASTSS (SI), Y8
	VBROADCASTSS 4(SI), Y9
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS 32(DX), Y8, Y1
	VFMADD231PS 64(DX), Y8, Y2
	VFMADD231PS 96(DX), Y8, Y3
	VFMADD231PS (DX)(R8*1), Y9, Y4
	VFMADD231PS 32(DX)(R8*1), Y9, Y5
	VFMADD231PS 64(DX)(R8*1), Y9, Y6
	VFMADD231PS 96(DX)(R8*1), Y9, Y7
	ADDQ $8, SI
	LEAQ (DX)(R8*2), DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE pair

tail:
	TESTQ CX, CX
	JZ sum
	VBROADCASTSS (SI), Y8
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS 32(DX), Y8, Y1
	VFMADD231PS 64(DX), Y8, Y2
	VFMADD231PS 96(DX), Y8, Y3

sum:
	MOVQ out+0(FP), DI
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

// func mix8AVX2(out, w, vals *float32, stride, n int)
//
// out[i] = Σ_t w[t]·vals[t·stride+i] for i < 8 over t < n: t ≡ j (mod 4)
// accumulates in Yj for the first 4·(n/4) positions, the rest in Y0, each
// in t order; out = (Y0+Y1) + (Y2+Y3).
TEXT ·mix8AVX2(SB), NOSPLIT, $0-40
	MOVQ w+8(FP), SI
	MOVQ vals+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R13
	MOVQ n+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ CX, $4
	JLT tail8

quad:
	VBROADCASTSS (SI), Y8
	VBROADCASTSS 4(SI), Y9
	VBROADCASTSS 8(SI), Y10
	VBROADCASTSS 12(SI), Y11
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS (DX)(R8*1), Y9, Y1
	VFMADD231PS (DX)(R8*2), Y10, Y2
	VFMADD231PS (DX)(R13*1), Y11, Y3
	ADDQ $16, SI
	LEAQ (DX)(R8*4), DX
	SUBQ $4, CX
	CMPQ CX, $4
	JGE quad

tail8:
	TESTQ CX, CX
	JZ sum8

one:
	VBROADCASTSS (SI), Y8
	VFMADD231PS (DX), Y8, Y0
	ADDQ $4, SI
	ADDQ R8, DX
	DECQ CX
	JNZ one

sum8:
	MOVQ out+0(FP), DI
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET
