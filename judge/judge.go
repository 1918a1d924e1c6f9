// Package judge scores answers with an LLM judge, pairwise or on a pointwise rubric.
// A pairwise comparison of a candidate with a baseline is judged in both
// orders and n times, to take position bias and noise out of the verdict.
// A pointwise rubric scores 0-100. Every judge call goes through a
// *delegate.Recorder, so its tokens and dollars land in the caller's trace
// under the judge's role. An answer that cannot be parsed is counted, never
// turned into a made-up score.
package judge

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime/debug"
	"time"

	"github.com/delegatelab/delegate"
	"golang.org/x/sync/errgroup"
)

// Role is the trace role of judge calls when the Agent given to New has
// none.
const Role = "judge"

// Outcomes of a comparison, for the candidate.
const (
	Win  = "win"
	Loss = "loss"
	Tie  = "tie"
)

// ErrUnparseable is returned (wrapped) when every judge call of a
// comparison or rating answered but none could be parsed.
var ErrUnparseable = errors.New("no judge answer could be parsed")

// Order says what one judge call was shown.
type Order string

// The orders of judge calls.
const (
	CandidateFirst Order = "candidate_first" // pairwise, candidate as A
	BaselineFirst  Order = "baseline_first"  // pairwise, baseline as A
	CandidateAlone Order = "candidate"       // pointwise, the candidate (or Rate's answer)
	BaselineAlone  Order = "baseline"        // pointwise, the baseline
)

// OrderResult is one judge call: what it was shown, what it answered and
// what was read from that.
type OrderResult struct {
	Order  Order `json:"order"`
	Repeat int   `json:"repeat"` // 0-based
	// Parsed reports whether scores were read; the score fields are
	// meaningful only then.
	Parsed bool `json:"parsed"`
	// ScoreA and ScoreB are the scores by position, as the judge gave
	// them; a pointwise call sets ScoreA only.
	ScoreA float64 `json:"score_a"`
	ScoreB float64 `json:"score_b"`
	// Candidate and Baseline are the same scores by answer; a pointwise
	// call sets the one of the answer it rated.
	Candidate    float64        `json:"candidate"`
	Baseline     float64        `json:"baseline"`
	Raw          string         `json:"raw"`
	ParseError   string         `json:"parse_error,omitempty"`
	CallError    string         `json:"call_error,omitempty"`
	FinishReason string         `json:"finish_reason,omitempty"`
	Usage        delegate.Usage `json:"usage"`
	Cost         float64        `json:"cost"`
	Latency      time.Duration  `json:"latency_ns"`
}

// Verdict is the judgement of a candidate against a baseline.
type Verdict struct {
	Mode string `json:"mode"`
	// Outcome is Win, Loss or Tie for the candidate; "" when Unparseable.
	Outcome string `json:"outcome"`
	// Candidate and Baseline are combined 0-100 scores. In pairwise mode,
	// each is the mean over orders of each order's mean over repeats, so each
	// position weighs the same. In pointwise mode, each is the mean rating.
	Candidate float64 `json:"candidate"`
	Baseline  float64 `json:"baseline"`
	Diff      float64 `json:"diff"` // Candidate - Baseline
	// Orders has one entry per judge call, in plan order.
	Orders []OrderResult `json:"orders"`
	// Paired reports whether both orders were judged and parsed; only then
	// does Consistent say anything.
	Paired bool `json:"paired"`
	// Consistent reports whether both orders gave the same outcome.
	Consistent    bool           `json:"consistent"`
	ParseFailures int            `json:"parse_failures"`
	CallErrors    int            `json:"call_errors"`
	Unparseable   bool           `json:"unparseable,omitempty"`
	Usage         delegate.Usage `json:"usage"` // summed over the judge calls
	Cost          float64        `json:"cost"`  // dollars, summed over the judge calls
}

// Rating is the pointwise judgement of one answer.
type Rating struct {
	Score         float64        `json:"score"` // mean over parsed repeats
	Calls         []OrderResult  `json:"calls"`
	ParseFailures int            `json:"parse_failures"`
	CallErrors    int            `json:"call_errors"`
	Unparseable   bool           `json:"unparseable,omitempty"`
	Usage         delegate.Usage `json:"usage"`
	Cost          float64        `json:"cost"`
}

