package rl

import "math"

// The per-token objective, folded into the weights of nn's token-weighted
// cross-entropy. nn minimises Σ −w·log p with w held constant, whose
// gradient is −w·∇log p; so a term f(log p) of the loss becomes the weight
// w = −f′(log p).
//
// PPO's clipped surrogate for a token with advantage A, current logprob l
// and old logprob l_old, r = exp(l − l_old):
//
//	loss = −min(r·A, clip(r, 1−ε, 1+ε)·A)
//	w    = A·r  where the min picks the unclipped term,
//	       0    where the clip is active (A > 0 and r > 1+ε, or A < 0 and r < 1−ε)
//
// The k3 estimator of KL(π ‖ π_ref) at that token, with l_ref the
// reference's logprob, δ = l_ref − l:
//
//	k3   = exp(δ) − δ − 1          (non-negative, unbiased for the KL)
//	∂k3/∂l = 1 − exp(δ)
//	w_KL = β·(exp(δ) − 1)          the weight of the term β·k3

// ppoTerm returns the surrogate loss of one token, its weight, and whether
// the clip is active.
func ppoTerm(adv, lp, lpOld, eps float64) (loss, w float64, clipped bool) {
	r := math.Exp(lp - lpOld)
	rc := min(max(r, 1-eps), 1+eps)
	loss = -min(r*adv, rc*adv)
	clipped = (adv > 0 && r > 1+eps) || (adv < 0 && r < 1-eps)
	if clipped {
		return loss, 0, true
	}
	return loss, adv * r, false
}

// k3 is the k3 estimate of KL(π ‖ π_ref) at one token.
func k3(lp, lpRef float64) float64 {
	d := lpRef - lp
	return math.Expm1(d) - d
}

// klWeight is the weight of the term beta·k3(lp, lpRef): −β·∂k3/∂lp.
func klWeight(lp, lpRef, beta float64) float64 {
	return beta * math.Expm1(lpRef-lp)
}

// objective is the per-token loss of a run: PPO's clip range and the KL
// coefficient.
type objective struct{ eps, beta float64 }

// at returns a token's clipped policy-gradient loss, k3 estimate, weight and whether the clip is active.
// The token has advantage adv and current, old and reference logprobs.
// The weight is for the cross-entropy: the derivative of −(pg + β·k3) with respect to the current logprob.
// Without a reference, pass ref = cur: k3 and its weight are then exactly 0.
func (o objective) at(adv, cur, old, ref float64) (pg, kl, w float64, clipped bool) {
	pg, w, clipped = ppoTerm(adv, cur, old, o.eps)
	kl = k3(cur, ref)
	w += klWeight(cur, ref, o.beta)
	return pg, kl, w, clipped
}
