package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Params are a model's weights: one contiguous []float32 with named views
// into it. The same layout binds gradients and optimizer moments, so that
// an update is a loop over Data.
//
// Every matrix is stored row-major as (out, in), the layout of PyTorch and
// llama2.c: a linear layer computes y = x · Wᵀ (kernel.MatMulNT).
type Params struct {
	Config Config
	Data   []float32

	TokenEmb  []float32 // (Vocab, Dim)
	Layers    []LayerParams
	FinalNorm []float32 // (Dim)
	// Output is the output head (Vocab, Dim); it aliases TokenEmb when the
	// config ties them.
	Output []float32
}

// LayerParams are the views of one transformer block.
type LayerParams struct {
	AttnNorm []float32 // (Dim)
	Wq       []float32 // (Dim, Dim)        = (Heads*HeadDim, Dim)
	Wk       []float32 // (KVDim, Dim)
	Wv       []float32 // (KVDim, Dim)
	Wo       []float32 // (Dim, Dim)
	FFNNorm  []float32 // (Dim)
	W1       []float32 // (Hidden, Dim)     gate
	W2       []float32 // (Dim, Hidden)     down
	W3       []float32 // (Hidden, Dim)     up
}

// Size is the number of float32 values in a model of config c.
func (c Config) Size() int {
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	layer := d + d*d + kv*d + kv*d + d*d + d + h*d + d*h + h*d
	n := c.Vocab*d + c.Layers*layer + d
	if !c.TiedOutput {
		n += c.Vocab * d
	}
	return n
}

// NewParams binds the views of config c to data, which must hold exactly
// c.Size() values. The order in Data is: token embedding; for each layer
// AttnNorm, Wq, Wk, Wv, Wo, FFNNorm, W1, W2, W3; final norm; output head
// (when untied).
func NewParams(c Config, data []float32) (*Params, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if f := c.inferenceOnly(); f != "" {
		return nil, fmt.Errorf("params: %s is supported for inference only (an imported checkpoint, see infer.LoadHF)", f)
	}
	if len(data) != c.Size() {
		return nil, fmt.Errorf("params: config needs %d values, got %d", c.Size(), len(data))
	}
	p := &Params{Config: c, Data: data}
	off := 0
	take := func(n int) []float32 {
		s := data[off : off+n : off+n]
		off += n
		return s
	}
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	p.TokenEmb = take(c.Vocab * d)
	p.Layers = make([]LayerParams, c.Layers)
	for i := range p.Layers {
		p.Layers[i] = LayerParams{
			AttnNorm: take(d),
			Wq:       take(d * d),
			Wk:       take(kv * d),
			Wv:       take(kv * d),
			Wo:       take(d * d),
			FFNNorm:  take(d),
			W1:       take(h * d),
			W2:       take(d * h),
			W3:       take(h * d),
		}
	}
	p.FinalNorm = take(d)
	if c.TiedOutput {
		p.Output = p.TokenEmb
	} else {
		p.Output = take(c.Vocab * d)
	}
	return p, nil
}

// Alloc returns zeroed parameters (or gradients, or moments) for c.
func Alloc(c Config) (*Params, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if f := c.inferenceOnly(); f != "" {
		return nil, fmt.Errorf("params: %s is supported for inference only (an imported checkpoint, see infer.LoadHF)", f)
	}
	return NewParams(c, make([]float32, c.Size()))
}

// Init draws fresh weights from seed, as GPT-2 does.
// Norms start at one and matrices normal with standard deviation 0.02. The
// projections that write into the residual stream, Wo and W2, are scaled
// down by 1/sqrt(2·Layers).
func (p *Params) Init(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	normal := func(s []float32, std float64) {
		for i := range s {
			s[i] = float32(rng.NormFloat64() * std)
		}
	}
	ones := func(s []float32) {
		for i := range s {
			s[i] = 1
		}
	}
	const std = 0.02
	resid := std / math.Sqrt(2*float64(p.Config.Layers))
	normal(p.TokenEmb, std)
	for _, l := range p.Layers {
		ones(l.AttnNorm)
		normal(l.Wq, std)
		normal(l.Wk, std)
		normal(l.Wv, std)
		normal(l.Wo, resid)
		ones(l.FFNNorm)
		normal(l.W1, std)
		normal(l.W2, resid)
		normal(l.W3, std)
	}
	ones(p.FinalNorm)
	if !p.Config.TiedOutput {
		normal(p.Output, std)
	}
}

// QKV returns layer l's Wq, Wk and Wv as one (Dim+2·KVDim, Dim) matrix.
// NewParams lays them out back to back, so one product yields a token's
// queries, keys and values as one row.
func (p *Params) QKV(l int) ([]float32, error) {
	c := p.Config
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	layer := d + d*d + kv*d + kv*d + d*d + d + h*d + d*h + h*d
	off := c.Vocab*d + l*layer + d
	lp := p.Layers[l]
	end := off + (d+2*kv)*d
	if end > len(p.Data) || len(lp.Wq) != d*d || len(lp.Wk) != kv*d || len(lp.Wv) != kv*d ||
		&p.Data[off] != &lp.Wq[0] || &p.Data[off+d*d] != &lp.Wk[0] || &p.Data[off+d*d+kv*d] != &lp.Wv[0] {
		return nil, fmt.Errorf("params: layer %d: Wq, Wk, Wv are not laid out back to back in Data as NewParams makes them", l)
	}
	return p.Data[off:end:end], nil
}
