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
	Adv float64 // the rollout's advantage, the same for every token
	// TokenAdv, when not nil, holds each completion token's advantage in place of Adv.
	TokenAdv []float64
	Coef     float64 // normalisation factor of each of its tokens
	// OffPolicy marks a sequence sampled by a policy other than the parameters before the update.
	// Its tokens are weighted by their truncated importance weights.
	OffPolicy bool
}

// adv is the advantage of completion token j.
func (s *trainSeq) adv(j int) float64 {
	if s.TokenAdv != nil {
		return s.TokenAdv[j]
	}
	return s.Adv
}

// updateStats describe the gradient phase of one step.
// GradNorm, Loss, PGLoss, KL and ClipFrac are averaged over its epochs.
// LogprobGap is taken before the first update.
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

// learner holds what the gradient phase needs: the policy, its frozen reference, the optimizer and scratch.
// The policy is shared with the model that samples rollouts.
// Not safe for concurrent use.
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
	u := &updatePass{l: l, seqs: seqs, obj: objective{eps: l.cfg.ClipEps, beta: l.cfg.KLBeta}}
	eps := make([]Episode, len(seqs))
	for i := range seqs {
		eps[i] = seqs[i].Episode
		u.st.Tokens += seqs[i].Generated()
		u.offPolicy = u.offPolicy || seqs[i].OffPolicy
	}
	if u.st.Tokens == 0 {
		return u.st, nil
	}
	u.mbs = pack(eps, l.cfg.MicroBatchTokens)
	if err := u.referenceLogprobs(ctx); err != nil {
		return u.st, err
	}
	var snap *snapshot
	if l.cfg.Epochs > 1 {
		snap = takeSnapshot(l.policy, l.opt)
	}
	// With one epoch, no reference and no off-policy sequence the ratio is
	// 1 at every token: the logprobs change nothing but the check.
	fast := !check && l.cfg.Epochs == 1 && l.ref == nil && !u.offPolicy
	u.isW = make([][]float64, len(u.mbs))
	u.oldLP = make([][]float32, len(u.mbs))
	for epoch := 1; epoch <= l.cfg.Epochs; epoch++ {
		if err := u.epoch(ctx, epoch, fast, check, lr); err != nil {
			if snap != nil && u.st.Updates > 0 {
				snap.restore(l.policy, l.opt)
			}
			return u.st, fmt.Errorf("epoch %d: %w", epoch, err)
		}
	}
	return u.stats(), nil
}

// updatePass is the state of one call of update across its epochs.
type updatePass struct {
	l         *learner
	seqs      []trainSeq
	mbs       []*microBatch
	obj       objective
	offPolicy bool
	st        updateStats
	refLP     [][]float32 // the reference's logprobs per micro-batch; nil without one
	oldLP     [][]float32 // the policy's logprobs in the first epoch
	// The importance weights of the off-policy tokens are fixed in the first epoch.
	// They come from the logprobs before any update: the proximal policy.
	isW          [][]float64
	isN, isTrunc int
	clipped      int
}

// referenceLogprobs computes the frozen reference's logprobs, when there
// is one.
func (u *updatePass) referenceLogprobs(ctx context.Context) error {
	if u.l.ref == nil {
		return nil
	}
	u.refLP = make([][]float32, len(u.mbs))
	for i, m := range u.mbs {
		lp, err := u.l.ws.TokenLogprobs(ctx, u.l.ref, m.batch)
		if err != nil {
			return fmt.Errorf("reference logprobs: %w", err)
		}
		u.refLP[i] = lp
	}
	return nil
}

// epoch accumulates the gradient of every micro-batch and takes one
// optimizer step.
func (u *updatePass) epoch(ctx context.Context, epoch int, fast, check bool, lr float64) error {
	l := u.l
	clear(l.grads.Data)
	var kl float64
	for i, m := range u.mbs {
		if fast {
			u.fastWeights(m)
		} else {
			lp, err := l.ws.TokenLogprobs(ctx, l.policy, m.batch)
			if err != nil {
				return err
			}
			if epoch == 1 {
				u.oldLP[i] = lp
				if u.offPolicy {
					u.importanceWeights(i, m, lp)
				}
				if check {
					if err := u.checkLogprobs(m, lp); err != nil {
						return err
					}
				}
			}
			kl += u.surrogateWeights(i, m, lp)
		}
		if _, err := l.ws.ForwardBackward(ctx, l.policy, l.grads, m.batch, 1); err != nil {
			return err
		}
	}
	u.st.KL += kl / float64(u.st.Tokens)
	return u.step(ctx, lr)
}

// fastWeights sets the weights of a micro-batch when every ratio is 1:
// the advantages times the coefficients.
func (u *updatePass) fastWeights(m *microBatch) {
	clear(m.batch.Weights)
	for _, s := range m.seqs {
		seq := u.seqs[s.idx]
		for j := range seq.Completion {
			if !seq.trained(j) {
				continue
			}
			pg, _, w, _ := u.obj.at(seq.adv(j), 0, 0, 0)
			u.st.PGLoss += seq.Coef * pg
			u.st.Loss += seq.Coef * pg
			m.batch.Weights[m.at(s, j)] = float32(seq.Coef * w)
		}
	}
}

