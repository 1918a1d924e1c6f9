package rl

import (
	"errors"
	"fmt"
	"math"

	"github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/reward"
)

// Norm names how a step's token losses are summed into one objective; see
// the package documentation for the formulas.
type Norm string

// The normalisations.
const (
	// NormAuto picks NormSeqMean for grpo and rloo, NormTokenSum for drgrpo.
	NormAuto Norm = ""
	// NormSeqMean (GRPO): the mean over a rollout's policy tokens, then the
	// mean over the step's rollouts.
	NormSeqMean Norm = "seq-mean"
	// NormTokenSum (Dr. GRPO): the sum over every policy token of the step
	// divided by the constant MaxNewTokens × rollouts per step.
	NormTokenSum Norm = "token-sum"
	// NormTokenMean (DAPO): the mean over every policy token of the step.
	NormTokenMean Norm = "token-mean"
)

// Config sets an RL run. DefaultConfig gives the documented defaults; a
// zero field means zero.
type Config struct {
	// GroupSize (G) is the number of rollouts of each item; the advantages
	// are relative to the group. Default 8.
	GroupSize int `json:"group_size"`
	// ItemsPerStep is the number of items sampled (without replacement
	// within a step) for each step. Default 4.
	ItemsPerStep int `json:"items_per_step"`
	// Steps is the number of optimizer steps of the run (PPO epochs
	// aside). Default 50.
	Steps int `json:"steps"`
	// Schedule is the learning rate over steps; its Total is usually Steps.
	// Default: 5 steps of warmup to 1e-4, cosine down to 1e-5 at Steps.
	Schedule train.Schedule `json:"schedule"`
	// AdamW are the optimizer settings. Default train.DefaultAdamW with no
	// weight decay (decay pulls a pretrained policy away from its start
	// for no reward).
	AdamW train.AdamW `json:"adamw"`
	// ClipNorm caps the global L2 norm of each update's gradient; 0
	// disables. Default 1.
	ClipNorm float64 `json:"clip_norm"`
	// ClipEps is PPO's ε: the importance ratio's gradient is cut outside
	// [1−ε, 1+ε] on the side the advantage pushes to. Default 0.2.
	ClipEps float64 `json:"clip_eps"`
	// KLBeta weighs the k3 estimate of KL(policy ‖ reference), the
	// reference being the parameters the run started from. Default 0.
	KLBeta float64 `json:"kl_beta"`
	// Estimator is the group-relative advantage: "grpo", "drgrpo" or
	// "rloo". Default grpo.
	Estimator reward.Estimator `json:"estimator"`
	// Norm is how token losses add up; "" picks by estimator.
	Norm Norm `json:"norm"`
	// Epochs is the number of PPO epochs: optimizer steps on each step's rollouts.
	// The importance ratio is exactly 1 on the first. Default 1.
	Epochs int `json:"epochs"`
	// MaxNewTokens caps each policy call's completion and is NormTokenSum's constant. Default 64.
	// The policy agent's delegate.Sampler enforces it.
	MaxNewTokens int `json:"max_new_tokens"`
	// Temperature is the policy's sampling temperature, which the policy agent's delegate.Sampler sets.
	// Default 1.
	// The sampler's and the trainer's logprobs are both the untempered policy's, since nn has no tempered loss.
	// Only at 1 is the sampled distribution the one the gradient is taken of.
	// At another temperature the update is off-policy by that difference.
	Temperature float64 `json:"temperature"`
	// PolicyRole is the trace role whose calls are trained, e.g. "strong",
	// "delegator" or "leader". Required.
	PolicyRole string `json:"policy_role"`
	// Seed fixes an in-process source's item sampling by Items and every rollout's seed by RolloutSeed.
	// Default 1.
	Seed uint64 `json:"seed"`
	// OutDir receives metrics.jsonl and checkpoint/. Required.
	OutDir string `json:"out_dir"`
	// CheckpointEvery is the number of steps between checkpoints. Default 10.
	// One is also written at the end and when the run is cancelled.
	CheckpointEvery int `json:"checkpoint_every"`
	// Concurrency bounds an in-process source's rollouts in flight at
	// once. Default 16.
	Concurrency int `json:"concurrency"`
	// MicroBatchTokens bounds B×T of one forward-backward pass. Default 4096.
	MicroBatchTokens int `json:"micro_batch_tokens"`
	// MaxLogprobGap is the largest |sampler logprob − trainer logprob| accepted before the first update.
	// A larger gap means the traced calls were not made by the parameters being trained.
	// Default 0.05.
	MaxLogprobGap float64 `json:"max_logprob_gap"`
	// LogprobCheckEvery runs that check on the first step and every n-th. Default 1.
	// With one epoch and no KL term the ratio is 1 and the update needs no logprobs of its own.
	// A step without the check then skips a forward pass, about a third of the update's work.
	LogprobCheckEvery int `json:"logprob_check_every"`
	// MaxImportanceWeight caps the importance weight of an off-policy token: truncated importance sampling.
	// The weight is exp(l_prox − l_behaviour).
	// l_behaviour is the sampler's logprob, from an older policy or another engine.
	// l_prox is the trainer's before the update.
	// At least 1. Default 2.
	MaxImportanceWeight float64 `json:"max_importance_weight,omitempty"`
	// EntropyBonus (c) adds c times each trained token's surprisal to its advantage.
	// The surprisal is −logprob under the sampler (Episode.Behaviour).
	// Its policy gradient is, in expectation, c times the gradient of the entropy of the token's distribution.
	// It keeps rare choices from collapsing before their advantage is learned.
	// Default 0: no bonus, and the update is the same as without the field.
	EntropyBonus float64 `json:"entropy_bonus,omitempty"`
}

