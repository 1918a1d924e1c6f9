package reward

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Kinds of reward a config selects by name.
const (
	KindGraded       = "graded"        // Graded, today's default
	KindSuccessGated = "success_gated" // SuccessGated, after xRouter
	KindEfficiency   = "efficiency"    // Efficiency, after ToolOrchestra
	KindCriticalPath = "critical_path" // CriticalPath, after Kimi PARL
	KindPerCall      = "per_call"      // PerCall
)

// Kinds lists the reward kinds a Config accepts.
func Kinds() []string {
	return []string{KindGraded, KindSuccessGated, KindEfficiency, KindCriticalPath, KindPerCall}
}

// Config selects a reward by Kind and holds every kind's settings.
// Absent sections keep DefaultConfig's values.
type Config struct {
	// Kind is one of Kinds; "" is graded.
	Kind         string       `json:"kind" yaml:"kind"`
	Graded       Graded       `json:"graded" yaml:"graded"`
	SuccessGated SuccessGated `json:"success_gated" yaml:"success_gated"`
	Efficiency   Efficiency   `json:"efficiency" yaml:"efficiency"`
	CriticalPath CriticalPath `json:"critical_path" yaml:"critical_path"`
	PerCall      PerCall      `json:"per_call" yaml:"per_call"`
}

// DefaultConfig is graded, with every kind's defaults in place.
func DefaultConfig() Config {
	return Config{
		Kind:         KindGraded,
		Graded:       DefaultGraded(),
		SuccessGated: SuccessGated{Lambda: 0.5, CostScale: 0.01},
		Efficiency:   Efficiency{CostWeight: 0.2, CostScale: 0.01, LatencyWeight: 0.1, LatencyScale: time.Minute},
		CriticalPath: CriticalPath{LatencyWeight: 0.2, LatencyScale: time.Minute, Bonus: 0.2, AnnealSteps: 100},
		PerCall:      PerCall{Lambda: 1, CostScale: 0.01},
	}
}

// Validate checks the section of the selected kind, naming each key as
// the config writes it.
func (c Config) Validate() error {
	var err error
	switch c.Kind {
	case "", KindGraded:
		err = c.Graded.Validate()
	case KindSuccessGated:
		err = c.SuccessGated.Validate()
	case KindEfficiency:
		err = c.Efficiency.Validate()
	case KindCriticalPath:
		err = c.CriticalPath.Validate()
	case KindPerCall:
		err = c.PerCall.Validate()
	default:
		return fmt.Errorf("kind %q: want one of %v", c.Kind, Kinds())
	}
	return err
}

// Func returns the selected reward function, or an error naming what is
// invalid.
func (c Config) Func() (func(Outcome) float64, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.Kind {
	case KindSuccessGated:
		return c.SuccessGated.Reward, nil
	case KindEfficiency:
		return c.Efficiency.Reward, nil
	case KindCriticalPath:
		return c.CriticalPath.Reward, nil
	case KindPerCall:
		return c.PerCall.Reward, nil
	}
	return c.Graded.Reward, nil
}

// Describe is the selected reward's name and settings as canonical JSON,
// for a run's identity.
func (c Config) Describe() string {
	var v any
	kind := c.Kind
	switch kind {
	case KindSuccessGated:
		v = c.SuccessGated
	case KindEfficiency:
		v = c.Efficiency
	case KindCriticalPath:
		v = c.CriticalPath
	case KindPerCall:
		v = c.PerCall
	default:
		kind, v = KindGraded, c.Graded
	}
	b, err := json.Marshal(v)
	if err != nil {
		// The sections are plain numbers, durations and a string map.
		return kind + " reward"
	}
	return kind + " reward " + string(b)
}

// quality is o's quality before any cost: 1 or 0 for a checked answer,
// the judge's Diff/100 otherwise. fixed reports a format failure or a
// truncation, which fixes the reward; ok is false when o gives no basis
// for a reward (an error, a missing or unparseable verdict).
func quality(o Outcome) (q float64, fixed, ok bool) {
	switch {
	case o.Error != "":
		return 0, false, false
	case o.formatFailed():
		return 0, true, true
	case o.Correct != nil:
		if *o.Correct {
			return 1, false, true
		}
		return 0, false, true
	case o.Verdict == nil || o.Verdict.Unparseable || math.IsNaN(o.Verdict.Diff):
		return 0, false, false
	}
	return o.Verdict.Diff / 100, false, true
}

// ratio is x / scale clipped to [0, 1].
func ratio(x, scale float64) float64 { return math.Min(math.Max(x/scale, 0), 1) }

func checkWeight(errs []error, key string, v float64) []error {
	if !finite(v) || v < 0 {
		errs = append(errs, fmt.Errorf("%s %v: want a finite number >= 0", key, v))
	}
	return errs
}

