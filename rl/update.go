package rl

import (
	"context"
	"fmt"
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
)

// trainSeq is one episode with what the objective needs besides its tokens.
type trainSeq struct {
	Episode
	Adv  float64 // the rollout's advantage, the same for every token
	Coef float64 // normalisation factor of each of its tokens
	// OffPolicy marks a sequence sampled by another policy than the
	// parameters before the update: its tokens are weighted by their
	// truncated importance weights.
	OffPolicy bool
}

// updateStats describe the gradient phase of one step, averaged over its
// epochs (GradNorm, Loss, PGLoss, KL, ClipFrac) or taken before the first
// update (LogprobGap).
type updateStats struct {
	Loss       float64 // normalised surrogate loss, KL term included
	PGLoss     float64 // normalised clipped policy-gradient loss alone
	KL         float64 // mean k3 estimate per trained token (0 when β = 0)
	ClipFrac   float64 // share of trained tokens whose clip is active
	GradNorm   float64 // global gradient norm before clipping
	GradClip   int     // epochs whose gradient was scaled down to ClipNorm
	LogprobGap float64 // largest |sampler − trainer| logprob of a trained token
	Tokens     int     // trained tokens
	Updates    int     // optimizer steps taken
	// Importance weights of off-policy tokens before truncation: mean,
	// min, max, and the share truncated.
	ISMean, ISMin, ISMax, ISTrunc float64
}

// learner holds what the gradient phase needs: the policy (shared with the
// model that samples rollouts), its frozen reference, the optimizer and
// scratch space. Not safe for concurrent use.
type learner struct {
	cfg    Config
	policy *nn.Params
	ref    *nn.Params // nil when KLBeta is 0
	grads  *nn.Params
	opt    *train.AdamState
	ws     *train.Workspace
}

func newLearner(cfg Config, policy *nn.Params) (*learner, error) {
	l := &learner{cfg: cfg, policy: policy}
	var err error
	if l.grads, err = nn.Alloc(policy.Config); err != nil {
		return nil, err
	}
	if l.opt, err = train.NewAdamState(policy.Config); err != nil {
		return nil, err
	}
	if l.ws, err = train.NewWorkspace(policy.Config); err != nil {
		return nil, err
	}
	if cfg.KLBeta > 0 {
		if l.ref, err = nn.Alloc(policy.Config); err != nil {
			return nil, err
		}
		copy(l.ref.Data, policy.Data)
	}
	return l, nil
}