// DefaultConfig returns the defaults noted on each field; PolicyRole and
// OutDir are left for the caller.
func DefaultConfig() Config {
	a := train.DefaultAdamW()
	a.WeightDecay = 0
	return Config{
		GroupSize:        8,
		ItemsPerStep:     4,
		Steps:            50,
		Schedule:         train.Schedule{Warmup: 5, Total: 50, MaxLR: 1e-4, MinLR: 1e-5},
		AdamW:            a,
		ClipNorm:         1,
		ClipEps:          0.2,
		Estimator:        reward.GRPO,
		Epochs:           1,
		MaxNewTokens:     64,
		Temperature:      1,
		Seed:             1,
		CheckpointEvery:  10,
		Concurrency:      16,
		MicroBatchTokens: 4096,
		MaxLogprobGap:    0.05,

		LogprobCheckEvery:   1,
		MaxImportanceWeight: 2,
	}
}

// norm resolves NormAuto.
func (c Config) norm() Norm {
	if c.Norm != NormAuto {
		return c.Norm
	}
	if c.Estimator == reward.DrGRPO {
		return NormTokenSum
	}
	return NormSeqMean
}

// Validate checks every field and the relations between them, naming the
// key of each problem.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if c.GroupSize < 1 {
		bad("group_size", "must be at least 1, got %d", c.GroupSize)
	}
	if c.Estimator == reward.RLOO && c.GroupSize < 2 {
		bad("group_size", "rloo needs at least 2, got %d", c.GroupSize)
	}
	if c.ItemsPerStep < 1 {
		bad("items_per_step", "must be at least 1, got %d", c.ItemsPerStep)
	}
	if c.Steps < 1 {
		bad("steps", "must be at least 1, got %d", c.Steps)
	}
	if err := c.Schedule.Validate(); err != nil {
		bad("schedule", "%v", err)
	}
	if err := c.AdamW.Validate(); err != nil {
		bad("adamw", "%v", err)
	}
	if !(c.ClipNorm >= 0) || !finite(c.ClipNorm) {
		bad("clip_norm", "must be non-negative and finite, got %v", c.ClipNorm)
	}
	if !(c.ClipEps > 0 && c.ClipEps < 1) {
		bad("clip_eps", "must be in (0, 1), got %v", c.ClipEps)
	}
	if !(c.KLBeta >= 0) || !finite(c.KLBeta) {
		bad("kl_beta", "must be non-negative and finite, got %v", c.KLBeta)
	}
	if _, err := reward.ParseEstimator(string(c.Estimator)); err != nil {
		bad("estimator", "%v", err)
	}
	switch c.Norm {
	case NormAuto, NormSeqMean, NormTokenSum, NormTokenMean:
	default:
		bad("norm", "%q: want %q, %q, %q or \"\" (by estimator)", c.Norm, NormSeqMean, NormTokenSum, NormTokenMean)
	}
	if c.Epochs < 1 {
		bad("epochs", "must be at least 1, got %d", c.Epochs)
	}
	if c.MaxNewTokens < 1 {
		bad("max_new_tokens", "must be at least 1, got %d", c.MaxNewTokens)
	}
	if !(c.Temperature > 0) || !finite(c.Temperature) {
		bad("temperature", "must be positive and finite, got %v (greedy sampling has no policy gradient)", c.Temperature)
	}
	if c.PolicyRole == "" {
		bad("policy_role", "required: the trace role whose calls are trained")
	}
	if c.OutDir == "" {
		bad("out_dir", "required: where metrics and checkpoints go")
	}
	if c.CheckpointEvery < 1 {
		bad("checkpoint_every", "must be at least 1, got %d", c.CheckpointEvery)
	}
	if c.Concurrency < 1 {
		bad("concurrency", "must be at least 1, got %d", c.Concurrency)
	}
	if c.MicroBatchTokens < 1 {
		bad("micro_batch_tokens", "must be at least 1, got %d", c.MicroBatchTokens)
	}
	if !(c.MaxImportanceWeight >= 1) || !finite(c.MaxImportanceWeight) {
		bad("max_importance_weight", "must be at least 1 and finite, got %v", c.MaxImportanceWeight)
	}
	if !(c.MaxLogprobGap > 0) || !finite(c.MaxLogprobGap) {
		bad("max_logprob_gap", "must be positive and finite, got %v", c.MaxLogprobGap)
	}
	if !(c.EntropyBonus >= 0) || !finite(c.EntropyBonus) {
		bad("entropy_bonus", "must be non-negative and finite, got %v", c.EntropyBonus)
	}
	if c.LogprobCheckEvery < 1 {
		bad("logprob_check_every", "must be at least 1, got %d", c.LogprobCheckEvery)
	}
	if len(errs) > 0 {
		return fmt.Errorf("rl config: %w", errors.Join(errs...))
	}
	return nil
}
