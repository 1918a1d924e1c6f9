package train

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

// decision is one delegate call in a delegator's sequences and its exact value.
type decision struct {
	ep         int // index of the sequence
	start, end int // the call's completion tokens, <|tool_call|> to <|end_tool_call|>
	op         world.Op
	value      float64
}

// decisions finds the delegate calls in eps, a rollout's delegator
// sequences, and values each by the solver's answer in tr. The value is
// what the world's reward rew charges: the scratchpad's tokens less the
// call's, at λ each, less μ; less 1 more when the answer is wrong, as it
// loses the item. Under a gate the value is callValue's. A call that is
// malformed, asks no world operation or got no answer is left out: its
// tokens keep the task's advantage. Tokens are counted as our byte-level
// tokenizer writes them.
func decisions(eps []rl.Episode, tr *delegate.Trace, rew reward.Graded) []decision {
	// What the rollout spent, in reward units, for a gated reward.
	spent := rew.Lambda*float64(tr.Roles[RoleDelegator].Usage.CompletionTokens) + rew.Mu*float64(tr.Roles[RoleSubagent].Calls)
	// The solver's answers by question, in call order.
	answers := map[string][]*delegate.Message{}
	for _, c := range tr.Calls() {
		if !slices.Contains(SolverRoles, c.Role) || len(c.Messages) == 0 {
			continue
		}
		q := strings.TrimSpace(c.Messages[len(c.Messages)-1].Content)
		answers[q] = append(answers[q], c.Output)
	}
	var out []decision
	for i := range eps {
		e := &eps[i]
		for j := 0; j < len(e.Completion); j++ {
			if e.Completion[j] != tokenizer.ToolCall || masked(e, j) {
				continue
			}
			k := j + 1
			for k < len(e.Completion) && e.Completion[k] != tokenizer.EndToolCall && !masked(e, k) {
				k++
			}
			if k == len(e.Completion) || e.Completion[k] != tokenizer.EndToolCall {
				j = k
				continue // left open: malformed
			}
			d, ok := valueCall(e.Completion[j:k+1], answers, rew, spent)
			if ok {
				d.ep, d.start, d.end = i, j, k+1
				out = append(out, d)
			}
			j = k
		}
	}
	return out
}

// masked reports whether completion token j of e is context.
func masked(e *rl.Episode, j int) bool { return e.Masked != nil && e.Masked[j] }

// valueCall values one call's tokens, <|tool_call|> to <|end_tool_call|>,
// taking its answer from answers. spent is the rollout's cost term.
func valueCall(ids []int, answers map[string][]*delegate.Message, rew reward.Graded, spent float64) (decision, bool) {
	msg, _ := tokenizer.ParseAssistant(ids)
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Name != strategy.DelegateToolName {
		return decision{}, false
	}
	var args struct {
		Question string `json:"question"`
	}
	if err := json.Unmarshal([]byte(msg.ToolCalls[0].Arguments), &args); err != nil {
		return decision{}, false
	}
	q := strings.TrimSpace(args.Question)
	op, x, y, err := world.ParseExpr(q)
	if err != nil {
		return decision{}, false
	}
	pad, _, err := world.Scratchpad(op, x, y)
	if err != nil || len(answers[q]) == 0 {
		return decision{}, false
	}
	reply := answers[q][0]
	answers[q] = answers[q][1:]
	right := reply != nil && world.Correct(reply.Content, op.Apply(x, y))
	return decision{op: op, value: callValue(rew, len(pad)-len(ids), right, spent)}, true
}

// callValue is the gain of a delegate call over computing its step
// inline, under rew, with the rest of the rollout right. saved is the
// scratchpad's tokens less the call's; spent is the rollout's cost term
// with the call. Ungated, a call gains λ·saved − μ, less 1 when wrong.
// Gated at G, the rollout computed inline would have cost c = spent +
// λ·saved − μ and scored 1 − min(c, G). A right call then gains
// min(c, G) − min(spent, G), λ·saved − μ below the gate. A wrong one
// loses the item: −G − (1 − min(c, G)), however few tokens it saved.
func callValue(rew reward.Graded, saved int, right bool, spent float64) float64 {
	gain := rew.Lambda*float64(saved) - rew.Mu
	switch {
	case rew.Gate <= 0 && right:
		return gain
	case rew.Gate <= 0:
		return gain - 1
	case right:
		return min(spent+gain, rew.Gate) - min(spent, rew.Gate)
	}
	return -(1 + rew.Gate - min(spent+gain, rew.Gate))
}