// update takes cfg.Epochs optimizer steps at learning rate lr on seqs.
// The old policy of the importance ratio is the trainer's own logprob at
// the parameters the rollouts were sampled with, computed in the first
// epoch before any update, so the ratio is exactly 1 there; when check is
// set, the sampler's logprobs are checked against it (MaxLogprobGap).
// Without check, with one epoch and no KL term, the weights are the
// advantages times the coefficients and no logprobs are computed at all. On any error, a
// cancelled ctx included, the parameters and moments are left as they
// were before the call.
func (l *learner) update(ctx context.Context, seqs []trainSeq, lr float64, check bool) (updateStats, error) {
	var st updateStats
	eps := make([]Episode, len(seqs))
	for i := range seqs {
		eps[i] = seqs[i].Episode
	}
	mbs := pack(eps, l.cfg.MicroBatchTokens)
	for _, s := range seqs {
		st.Tokens += s.Generated()
	}
	if st.Tokens == 0 {
		return st, nil
	}

	var refLP [][]float32
	if l.ref != nil {
		refLP = make([][]float32, len(mbs))
		for i, m := range mbs {
			lp, err := l.ws.TokenLogprobs(ctx, l.ref, m.batch)
			if err != nil {
				return st, fmt.Errorf("reference logprobs: %w", err)
			}
			refLP[i] = lp
		}
	}

	var snap *snapshot
	if l.cfg.Epochs > 1 {
		snap = takeSnapshot(l.policy, l.opt)
	}
	fail := func(err error) (updateStats, error) {
		if snap != nil && st.Updates > 0 {
			snap.restore(l.policy, l.opt)
		}
		return st, err
	}

	// With one epoch, no reference and no off-policy sequence the ratio is
	// 1 at every token: the logprobs change nothing but the check.
	offPolicy := false
	for _, s := range seqs {
		offPolicy = offPolicy || s.OffPolicy
	}
	fast := !check && l.cfg.Epochs == 1 && l.ref == nil && !offPolicy
	// The importance weights of the off-policy tokens, fixed in the first
	// epoch from the logprobs before any update (the proximal policy).
	isW := make([][]float64, len(mbs))
	var isN, isTrunc int
	oldLP := make([][]float32, len(mbs))
	obj := objective{eps: l.cfg.ClipEps, beta: l.cfg.KLBeta}
	var clipped int
	for epoch := 1; epoch <= l.cfg.Epochs; epoch++ {
		clear(l.grads.Data)
		var kl float64
		for i, m := range mbs {
			if fast {
				clear(m.batch.Weights)
				for _, s := range m.seqs {
					seq := seqs[s.idx]
					for j := range seq.Completion {
						if !seq.trained(j) {
							continue
						}
						pg, _, w, _ := obj.at(seq.Adv, 0, 0, 0)
						st.PGLoss += seq.Coef * pg
						st.Loss += seq.Coef * pg
						m.batch.Weights[m.at(s, j)] = float32(seq.Coef * w)
					}
				}
				if _, err := l.ws.ForwardBackward(ctx, l.policy, l.grads, m.batch, 1); err != nil {
					return fail(fmt.Errorf("epoch %d: %w", epoch, err))
				}
				continue
			}
			lp, err := l.ws.TokenLogprobs(ctx, l.policy, m.batch)
			if err != nil {
				return fail(fmt.Errorf("epoch %d: %w", epoch, err))
			}
			if epoch == 1 {
				oldLP[i] = lp
				if offPolicy {
					isW[i] = make([]float64, len(lp))
					for _, s := range m.seqs {
						seq := seqs[s.idx]
						if !seq.OffPolicy {
							continue
						}
						for j, b := range seq.Behaviour {
							if !seq.trained(j) {
								continue
							}
							k := m.at(s, j)
							w := math.Exp(float64(lp[k]) - float64(b))
							if isN == 0 {
								st.ISMin, st.ISMax = w, w
							}
							isN++
							st.ISMean += w
							st.ISMin, st.ISMax = min(st.ISMin, w), max(st.ISMax, w)
							if w > l.cfg.maxIS() {
								isTrunc++
								w = l.cfg.maxIS()
							}
							isW[i][k] = w
						}
					}
				}
			}
			if epoch == 1 && check {
				for _, s := range m.seqs {
					if seqs[s.idx].OffPolicy {
						continue // sampled by another policy: the gap is what the weights correct
					}
					for j, b := range s.ep.Behaviour {
						if !s.ep.trained(j) {
							continue
						}
						gap := math.Abs(float64(lp[m.at(s, j)]) - float64(b))
						if !(gap <= l.cfg.MaxLogprobGap) {
							return fail(fmt.Errorf("node %s token %d: sampler logprob %v, trainer %v: the call was not made by the parameters being trained",
								s.ep.Node, j, b, lp[m.at(s, j)]))
						}
						st.LogprobGap = max(st.LogprobGap, gap)
					}
				}
			}
			clear(m.batch.Weights)
			for _, s := range m.seqs {
				seq := seqs[s.idx]
				for j := range seq.Completion {
					if !seq.trained(j) {
						continue
					}
					k := m.at(s, j)
					cur, old, ref := float64(lp[k]), float64(oldLP[i][k]), float64(lp[k])
					if refLP != nil {
						ref = float64(refLP[i][k])
					}
					pg, kj, w, c := obj.at(seq.Adv, cur, old, ref)
					if seq.OffPolicy {
						// Truncated importance sampling: the clipped
						// surrogate of the proximal policy, reweighted to
						// the behaviour policy's samples.
						is := isW[i][k]
						pg *= is
						w = is*(w-klWeight(cur, ref, l.cfg.KLBeta)) + klWeight(cur, ref, l.cfg.KLBeta)
					}
					if c {
						clipped++
					}
					kl += kj
					st.PGLoss += seq.Coef * pg
					st.Loss += seq.Coef * (pg + l.cfg.KLBeta*kj)
					m.batch.Weights[k] = float32(seq.Coef * w)
				}
			}
			if _, err := l.ws.ForwardBackward(ctx, l.policy, l.grads, m.batch, 1); err != nil {
				return fail(fmt.Errorf("epoch %d: %w", epoch, err))
			}
		}
		st.KL += kl / float64(st.Tokens)

		var ss float64
		for _, g := range l.grads.Data {
			ss += float64(g) * float64(g)
		}
		norm := math.Sqrt(ss)
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return fail(fmt.Errorf("epoch %d: gradient norm is %v", epoch, norm))
		}
		st.GradNorm += norm
		if c := l.cfg.ClipNorm; c > 0 && norm > c {
			st.GradClip++
			scale := float32(c / norm)
			for i := range l.grads.Data {
				l.grads.Data[i] *= scale
			}
		}
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("epoch %d: %w", epoch, err))
		}
		if err := l.cfg.AdamW.Update(l.policy, l.grads, l.opt, lr); err != nil {
			return fail(fmt.Errorf("epoch %d: %w", epoch, err))
		}
		st.Updates++
	}
	e := float64(l.cfg.Epochs)
	st.Loss /= e
	st.PGLoss /= e
	st.KL /= e
	st.GradNorm /= e
	st.ClipFrac = float64(clipped) / (e * float64(st.Tokens))
	if isN > 0 {
		st.ISMean /= float64(isN)
		st.ISTrunc = float64(isTrunc) / float64(isN)
	}
	return st, nil
}

// snapshot is a copy of the parameters and optimizer state, so that a
// multi-epoch update that fails half-way can be undone.
type snapshot struct {
	params, m, v []float32
	steps        int
}

func takeSnapshot(p *nn.Params, s *train.AdamState) *snapshot {
	return &snapshot{
		params: append([]float32(nil), p.Data...),
		m:      append([]float32(nil), s.M.Data...),
		v:      append([]float32(nil), s.V.Data...),
		steps:  s.Steps,
	}
}

func (s *snapshot) restore(p *nn.Params, a *train.AdamState) {
	copy(p.Data, s.params)
	copy(a.M.Data, s.m)
	copy(a.V.Data, s.v)
	a.Steps = s.steps
}
