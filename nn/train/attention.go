package train

import (
	"math"
	"sync"

	"github.com/delegatelab/delegate/nn/kernel"
)

// Causal self-attention with grouped key/value heads.
//
// The projections of a token arrive fused in one row of qkv (N, S), with
// N = B·T and S = Dim + 2·KVDim. The queries come first, Heads·HeadDim of
// them, then the keys and the values, KVHeads·HeadDim each. Queries and
// keys are already rotated. Query head h reads key/value head
// h / (Heads/KVHeads), as in llama2.c.
// For each sequence b, head h and position t:
//
//	s_tj = q_t·k_j / sqrt(HeadDim),   p_tj = softmax_j≤t(s_tj),   out_t = Σ_j≤t p_tj·v_j
//
// Positions j > t are masked: they get probability exactly 0 and receive
// exactly zero gradient from position t.
//
// Each pair of a sequence and a key/value head is one task. Its keys and
// values, and in turn the queries of every head of its group, are gathered
// into contiguous (T, HeadDim) blocks, so that the products run through
// package kernel. Queries go in row blocks of attnBlock positions. The
// block of rows [r0, r1) needs only keys [0, r1), so the masked triangle
// inside the diagonal block is the only wasted work.
//
// The (T, T) probabilities are not kept. The forward pass saves one
// log-sum-exp per row, lse_t = log Σ_j≤t exp(s_tj). The backward pass
// recomputes p_tj = exp(s_tj − lse_t) block by block. The forward pass
// normalises by 1/Σ exp instead; the two agree to float32 rounding. So
// memory grows with T, not T². The price is one more query-key product per
// head in the backward pass.
type attention struct {
	B, T, Heads, KVHeads, HeadDim int
}

func (a attention) stride() int { return (a.Heads + 2*a.KVHeads) * a.HeadDim }

// attnBlock is the number of query positions per row block.
const attnBlock = 32

// attnScratch holds one task's gathered blocks.
type attnScratch struct {
	q, k, v, o, dq, dk, dv []float32 // (T, HeadDim)
	p, dp                  []float32 // (attnBlock, T16), T16 = T rounded up to 16
	kp, vp                 []float32 // (T16, HeadDim) keys and values packed by kernel.PackPanels
	rows                   []float32 // (2·attnBlock) attnProbs' shifts and sums
}

var attnPool sync.Pool // of *attnScratch

func (a attention) scratch() *attnScratch {
	t16 := (a.T + 15) &^ 15
	n, nb, np := a.T*a.HeadDim, attnBlock*t16, t16*a.HeadDim
	s, _ := attnPool.Get().(*attnScratch)
	if s == nil || len(s.q) < n || len(s.p) < nb || len(s.kp) < np {
		f := func(k int) []float32 { return make([]float32, k) }
		s = &attnScratch{q: f(n), k: f(n), v: f(n), o: f(n), dq: f(n), dk: f(n), dv: f(n), p: f(nb), dp: f(nb), kp: f(np), vp: f(np), rows: f(2 * attnBlock)}
	}
	return s
}

// gather copies column block [off, off+HeadDim) of the T rows of src into dst.
// src has row stride s; dst is (T, HeadDim). scatter is its inverse.
func (a attention) gather(dst, src []float32, s, off int) {
	hd := a.HeadDim
	for i := 0; i < a.T; i++ {
		copy(dst[i*hd:(i+1)*hd], src[i*s+off:i*s+off+hd])
	}
}

func (a attention) scatter(dst, src []float32, s, off int) {
	hd := a.HeadDim
	for i := 0; i < a.T; i++ {
		copy(dst[i*s+off:i*s+off+hd], src[i*hd:(i+1)*hd])
	}
}