func checkScale(errs []error, key string, v float64) []error {
	if !finite(v) || v <= 0 {
		errs = append(errs, fmt.Errorf("%s %v: want a finite number > 0", key, v))
	}
	return errs
}

func checkPenalty(errs []error, key string, v float64) []error {
	if !finite(v) || v > 0 {
		errs = append(errs, fmt.Errorf("%s %v: want a finite number <= 0", key, v))
	}
	return errs
}

func joined(kind string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s reward: %w", kind, errors.Join(errs...))
}

// SuccessGated pays for cost only when the answer succeeds, after xRouter.
// Its reward is:
//
//	reward = q - Lambda·min(Cost/CostScale, 1)   when q > 0
//	         0                                    when q <= 0
//	         FormatPenalty                        after a format failure
//
// with q the quality (1/0 for a checked answer, Diff/100 from a judge), so
// that a wrong answer is never worth less for being cheap. Cost is the
// rollout's dollars at the config's prices. NaN when o has no basis.
type SuccessGated struct {
	Lambda float64 `json:"lambda" yaml:"lambda"`
	// CostScale is the dollars per rollout that count as a cost of 1.
	CostScale     float64 `json:"cost_scale" yaml:"cost_scale"`
	FormatPenalty float64 `json:"format_penalty" yaml:"format_penalty"`
}

// Validate checks every field, naming each key.
func (s SuccessGated) Validate() error {
	var errs []error
	errs = checkWeight(errs, "success_gated.lambda", s.Lambda)
	errs = checkScale(errs, "success_gated.cost_scale", s.CostScale)
	errs = checkPenalty(errs, "success_gated.format_penalty", s.FormatPenalty)
	return joined(KindSuccessGated, errs)
}

// Reward is o's success-gated reward; see SuccessGated.
func (s SuccessGated) Reward(o Outcome) float64 {
	q, fixed, ok := quality(o)
	switch {
	case !ok:
		return math.NaN()
	case fixed:
		return s.FormatPenalty
	case q <= 0:
		return 0
	}
	return q - s.Lambda*ratio(o.Cost, s.CostScale)
}

// Efficiency is outcome plus weighted efficiency terms, after ToolOrchestra.
// Its reward is:
//
//	reward = q - CostWeight·min(Cost/CostScale, 1)
//	           - LatencyWeight·min(Latency/LatencyScale, 1)
//
// with q the quality, or FormatPenalty in its place after a format
// failure. Cost is the rollout's dollars at the config's prices, Latency
// its wall time. NaN when o has no basis. docs/scoring.md says where this
// differs from the paper.
type Efficiency struct {
	CostWeight    float64       `json:"cost_weight" yaml:"cost_weight"`
	CostScale     float64       `json:"cost_scale" yaml:"cost_scale"`
	LatencyWeight float64       `json:"latency_weight" yaml:"latency_weight"`
	LatencyScale  time.Duration `json:"latency_scale" yaml:"latency_scale"`
	FormatPenalty float64       `json:"format_penalty" yaml:"format_penalty"`
}

// Validate checks every field, naming each key.
func (e Efficiency) Validate() error {
	var errs []error
	errs = checkWeight(errs, "efficiency.cost_weight", e.CostWeight)
	errs = checkScale(errs, "efficiency.cost_scale", e.CostScale)
	errs = checkWeight(errs, "efficiency.latency_weight", e.LatencyWeight)
	if e.LatencyScale <= 0 {
		errs = append(errs, fmt.Errorf("efficiency.latency_scale %v: want a duration > 0", e.LatencyScale))
	}
	errs = checkPenalty(errs, "efficiency.format_penalty", e.FormatPenalty)
	return joined(KindEfficiency, errs)
}

// Reward is o's efficiency reward; see Efficiency.
func (e Efficiency) Reward(o Outcome) float64 {
	q, fixed, ok := quality(o)
	if !ok {
		return math.NaN()
	}
	if fixed {
		q = e.FormatPenalty
	}
	return q - e.CostWeight*ratio(o.Cost, e.CostScale) -
		e.LatencyWeight*ratio(float64(o.Latency), float64(e.LatencyScale))
}

