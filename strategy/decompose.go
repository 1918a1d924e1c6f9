package strategy

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
)

// decompose plans subtasks, runs sub-agents on them concurrently and
// aggregates their results.
type decompose struct {
	delegator, subagent delegate.Agent
	cfg                 Config
	p                   prompts
}

func (d *decompose) Name() string { return NameDecompose }

// Run goes through the three stages. A plan format failure or a failed
// delegator call stops the run with Trace.Failure set. A failed sub-agent
// does not: its failure is stated in its result's place. Events go to
// events, which may be nil, by non-blocking sends; the caller owns the
// channel.
func (d *decompose) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	rec := delegate.NewRecorder(NameDecompose, request, events)
	plan, fail := d.plan(ctx, rec, request)
	if fail.Kind != "" {
		return finishRun(ctx, rec, NameDecompose, "", fail)
	}
	results, err := d.subagents(ctx, rec, request, plan)
	if err != nil {
		return panicked(rec, NameDecompose, "", err)
	}
	if ctx.Err() != nil {
		return finishRun(ctx, rec, NameDecompose, "", delegate.Failure{})
	}
	answer, fail := d.aggregate(ctx, rec, request, plan, results)
	return finishRun(ctx, rec, NameDecompose, answer, fail)
}

// plan runs stage 1 and returns the plan, or the run's failure.
func (d *decompose) plan(ctx context.Context, rec *delegate.Recorder, request string) (Plan, delegate.Failure) {
	g := rec.Group(nil, NodePlan)
	plan, fail := d.planIn(ctx, rec, g, request)
	g.Error = fail.Message // g is this goroutine's until EndGroup; nothing else reads it before
	rec.EndGroup(g)
	return plan, fail
}

func (d *decompose) planIn(ctx context.Context, rec *delegate.Recorder, g *delegate.Node, request string) (Plan, delegate.Failure) {
	msgs, err := d.p.messages("plan_system", "plan_user", PromptData{
		Request: request, Min: d.cfg.MinSubtasks, Max: d.cfg.MaxSubtasks, SubagentContext: d.cfg.SubagentContext,
	})
	if err != nil {
		return Plan{}, delegate.Failed(delegate.FailurePrompt, "%v", err)
	}
	resp, err := chat(ctx, rec, g, NodeDelegator, d.delegator, d.cfg.Plan.request(0, msgs))
	if err != nil {
		return Plan{}, delegate.Failed(delegate.FailureCall, "%s: %v", NodePlan, err)
	}
	if resp.Choices[0].FinishReason == delegate.FinishLength {
		return Plan{}, delegate.Failure{Kind: delegate.FailurePlanTruncated, Message: (&PlanError{Reason: PlanTruncated}).Error()}
	}
	plan, err := ParsePlan(resp.Text(), d.cfg.MinSubtasks, d.cfg.MaxSubtasks)
	if err != nil {
		return Plan{}, delegate.Failure{Kind: delegate.FailurePlan, Message: err.Error()}
	}
	return plan, delegate.Failure{}
}