// attnProbs turns the raw products pb of query rows [r0, r1) with keys [0, r1) into probabilities.
// It works in place on pb (r1−r0, r1), row stride ld: p_ij = exp(scale·pb_ij − lse_i) for
// j ≤ i and 0 after. When save is true it computes and stores lse for each
// row; the row then holds e_ij/Σe, with e_ij = exp(scale·pb_ij − max).
// Otherwise it reads the saved lse. tmp holds 2·attnBlock values. The
// exponentials of all rows run in one kernel.ExpSumRows, with the bits of
// kernel.Softmax and kernel.ExpSum row by row.
func attnProbs(pb []float32, ld int, lse []float32, r0, r1 int, scale float32, save bool, tmp []float32) {
	m := r1 - r0
	shift, sums := tmp[:m], tmp[attnBlock:attnBlock+m]
	if !save {
		shift = lse[r0:r1]
	}
	for i := r0; i < r1; i++ {
		row := pb[(i-r0)*ld : (i-r0)*ld+r1]
		clear(row[i+1:])
		if save {
			shift[i-r0] = scale * kernel.Max(row[:i+1]) // as kernel.Softmax shifts
		}
	}
	kernel.ExpSumRows(pb, ld, r0+1, m, scale, shift, sums)
	if !save {
		return
	}
	for i := r0; i < r1; i++ {
		sum := sums[i-r0]
		lse[i] = shift[i-r0] + float32(math.Log(float64(sum)))
		kernel.Scale(pb[(i-r0)*ld:(i-r0)*ld+i+1], 1/sum)
	}
}

// forward writes out (N, Heads·HeadDim) and the row log-sum-exps lse
// (B, Heads, T). Tasks run in parallel.
func (a attention) forward(out, lse, qkv []float32) {
	if a.inPlace() {
		a.forwardInPlace(out, lse, qkv)
		return
	}
	a.forwardGather(out, lse, qkv)
}

// forwardGather is forward on gathered blocks, for every shape.
func (a attention) forwardGather(out, lse, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		sc := a.scratch()
		defer attnPool.Put(sc)
		q, k, v, o := sc.q[:t*hd], sc.k[:t*hd], sc.v[:t*hd], sc.o[:t*hd]
		for bk := lo; bk < hi; bk++ {
			b, kvh := bk/a.KVHeads, bk%a.KVHeads
			rows := qkv[b*t*s : (b+1)*t*s] // (T, S)
			a.gather(k, rows, s, kOff+kvh*hd)
			a.gather(v, rows, s, vOff+kvh*hd)
			for h := kvh * group; h < (kvh+1)*group; h++ {
				a.gather(q, rows, s, h*hd)
				l := lse[(b*a.Heads+h)*t : (b*a.Heads+h+1)*t] // (T)
				for r0 := 0; r0 < t; r0 += attnBlock {
					r1 := min(r0+attnBlock, t)
					m := r1 - r0
					pb := sc.p[:m*r1]                                 // (r1−r0, r1)
					kernel.MatMulNT(pb, q[r0*hd:r1*hd], k, m, hd, r1) // q·kᵀ
					attnProbs(pb, r1, l, r0, r1, scale, true, sc.rows)
					kernel.MatMulNN(o[r0*hd:r1*hd], pb, v, m, r1, hd) // (r1−r0, HeadDim)
				}
				a.scatter(out[b*t*d:(b+1)*t*d], o, d, h*hd)
			}
		}
	})
}

// backward overwrites dqkv with the gradient with respect to qkv.
// It reads dout, the saved lse and qkv; dqkv is (N, S), dout
// (N, Heads·HeadDim). Per head and row block, with P the recomputed
// probabilities and dO the output gradient:
//
//	dP = dO·Vᵀ,  dV += Pᵀ·dO,  dS = P∘(dP − rowsum(P∘dP))·scale
//	dQ = dS·K,   dK += dSᵀ·Q
//
// The query heads sharing a key/value head add into its gradient in a
// fixed order within one task, so results do not depend on scheduling.
// Masked entries of P are zero, so they pass no gradient.
func (a attention) backward(dqkv, dout, lse, qkv []float32) {
	if a.inPlace() {
		a.backwardInPlace(dqkv, dout, lse, qkv)
		return
	}
	a.backwardGather(dqkv, dout, lse, qkv)
}