// Judge judges answers with one model. Its methods may be called from many
// goroutines at once.
type Judge struct {
	agent   delegate.Agent
	cfg     Config
	prompts *prompts
}

// New returns a Judge that calls a's model. a.Role defaults to Role.
func New(a delegate.Agent, cfg Config) (*Judge, error) {
	if a.Model == nil {
		return nil, errors.New("new judge: agent has no model")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new judge: %w", err)
	}
	p, err := loadPrompts(cfg.Prompts)
	if err != nil {
		return nil, fmt.Errorf("new judge: %w", err)
	}
	if a.Role == "" {
		a.Role = Role
	}
	return &Judge{agent: a, cfg: cfg, prompts: p}, nil
}

// Config returns the judge's configuration.
func (j *Judge) Config() Config { return j.cfg }

// call is one planned judge call.
type call struct {
	order  Order
	repeat int
	user   string
	system string
}

// Compare judges candidate against baseline as answers to request.
// rec records the calls under a group node of parent, or of the root when
// parent is nil. A nil rec gets a private recorder, and the verdict's Usage
// and Cost still account for every call.
//
// A judge answer that cannot be parsed is counted in ParseFailures and
// left out of the scores. Every call may answer and none parse; in
// pointwise mode, none for one of the two answers. Compare then returns the
// verdict with Unparseable set and an error wrapping ErrUnparseable, and
// the verdict has no outcome and no scores. When calls failed and none
// gave a usable answer, the error wraps the first call's error. A
// cancelled ctx returns ctx's error.
func (j *Judge) Compare(ctx context.Context, rec *delegate.Recorder, parent *delegate.Node, request, candidate, baseline string) (Verdict, error) {
	var plan []call
	add := func(o Order, r int, user, system string) {
		plan = append(plan, call{order: o, repeat: r, user: user, system: system})
	}
	if j.cfg.Mode == ModePointwise {
		cu, err := j.prompts.pointwise(request, candidate)
		if err != nil {
			return Verdict{}, fmt.Errorf("judge compare: %w", err)
		}
		bu, err := j.prompts.pointwise(request, baseline)
		if err != nil {
			return Verdict{}, fmt.Errorf("judge compare: %w", err)
		}
		for r := range j.cfg.Repeats {
			add(CandidateAlone, r, cu, j.prompts.pointSystem)
			add(BaselineAlone, r, bu, j.prompts.pointSystem)
		}
	} else {
		orders := []Order{CandidateFirst, BaselineFirst}
		if !j.cfg.BothOrders {
			orders = []Order{pickOrder(request, candidate, baseline)}
		}
		for _, o := range orders {
			a, b := candidate, baseline
			if o == BaselineFirst {
				a, b = baseline, candidate
			}
			u, err := j.prompts.pairwise(request, a, b)
			if err != nil {
				return Verdict{}, fmt.Errorf("judge compare: %w", err)
			}
			for r := range j.cfg.Repeats {
				add(o, r, u, j.prompts.pairSystem)
			}
		}
	}

	results, errs, err := j.run(ctx, rec, parent, "judge compare", request, plan)
	v := Verdict{Mode: j.cfg.Mode, Orders: results}
	for _, r := range results {
		v.Usage = v.Usage.Add(r.Usage)
		v.Cost += r.Cost
		if r.CallError != "" {
			v.CallErrors++
		} else if !r.Parsed {
			v.ParseFailures++
		}
	}
	if err != nil {
		return v, fmt.Errorf("judge compare: %w", err)
	}
	var ok bool
	if j.cfg.Mode == ModePointwise {
		ok = j.combinePointwise(&v)
	} else {
		ok = j.combinePairwise(&v, len(plan)/j.cfg.Repeats)
	}
	if !ok {
		v.Unparseable = v.CallErrors == 0
		return v, fmt.Errorf("judge compare: %w", noUsable(results, errs))
	}
	return v, nil
}