// subagents runs stage 2: one sub-agent per subtask, at most
// SubagentConcurrency at once, each result in its own slot. A sub-agent's
// failure never cancels its siblings; only a panic (returned) or the
// caller's context does.
func (d *decompose) subagents(ctx context.Context, rec *delegate.Recorder, request string, plan Plan) ([]SubtaskResult, error) {
	g := rec.Group(nil, NodeSubagents)
	defer rec.EndGroup(g)
	results := make([]SubtaskResult, len(plan.Subtasks))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(d.cfg.SubagentConcurrency)
	for i, sub := range plan.Subtasks {
		if gctx.Err() != nil {
			break // cancelled: start nothing more
		}
		eg.Go(func() error {
			return protect(func() error {
				results[i] = d.subagent1(gctx, rec, g, request, i+1, sub)
				return nil
			})
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w", NodeSubagents, err)
	}
	return results, nil
}

// subagent1 runs sub-agent i, counting from 1, on its subtask.
// It repeats a failed call up to SubagentRetries times. Its result is the
// output cut to the budget, or the failure stated.
func (d *decompose) subagent1(ctx context.Context, rec *delegate.Recorder, g *delegate.Node, request string, i int, subtask string) SubtaskResult {
	res := SubtaskResult{Index: i, Subtask: subtask}
	budget := d.cfg.Subagent.MaxTokens
	data := PromptData{Subtask: subtask, Index: i, Budget: budget}
	if d.cfg.SubagentContext {
		data.Request = request
	}
	msgs, err := d.p.messages("subagent_system", "subagent_user", data)
	if err != nil {
		res.Result = failedResult(i, err)
		return res
	}
	name := SubagentNode(i)
	for attempt := 0; attempt <= d.cfg.SubagentRetries; attempt++ {
		n := name
		if attempt > 0 {
			n = retryName(name, attempt)
		}
		resp, cerr := chat(ctx, rec, g, n, d.subagent, d.cfg.Subagent.request(attempt, msgs))
		if cerr == nil {
			text := strings.TrimSpace(resp.Text())
			if text == "" {
				cerr = fmt.Errorf("%s: empty reply", n)
			} else {
				out, cut := CutToBudget(text, resp.Usage.CompletionTokens, budget)
				if cut || resp.Choices[0].FinishReason == delegate.FinishLength {
					out += fmt.Sprintf("\n[truncated at the %d-token budget]", budget)
				}
				res.Result = out
				return res
			}
		}
		err = cerr
		if ctx.Err() != nil {
			break
		}
	}
	res.Result = failedResult(i, err)
	return res
}

func failedResult(i int, err error) string {
	return fmt.Sprintf("[sub-agent %d failed: %v]", i, err)
}

// CutToBudget cuts text of completion tokens to about budget tokens.
// completion is the API's count for text. When it exceeds budget, the first
// len(text)*budget/completion bytes are kept, backed up to a rune boundary,
// and cut is reported. The token boundaries are unknown, so the cut is
// proportional.
func CutToBudget(text string, completion, budget int) (string, bool) {
	if completion <= budget || budget < 0 {
		return text, false
	}
	keep := int(int64(len(text)) * int64(budget) / int64(completion))
	for keep > 0 && keep < len(text) && !utf8.RuneStart(text[keep]) {
		keep--
	}
	return strings.TrimRightFunc(text[:keep], func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '\r' }), true
}

// aggregate runs stage 3 and returns the answer and what was wrong with it.
func (d *decompose) aggregate(ctx context.Context, rec *delegate.Recorder, request string, plan Plan, results []SubtaskResult) (string, delegate.Failure) {
	g := rec.Group(nil, NodeAggregate)
	defer rec.EndGroup(g)
	msgs, err := d.p.messages("aggregate_system", "aggregate_user", PromptData{
		Request: request, Reasoning: plan.Reasoning, Results: results,
	})
	if err != nil {
		return "", delegate.Failed(delegate.FailurePrompt, "%v", err)
	}
	resp, err := chat(ctx, rec, g, NodeDelegator, d.delegator, d.cfg.Aggregate.request(0, msgs))
	if err != nil {
		return "", delegate.Failed(delegate.FailureCall, "%s: %v", NodeAggregate, err)
	}
	answer, ok := delegate.FinalOutput(resp.Text())
	switch {
	case resp.Choices[0].FinishReason == delegate.FinishLength:
		return answer, delegate.Failed(delegate.FailureTruncated, "%s stopped at max_tokens", NodeAggregate)
	case !ok:
		return answer, delegate.Failed(delegate.FailureAnswerFormat, "%s gave no %q; the whole reply is the answer", NodeAggregate, delegate.FinalOutputMarker)
	}
	return answer, delegate.Failure{}
}
