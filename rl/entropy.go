package rl

import "math"

// entropyAdvantages is the advantage of each of s's completion tokens with
// c times its surprisal added. The surprisal of token a sampled at state
// x is −log π(a|x), read from the sampler's logprob. Since
// ∇H(π(·|x)) = E_a[−log π(a|x)·∇log π(a|x)], the added term's gradient
// is, in expectation, c times the entropy's at x. A masked token, which
// carries no loss, or one without a finite logprob gets no bonus.
func entropyAdvantages(s trainSeq, c float64) []float64 {
	out := make([]float64, len(s.Completion))
	for j := range out {
		out[j] = s.adv(j)
		if !s.trained(j) || j >= len(s.Behaviour) {
			continue
		}
		lp := float64(s.Behaviour[j])
		if math.IsNaN(lp) || math.IsInf(lp, 0) {
			continue
		}
		out[j] += c * -lp
	}
	return out
}
