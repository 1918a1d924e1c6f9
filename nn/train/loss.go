package train

import (
	"math"

	"github.com/delegatelab/delegate/nn/kernel"
)

// Token-weighted cross-entropy over the vocabulary.
//
// For row i with logits z_i (Vocab), target y_i and weight w_i:
//
//	loss = Σ_i w_i·(−log softmax(z_i)[y_i]) / norm
//	∂loss/∂z_i = (w_i / norm)·(softmax(z_i) − onehot(y_i))
//
// The weights may be any finite numbers. They are 1 for supervised tokens,
// 0 for masked ones such as prompt and padding, and a per-token advantage,
// possibly negative, for policy-gradient updates. Since
// ∇(−w·log p) = −w·∇log p, a caller folds PPO's clipped objective into the
// weights. It sets w = A·r, with r = p/p_old treated as a constant, where
// the ratio is inside its clip range, and w = 0 where the clip is active.
// A KL penalty to a reference policy subtracts its coefficient times the
// per-token KL estimate from A. A row with weight exactly 0 contributes
// exactly 0 to the loss, and its logit gradient is exactly 0, whatever its
// logits hold: there is no 0·∞ = NaN.

// logSoftmax writes logp[i] = log softmax(z_i)[y_i] for every row of logits (N, V).
// It overwrites the rows. When grad is true it writes their gradient
// (w_i·scale)·(softmax − onehot), or zeros for w_i = 0. Otherwise it writes
// scratch, since the logits are the workspace's own and are not read again.
// weights nil means weight 1 everywhere.
func logSoftmax(logp, logits []float32, targets []int, weights []float32, n, v int, grad bool, scale float32) {
	parallel(n, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			z := logits[i*v : (i+1)*v]
			zt := z[targets[i]]
			// z becomes e^(z−max); softmax is z/sum
			sum, maxv := kernel.Softmax(z, 1)
			logp[i] = zt - (float32(math.Log(float64(sum))) + maxv)
			if !grad {
				continue
			}
			w := float32(1)
			if weights != nil {
				w = weights[i]
			}
			if w == 0 {
				clear(z)
				continue
			}
			g := w * scale
			kernel.Scale(z, g/sum)
			z[targets[i]] -= g
		}
	})
}
