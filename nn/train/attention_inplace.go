package train

import (
	"math"

	"github.com/delegatelab/delegate/nn/kernel"
)

// Attention read in place. Where kernel.MatMulStrided runs (AVX-512) and
// the head width is a multiple of 16, the products read the queries,
// keys and values straight from the rows of qkv, and write the output
// and the query gradient straight into their rows. Only the keys and
// values that a product reads transposed are packed, once per task. The
// small products so skip the blocked kernel's packing and edge tiles,
// and the gathers and scatters of the other path.
//
// Each product is the same chain of multiply-adds as in the other path,
// over the same row blocks with the same masked zeros, so both paths give
// the same bits. TestAttentionPathsSameBits checks that.

// pw is the width of kernel.MatMulStrided's panels of B.
const pw = 16

// inPlace reports whether this shape takes the in-place path.
func (a attention) inPlace() bool { return kernel.HaveStrided() && a.HeadDim%pw == 0 }

// forwardInPlace is forward on the in-place path.
func (a attention) forwardInPlace(out, lse, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	t16 := (t + 15) &^ 15
	parallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		sc := a.scratch()
		defer attnPool.Put(sc)
		kp := sc.kp[:t16*hd] // (T16, HeadDim) keys as panels of 16
		for bk := lo; bk < hi; bk++ {
			b, kvh := bk/a.KVHeads, bk%a.KVHeads
			rows := qkv[b*t*s : (b+1)*t*s] // (T, S)
			kernel.PackPanels(kp, rows[kOff+kvh*hd:], t, hd, s)
			v := rows[vOff+kvh*hd:] // (T, HeadDim), row stride S
			for h := kvh * group; h < (kvh+1)*group; h++ {
				q := rows[h*hd:]           // (T, HeadDim), row stride S
				o := out[b*t*d+h*hd:]      // (T, HeadDim), row stride D
				l := lse[(b*a.Heads+h)*t:] // (T)
				for r0 := 0; r0 < t; r0 += attnBlock {
					r1 := min(r0+attnBlock, t)
					m, n16 := r1-r0, (r1+15)&^15
					pb := sc.p[:m*t16]                                                              // (r1−r0, r1), row stride T16
					kernel.MatMulStrided(pb, t16, q[r0*s:], s, 1, kp, pw, pw*hd, m, hd, n16, false) // q·kᵀ
					attnProbs(pb, t16, l, r0, r1, scale, true, sc.rows)
					kernel.MatMulStrided(o[r0*d:], d, pb, t16, 1, v, s, pw, m, r1, hd, false) // p·v
				}
			}
		}
	})
}

// backwardInPlace is backward on the in-place path.
func (a attention) backwardInPlace(dqkv, dout, lse, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	t16 := (t + 15) &^ 15
	parallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		sc := a.scratch()
		defer attnPool.Put(sc)
		kp, vp := sc.kp[:t16*hd], sc.vp[:t16*hd] // (T16, HeadDim) as panels of 16
		dk, dv := sc.dk[:t*hd], sc.dv[:t*hd]     // (T, HeadDim)
		for bk := lo; bk < hi; bk++ {
			b, kvh := bk/a.KVHeads, bk%a.KVHeads
			rows, drows := qkv[b*t*s:(b+1)*t*s], dqkv[b*t*s:(b+1)*t*s] // (T, S)
			k := rows[kOff+kvh*hd:]                                    // (T, HeadDim), row stride S
			kernel.PackPanels(kp, k, t, hd, s)
			kernel.PackPanels(vp, rows[vOff+kvh*hd:], t, hd, s)
			clear(dk)
			clear(dv)
			for h := kvh * group; h < (kvh+1)*group; h++ {
				q, dq := rows[h*hd:], drows[h*hd:] // (T, HeadDim), row stride S
				do := dout[b*t*d+h*hd:]            // (T, HeadDim), row stride D
				l := lse[(b*a.Heads+h)*t:]         // (T)
				for r0 := 0; r0 < t; r0 += attnBlock {
					r1 := min(r0+attnBlock, t)
					m, n16 := r1-r0, (r1+15)&^15
					pb, dpb := sc.p[:m*t16], sc.dp[:m*t16]                                          // (r1−r0, r1), row stride T16
					kernel.MatMulStrided(pb, t16, q[r0*s:], s, 1, kp, pw, pw*hd, m, hd, n16, false) // q·kᵀ again
					attnProbs(pb, t16, l, r0, r1, scale, false, sc.rows)
					kernel.MatMulStrided(dpb, t16, do[r0*d:], d, 1, vp, pw, pw*hd, m, hd, n16, false) // dP
					kernel.MatMulStrided(dv, hd, pb, 1, t16, do[r0*d:], d, pw, r1, m, hd, true)       // dV[0:r1] += Pᵀ·dO
					attnDScores(dpb, pb, t16, r0, r1, scale)
					kernel.MatMulStrided(dq[r0*s:], s, dpb, t16, 1, k, s, pw, m, r1, hd, false) // dQ[r0:r1]
					kernel.MatMulStrided(dk, hd, dpb, 1, t16, q[r0*s:], s, pw, r1, m, hd, true) // dK[0:r1] += dSᵀ·Q
				}
			}
			a.scatter(drows, dk, s, kOff+kvh*hd)
			a.scatter(drows, dv, s, vOff+kvh*hd)
		}
	})
}