// DecisionsCreditedMetric is the rollout scalar of decision credit: the
// delegate calls whose tokens got their own advantage.
const DecisionsCreditedMetric = "decisions_credited"

// creditDecisions gives each decision's call tokens an advantage: its
// value among the values of the step's decisions on the same operation,
// under est. Comparing a product delegated with the other products
// delegated removes what they share, "delegate a product less", and
// leaves what tells them apart. Where all of an operation's decisions are
// worth the same, or RLOO has one alone, they keep the task's advantage.
// ds[n] are the decisions of rs[n]; rs gets Spans, and the scalar
// DecisionsCreditedMetric counting the calls that got their own advantage.
func creditDecisions(est reward.Estimator, rs []*rl.ScoredRollout, ds [][]decision) error {
	if len(rs) != len(ds) {
		return fmt.Errorf("decision credit: %d rollouts, %d decision lists", len(rs), len(ds))
	}
	type ref struct{ n, d int }
	byOp := map[world.Op][]ref{}
	var ops []world.Op
	for n := range ds {
		for d, x := range ds[n] {
			if _, ok := byOp[x.op]; !ok {
				ops = append(ops, x.op)
			}
			byOp[x.op] = append(byOp[x.op], ref{n, d})
		}
	}
	adv := make([][]float64, len(ds))
	credited := make([][]bool, len(ds))
	for n := range ds {
		adv[n], credited[n] = make([]float64, len(ds[n])), make([]bool, len(ds[n]))
	}
	for _, op := range ops {
		refs := byOp[op]
		if est == reward.RLOO && len(refs) < 2 {
			continue
		}
		values := make([]float64, len(refs))
		for i, r := range refs {
			values[i] = ds[r.n][r.d].value
		}
		g, err := reward.NewGroup(est, values)
		if err != nil {
			return fmt.Errorf("decision credit on %s: %w", op, err)
		}
		if g.Degenerate {
			continue
		}
		for i, r := range refs {
			adv[r.n][r.d], credited[r.n][r.d] = g.Advantages[i], true
		}
	}
	setSpans(rs, ds, adv, credited)
	return nil
}

// creditCounterfactual gives each decision's call tokens its value as
// advantage. The value is the exact gain of delegating the step over
// computing it inline, whose value is 0, so 0 is the baseline: a call
// that loses the item is pushed down even when every call like it lost.
// Values stay in reward units, as Dr. GRPO's and RLOO's task advantages
// are; no scale is taken from the rollouts, whose spread is near 0 when
// they tie. ds[n] are the decisions of rs[n]; rs gets Spans, and the
// scalar DecisionsCreditedMetric counting the calls credited.
func creditCounterfactual(rs []*rl.ScoredRollout, ds [][]decision) error {
	return creditValues(rs, ds, false)
}

// creditCentred is counterfactual credit less a mean: each call's value
// less the mean value of the step's other calls on the same operation,
// capped at 0, where the operation's calls both gain and lose. A blind
// product call is worth −0.19 in the band world; against that mean a
// product is credited by whether it beats the average product call, so
// "delegate fewer products" stops drowning "delegate these". Only the
// delegated branch gets it, so it is not a policy-gradient baseline but a
// bonus for delegating the operation, at most the mean's loss. That mean
// lies between the calls that gain and those that lose, so no call's sign
// flips: the best choice at each call is counterfactual credit's. An
// operation whose calls all lose, as the band world's sums, keeps its
// values, which the mean would turn to 0.
func creditCentred(rs []*rl.ScoredRollout, ds [][]decision) error {
	return creditValues(rs, ds, true)
}

// creditValues gives each decision its value, less the centred baseline
// when centred is set (creditCentred).
func creditValues(rs []*rl.ScoredRollout, ds [][]decision, centred bool) error {
	if len(rs) != len(ds) {
		return fmt.Errorf("counterfactual credit: %d rollouts, %d decision lists", len(rs), len(ds))
	}
	type sums struct {
		sum        float64
		n          int
		gain, lose bool
	}
	byOp := map[world.Op]*sums{}
	for n := range ds {
		for _, x := range ds[n] {
			s := byOp[x.op]
			if s == nil {
				s = &sums{}
				byOp[x.op] = s
			}
			s.sum, s.n = s.sum+x.value, s.n+1
			s.gain, s.lose = s.gain || x.value > 0, s.lose || x.value < 0
		}
	}
	adv := make([][]float64, len(ds))
	credited := make([][]bool, len(ds))
	for n := range ds {
		adv[n], credited[n] = make([]float64, len(ds[n])), make([]bool, len(ds[n]))
		for d, x := range ds[n] {
			adv[n][d], credited[n][d] = x.value, true
			if s := byOp[x.op]; centred && s.gain && s.lose && s.n > 1 {
				adv[n][d] -= min(0, (s.sum-x.value)/float64(s.n-1))
			}
		}
	}
	setSpans(rs, ds, adv, credited)
	return nil
}