// importanceWeights fixes the truncated importance weights of the
// off-policy tokens of micro-batch i from the logprobs lp.
func (u *updatePass) importanceWeights(i int, m *microBatch, lp []float32) {
	st, maxIS := &u.st, u.l.cfg.MaxImportanceWeight
	u.isW[i] = make([]float64, len(lp))
	for _, s := range m.seqs {
		seq := u.seqs[s.idx]
		if !seq.OffPolicy {
			continue
		}
		for j, b := range seq.Behaviour {
			if !seq.trained(j) {
				continue
			}
			k := m.at(s, j)
			w := math.Exp(float64(lp[k]) - float64(b))
			if u.isN == 0 {
				st.ISMin, st.ISMax = w, w
			}
			u.isN++
			st.ISMean += w
			st.ISMin, st.ISMax = min(st.ISMin, w), max(st.ISMax, w)
			if w > maxIS {
				u.isTrunc++
				w = maxIS
			}
			u.isW[i][k] = w
		}
	}
}

// checkLogprobs checks the sampler's logprobs of the on-policy tokens
// against the trainer's, lp.
func (u *updatePass) checkLogprobs(m *microBatch, lp []float32) error {
	for _, s := range m.seqs {
		if u.seqs[s.idx].OffPolicy {
			continue // sampled by another policy: the gap is what the weights correct
		}
		for j, b := range s.ep.Behaviour {
			if !s.ep.trained(j) {
				continue
			}
			gap := math.Abs(float64(lp[m.at(s, j)]) - float64(b))
			if !(gap <= u.l.cfg.MaxLogprobGap) {
				return fmt.Errorf("node %s token %d: sampler logprob %v, trainer %v: the call was not made by the parameters being trained",
					s.ep.Node, j, b, lp[m.at(s, j)])
			}
			u.st.LogprobGap = max(u.st.LogprobGap, gap)
		}
	}
	return nil
}

// surrogateWeights sets the weights of micro-batch i from the clipped surrogate at logprobs lp.
// It returns the batch's KL sum.
func (u *updatePass) surrogateWeights(i int, m *microBatch, lp []float32) (kl float64) {
	beta := u.l.cfg.KLBeta
	clear(m.batch.Weights)
	for _, s := range m.seqs {
		seq := u.seqs[s.idx]
		for j := range seq.Completion {
			if !seq.trained(j) {
				continue
			}
			k := m.at(s, j)
			cur, old, ref := float64(lp[k]), float64(u.oldLP[i][k]), float64(lp[k])
			if u.refLP != nil {
				ref = float64(u.refLP[i][k])
			}
			pg, kj, w, c := u.obj.at(seq.adv(j), cur, old, ref)
			if seq.OffPolicy {
				// Truncated importance sampling: the clipped surrogate of
				// the proximal policy, reweighted to the behaviour
				// policy's samples.
				is := u.isW[i][k]
				pg *= is
				w = is*(w-klWeight(cur, ref, beta)) + klWeight(cur, ref, beta)
			}
			if c {
				u.clipped++
			}
			kl += kj
			u.st.PGLoss += seq.Coef * pg
			u.st.Loss += seq.Coef * (pg + beta*kj)
			m.batch.Weights[k] = float32(seq.Coef * w)
		}
	}
	return kl
}

// step clips the accumulated gradient to ClipNorm and takes one AdamW
// step.
func (u *updatePass) step(ctx context.Context, lr float64) error {
	l := u.l
	var ss float64
	for _, g := range l.grads.Data {
		ss += float64(g) * float64(g)
	}
	norm := math.Sqrt(ss)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return fmt.Errorf("gradient norm is %v", norm)
	}
	u.st.GradNorm += norm
	if c := l.cfg.ClipNorm; c > 0 && norm > c {
		u.st.GradClip++
		scale := float32(c / norm)
		for i := range l.grads.Data {
			l.grads.Data[i] *= scale
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := l.cfg.AdamW.Update(l.policy, l.grads, l.opt, lr); err != nil {
		return err
	}
	u.st.Updates++
	return nil
}

// stats averages the sums over the epochs.
func (u *updatePass) stats() updateStats {
	st := u.st
	e := float64(u.l.cfg.Epochs)
	st.Loss /= e
	st.PGLoss /= e
	st.KL /= e
	st.GradNorm /= e
	st.ClipFrac = float64(u.clipped) / (e * float64(st.Tokens))
	if u.isN > 0 {
		st.ISMean /= float64(u.isN)
		st.ISTrunc = float64(u.isTrunc) / float64(u.isN)
	}
	return st
}

// snapshot is a copy of the parameters and optimizer state.
// A multi-epoch update that fails half-way can then be undone.
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