// CriticalPath charges critical-path latency and pays an annealed parallelism bonus, after Kimi PARL.
// Its reward is:
//
//	parallelism = 1 - CriticalCalls/AllCalls   (0 without calls)
//	bonus(step) = Bonus·max(0, 1 - Step/AnnealSteps)
//	reward      = q - LatencyWeight·min(CriticalPath/LatencyScale, 1)
//	                + bonus(step)·parallelism
//
// CriticalPath counts only the slowest of calls run side by side. After a
// format failure FormatPenalty takes q's place and no bonus is paid, so
// that spawning sub-agents never redeems a broken answer. NaN when o has
// no basis.
type CriticalPath struct {
	LatencyWeight float64       `json:"latency_weight" yaml:"latency_weight"`
	LatencyScale  time.Duration `json:"latency_scale" yaml:"latency_scale"`
	// Bonus is the parallelism bonus's weight at step 0; it falls
	// linearly to 0 at AnnealSteps.
	Bonus         float64 `json:"bonus" yaml:"bonus"`
	AnnealSteps   int     `json:"anneal_steps" yaml:"anneal_steps"`
	FormatPenalty float64 `json:"format_penalty" yaml:"format_penalty"`
}

// Validate checks every field, naming each key.
func (c CriticalPath) Validate() error {
	var errs []error
	errs = checkWeight(errs, "critical_path.latency_weight", c.LatencyWeight)
	if c.LatencyScale <= 0 {
		errs = append(errs, fmt.Errorf("critical_path.latency_scale %v: want a duration > 0", c.LatencyScale))
	}
	errs = checkWeight(errs, "critical_path.bonus", c.Bonus)
	if c.AnnealSteps < 1 {
		errs = append(errs, fmt.Errorf("critical_path.anneal_steps %d: want at least 1", c.AnnealSteps))
	}
	errs = checkPenalty(errs, "critical_path.format_penalty", c.FormatPenalty)
	return joined(KindCriticalPath, errs)
}

// BonusAt is the parallelism bonus's weight at a trainer step.
func (c CriticalPath) BonusAt(step int) float64 {
	if c.AnnealSteps < 1 {
		return 0
	}
	return c.Bonus * math.Max(0, 1-float64(step)/float64(c.AnnealSteps))
}

// Parallelism is the share of o's calls off its critical path.
func Parallelism(o Outcome) float64 {
	if o.AllCalls <= 0 {
		return 0
	}
	return 1 - float64(o.CriticalCalls)/float64(o.AllCalls)
}

// Reward is o's critical-path reward; see CriticalPath.
func (c CriticalPath) Reward(o Outcome) float64 {
	q, fixed, ok := quality(o)
	if !ok {
		return math.NaN()
	}
	lat := c.LatencyWeight * ratio(float64(o.CriticalPath), float64(c.LatencyScale))
	if fixed {
		return c.FormatPenalty - lat
	}
	return q - lat + c.BonusAt(o.Step)*Parallelism(o)
}

// PerCall charges a price per call, set per model.
// Its reward is:
//
//	spent  = Σ over models m of calls(m)·Fees[m]
//	reward = q - Lambda·spent/CostScale
//
// with q the quality, or FormatPenalty in its place after a format
// failure. A call to a model without a fee is NaN, never free: the
// config must price every model it calls.
type PerCall struct {
	// Fees are dollars per call, by model name as the trace records it.
	Fees          map[string]float64 `json:"fees" yaml:"fees"`
	Lambda        float64            `json:"lambda" yaml:"lambda"`
	CostScale     float64            `json:"cost_scale" yaml:"cost_scale"`
	FormatPenalty float64            `json:"format_penalty" yaml:"format_penalty"`
}

// Validate checks every field, naming each key.
func (p PerCall) Validate() error {
	var errs []error
	if len(p.Fees) == 0 {
		errs = append(errs, errors.New("per_call.fees: want a price per call for every model called"))
	}
	names := make([]string, 0, len(p.Fees))
	for m := range p.Fees {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		errs = checkWeight(errs, "per_call.fees."+m, p.Fees[m])
	}
	errs = checkWeight(errs, "per_call.lambda", p.Lambda)
	errs = checkScale(errs, "per_call.cost_scale", p.CostScale)
	errs = checkPenalty(errs, "per_call.format_penalty", p.FormatPenalty)
	return joined(KindPerCall, errs)
}

// Spent is what o's calls cost at the fees; ok is false when a model
// called has no fee.
func (p PerCall) Spent(o Outcome) (dollars float64, ok bool) {
	models := make([]string, 0, len(o.ModelCalls))
	for m := range o.ModelCalls {
		models = append(models, m)
	}
	sort.Strings(models) // a fixed order of addition: the same sum every time
	for _, m := range models {
		fee, priced := p.Fees[m]
		if !priced {
			return math.NaN(), false
		}
		dollars += float64(o.ModelCalls[m]) * fee
	}
	return dollars, true
}

// Reward is o's per-call reward; see PerCall.
func (p PerCall) Reward(o Outcome) float64 {
	q, fixed, ok := quality(o)
	if !ok {
		return math.NaN()
	}
	spent, ok := p.Spent(o)
	if !ok {
		return math.NaN()
	}
	if fixed {
		q = p.FormatPenalty
	}
	return q - p.Lambda*spent/p.CostScale
}