// backwardGather is backward on gathered blocks, for every shape.
func (a attention) backwardGather(dqkv, dout, lse, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		sc := a.scratch()
		defer attnPool.Put(sc)
		q, k, v, do := sc.q[:t*hd], sc.k[:t*hd], sc.v[:t*hd], sc.o[:t*hd]
		dq, dk, dv := sc.dq[:t*hd], sc.dk[:t*hd], sc.dv[:t*hd]
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
				l := lse[(b*a.Heads+h)*t : (b*a.Heads+h+1)*t] // (T)
				for r0 := 0; r0 < t; r0 += attnBlock {
					r1 := min(r0+attnBlock, t)
					m := r1 - r0
					pb, dpb := sc.p[:m*r1], sc.dp[:m*r1] // (r1−r0, r1)
					qb, dob, dqb := q[r0*hd:r1*hd], do[r0*hd:r1*hd], dq[r0*hd:r1*hd]
					kernel.MatMulNT(pb, qb, k, m, hd, r1) // q·kᵀ again
					attnProbs(pb, r1, l, r0, r1, scale, false, sc.rows)
					kernel.MatMulNT(dpb, dob, v, m, hd, r1)    // dP
					kernel.MatMulTNAcc(dv, pb, dob, r1, m, hd) // dV[0:r1]
					attnDScores(dpb, pb, r1, r0, r1, scale)
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

// attnDScores turns dP into dS in place for query rows [r0, r1) of a block.
// pb and dpb are (r1−r0, r1), row stride ld; for j ≤ i, dS_ij = p_ij·(dP_ij − dot_i)·scale
// with dot_i = Σ_j≤i p_ij·dP_ij, and 0 after. The sums take four rows at a
// time, as four independent chains, each over j in increasing order.
func attnDScores(dpb, pb []float32, ld, r0, r1 int, scale float32) {
	row := func(s []float32, i int) []float32 { return s[(i-r0)*ld : (i-r0)*ld+r1] }
	i := r0
	for ; i+4 <= r1; i += 4 {
		p0, p1, p2, p3 := row(pb, i), row(pb, i+1), row(pb, i+2), row(pb, i+3)
		d0, d1, d2, d3 := row(dpb, i), row(dpb, i+1), row(dpb, i+2), row(dpb, i+3)
		var s0, s1, s2, s3 float32
		// Each slice cut to the shared length, so that the loop needs no
		// bounds checks.
		n := i + 1
		q0, q1, q2, q3 := p0[:n], p1[:n], p2[:n], p3[:n]
		e0, e1, e2, e3 := d0[:n], d1[:n], d2[:n], d3[:n]
		for j, p := range q0 {
			s0 += p * e0[j]
			s1 += q1[j] * e1[j]
			s2 += q2[j] * e2[j]
			s3 += q3[j] * e3[j]
		}
		s1 += p1[i+1] * d1[i+1]
		s2 += p2[i+1] * d2[i+1]
		s2 += p2[i+2] * d2[i+2]
		s3 += p3[i+1] * d3[i+1]
		s3 += p3[i+2] * d3[i+2]
		s3 += p3[i+3] * d3[i+3]
		attnDScoresRow(d0, p0, i, s0, scale)
		attnDScoresRow(d1, p1, i+1, s1, scale)
		attnDScoresRow(d2, p2, i+2, s2, scale)
		attnDScoresRow(d3, p3, i+3, s3, scale)
	}
	for ; i < r1; i++ {
		p, d := row(pb, i), row(dpb, i)
		var dot float32
		for j := range i + 1 {
			dot += p[j] * d[j]
		}
		attnDScoresRow(d, p, i, dot, scale)
	}
}

// attnDScoresRow finishes row i of dS in d from p and its dot.
func attnDScoresRow(d, p []float32, i int, dot, scale float32) {
	kernel.SoftmaxGrad(d[:i+1], p, dot, scale)
	clear(d[i+1:])
}
