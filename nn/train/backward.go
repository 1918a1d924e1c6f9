package train

import (
	"context"
	"fmt"
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// ForwardBackward runs the model on b and adds the loss's gradient to grads.
// The loss is
//
//	loss = Σ_i Weights[i]·(−log p(Targets[i])) / norm
//
// grads must have p's config; a tied output head accumulates into the
// shared embedding. It returns the loss. norm must be positive and finite.
// Gradient accumulation over micro-batches passes the same norm to each
// call, such as the step's count of weighted tokens. On error grads may hold
// a partial sum and should be zeroed before reuse.
func (w *Workspace) ForwardBackward(ctx context.Context, p, grads *nn.Params, b Batch, norm float64) (float64, error) {
	if err := b.validate(w.cfg); err != nil {
		return 0, fmt.Errorf("forward-backward: %w", err)
	}
	if err := w.checkParams(p, grads); err != nil {
		return 0, fmt.Errorf("forward-backward: %w", err)
	}
	if grads == nil || grads == p || &grads.Data[0] == &p.Data[0] {
		return 0, fmt.Errorf("forward-backward: grads must be separate parameters of the same config")
	}
	if !(norm > 0) || math.IsInf(norm, 0) {
		return 0, fmt.Errorf("forward-backward: norm must be positive and finite, got %v", norm)
	}
	if err := w.forward(ctx, p, b); err != nil {
		return 0, fmt.Errorf("forward-backward: %w", err)
	}
	c := w.cfg
	n, v := b.B*b.T, c.Vocab
	logp := w.logp[:n]
	logSoftmax(logp, w.logits[:n*v], b.Targets, b.Weights, n, v, true, float32(1/norm))
	var loss float64
	for i, lp := range logp {
		wi := 1.0
		if b.Weights != nil {
			wi = float64(b.Weights[i])
		}
		if wi != 0 {
			loss -= wi * float64(lp)
		}
	}
	if err := w.backward(ctx, p, grads, b); err != nil {
		return 0, fmt.Errorf("forward-backward: %w", err)
	}
	return loss / norm, nil
}

// backward propagates the logit gradient left in w.logits by
// logSoftmax back through the saved activations into grads.
func (w *Workspace) backward(ctx context.Context, p, g *nn.Params, b Batch) error {
	c := w.cfg
	n, t, d, kv, hid, v := b.B*b.T, b.T, c.Dim, c.KVDim(), c.Hidden, c.Vocab
	s := d + 2*kv
	attn := attention{B: b.B, T: t, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim()}
	dlogits := w.logits[:n*v]
	dres, dxn, dtmp := w.dres[:n*d], w.dxn[:n*d], w.dtmp[:n*d]

	// output head and final norm
	kernel.MatMulTNAcc(g.Output, dlogits, w.xnF[:n*d], v, n, d) // (V, D)
	kernel.MatMulNN(dxn, dlogits, p.Output, n, v, d)            // (N, D)
	clear(dres)
	rmsNormBackward(dres, g.FinalNorm, dxn, w.res[c.Layers][:n*d], p.FinalNorm, w.rF, n, d)

	for l := c.Layers - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("backward layer %d: %w", l, err)
		}
		lp, gl, a := &p.Layers[l], &g.Layers[l], &w.layers[l]
		wqkv, err := p.QKV(l)
		if err != nil {
			return err
		}
		gqkv, err := g.QKV(l)
		if err != nil {
			return err
		}
		xn2, h1, h3, hg := a.xn2[:n*d], a.h1[:n*hid], a.h3[:n*hid], a.hg[:n*hid]
		dh1, dh3, dhg := w.dh1[:n*hid], w.dh3[:n*hid], w.dhg[:n*hid]

		// MLP: dres is ∂L/∂xout and flows unchanged to xmid through the residual
		kernel.MatMulTNAcc(gl.W2, dres, hg, d, n, hid) // (D, Hidden)
		kernel.MatMulNN(dhg, dres, lp.W2, n, d, hid)   // (N, Hidden)
		swiGLUBackward(dh1, dh3, dhg, h1, h3)          // (N, Hidden) ×2
		kernel.MatMulTNAcc(gl.W1, dh1, xn2, hid, n, d) // (Hidden, D)
		kernel.MatMulTNAcc(gl.W3, dh3, xn2, hid, n, d) // (Hidden, D)
		kernel.MatMulNN(dxn, dh1, lp.W1, n, hid, d)    // (N, D)
		kernel.MatMulNN(dtmp, dh3, lp.W3, n, hid, d)   // (N, D)
		kernel.Add(dxn, dtmp)
		rmsNormBackward(dres, gl.FFNNorm, dxn, a.xmid[:n*d], lp.FFNNorm, a.r2, n, d) // dres is now ∂L/∂xmid

		// attention
		xn1, qkv, ao := a.xn1[:n*d], a.qkv[:n*s], a.ao[:n*d]
		dao, dqkv := w.dao[:n*d], w.dqkv[:n*s]
		kernel.MatMulTNAcc(gl.Wo, dres, ao, d, n, d)                                     // (D, D)
		kernel.MatMulNN(dao, dres, lp.Wo, n, d, d)                                       // (N, D)
		attn.backward(dqkv, dao, a.lse, qkv)                                             // (N, D+2KV)
		w.rope.backward(dqkv, n, t, s, d+kv)                                             // queries and keys
		kernel.MatMulTNAcc(gqkv, dqkv, xn1, s, n, d)                                     // (D+2KV, D)
		kernel.MatMulNN(dxn, dqkv, wqkv, n, s, d)                                        // (N, D)
		rmsNormBackward(dres, gl.AttnNorm, dxn, w.res[l][:n*d], lp.AttnNorm, a.r1, n, d) // dres is now ∂L/∂x
	}

	// token embedding: rows add up in position order, so repeated tokens
	// accumulate deterministically
	for i, id := range b.Inputs {
		kernel.Add(g.TokenEmb[id*d:(id+1)*d], dres[i*d:(i+1)*d])
	}
	return nil
}
