// Package nntest holds the reference forward pass that tests of nn's engines share.
// It is the architecture written plainly in float64, with no cache, kernel
// or batching. The training engine, nn/train, and the sampling engine,
// nn/infer, are both checked against it.
package nntest

import (
	"math"

	"github.com/delegatelab/delegate/nn"
)

// Logits is the full-sequence forward pass of p over toks, in float64:
// the (T, Vocab) logits of every position.
func Logits(p *nn.Params, toks []int) [][]float64 {
	c := p.Config
	d := c.Dim
	T := len(toks)
	hs := make([][]float64, T) // (T, Dim)
	for t, tok := range toks {
		hs[t] = make([]float64, d)
		for i := range hs[t] {
			hs[t][i] = float64(p.TokenEmb[tok*d+i])
		}
	}
	for _, lp := range p.Layers {
		attentionBlock(c, &lp, hs)
		ffnBlock(c, &lp, hs)
	}
	out := make([][]float64, T)
	for t := range T {
		out[t] = linear(p.Output, rmsnorm(hs[t], p.FinalNorm, c.NormEps), c.Vocab)
	}
	return out
}

// attentionBlock adds causal self-attention of the normalised hs to hs,
// the residual stream of every position.
func attentionBlock(c nn.Config, lp *nn.LayerParams, hs [][]float64) {
	d, kvd := c.Dim, c.KVDim()
	T := len(hs)
	qs, ks, vs := make([][]float64, T), make([][]float64, T), make([][]float64, T)
	for t := range T {
		xb := rmsnorm(hs[t], lp.AttnNorm, c.NormEps)
		qs[t], ks[t], vs[t] = linear(lp.Wq, xb, d), linear(lp.Wk, xb, kvd), linear(lp.Wv, xb, kvd)
		rope(qs[t], t, c.HeadDim(), c.RopeTheta)
		rope(ks[t], t, c.HeadDim(), c.RopeTheta)
	}
	for t := range T {
		o := linear(lp.Wo, attend(c, qs[t], ks[:t+1], vs[:t+1]), d)
		for i := range o {
			hs[t][i] += o[i]
		}
	}
}

// attend is the attention output, (Dim), of query q over positions 0 to t.
// ks and vs hold their keys and values. Heads share key heads in groups.
func attend(c nn.Config, q []float64, ks, vs [][]float64) []float64 {
	hd := c.HeadDim()
	att := make([]float64, c.Dim)
	for h := 0; h < c.Heads; h++ {
		kh := h / (c.Heads / c.KVHeads)
		w := make([]float64, len(ks))
		mx := math.Inf(-1)
		for s := range ks {
			var dot float64
			for i := 0; i < hd; i++ {
				dot += q[h*hd+i] * ks[s][kh*hd+i]
			}
			w[s] = dot / math.Sqrt(float64(hd))
			mx = math.Max(mx, w[s])
		}
		var sum float64
		for s := range w {
			w[s] = math.Exp(w[s] - mx)
			sum += w[s]
		}
		for s := range w {
			for i := 0; i < hd; i++ {
				att[h*hd+i] += w[s] / sum * vs[s][kh*hd+i]
			}
		}
	}
	return att
}

// ffnBlock adds the SwiGLU feed-forward of the normalised hs to hs.
func ffnBlock(c nn.Config, lp *nn.LayerParams, hs [][]float64) {
	for t := range hs {
		xb := rmsnorm(hs[t], lp.FFNNorm, c.NormEps)
		g, u := linear(lp.W1, xb, c.Hidden), linear(lp.W3, xb, c.Hidden)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		o := linear(lp.W2, g, c.Dim)
		for i := range o {
			hs[t][i] += o[i]
		}
	}
}

// linear is y = W·x, with W (out, len(x)).
func linear(w []float32, x []float64, out int) []float64 {
	y := make([]float64, out)
	for o := range y {
		var s float64
		for i, v := range x {
			s += float64(w[o*len(x)+i]) * v
		}
		y[o] = s
	}
	return y
}

// rmsnorm is x scaled to unit root mean square, plus eps, times w.
func rmsnorm(x []float64, w []float32, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * inv * float64(w[i])
	}
	return y
}

// rope rotates the adjacent pairs of each head of v, hd values a head,
// by the angles of position pos.
func rope(v []float64, pos, hd int, theta float64) {
	for h := 0; h < len(v); h += hd {
		for i := 0; i < hd/2; i++ {
			ang := float64(pos) * math.Pow(theta, -float64(2*i)/float64(hd))
			a, b := v[h+2*i], v[h+2*i+1]
			v[h+2*i] = a*math.Cos(ang) - b*math.Sin(ang)
			v[h+2*i+1] = a*math.Sin(ang) + b*math.Cos(ang)
		}
	}
}

// LogProbs is, for each position of inputs, the log-probability Logits
// gives the target at that position.
func LogProbs(p *nn.Params, inputs, targets []int) []float64 {
	out := make([]float64, len(inputs))
	for pos, logits := range Logits(p, inputs) {
		out[pos] = LogSoftmax(logits)[targets[pos]]
	}
	return out
}

// LogSoftmax is the log-probabilities of logits z.
func LogSoftmax(z []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v)
	}
	var sum float64
	for _, v := range z {
		sum += math.Exp(v - mx)
	}
	lse := mx + math.Log(sum)
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = v - lse
	}
	return out
}
