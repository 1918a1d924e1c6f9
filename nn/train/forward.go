package train

import (
	"context"
	"fmt"
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// Batch is B sequences of T tokens each, flattened row-major: position t of
// sequence b is index b·T+t. Every sequence starts at position 0.
type Batch struct {
	B, T    int
	Inputs  []int // (B·T) token ids fed to the model
	Targets []int // (B·T) token ids to predict at each position
	// Weights (B·T) scale each position's loss: 0 masks it; any finite
	// value, negative included, is allowed (policy-gradient advantages).
	// Nil means weight 1 everywhere.
	Weights []float32
}

// validate checks the batch against a model config.
func (b Batch) validate(c nn.Config) error {
	n := b.B * b.T
	switch {
	case b.B <= 0 || b.T <= 0:
		return fmt.Errorf("batch: shape %dx%d must be positive", b.B, b.T)
	case b.T > c.Context:
		return fmt.Errorf("batch: length %d exceeds the model's context %d", b.T, c.Context)
	case len(b.Inputs) != n:
		return fmt.Errorf("batch: %d inputs for shape %dx%d, want %d", len(b.Inputs), b.B, b.T, n)
	case len(b.Targets) != n:
		return fmt.Errorf("batch: %d targets for shape %dx%d, want %d", len(b.Targets), b.B, b.T, n)
	case b.Weights != nil && len(b.Weights) != n:
		return fmt.Errorf("batch: %d weights for shape %dx%d, want %d", len(b.Weights), b.B, b.T, n)
	}
	for i := 0; i < n; i++ {
		if id := b.Inputs[i]; id < 0 || id >= c.Vocab {
			return fmt.Errorf("batch: input token %d at sequence %d position %d is outside the vocabulary [0,%d)", id, i/b.T, i%b.T, c.Vocab)
		}
		if id := b.Targets[i]; id < 0 || id >= c.Vocab {
			return fmt.Errorf("batch: target token %d at sequence %d position %d is outside the vocabulary [0,%d)", id, i/b.T, i%b.T, c.Vocab)
		}
		if b.Weights != nil {
			if w := float64(b.Weights[i]); math.IsNaN(w) || math.IsInf(w, 0) {
				return fmt.Errorf("batch: weight %v at sequence %d position %d is not finite", w, i/b.T, i%b.T)
			}
		}
	}
	return nil
}

// Workspace holds one forward pass's activations and the backward pass's scratch.
// Buffers grow to the largest batch seen and are reused, so steady-state
// training does not allocate them again. A Workspace is not safe for
// concurrent use; use one per goroutine. Its methods only read the
// parameters they are given, and ForwardBackward writes only grads. So
// several workspaces may run TokenLogprobs on the same nn.Params at once
// while nothing updates them.
type Workspace struct {
	cfg  nn.Config
	rope ropeTable

	capN, capRows int // sizes the buffers hold: tokens, and B·Heads·T attention rows

	// saved activations, N = B·T
	res    [][]float32 // Layers+1 × (N, D): residual stream entering each layer, and the final one
	layers []layerActs
	xnF    []float32 // (N, D) final norm output
	rF     []float32 // (N) final norm 1/rms
	logits []float32 // (N, V), overwritten by its gradient in the backward pass
	logp   []float32 // (N) log p(target)

	// backward scratch
	dres []float32 // (N, D) gradient of the residual stream
	dxn  []float32 // (N, D)
	dtmp []float32 // (N, D)
	dqkv []float32 // (N, D+2·KV)
	dao  []float32 // (N, D)
	dh1  []float32 // (N, Hidden)
	dh3  []float32 // (N, Hidden)
	dhg  []float32 // (N, Hidden)
}

// layerActs are the activations of one block saved for its backward.
type layerActs struct {
	xn1  []float32 // (N, D) attention norm output
	r1   []float32 // (N)
	qkv  []float32 // (N, D+2·KV) queries and keys after RoPE, values
	lse  []float32 // (B, Heads, T) attention row log-sum-exps
	ao   []float32 // (N, D) attention output before Wo
	xmid []float32 // (N, D) residual after attention
	xn2  []float32 // (N, D) MLP norm output
	r2   []float32 // (N)
	h1   []float32 // (N, Hidden) gate pre-activation W1·x
	h3   []float32 // (N, Hidden) up projection W3·x
	hg   []float32 // (N, Hidden) silu(h1)·h3
}

// NewWorkspace returns an empty workspace for models of config c; its
// buffers are sized by the first batch.
func NewWorkspace(c nn.Config) (*Workspace, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Workspace{cfg: c, rope: newRopeTable(c)}, nil
}

// ensure sizes the buffers for a B×T batch.
func (w *Workspace) ensure(b, t int) {
	c := w.cfg
	n, nrows := b*t, b*c.Heads*t
	if n <= w.capN && nrows <= w.capRows {
		return
	}
	w.capN, w.capRows = max(n, w.capN), max(nrows, w.capRows)
	n, nrows = w.capN, w.capRows
	d, s, hid := c.Dim, c.Dim+2*c.KVDim(), c.Hidden
	f := func(k int) []float32 { return make([]float32, k) }
	w.res = make([][]float32, c.Layers+1)
	for i := range w.res {
		w.res[i] = f(n * d)
	}
	w.layers = make([]layerActs, c.Layers)
	for i := range w.layers {
		w.layers[i] = layerActs{
			xn1: f(n * d), r1: f(n), qkv: f(n * s), lse: f(nrows), ao: f(n * d),
			xmid: f(n * d), xn2: f(n * d), r2: f(n), h1: f(n * hid), h3: f(n * hid), hg: f(n * hid),
		}
	}
	w.xnF, w.rF, w.logits, w.logp = f(n*d), f(n), f(n*c.Vocab), f(n)
	w.dres, w.dxn, w.dtmp, w.dqkv, w.dao = f(n*d), f(n*d), f(n*d), f(n*s), f(n*d)
	w.dh1, w.dh3, w.dhg = f(n*hid), f(n*hid), f(n*hid)
}

// checkParams reports whether p (and grads, when not nil) fit the
// workspace's config and have the contiguous layout nn.NewParams makes.
func (w *Workspace) checkParams(p, grads *nn.Params) error {
	for _, q := range []*nn.Params{p, grads} {
		if q == nil {
			continue
		}
		if q.Config != w.cfg {
			return fmt.Errorf("workspace: params config %+v differs from workspace config %+v", q.Config, w.cfg)
		}
		if len(q.Data) != w.cfg.Size() {
			return fmt.Errorf("workspace: params hold %d values, config needs %d", len(q.Data), w.cfg.Size())
		}
		for l := range q.Layers {
			if _, err := q.QKV(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// forward runs the model on b and saves every activation backward needs.
// It leaves log p(target) of every position in w.logp and the logits in
// w.logits. The caller has validated b and p.
func (w *Workspace) forward(ctx context.Context, p *nn.Params, b Batch) error {
	c := w.cfg
	w.ensure(b.B, b.T)
	n, t, d, kv, hid, v := b.B*b.T, b.T, c.Dim, c.KVDim(), c.Hidden, c.Vocab
	s := d + 2*kv
	eps := float32(c.NormEps)
	attn := attention{B: b.B, T: t, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim()}

	// token embedding
	x := w.res[0][:n*d] // (N, D)
	for i, id := range b.Inputs {
		copy(x[i*d:(i+1)*d], p.TokenEmb[id*d:(id+1)*d])
	}

	for l := range c.Layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("forward layer %d: %w", l, err)
		}
		lp, a := &p.Layers[l], &w.layers[l]
		wqkv, err := p.QKV(l)
		if err != nil {
			return err
		}
		x := w.res[l][:n*d]
		xn1, qkv, ao, xmid := a.xn1[:n*d], a.qkv[:n*s], a.ao[:n*d], a.xmid[:n*d]

		// attention: xmid = x + Wo·Attn(RoPE(Wq·xn1), RoPE(Wk·xn1), Wv·xn1)
		rmsNormForward(xn1, a.r1, x, lp.AttnNorm, n, d, eps) // (N, D)
		kernel.MatMulNT(qkv, xn1, wqkv, n, d, s)             // (N, D+2KV)
		w.rope.forward(qkv, n, t, s, d+kv)                   // queries and keys
		attn.forward(ao, a.lse, qkv)                         // (N, D)
		kernel.MatMulNT(xmid, ao, lp.Wo, n, d, d)            // (N, D)
		kernel.Add(xmid, x)                                  // residual

		// MLP: xout = xmid + W2·(silu(W1·xn2) · W3·xn2)
		xn2, h1, h3, hg := a.xn2[:n*d], a.h1[:n*hid], a.h3[:n*hid], a.hg[:n*hid]
		xout := w.res[l+1][:n*d]
		rmsNormForward(xn2, a.r2, xmid, lp.FFNNorm, n, d, eps) // (N, D)
		kernel.MatMulNT(h1, xn2, lp.W1, n, d, hid)             // (N, Hidden)
		kernel.MatMulNT(h3, xn2, lp.W3, n, d, hid)             // (N, Hidden)
		swiGLUForward(hg, h1, h3)                              // (N, Hidden)
		kernel.MatMulNT(xout, hg, lp.W2, n, hid, d)            // (N, D)
		kernel.Add(xout, xmid)                                 // residual
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("forward head: %w", err)
	}
	xn, logits := w.xnF[:n*d], w.logits[:n*v]
	rmsNormForward(xn, w.rF, w.res[c.Layers][:n*d], p.FinalNorm, n, d, eps) // (N, D)
	kernel.MatMulNT(logits, xn, p.Output, n, d, v)                          // (N, V)
	return nil
}

// TokenLogprobs returns log p(Targets[i] | Inputs[..i]) for every position
// of b under p, forward only (Weights are ignored). It serves evaluation and
// the importance ratios of policy-gradient updates.
func (w *Workspace) TokenLogprobs(ctx context.Context, p *nn.Params, b Batch) ([]float32, error) {
	if err := b.validate(w.cfg); err != nil {
		return nil, fmt.Errorf("token logprobs: %w", err)
	}
	if err := w.checkParams(p, nil); err != nil {
		return nil, fmt.Errorf("token logprobs: %w", err)
	}
	if err := w.forward(ctx, p, b); err != nil {
		return nil, fmt.Errorf("token logprobs: %w", err)
	}
	n := b.B * b.T
	out := make([]float32, n)
	logSoftmax(out, w.logits[:n*w.cfg.Vocab], b.Targets, nil, n, w.cfg.Vocab, false, 0)
	return out, nil
}
