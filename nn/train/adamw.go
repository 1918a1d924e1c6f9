package train

import (
	"fmt"
	"math"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter). For each
// parameter θ with gradient g, at step t (1-based) and learning rate lr:
//
//	m = β1·m + (1−β1)·g,   v = β2·v + (1−β2)·g²
//	θ -= lr·( m/(1−β1ᵗ) / (sqrt(v/(1−β2ᵗ)) + ε) + λ·θ )
//
// The decay λ applies to the matrices: the embedding, the attention and MLP
// projections, and an untied output head. It does NOT apply to the RMSNorm
// gains, which decay would pull toward zero instead of their natural scale
// of one.
type AdamW struct {
	Beta1, Beta2 float64 // moment decay rates, 0.9 and 0.95 by default
	Eps          float64 // denominator floor, 1e-8 by default
	WeightDecay  float64 // λ, 0.1 by default
}

// DefaultAdamW returns the settings of most small GPT and Llama runs.
func DefaultAdamW() AdamW { return AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1} }

// Validate checks the ranges of the settings.
func (a AdamW) Validate() error {
	switch {
	case !(a.Beta1 >= 0 && a.Beta1 < 1):
		return fmt.Errorf("adamw: beta1 must be in [0,1), got %v", a.Beta1)
	case !(a.Beta2 >= 0 && a.Beta2 < 1):
		return fmt.Errorf("adamw: beta2 must be in [0,1), got %v", a.Beta2)
	case !(a.Eps > 0) || math.IsInf(a.Eps, 0):
		return fmt.Errorf("adamw: eps must be positive, got %v", a.Eps)
	case !(a.WeightDecay >= 0) || math.IsInf(a.WeightDecay, 0):
		return fmt.Errorf("adamw: weight decay must be non-negative, got %v", a.WeightDecay)
	}
	return nil
}

// AdamState is the optimizer's memory: first and second moments laid out
// like the parameters, and the number of updates taken.
type AdamState struct {
	M, V  *nn.Params
	Steps int
	decay []span // ranges of Data that take weight decay
}

// span is a half-open range [Lo, Hi) of an nn.Params' Data.
type span struct{ Lo, Hi int }

// NewAdamState returns zero moments for models of config c.
func NewAdamState(c nn.Config) (*AdamState, error) {
	m, err := nn.Alloc(c)
	if err != nil {
		return nil, err
	}
	v, err := nn.Alloc(c)
	if err != nil {
		return nil, err
	}
	return &AdamState{M: m, V: v, decay: decaySpans(c)}, nil
}

// decaySpans finds the ranges of Data holding matrices.
// It marks the norm gains on a probe laid out by nn.NewParams, so it follows
// the layout wherever it changes.
func decaySpans(c nn.Config) []span {
	probe, err := nn.Alloc(c)
	if err != nil {
		return nil
	}
	for i := range probe.Data {
		probe.Data[i] = 1
	}
	clear(probe.FinalNorm)
	for _, l := range probe.Layers {
		clear(l.AttnNorm)
		clear(l.FFNNorm)
	}
	var spans []span
	for i := 0; i < len(probe.Data); {
		if probe.Data[i] == 0 {
			i++
			continue
		}
		j := i
		for j < len(probe.Data) && probe.Data[j] != 0 {
			j++
		}
		spans = append(spans, span{i, j})
		i = j
	}
	return spans
}

// Update takes one AdamW step on p with gradients g at learning rate lr,
// advancing s. p, g and s must share one config.
func (a AdamW) Update(p, g *nn.Params, s *AdamState, lr float64) error {
	if p.Config != g.Config || p.Config != s.M.Config {
		return fmt.Errorf("adamw: params, gradients and moments have different configs")
	}
	if !(lr >= 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("adamw: learning rate must be non-negative and finite, got %v", lr)
	}
	s.Steps++
	t := float64(s.Steps)
	st := kernel.AdamWStep{
		B1: float32(a.Beta1), B2: float32(a.Beta2),
		C1: float32(1 / (1 - math.Pow(a.Beta1, t))), // bias corrections
		C2: float32(1 / (1 - math.Pow(a.Beta2, t))),
		LR: float32(lr), Eps: float32(a.Eps),
	}
	shrink := float32(1 - lr*a.WeightDecay)
	theta, grad, m, v := p.Data, g.Data, s.M.Data, s.V.Data
	update := func(lo, hi int, decay float32) {
		st := st
		st.Decay = decay
		parallel(hi-lo, 1<<14, func(i0, i1 int) {
			kernel.AdamW(theta[lo+i0:lo+i1], grad[lo+i0:lo+i1], m[lo+i0:lo+i1], v[lo+i0:lo+i1], st)
		})
	}
	prev := 0
	for _, sp := range s.decay {
		update(prev, sp.Lo, 1) // norms: no decay
		update(sp.Lo, sp.Hi, shrink)
		prev = sp.Hi
	}
	update(prev, len(theta), 1)
	return nil
}
