package train

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// refLogprobs is a plain float64 transcription of llama2.c's forward
// pass, one token at a time with a key/value cache, written independently
// of the batched training code: it returns log p(targets[t]) for one
// sequence.
func refLogprobs(p *nn.Params, inputs, targets []int) []float64 {
	c := p.Config
	d, hd, kvd, hid := c.Dim, c.HeadDim(), c.KVDim(), c.Hidden
	f64 := func(s []float32) []float64 {
		o := make([]float64, len(s))
		for i, v := range s {
			o[i] = float64(v)
		}
		return o
	}
	rms := func(x []float64, g []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(x))+c.NormEps)
		o := make([]float64, len(x))
		for i := range x {
			o[i] = x[i] * r * float64(g[i])
		}
		return o
	}
	matvec := func(w []float32, x []float64, out int) []float64 { // w (out, len(x))
		o := make([]float64, out)
		for i := range o {
			for j, v := range x {
				o[i] += float64(w[i*len(x)+j]) * v
			}
		}
		return o
	}
	rope := func(v []float64, pos int) {
		for i := 0; i < len(v); i += 2 {
			freq := 1 / math.Pow(c.RopeTheta, float64(i%hd)/float64(hd))
			a := float64(pos) * freq
			v0, v1 := v[i], v[i+1]
			v[i] = v0*math.Cos(a) - v1*math.Sin(a)
			v[i+1] = v0*math.Sin(a) + v1*math.Cos(a)
		}
	}
	keys := make([][][]float64, c.Layers) // [layer][pos] (KVDim)
	vals := make([][][]float64, c.Layers)
	out := make([]float64, len(inputs))
	for pos, tok := range inputs {
		x := f64(p.TokenEmb[tok*d : (tok+1)*d])
		for l, lp := range p.Layers {
			xn := rms(x, lp.AttnNorm)
			q, k, v := matvec(lp.Wq, xn, d), matvec(lp.Wk, xn, kvd), matvec(lp.Wv, xn, kvd)
			rope(q, pos)
			rope(k, pos)
			keys[l] = append(keys[l], k)
			vals[l] = append(vals[l], v)
			att := make([]float64, d)
			for h := 0; h < c.Heads; h++ {
				kh := h / (c.Heads / c.KVHeads)
				sc := make([]float64, pos+1)
				mx := math.Inf(-1)
				for t := 0; t <= pos; t++ {
					for i := 0; i < hd; i++ {
						sc[t] += q[h*hd+i] * keys[l][t][kh*hd+i]
					}
					sc[t] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[t])
				}
				var sum float64
				for t := range sc {
					sc[t] = math.Exp(sc[t] - mx)
					sum += sc[t]
				}
				for t := range sc {
					for i := 0; i < hd; i++ {
						att[h*hd+i] += sc[t] / sum * vals[l][t][kh*hd+i]
					}
				}
			}
			for i, v := range matvec(lp.Wo, att, d) {
				x[i] += v
			}
			xn = rms(x, lp.FFNNorm)
			a, b := matvec(lp.W1, xn, hid), matvec(lp.W3, xn, hid)
			for i := range a {
				a[i] = a[i] / (1 + math.Exp(-a[i])) * b[i]
			}
			for i, v := range matvec(lp.W2, a, d) {
				x[i] += v
			}
		}
		logits := matvec(p.Output, rms(x, p.FinalNorm), c.Vocab)
		mx := math.Inf(-1)
		for _, z := range logits {
			mx = math.Max(mx, z)
		}
		var sum float64
		for _, z := range logits {
			sum += math.Exp(z - mx)
		}
		out[pos] = logits[targets[pos]] - mx - math.Log(sum)
	}
	return out
}

// TestForwardMatchesReference compares the batched float32 forward with
// the float64 token-at-a-time reference: every log-prob within 1e-4.
func TestForwardMatchesReference(t *testing.T) {
	for _, tied := range []bool{false, true} {
		c := tinyConfig(tied)
		c.Context = attnBlock + 4 // two row blocks
		p := largeInit(t, c, 91)
		ws, _ := NewWorkspace(c)
		b := randomBatch(rand.New(rand.NewPCG(92, 93)), c, 2, c.Context, false)
		got, err := ws.TokenLogprobs(context.Background(), p, b)
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s < b.B; s++ {
			want := refLogprobs(p, b.Inputs[s*b.T:(s+1)*b.T], b.Targets[s*b.T:(s+1)*b.T])
			for i, w := range want {
				if g := float64(got[s*b.T+i]); math.Abs(g-w) > 1e-4 {
					t.Fatalf("tied=%v: sequence %d position %d: log p = %v, reference %v", tied, s, i, g, w)
				}
			}
		}
	}
}
