package main

import (
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// lastLogits runs the model over the whole sequence ids and returns the
// logits (Vocab) after its last position. It recomputes every position on
// every call: simple and slow, which is fine for the short continuations
// this comparison needs. It follows package nn's model definition:
// RMSNorm (mean of squares plus eps, then scale), rotary embedding over
// adjacent pairs (2i, 2i+1) of each head with angle pos·theta^(-2i/head_dim),
// causal multi-head attention with grouped key/value heads scaled by
// 1/sqrt(head_dim), SwiGLU w2(silu(w1 x) ⊙ w3 x), residual connections,
// final norm and output head. Linear layers are kernel.MatMulNT on (out, in)
// weights.
func lastLogits(p *nn.Params, ids []int) []float32 {
	c := p.Config
	T, D, KV, H, hd := len(ids), c.Dim, c.KVDim(), c.Hidden, c.HeadDim()
	eps := float32(c.NormEps)

	x := make([]float32, T*D) // (T, D) residual stream
	for t, id := range ids {
		copy(x[t*D:(t+1)*D], p.TokenEmb[id*D:(id+1)*D])
	}
	xn := make([]float32, T*D)  // (T, D) normed input of a sublayer
	q := make([]float32, T*D)   // (T, Heads*hd)
	k := make([]float32, T*KV)  // (T, KVHeads*hd)
	v := make([]float32, T*KV)  // (T, KVHeads*hd)
	att := make([]float32, T*D) // (T, D) attention output before Wo
	proj := make([]float32, T*D)
	h1 := make([]float32, T*H) // (T, Hidden)
	h3 := make([]float32, T*H) // (T, Hidden)
	scores := make([]float32, T)

	for _, l := range p.Layers {
		rmsnorm(xn, x, l.AttnNorm, T, D, eps)
		kernel.MatMulNT(q, xn, l.Wq, T, D, D)
		kernel.MatMulNT(k, xn, l.Wk, T, D, KV)
		kernel.MatMulNT(v, xn, l.Wv, T, D, KV)
		for t := range T {
			rope(q[t*D:(t+1)*D], t, hd, c.RopeTheta)
			rope(k[t*KV:(t+1)*KV], t, hd, c.RopeTheta)
		}
		group := c.Heads / c.KVHeads
		scale := float32(1 / math.Sqrt(float64(hd)))
		for t := range T {
			for h := range c.Heads {
				qh := q[t*D+h*hd : t*D+(h+1)*hd]
				kvOff := (h / group) * hd
				maxS := float32(math.Inf(-1))
				for s := 0; s <= t; s++ {
					kh := k[s*KV+kvOff : s*KV+kvOff+hd]
					var dot float32
					for i := range hd {
						dot += qh[i] * kh[i]
					}
					scores[s] = dot * scale
					maxS = max(maxS, scores[s])
				}
				var sum float32
				for s := 0; s <= t; s++ {
					scores[s] = float32(math.Exp(float64(scores[s] - maxS)))
					sum += scores[s]
				}
				out := att[t*D+h*hd : t*D+(h+1)*hd]
				clear(out)
				for s := 0; s <= t; s++ {
					a := scores[s] / sum
					vh := v[s*KV+kvOff : s*KV+kvOff+hd]
					for i := range hd {
						out[i] += a * vh[i]
					}
				}
			}
		}
		kernel.MatMulNT(proj, att, l.Wo, T, D, D)
		for i := range x {
			x[i] += proj[i]
		}

		rmsnorm(xn, x, l.FFNNorm, T, D, eps)
		kernel.MatMulNT(h1, xn, l.W1, T, D, H)
		kernel.MatMulNT(h3, xn, l.W3, T, D, H)
		for i, g := range h1 {
			h1[i] = g / (1 + float32(math.Exp(float64(-g)))) * h3[i]
		}
		kernel.MatMulNT(proj, h1, l.W2, T, H, D)
		for i := range x {
			x[i] += proj[i]
		}
	}
	last := make([]float32, D)
	rmsnorm(last, x[(T-1)*D:], p.FinalNorm, 1, D, eps)
	logits := make([]float32, c.Vocab)
	kernel.MatMulNT(logits, last, p.Output, 1, D, c.Vocab)
	return logits
}

// rmsnorm writes w ⊙ x/rms(x) for each of the n rows of x (n, d) into dst.
func rmsnorm(dst, x, w []float32, n, d int, eps float32) {
	for r := range n {
		row := x[r*d : (r+1)*d]
		var ss float32
		for _, v := range row {
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(float64(ss/float32(d)+eps)))
		for i, v := range row {
			dst[r*d+i] = w[i] * (inv * v)
		}
	}
}

// rope rotates each head of vec (heads·hd) in place for position pos.
func rope(vec []float32, pos, hd int, theta float64) {
	for i := 0; i < len(vec); i += 2 {
		j := i % hd
		a := float64(pos) * math.Pow(theta, -float64(j)/float64(hd))
		cos, sin := float32(math.Cos(a)), float32(math.Sin(a))
		v0, v1 := vec[i], vec[i+1]
		vec[i] = v0*cos - v1*sin
		vec[i+1] = v0*sin + v1*cos
	}
}
