package nn

import (
	"math"
	"sync"

	"github.com/delegatelab/delegate/nn/kernel"
)

// Causal self-attention with grouped key/value heads.
//
// The projections of a token arrive fused in one row of qkv (N, S), N = B·T,
// S = Dim + 2·KVDim: the queries (Heads·HeadDim) first, then the keys and
// the values (KVHeads·HeadDim each), queries and keys already rotated.
// Query head h reads key/value head h / (Heads/KVHeads), as in llama2.c.
// For each sequence b, head h and position t:
//
//	p_tj = softmax_j≤t(q_t·k_j / sqrt(HeadDim)),   out_t = Σ_j≤t p_tj·v_j
//
// Positions j > t are masked: they get probability exactly 0 and receive
// exactly zero gradient from position t.
//
// Each (sequence, key/value head) is one task: its keys and values, and in
// turn the queries of every head of its group, are gathered into contiguous
// (T, HeadDim) blocks so that the products run through package kernel.
// Queries go in row blocks of trainAttnBlock positions; the block of rows
// [r0, r1) needs only keys [0, r1), so its probabilities are stored as one
// contiguous (r1−r0, r1) matrix, the blocks of a head back to back in its
// (T·T) slot of att. The masked triangle inside the diagonal block is the
// only wasted work.
type trainAttn struct {
	B, T, Heads, KVHeads, HeadDim int
}

func (a trainAttn) stride() int { return (a.Heads + 2*a.KVHeads) * a.HeadDim }

// trainAttnBlock is the number of query positions per row block.
const trainAttnBlock = 32

// prob returns p_ij of the head bh = b·Heads+h from att, 0 when masked.
func (a trainAttn) prob(att []float32, bh, i, j int) float32 {
	off := bh * a.T * a.T
	for r0 := 0; r0 < a.T; r0 += trainAttnBlock {
		r1 := min(r0+trainAttnBlock, a.T)
		if i < r1 {
			if j >= r1 {
				return 0
			}
			return att[off+(i-r0)*r1+j]
		}
		off += (r1 - r0) * r1
	}
	panic("trainAttn.prob: position out of range")
}

// trainAttnScratch holds one task's gathered blocks.
type trainAttnScratch struct {
	q, k, v, o, dq, dk, dv []float32 // (T, HeadDim)
	dp                     []float32 // (T, T)
}

var trainAttnPool sync.Pool // of *trainAttnScratch

func (a trainAttn) scratch() *trainAttnScratch {
	n, nn := a.T*a.HeadDim, a.T*a.T
	s, _ := trainAttnPool.Get().(*trainAttnScratch)
	if s == nil || len(s.q) < n || len(s.dp) < nn {
		f := func(k int) []float32 { return make([]float32, k) }
		s = &trainAttnScratch{q: f(n), k: f(n), v: f(n), o: f(n), dq: f(n), dk: f(n), dv: f(n), dp: f(nn)}
	}
	return s
}

// gather copies column block [off, off+HeadDim) of the T rows of src (row
// stride s) into dst (T, HeadDim); scatter is its inverse.
func (a trainAttn) gather(dst, src []float32, s, off int) {
	hd := a.HeadDim
	for i := 0; i < a.T; i++ {
		copy(dst[i*hd:(i+1)*hd], src[i*s+off:i*s+off+hd])
	}
}

func (a trainAttn) scatter(dst, src []float32, s, off int) {
	hd := a.HeadDim
	for i := 0; i < a.T; i++ {
		copy(dst[i*s+off:i*s+off+hd], src[i*hd:(i+1)*hd])
	}
}

// forward writes out (N, Heads·HeadDim) and the probabilities into att
// (B, Heads, T·T), row blocks as described above, masked entries zero.
// Tasks run in parallel.
func (a trainAttn) forward(out, att, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	trainParallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		sc := a.scratch()
		defer trainAttnPool.Put(sc)
		q, k, v, o := sc.q[:t*hd], sc.k[:t*hd], sc.v[:t*hd], sc.o[:t*hd]
		for bk := lo; bk < hi; bk++ {
			b, kvh := bk/a.KVHeads, bk%a.KVHeads
			rows := qkv[b*t*s : (b+1)*t*s] // (T, S)
			a.gather(k, rows, s, kOff+kvh*hd)
			a.gather(v, rows, s, vOff+kvh*hd)
			for h := kvh * group; h < (kvh+1)*group; h++ {
				a.gather(q, rows, s, h*hd)
				p := att[(b*a.Heads+h)*t*t : (b*a.Heads+h+1)*t*t]
				for r0 := 0; r0 < t; r0 += trainAttnBlock {
					r1 := min(r0+trainAttnBlock, t)
					m := r1 - r0
					pb := p[:m*r1] // (r1−r0, r1)
					p = p[m*r1:]
					kernel.MatMulNT(pb, q[r0*hd:r1*hd], k, m, hd, r1) // scores
					for i := r0; i < r1; i++ {
						trainSoftmaxCausal(pb[(i-r0)*r1:(i-r0+1)*r1], i, scale)
					}
					kernel.MatMulNN(o[r0*hd:r1*hd], pb, v, m, r1, hd) // (r1−r0, HeadDim)
				}
				a.scatter(out[b*t*d:(b+1)*t*d], o, d, h*hd)
			}
		}
	})
}

