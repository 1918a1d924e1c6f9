// Package reward turns the outcome of a rollout into a scalar reward, and a group of rewards into advantages.
// Parity reproduces the reference environment's buckets exactly, for comparison with its published behaviour.
// Graded, the default, is a continuous quality signal minus a cost term, with format penalties on the same scale.
// A reward without basis, such as after a failed call or a missing verdict, is NaN.
// Advantages rejects NaN by index, so it cannot slip into training unnoticed:
// callers count such rollouts as failed before computing advantages.
package reward

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/delegatelab/delegate/judge"
)

// Stage names where a rollout's own format failure happened.
type Stage string

// The stages of a delegation path. A failure with no stage counts as a
// plan failure.
const (
	StagePlan   Stage = "plan"   // the decomposition (the reference's stage 1)
	StageAnswer Stage = "answer" // the final answer (the reference's stage 3)
)

// Outcome is what a rollout produced, as far as rewards care.
type Outcome struct {
	// FormatOK reports whether the policy's outputs had the required
	// format; when false, FailedStage says where and FormatFailure why.
	FormatOK      bool   `json:"format_ok"`
	FormatFailure string `json:"format_failure,omitempty"`
	FailedStage   Stage  `json:"failed_stage,omitempty"`
	// BaselineFailure says why the shared baseline answer failed its
	// format; "" when it did not.
	BaselineFailure string `json:"baseline_failure,omitempty"`
	// Correct is set when the dataset has reference answers.
	Correct *bool          `json:"correct,omitempty"`
	Verdict *judge.Verdict `json:"verdict,omitempty"`
	// Truncated reports that a policy output was cut at max_tokens.
	Truncated bool `json:"truncated,omitempty"`
	// Error is a failure that left the rollout without a result.
	Error  string  `json:"error,omitempty"`
	Cost   float64 `json:"cost"`   // dollars, all roles of the rollout
	Tokens int     `json:"tokens"` // the delegator's (policy's) tokens
	Calls  int     `json:"calls"`  // sub-agent calls

	// Latency is the rollout's wall time. CriticalPath is the model time
	// along its slowest chain of calls: of calls that ran side by side,
	// only the slowest counts (delegate.CriticalPath).
	Latency      time.Duration `json:"latency_ns,omitempty"`
	CriticalPath time.Duration `json:"critical_path_ns,omitempty"`
	// AllCalls counts every call of the rollout, the policy's included;
	// CriticalCalls counts those on the critical path.
	AllCalls      int `json:"all_calls,omitempty"`
	CriticalCalls int `json:"critical_calls,omitempty"`
	// ModelCalls counts the rollout's calls per model name.
	ModelCalls map[string]int `json:"model_calls,omitempty"`
	// Step is the trainer step the rollout was sampled for; 0 outside
	// training. CriticalPath anneals its bonus over it.
	Step int `json:"step,omitempty"`
}

// formatFailed reports whether the policy's own output fixes the reward.
// It does after a format failure or a truncated output.
// The reference never detected truncation; we do not reproduce that.
func (o Outcome) formatFailed() bool { return !o.FormatOK || o.Truncated }

// NeedsJudge reports whether a judge call can change o's reward.
// It cannot when the rollout failed, a format failure or truncation fixed the reward,
// or the dataset's answer decides it.
// A baseline format failure does not stop the judge.
// The baseline is shared by the group, so under Graded it shifts every member alike.
func NeedsJudge(o Outcome) bool {
	return o.Error == "" && !o.formatFailed() && o.Correct == nil
}

// Parity is the reference environment's reward, bucket for bucket.
// The buckets are:
//
//	plan format failure (or one with no stage)        -10
//	judge verdict unparseable                         -10
//	answer-stage or baseline format failure             0
//	diff < -20: -3; -20 <= diff < -10: -2; -10 <= diff < 0: -1
//	diff == 0: +0.1
//	0 < diff <= 10: +1; 10 < diff <= 20: +2; diff > 20: +3
//
// with diff = candidate score - baseline score, in that order of
// precedence. Deliberate departures, both fixes of listed defects: a
// truncated output counts as a format failure of its stage, and since no
// judge is called once the format has fixed the reward, an answer-stage
// failure gets 0 even where the reference's judge would have failed and
// given -10. Parity is NaN when o.Error is set or a reward needs a
// verdict that o lacks.
func Parity(o Outcome) float64 {
	if o.Error != "" {
		return math.NaN()
	}
	if o.formatFailed() && o.FailedStage != StageAnswer {
		return -10
	}
	if o.Verdict != nil && o.Verdict.Unparseable {
		return -10
	}
	if o.formatFailed() || o.BaselineFailure != "" {
		return 0
	}
	if o.Verdict == nil {
		return math.NaN()
	}
	return parityBucket(o.Verdict.Diff)
}