// pickOrder chooses the order of a comparison judged in one order only.
// It picks by the parity of a hash of the comparison's inputs.
func pickOrder(request, candidate, baseline string) Order {
	h := fnv.New64a()
	for _, s := range []string{request, candidate, baseline} {
		// Length-prefixed so that moving text between fields changes the hash.
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	if h.Sum64()%2 == 0 {
		return CandidateFirst
	}
	return BaselineFirst
}

// noUsable explains why a set of calls gave no score.
// Either calls failed, giving the first failure's error, or answers could
// not be parsed, giving ErrUnparseable.
func noUsable(rs []OrderResult, errs []error) error {
	for i, r := range rs {
		if r.CallError != "" {
			return fmt.Errorf("no usable judge answer from %d calls: %w", len(rs), errs[i])
		}
	}
	return fmt.Errorf("%d judge answers: %w", len(rs), ErrUnparseable)
}

// combinePairwise fills v's scores and outcome from its parsed calls, of
// nOrders planned orders; false when no call was parsed.
func (j *Judge) combinePairwise(v *Verdict, nOrders int) bool {
	type acc struct {
		n          int
		cand, base float64
	}
	var byOrder [2]acc // CandidateFirst, BaselineFirst
	for _, r := range v.Orders {
		if !r.Parsed {
			continue
		}
		i := 0
		if r.Order == BaselineFirst {
			i = 1
		}
		byOrder[i].n++
		byOrder[i].cand += r.Candidate
		byOrder[i].base += r.Baseline
	}
	var outcomes []string
	var cand, base float64
	for _, a := range byOrder {
		if a.n == 0 {
			continue
		}
		c, b := a.cand/float64(a.n), a.base/float64(a.n)
		cand += c
		base += b
		outcomes = append(outcomes, j.classify(c-b))
	}
	if len(outcomes) == 0 {
		return false
	}
	v.Candidate = cand / float64(len(outcomes))
	v.Baseline = base / float64(len(outcomes))
	v.Diff = v.Candidate - v.Baseline
	v.Paired = len(outcomes) == 2
	v.Consistent = v.Paired && outcomes[0] == outcomes[1]
	switch {
	case len(outcomes) < nOrders:
		// A planned order gave nothing: position bias cannot be taken
		// out, so neither combination claims a winner. The scores stay
		// as measured, from one order; Paired is false.
		v.Outcome = Tie
	case j.cfg.Combine == CombineAverage:
		v.Outcome = j.classify(v.Diff)
	case len(outcomes) == 1 || v.Consistent:
		v.Outcome = outcomes[0]
	default:
		v.Outcome = Tie
	}
	return true
}

// combinePointwise fills v's scores and outcome from its parsed ratings;
// false when either answer has none.
func (j *Judge) combinePointwise(v *Verdict) bool {
	var nc, nb int
	var cand, base float64
	for _, r := range v.Orders {
		if !r.Parsed {
			continue
		}
		if r.Order == CandidateAlone {
			nc++
			cand += r.Candidate
		} else {
			nb++
			base += r.Baseline
		}
	}
	if nc == 0 || nb == 0 {
		return false
	}
	v.Candidate = cand / float64(nc)
	v.Baseline = base / float64(nb)
	v.Diff = v.Candidate - v.Baseline
	v.Outcome = j.classify(v.Diff)
	return true
}

func (j *Judge) classify(diff float64) string {
	switch {
	case diff > j.cfg.TieMargin:
		return Win
	case diff < -j.cfg.TieMargin:
		return Loss
	}
	return Tie
}

// Rate scores answer to request on the pointwise rubric, Repeats times,
// and averages the parsed scores. Recording and errors are as for Compare.
func (j *Judge) Rate(ctx context.Context, rec *delegate.Recorder, parent *delegate.Node, request, answer string) (Rating, error) {
	u, err := j.prompts.pointwise(request, answer)
	if err != nil {
		return Rating{}, fmt.Errorf("judge rate: %w", err)
	}
	plan := make([]call, j.cfg.Repeats)
	for r := range plan {
		plan[r] = call{order: CandidateAlone, repeat: r, user: u, system: j.prompts.pointSystem}
	}
	results, errs, err := j.run(ctx, rec, parent, "judge rate", request, plan)
	rt := Rating{Calls: results}
	n := 0
	for _, r := range results {
		rt.Usage = rt.Usage.Add(r.Usage)
		rt.Cost += r.Cost
		switch {
		case r.CallError != "":
			rt.CallErrors++
		case !r.Parsed:
			rt.ParseFailures++
		default:
			n++
			rt.Score += r.ScoreA
		}
	}
	if err != nil {
		return rt, fmt.Errorf("judge rate: %w", err)
	}
	if n == 0 {
		rt.Unparseable = rt.CallErrors == 0
		return rt, fmt.Errorf("judge rate: %w", noUsable(results, errs))
	}
	rt.Score /= float64(n)
	return rt, nil
}

// run makes the planned calls concurrently, at most Concurrency at once,
// and returns one result per call in plan order. A failed call is
// recorded in its result and its error in errs, and does not cancel the
// others. The error is ctx's when it was cancelled.
func (j *Judge) run(ctx context.Context, rec *delegate.Recorder, parent *delegate.Node, name, request string, plan []call) (results []OrderResult, errs []error, err error) {
	if rec == nil {
		rec = delegate.NewRecorder(Role, request, nil)
		parent = nil
	}
	group := rec.Group(parent, name)
	defer rec.EndGroup(group)

	results = make([]OrderResult, len(plan))
	errs = make([]error, len(plan))
	var g errgroup.Group
	g.SetLimit(j.cfg.Concurrency)
	for i, c := range plan {
		g.Go(func() error {
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("judge call panicked: %v\n%s", p, debug.Stack())
					results[i].CallError = errs[i].Error()
				}
			}()
			results[i], errs[i] = j.one(ctx, rec, group, c)
			return nil
		})
	}
	_ = g.Wait() // the goroutines record their errors in errs and never return one
	return results, errs, ctx.Err()
}

