package nn

import "math"

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
type trainAttn struct {
	B, T, Heads, KVHeads, HeadDim int
}

func (a trainAttn) stride() int { return (a.Heads + 2*a.KVHeads) * a.HeadDim }

// forward writes out (N, Heads·HeadDim) and the probabilities att
// (B, Heads, T, T), whose masked entries are zero. Sequences and heads run
// in parallel.
func (a trainAttn) forward(out, att, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	trainParallel(a.B*a.Heads, 1, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			b, h := bh/a.Heads, bh%a.Heads
			kvh := h / group
			rows := qkv[b*t*s : (b+1)*t*s] // (T, S)
			for i := 0; i < t; i++ {
				q := rows[i*s+h*hd : i*s+h*hd+hd]
				p := att[(bh*t+i)*t : (bh*t+i+1)*t] // (T)
				maxv := float32(math.Inf(-1))
				for j := 0; j <= i; j++ {
					k := rows[j*s+kOff+kvh*hd : j*s+kOff+kvh*hd+hd]
					var dot float32
					for c, qc := range q {
						dot += qc * k[c]
					}
					dot *= scale
					p[j] = dot
					maxv = max(maxv, dot)
				}
				var sum float32
				for j := 0; j <= i; j++ {
					e := float32(math.Exp(float64(p[j] - maxv)))
					p[j] = e
					sum += e
				}
				inv := 1 / sum
				for j := 0; j <= i; j++ {
					p[j] *= inv
				}
				clear(p[i+1:])
				o := out[(b*t+i)*d+h*hd : (b*t+i)*d+h*hd+hd]
				clear(o)
				for j := 0; j <= i; j++ {
					v := rows[j*s+vOff+kvh*hd : j*s+vOff+kvh*hd+hd]
					pj := p[j]
					for c, vc := range v {
						o[c] += pj * vc
					}
				}
			}
		}
	})
}

// backward writes the gradient with respect to qkv into dqkv (N, S),
// overwriting it, from dout (N, Heads·HeadDim) and the saved att and qkv.
// With dp_tj = dout_t·v_j and the softmax Jacobian,
//
//	ds_tj = p_tj·(dp_tj − Σ_j' p_tj'·dp_tj')
//	dq_t = Σ_j ds_tj·k_j·scale,  dk_j += ds_tj·q_t·scale,  dv_j += p_tj·dout_t
//
// Work is split over (sequence, key/value head), so that the query heads
// sharing a key/value head add into its gradient in a fixed order within
// one goroutine.
func (a trainAttn) backward(dqkv, dout, att, qkv []float32) {
	hd, s, t := a.HeadDim, a.stride(), a.T
	d := a.Heads * hd
	kOff, vOff := d, d+a.KVHeads*hd
	group := a.Heads / a.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	trainParallel(a.B*a.KVHeads, 1, func(lo, hi int) {
		dp := make([]float32, t)
		for bk := lo; bk < hi; bk++ {
			b, kvh := bk/a.KVHeads, bk%a.KVHeads
			rows := qkv[b*t*s : (b+1)*t*s]   // (T, S)
			drows := dqkv[b*t*s : (b+1)*t*s] // (T, S)
			for j := 0; j < t; j++ {
				clear(drows[j*s+kOff+kvh*hd : j*s+kOff+kvh*hd+hd])
				clear(drows[j*s+vOff+kvh*hd : j*s+vOff+kvh*hd+hd])
			}
			for h := kvh * group; h < (kvh+1)*group; h++ {
				bh := b*a.Heads + h
				for i := 0; i < t; i++ {
					p := att[(bh*t+i)*t : (bh*t+i+1)*t]
					do := dout[(b*t+i)*d+h*hd : (b*t+i)*d+h*hd+hd]
					var dot float32
					for j := 0; j <= i; j++ {
						v := rows[j*s+vOff+kvh*hd : j*s+vOff+kvh*hd+hd]
						dv := drows[j*s+vOff+kvh*hd : j*s+vOff+kvh*hd+hd]
						var g float32
						pj := p[j]
						for c, vc := range v {
							g += do[c] * vc
							dv[c] += pj * do[c]
						}
						dp[j] = g
						dot += pj * g
					}
					q := rows[i*s+h*hd : i*s+h*hd+hd]
					dq := drows[i*s+h*hd : i*s+h*hd+hd]
					clear(dq)
					for j := 0; j <= i; j++ {
						ds := p[j] * (dp[j] - dot) * scale
						k := rows[j*s+kOff+kvh*hd : j*s+kOff+kvh*hd+hd]
						dk := drows[j*s+kOff+kvh*hd : j*s+kOff+kvh*hd+hd]
						for c, kc := range k {
							dq[c] += ds * kc
							dk[c] += ds * q[c]
						}
					}
				}
			}
		}
	})
}