func parityBucket(diff float64) float64 {
	switch {
	case math.IsNaN(diff):
		return math.NaN()
	case diff < -20:
		return -3
	case diff < -10:
		return -2
	case diff < 0:
		return -1
	case diff > 20:
		return 3
	case diff > 10:
		return 2
	case diff > 0:
		return 1
	}
	return 0.1
}

// Units of the cost term.
const (
	CostDollars = "dollars" // Outcome.Cost
	CostTokens  = "tokens"  // Outcome.Tokens
)

// Graded is the default reward: quality minus cost.
//
//	quality = Diff/100 in [-1, 1] from the judge's verdict, or 1/0 for a
//	          correct/incorrect answer where the dataset has answers
//	cost    = Lambda × (Cost or Tokens, per CostUnit) + Mu × Calls
//	reward  = quality - cost, or FormatPenalty - cost after a format
//	          failure or truncation (no judge call needed)
//
// It is NaN when o.Error is set or the verdict it needs is missing or
// unparseable: a judge failure is not the policy's doing.
//
// A Gate above 0 makes it success-gated, lexicographic in quality:
//
//	reward = quality - min(cost, Gate)   when quality > 0
//	         -Gate                       when quality <= 0 (wrong)
//	         FormatPenalty - Gate        after a format failure or truncation
//
// Any success then scores above any failure, however cheap the failure.
// Among successes the cheaper scores higher, up to a cost of Gate. It is
// xRouter's success-gated cost, shifted by Gate and scaled by 1+Gate.
type Graded struct {
	Lambda   float64 `json:"lambda" yaml:"lambda"`
	CostUnit string  `json:"cost_unit" yaml:"cost_unit"`
	// Mu is charged per sub-agent call.
	Mu float64 `json:"mu" yaml:"mu"`
	// FormatPenalty is on the reward's own scale.
	// -1 sits at the bottom of the judge's [-1, 1] and below a wrong answer's 0.
	FormatPenalty float64 `json:"format_penalty" yaml:"format_penalty"`
	// Gate, when above 0, caps the cost a success pays and fixes a
	// failure's reward at -Gate. 0, the default, is the plain reward.
	Gate float64 `json:"gate,omitempty" yaml:"gate,omitempty"`
}

// DefaultGraded charges 1e-5 per delegator token and 0.01 per sub-agent call.
// Quality dominates: a rollout of 2,000 tokens and 4 calls pays 0.06 out of a range of 2.
// A needless call still costs something. A format failure gets -1.
func DefaultGraded() Graded {
	return Graded{Lambda: 1e-5, CostUnit: CostTokens, Mu: 0.01, FormatPenalty: -1}
}

// Validate checks every field, naming each problem.
func (g Graded) Validate() error {
	var errs []error
	if !finite(g.Lambda) || g.Lambda < 0 {
		errs = append(errs, fmt.Errorf("lambda %v: want a finite number >= 0", g.Lambda))
	}
	if g.CostUnit != CostDollars && g.CostUnit != CostTokens {
		errs = append(errs, fmt.Errorf("cost_unit %q: want %q or %q", g.CostUnit, CostDollars, CostTokens))
	}
	if !finite(g.Mu) || g.Mu < 0 {
		errs = append(errs, fmt.Errorf("mu %v: want a finite number >= 0", g.Mu))
	}
	if !finite(g.FormatPenalty) || g.FormatPenalty > 0 {
		errs = append(errs, fmt.Errorf("format_penalty %v: want a finite number <= 0", g.FormatPenalty))
	}
	if !finite(g.Gate) || g.Gate < 0 {
		errs = append(errs, fmt.Errorf("gate %v: want a finite number >= 0", g.Gate))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("graded reward: %w", errors.Join(errs...))
}

// CostTerm is the amount Reward subtracts for what o spent; NaN for an
// unknown CostUnit.
func (g Graded) CostTerm(o Outcome) float64 {
	var spent float64
	switch g.CostUnit {
	case CostDollars:
		spent = o.Cost
	case CostTokens:
		spent = float64(o.Tokens)
	default:
		return math.NaN()
	}
	return g.Lambda*spent + g.Mu*float64(o.Calls)
}

// Reward is o's graded reward; see Graded.
func (g Graded) Reward(o Outcome) float64 {
	if o.Error != "" {
		return math.NaN()
	}
	cost := g.CostTerm(o)
	if g.Gate > 0 {
		return g.gated(o, cost)
	}
	switch {
	case o.formatFailed():
		return g.FormatPenalty - cost
	case o.Correct != nil:
		if *o.Correct {
			return 1 - cost
		}
		return 0 - cost
	case o.Verdict == nil || o.Verdict.Unparseable:
		return math.NaN()
	}
	return o.Verdict.Diff/100 - cost
}

// gated is o's success-gated reward at cost; see Graded.
func (g Graded) gated(o Outcome, cost float64) float64 {
	q, fixed, ok := quality(o)
	switch {
	case !ok:
		return math.NaN()
	case fixed:
		return g.FormatPenalty - g.Gate
	case q <= 0:
		return -g.Gate
	}
	return q - math.Min(cost, g.Gate)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