// one makes a single judge call and reads its scores.
func (j *Judge) one(ctx context.Context, rec *delegate.Recorder, group *delegate.Node, c call) (OrderResult, error) {
	res := OrderResult{Order: c.order, Repeat: c.repeat}
	if err := ctx.Err(); err != nil {
		res.CallError = err.Error()
		return res, err
	}
	temp := j.cfg.Temperature
	req := &delegate.Request{
		Messages:    []delegate.Message{delegate.System(c.system), delegate.User(c.user)},
		Temperature: &temp,
		MaxTokens:   j.cfg.MaxTokens,
	}
	if j.cfg.Repeats > 1 {
		seed := int64(c.repeat)
		req.Seed = &seed
	}
	resp, err := rec.Call(ctx, group, fmt.Sprintf("%s #%d", c.order, c.repeat), j.agent, req)
	if resp != nil {
		res.Usage = resp.Usage
		res.Cost = j.agent.Price.Cost(resp.Usage)
		res.Latency = resp.Latency
		res.Raw = resp.Text()
		if len(resp.Choices) > 0 {
			res.FinishReason = resp.Choices[0].FinishReason
		}
	}
	if err != nil {
		res.CallError = err.Error()
		return res, err
	}
	var perr error
	switch c.order {
	case CandidateAlone, BaselineAlone:
		var s float64
		s, perr = ParseScore(res.Raw)
		res.ScoreA = s
		if c.order == CandidateAlone {
			res.Candidate = s
		} else {
			res.Baseline = s
		}
	default:
		res.ScoreA, res.ScoreB, perr = ParseScores(res.Raw)
		res.Candidate, res.Baseline = res.ScoreA, res.ScoreB
		if c.order == BaselineFirst {
			res.Candidate, res.Baseline = res.ScoreB, res.ScoreA
		}
	}
	if perr != nil {
		msg := perr.Error()
		if res.FinishReason == delegate.FinishLength {
			msg += " (answer cut at max_tokens)"
		}
		res = OrderResult{Order: res.Order, Repeat: res.Repeat, Raw: res.Raw, ParseError: msg,
			FinishReason: res.FinishReason, Usage: res.Usage, Cost: res.Cost, Latency: res.Latency}
		return res, nil
	}
	res.Parsed = true
	return res, nil
}