// setSpans gives each credited decision's call tokens its advantage.
// It counts them in each rollout's DecisionsCreditedMetric.
func setSpans(rs []*rl.ScoredRollout, ds [][]decision, adv [][]float64, credited [][]bool) {
	for n, r := range rs {
		if r.Scalars == nil {
			r.Scalars = map[string]float64{}
		}
		r.Scalars[DecisionsCreditedMetric] = 0
		for d, x := range ds[n] {
			if !credited[n][d] {
				continue
			}
			r.Scalars[DecisionsCreditedMetric]++
			if r.Spans == nil {
				r.Spans = make([][]rl.Span, len(r.Episodes))
			}
			r.Spans[x.ep] = append(r.Spans[x.ep], rl.Span{Start: x.start, End: x.end, Advantage: adv[n][d]})
		}
	}
}

// skipTokens finds, for each decision of ds in eps, the token at which the
// delegator passed over the step it delegates. Blocks come in step order
// and calls after them, so a turn that delegates step i and computes a
// later step first writes that step's block where block i would be. The
// token where it departs from block i is the choice to delegate; the
// call that follows is then near certain. The result is -1 for a call
// with no later step's block before it in its turn: the call's own first
// token is the choice. p's steps name the blocks by their first line.
func skipTokens(eps []rl.Episode, ds []decision, p *world.Problem) []int {
	out := make([]int, len(ds))
	used := make([]bool, len(p.Steps))
	for n, d := range ds {
		out[n] = -1
		e := &eps[d.ep]
		i := callStep(e.Completion[d.start:d.end], p, used)
		if i < 0 {
			continue
		}
		// The turn's text before the call, from its first generated token.
		t0 := d.start
		for t0 > 0 && !masked(e, t0-1) && tokenizer.IsByte(e.Completion[t0-1]) {
			t0--
		}
		if t0 > 0 && !masked(e, t0-1) {
			continue // an earlier call of the turn, or a token not of a block
		}
		text := tokenizer.Decode(e.Completion[t0:d.start])
		pad, _, err := world.Scratchpad(p.Steps[i].Op, p.Steps[i].X.Value, p.Steps[i].Y.Value)
		if err != nil {
			continue
		}
		for at := 0; at < len(text); {
			line, _, _ := strings.Cut(text[at:], "\n")
			if laterBlock(line, i, p) {
				k := 0
				for k < len(pad) && at+k < len(text) && text[at+k] == pad[k] {
					k++
				}
				if at+k < len(text) {
					out[n] = t0 + at + k // one token a byte
				}
				break
			}
			at += len(line) + 1
		}
	}
	return out
}

// callStep is the index of the first step of p not yet used whose question
// the call's tokens ask, marked used; -1 when none.
func callStep(ids []int, p *world.Problem, used []bool) int {
	msg, _ := tokenizer.ParseAssistant(ids)
	if len(msg.ToolCalls) != 1 {
		return -1
	}
	var args struct {
		Question string `json:"question"`
	}
	if json.Unmarshal([]byte(msg.ToolCalls[0].Arguments), &args) != nil {
		return -1 // valueCall left it out too
	}
	q := strings.TrimSpace(args.Question)
	for i, s := range p.Steps {
		if !used[i] && s.Expr() == q {
			used[i] = true
			return i
		}
	}
	return -1
}

// laterBlock reports whether line opens the block of a step after step i:
// it is that step's question, as a scratchpad's first line writes it.
func laterBlock(line string, i int, p *world.Problem) bool {
	for k := i + 1; k < len(p.Steps); k++ {
		if p.Steps[k].Expr() == line {
			return true
		}
	}
	return false
}

// SkipsCreditedMetric is the rollout scalar of skip credit: the delegate
// calls whose skip token got their advantage.
const SkipsCreditedMetric = "skips_credited"

