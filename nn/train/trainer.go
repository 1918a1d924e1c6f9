package train

import (
	"context"
	"fmt"
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// Config sets a Trainer's optimizer, learning-rate schedule and
// gradient clipping.
type Config struct {
	AdamW    AdamW
	Schedule Schedule
	// ClipNorm caps the global L2 norm of the step's gradient: a larger
	// gradient is scaled down to exactly ClipNorm. 0 disables clipping.
	ClipNorm float64
}

// Validate checks every part of the config.
func (c Config) Validate() error {
	if err := c.AdamW.Validate(); err != nil {
		return fmt.Errorf("train config: %w", err)
	}
	if err := c.Schedule.Validate(); err != nil {
		return fmt.Errorf("train config: %w", err)
	}
	if !(c.ClipNorm >= 0) || math.IsInf(c.ClipNorm, 0) {
		return fmt.Errorf("train config: clip norm must be non-negative and finite, got %v", c.ClipNorm)
	}
	return nil
}

// StepStats describe one optimizer step.
type StepStats struct {
	Step     int     // steps taken so far, this one included
	LR       float64 // learning rate used
	Loss     float64 // Σ w·(−log p) / Tokens over all micro-batches
	GradNorm float64 // global L2 norm of the gradient before clipping
	Clipped  bool    // whether the gradient was scaled down to ClipNorm
	Tokens   int     // positions with a non-zero weight, the loss's normalizer
}

// Trainer updates a model's parameters in place: gradient accumulation over
// micro-batches, global-norm clipping, AdamW on the schedule's learning
// rate. It is not safe for concurrent use.
type Trainer struct {
	Params *nn.Params // the weights being trained, updated in place by Step
	Grads  *nn.Params // the last step's gradient (after clipping)
	Opt    *AdamState // moments and step count
	cfg    Config     //
	ws     *Workspace
}

// NewTrainer returns a trainer that updates p, with zero moments.
func NewTrainer(p *nn.Params, cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ws, err := NewWorkspace(p.Config)
	if err != nil {
		return nil, fmt.Errorf("new trainer: %w", err)
	}
	if err := ws.checkParams(p, nil); err != nil {
		return nil, fmt.Errorf("new trainer: %w", err)
	}
	g, err := nn.Alloc(p.Config)
	if err != nil {
		return nil, fmt.Errorf("new trainer: %w", err)
	}
	opt, err := NewAdamState(p.Config)
	if err != nil {
		return nil, fmt.Errorf("new trainer: %w", err)
	}
	return &Trainer{Params: p, Grads: g, Opt: opt, cfg: cfg, ws: ws}, nil
}

// Step takes one optimizer step on the micro-batches together.
// Their gradients add up, each token's loss counted once, normalized by the
// number of non-zero-weight tokens in all of them. So weights of one give
// the mean cross-entropy; callers wanting another normalization scale the
// weights. On any error, including a cancelled ctx or a non-finite
// gradient, the parameters and moments are left as they were.
func (t *Trainer) Step(ctx context.Context, micro []Batch) (StepStats, error) {
	st := StepStats{Step: t.Opt.Steps + 1}
	if len(micro) == 0 {
		return st, fmt.Errorf("train step %d: no micro-batches", st.Step)
	}
	for i, b := range micro {
		if err := b.validate(t.Params.Config); err != nil {
			return st, fmt.Errorf("train step %d: micro-batch %d: %w", st.Step, i, err)
		}
		if b.Weights == nil {
			st.Tokens += b.B * b.T
			continue
		}
		for _, w := range b.Weights {
			if w != 0 {
				st.Tokens++
			}
		}
	}
	if st.Tokens == 0 {
		return st, fmt.Errorf("train step %d: every token weight is zero", st.Step)
	}
	clear(t.Grads.Data)
	for i, b := range micro {
		loss, err := t.ws.ForwardBackward(ctx, t.Params, t.Grads, b, float64(st.Tokens))
		if err != nil {
			return st, fmt.Errorf("train step %d: micro-batch %d: %w", st.Step, i, err)
		}
		st.Loss += loss
	}

	var ss float64
	for _, g := range t.Grads.Data {
		ss += float64(g) * float64(g)
	}
	st.GradNorm = math.Sqrt(ss)
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return st, fmt.Errorf("train step %d: gradient norm is %v; parameters left unchanged", st.Step, st.GradNorm)
	}
	if t.cfg.ClipNorm > 0 && st.GradNorm > t.cfg.ClipNorm {
		st.Clipped = true
		kernel.Scale(t.Grads.Data, float32(t.cfg.ClipNorm/st.GradNorm))
	}
	st.LR = t.cfg.Schedule.LR(t.Opt.Steps)
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("train step %d: %w", st.Step, err)
	}
	if err := t.cfg.AdamW.Update(t.Params, t.Grads, t.Opt, st.LR); err != nil {
		return st, fmt.Errorf("train step %d: %w", st.Step, err)
	}
	return st, nil
}

// TokenLogprobs returns log p(target) at every position of b under the
// current parameters; see Workspace.TokenLogprobs.
func (t *Trainer) TokenLogprobs(ctx context.Context, b Batch) ([]float32, error) {
	return t.ws.TokenLogprobs(ctx, t.Params, b)
}
