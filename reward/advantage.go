package reward

import (
	"fmt"
	"math"
)

// Estimator names a group-relative advantage estimator.
type Estimator string

// The estimators.
const (
	// GRPO: A_i = (r_i - mean) / (std + GRPOEps), with the population
	// standard deviation (divided by G, not G-1).
	GRPO Estimator = "grpo"
	// DrGRPO: A_i = r_i - mean, no division by the standard deviation.
	DrGRPO Estimator = "drgrpo"
	// RLOO: A_i = r_i - mean of the other G-1 rewards, which equals
	// G/(G-1) × (r_i - mean). Needs G >= 2.
	RLOO Estimator = "rloo"
)

// GRPOEps keeps GRPO's division finite for near-equal rewards.
const GRPOEps = 1e-4

// ParseEstimator checks a name from a flag or config file.
func ParseEstimator(s string) (Estimator, error) {
	switch e := Estimator(s); e {
	case GRPO, DrGRPO, RLOO:
		return e, nil
	}
	return "", fmt.Errorf("estimator %q: want %q, %q or %q", s, GRPO, DrGRPO, RLOO)
}

// NonFiniteError reports a reward that is NaN or infinite.
type NonFiniteError struct {
	Index int
	Value float64
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("reward %d is %v, want a finite number", e.Index, e.Value)
}

// Group is the advantages of one group of rollouts of the same item.
type Group struct {
	Estimator  Estimator `json:"estimator"`
	Rewards    []float64 `json:"rewards"`
	Advantages []float64 `json:"advantages"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"` // population standard deviation
	// Degenerate reports a group whose rewards are all equal, or a group of one.
	// Its advantages are all zero and it carries no learning signal.
	// It is reported, not dropped: callers count it.
	Degenerate bool `json:"degenerate"`
}

// NewGroup computes the advantages of rewards under est. An empty group,
// an unknown estimator, a non-finite reward (a *NonFiniteError naming its
// index) and RLOO on fewer than two rewards are errors.
func NewGroup(est Estimator, rewards []float64) (Group, error) {
	if _, err := ParseEstimator(string(est)); err != nil {
		return Group{}, fmt.Errorf("advantages: %w", err)
	}
	g := len(rewards)
	if g == 0 {
		return Group{}, fmt.Errorf("advantages: empty group")
	}
	if est == RLOO && g < 2 {
		return Group{}, fmt.Errorf("advantages: rloo needs at least 2 rewards, got %d", g)
	}
	for i, r := range rewards {
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return Group{}, fmt.Errorf("advantages: %w", &NonFiniteError{Index: i, Value: r})
		}
	}
	out := Group{Estimator: est, Rewards: append([]float64(nil), rewards...), Advantages: make([]float64, g)}
	out.Degenerate = true
	for _, r := range rewards[1:] {
		if r != rewards[0] {
			out.Degenerate = false
			break
		}
	}
	if out.Degenerate {
		out.Mean = rewards[0]
		return out, nil
	}

	// The corrected two-pass algorithm: two passes, then a correction.
	// The deviations then sum to zero up to rounding in the last step.
	var sum float64
	for _, r := range rewards {
		sum += r
	}
	mean := sum / float64(g)
	dev := out.Advantages
	var resid float64
	for i, r := range rewards {
		dev[i] = r - mean
		resid += dev[i]
	}
	resid /= float64(g)
	var ss float64
	for i := range dev {
		dev[i] -= resid
		ss += dev[i] * dev[i]
	}
	out.Mean = mean + resid
	out.Std = math.Sqrt(ss / float64(g))

	switch est {
	case GRPO:
		for i := range dev {
			dev[i] /= out.Std + GRPOEps
		}
	case RLOO:
		scale := float64(g) / float64(g-1)
		for i := range dev {
			dev[i] *= scale
		}
	}
	return out, nil
}

// Advantages returns the advantages of rewards under est; see NewGroup,
// which also reports whether the group is degenerate.
func Advantages(est Estimator, rewards []float64) ([]float64, error) {
	g, err := NewGroup(est, rewards)
	if err != nil {
		return nil, err
	}
	return g.Advantages, nil
}