// creditSkips gives each decision's skip token (skipTokens) the advantage
// its call's tokens got, added to any other decision's at that token. A
// decision whose call got no advantage of its own, or with no skip token,
// adds nothing. It runs after creditDecisions or creditCounterfactual;
// skips[n] are the skip tokens of ds[n]. It counts them in each
// rollout's SkipsCreditedMetric.
func creditSkips(rs []*rl.ScoredRollout, ds [][]decision, skips [][]int) error {
	if len(rs) != len(ds) || len(ds) != len(skips) {
		return fmt.Errorf("skip credit: %d rollouts, %d decision lists, %d skip lists", len(rs), len(ds), len(skips))
	}
	for n, r := range rs {
		if len(skips[n]) != len(ds[n]) {
			return fmt.Errorf("skip credit: rollout %d: %d decisions, %d skip tokens", n, len(ds[n]), len(skips[n]))
		}
		if r.Scalars == nil {
			r.Scalars = map[string]float64{}
		}
		r.Scalars[SkipsCreditedMetric] = 0
		for d, x := range ds[n] {
			at := skips[n][d]
			if at < 0 || r.Spans == nil {
				continue
			}
			sp := r.Spans[x.ep]
			c := slices.IndexFunc(sp, func(s rl.Span) bool { return s.Start == x.start && s.End == x.end })
			if c < 0 {
				continue // the call kept the task's advantage
			}
			adv := sp[c].Advantage
			r.Scalars[SkipsCreditedMetric]++
			if k := slices.IndexFunc(sp, func(s rl.Span) bool { return s.Start == at && s.End == at+1 }); k >= 0 {
				sp[k].Advantage += adv
			} else {
				sp = append(sp, rl.Span{Start: at, End: at + 1, Advantage: adv})
			}
			slices.SortFunc(sp, func(a, b rl.Span) int { return a.Start - b.Start })
			r.Spans[x.ep] = sp
		}
	}
	return nil
}

// inlineTokens finds, in each of eps, the first token of every block the
// delegator wrote for a step of p. That token chose to compute the step
// where a delegate call could have stood. A block opens a line of a
// turn's text with its step's question, as a scratchpad's first line
// writes it.
func inlineTokens(eps []rl.Episode, p *world.Problem) [][]int {
	out := make([][]int, len(eps))
	for i := range eps {
		e := &eps[i]
		lineStart := true
		for j, id := range e.Completion {
			if masked(e, j) || !tokenizer.IsByte(id) {
				lineStart = true
				continue
			}
			if lineStart && opensBlock(e, j, p) {
				out[i] = append(out[i], j)
			}
			lineStart = id == tokenizer.ByteOffset+'\n'
		}
	}
	return out
}

// opensBlock reports whether completion token j of e opens a line that is
// one of p's steps' questions.
func opensBlock(e *rl.Episode, j int, p *world.Problem) bool {
	k := j
	for k < len(e.Completion) && !masked(e, k) && tokenizer.IsByte(e.Completion[k]) && e.Completion[k] != tokenizer.ByteOffset+'\n' {
		k++
	}
	line := tokenizer.Decode(e.Completion[j:k])
	for _, s := range p.Steps {
		if s.Expr() == line {
			return true
		}
	}
	return false
}

// InlineCreditedMetric is the rollout scalar of inline credit: the blocks
// whose first token got inline's value.
const InlineCreditedMetric = "inline_credited"

// creditInline gives the first token of each block (inlineTokens) the
// value of computing a step inline, 0, in place of its rollout's
// advantage. Under counterfactual credit a delegate call's tokens get its
// exact gain over computing inline; the choice to compute is then worth
// exactly 0 against it, not the rollout's advantage, which also moves
// with every other call of the rollout. A token that already has a span,
// as a skip token, keeps it. at[n] are the tokens of rs[n]'s episodes.
func creditInline(rs []*rl.ScoredRollout, at [][][]int) error {
	if len(rs) != len(at) {
		return fmt.Errorf("inline credit: %d rollouts, %d token lists", len(rs), len(at))
	}
	for n, r := range rs {
		if len(at[n]) != len(r.Episodes) {
			return fmt.Errorf("inline credit: rollout %d: %d episodes, %d token lists", n, len(r.Episodes), len(at[n]))
		}
		if r.Scalars == nil {
			r.Scalars = map[string]float64{}
		}
		r.Scalars[InlineCreditedMetric] = 0
		for ep, tokens := range at[n] {
			for _, j := range tokens {
				if r.Spans == nil {
					r.Spans = make([][]rl.Span, len(r.Episodes))
				}
				sp := r.Spans[ep]
				if slices.ContainsFunc(sp, func(s rl.Span) bool { return s.Start <= j && j < s.End }) {
					continue
				}
				r.Scalars[InlineCreditedMetric]++
				sp = append(sp, rl.Span{Start: j, End: j + 1})
				slices.SortFunc(sp, func(a, b rl.Span) int { return a.Start - b.Start })
				r.Spans[ep] = sp
			}
		}
	}
	return nil
}
