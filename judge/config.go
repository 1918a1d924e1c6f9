package judge

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Modes of comparison.
const (
	ModePairwise  = "pairwise"  // both answers in one prompt, scored side by side
	ModePointwise = "pointwise" // each answer rated alone against the rubric
)

// Ways of combining the two orders of a pairwise comparison.
const (
	CombineAgree   = "agree"   // a win or loss only when both orders say so, else a tie
	CombineAverage = "average" // the outcome of the mean of the two orders' scores
)

// Config says how a Judge judges. Start from DefaultConfig: the zero value
// is not valid (Repeats and Concurrency must be at least 1).
type Config struct {
	// Mode is ModePairwise (default) or ModePointwise. It decides how
	// Compare judges; Rate is always pointwise.
	Mode string `json:"mode" yaml:"mode"`
	// BothOrders judges a pairwise comparison twice, once with each answer
	// shown first (default true). When false, one order is used for every
	// repeat, chosen by a hash of the request and the two answers. That is
	// as good as random for position bias, and reproducible.
	BothOrders bool `json:"both_orders" yaml:"both_orders"`
	// Combine is CombineAgree (default) or CombineAverage.
	Combine string `json:"combine" yaml:"combine"`
	// Repeats is how many times each order (pairwise) or each answer
	// (pointwise) is judged; the scores are averaged. Default 1. Repeats
	// beyond the first carry a distinct seed so that a response cache
	// keyed by the whole request keeps them apart.
	Repeats int `json:"repeats" yaml:"repeats"`
	// Concurrency bounds the judge calls of one Compare or Rate in flight
	// at once. Default 4.
	Concurrency int `json:"concurrency" yaml:"concurrency"`
	// Temperature of the judge calls. Default 0.
	Temperature float64 `json:"temperature" yaml:"temperature"`
	// MaxTokens of a judge answer; 0 leaves the backend's default.
	// Default 1024.
	MaxTokens int `json:"max_tokens" yaml:"max_tokens"`
	// TieMargin: a score difference (0-100 scale) whose absolute value is
	// at most TieMargin is a tie. Default 0: only equal scores tie.
	TieMargin float64 `json:"tie_margin" yaml:"tie_margin"`
	// Prompts replaces built-in prompt templates by key: PromptPairwiseSystem,
	// PromptPairwiseUser, PromptPointwiseSystem, PromptPointwiseUser. The
	// values are text/template sources; see DefaultPrompt for the fields.
	Prompts map[string]string `json:"prompts,omitempty" yaml:"prompts,omitempty"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Mode:        ModePairwise,
		BothOrders:  true,
		Combine:     CombineAgree,
		Repeats:     1,
		Concurrency: 4,
		Temperature: 0,
		MaxTokens:   1024,
		TieMargin:   0,
	}
}

// Validate checks every field and their relations, and reports every
// problem found, each naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Mode {
	case ModePairwise, ModePointwise:
	default:
		bad("mode %q: want %q or %q", c.Mode, ModePairwise, ModePointwise)
	}
	switch c.Combine {
	case CombineAgree, CombineAverage:
	default:
		bad("combine %q: want %q or %q", c.Combine, CombineAgree, CombineAverage)
	}
	if c.Repeats < 1 {
		bad("repeats %d: want at least 1", c.Repeats)
	}
	if c.Concurrency < 1 {
		bad("concurrency %d: want at least 1", c.Concurrency)
	}
	if math.IsNaN(c.Temperature) || c.Temperature < 0 || c.Temperature > 2 {
		bad("temperature %v: want 0 to 2", c.Temperature)
	}
	if c.MaxTokens < 0 {
		bad("max_tokens %d: want 0 (backend default) or more", c.MaxTokens)
	}
	if math.IsNaN(c.TieMargin) || c.TieMargin < 0 || c.TieMargin >= 100 {
		bad("tie_margin %v: want 0 or more and below 100", c.TieMargin)
	}
	keys := make([]string, 0, len(c.Prompts))
	for k := range c.Prompts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := parsePrompt(k, c.Prompts[k]); err != nil {
			bad("prompts: %w", err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("judge config: %w", errors.Join(errs...))
}

func knownPromptKeys() string {
	return strings.Join([]string{PromptPairwiseSystem, PromptPairwiseUser, PromptPointwiseSystem, PromptPointwiseUser}, ", ")
}