// trainSoftmaxCausal turns row i of raw scores into probabilities over
// positions 0..i, scaled by scale, and zeroes positions after i.
func trainSoftmaxCausal(row []float32, i int, scale float32) {
	maxv := float32(math.Inf(-1))
	for j := 0; j <= i; j++ {
		row[j] *= scale
		maxv = max(maxv, row[j])
	}
	var sum float32
	for j := 0; j <= i; j++ {
		e := trainExp(row[j] - maxv)
		row[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := 0; j <= i; j++ {
		row[j] *= inv
	}
	clear(row[i+1:])
}

// backward writes the gradient with respect to qkv into dqkv (N, S),
// overwriting it, from dout (N, Heads·HeadDim) and the saved att and qkv.
// Per head and row block, with P the probabilities and dO the output
// gradient:
//
//	dP = dO·Vᵀ,  dV += Pᵀ·dO,  dS = P∘(dP − rowsum(P∘dP))·scale
//	dQ = dS·K,   dK += dSᵀ·Q
//
// The query heads sharing a key/value head add into its gradient in a
// fixed order within one task, so results do not depend on scheduling.
// Masked entries of P are zero, so they pass no gradient.
func (a trainAttn) backward(dqkv, dout, att, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	trainParallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		sc := a.scratch()
		defer trainAttnPool.Put(sc)
		q, k, v, do := sc.q[:t*hd], sc.k[:t*hd], sc.v[:t*hd], sc.o[:t*hd]
		dq, dk, dv, dp := sc.dq[:t*hd], sc.dk[:t*hd], sc.dv[:t*hd], sc.dp[:t*t]
		for bk := lo; bk < hi; bk++ {
			b, kvh := bk/a.KVHeads, bk%a.KVHeads
			rows, drows := qkv[b*t*s:(b+1)*t*s], dqkv[b*t*s:(b+1)*t*s] // (T, S)
			a.gather(k, rows, s, kOff+kvh*hd)
			a.gather(v, rows, s, vOff+kvh*hd)
			clear(dk)
			clear(dv)
			for h := kvh * group; h < (kvh+1)*group; h++ {
				a.gather(q, rows, s, h*hd)
				a.gather(do, dout[b*t*d:(b+1)*t*d], d, h*hd)
				p := att[(b*a.Heads+h)*t*t : (b*a.Heads+h+1)*t*t]
				for r0 := 0; r0 < t; r0 += trainAttnBlock {
					r1 := min(r0+trainAttnBlock, t)
					m := r1 - r0
					pb, dpb := p[:m*r1], dp[:m*r1] // (r1−r0, r1)
					p = p[m*r1:]
					qb, dob, dqb := q[r0*hd:r1*hd], do[r0*hd:r1*hd], dq[r0*hd:r1*hd]
					kernel.MatMulNT(dpb, dob, v, m, hd, r1)    // dP
					kernel.MatMulTNAcc(dv, pb, dob, r1, m, hd) // dV[0:r1]
					for i := r0; i < r1; i++ {
						pi, dpi := pb[(i-r0)*r1:(i-r0+1)*r1], dpb[(i-r0)*r1:(i-r0+1)*r1]
						var dot float32
						for j := 0; j <= i; j++ {
							dot += pi[j] * dpi[j]
						}
						for j := 0; j <= i; j++ {
							dpi[j] = pi[j] * (dpi[j] - dot) * scale
						}
						clear(dpi[i+1:])
					}
					kernel.MatMulNN(dqb, dpb, k, m, r1, hd)    // dQ[r0:r1]
					kernel.MatMulTNAcc(dk, dpb, qb, r1, m, hd) // dK[0:r1]
				}
				a.scatter(drows, dq, s, h*hd)
			}
			a.scatter(drows, dk, s, kOff+kvh*hd)
			a.scatter(drows, dv, s, vOff+kvh*hd)
		}
	})
}
