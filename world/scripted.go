package world

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// A Decider decides whether a route policy hands step i of p to the
// solver, once the step's operands are known: x and y are their values
// as the policy holds them (the solver's answers, right or wrong, for the
// steps it was handed).
type Decider func(ctx context.Context, p *Problem, i int, x, y int64) (bool, error)

// FromPolicy is the Decider of a Policy, which looks at the problem only.
func FromPolicy(pol Policy) Decider {
	return func(_ context.Context, p *Problem, i int, _, _ int64) (bool, error) { return pol(p, i), nil }
}

// PositionRule is the input-independent policy that delegates the steps
// at the positions whose bits are set in mask (bit 0: the first step) and
// computes the others.
func PositionRule(mask uint) Policy {
	return func(_ *Problem, i int) bool { return i < 64 && mask>>uint(i)&1 == 1 }
}

// PositionRuleName names a position rule over steps positions: "never",
// "always", or the positions it delegates ("delegate step 1, 3").
func PositionRuleName(mask uint, steps int) string {
	var pos []string
	for i := range steps {
		if mask>>uint(i)&1 == 1 {
			pos = append(pos, strconv.Itoa(i+1))
		}
	}
	switch len(pos) {
	case 0:
		return "never delegate"
	case steps:
		return "always delegate"
	}
	return "delegate step " + strings.Join(pos, ", ")
}

// RandomRate delegates each step with probability rate, decided by a hash
// of the problem, the step and seed: the same decision every time it is
// asked, so a conversation replays, and unrelated to what the step is.
func RandomRate(rate float64, seed uint64) Policy {
	return func(p *Problem, i int) bool {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%d", p.Text, i, seed)
		return float64(h.Sum64()>>11)/float64(1<<53) < rate
	}
}

// Oracle is the upper bound of routing: per step, the cheaper choice that
// is right. It delegates a step worth delegating (WorthDelegating) exactly
// when the solver answers it right, which it learns by asking the solver
// first, greedily, under route's prompts (asked once per question, not
// billed); every other step it computes, never wrong. The solver must
// answer the same question the same way each time (greedy).
func Oracle(solver delegate.Model) Decider {
	var mu sync.Mutex
	right := map[string]bool{}
	wcfg := StrategyConfig().Weak
	return func(ctx context.Context, p *Problem, i int, x, y int64) (bool, error) {
		s := p.Steps[i]
		if !WorthDelegating(Step{Op: s.Op, X: Operand{Value: x}, Y: Operand{Value: y}}) {
			return false, nil
		}
		q := Expr(s.Op, x, y)
		mu.Lock()
		ok, seen := right[q]
		mu.Unlock()
		if seen {
			return ok, nil
		}
		temp := 0.0
		resp, err := solver.Chat(ctx, &delegate.Request{
			Messages:    worldPrompts.messages("weak_system", "weak_user", strategy.PromptData{Question: q}),
			Temperature: &temp, MaxTokens: wcfg.MaxTokens,
		})
		if err != nil {
			return false, fmt.Errorf("oracle: ask the solver %s: %w", q, err)
		}
		ok = Correct(resp.Text(), s.Op.apply(x, y))
		mu.Lock()
		right[q] = ok
		mu.Unlock()
		return ok, nil
	}
}

// Scripted is a route policy run by a program in the delegator's seat:
// it executes its Decider without a slip, in the exact format of the
// world's route transcripts (Route), so that it measures the policy, not a
// model's execution of it. Each turn writes the scratchpads of every step
// it can compute now, then calls the solver for every step it hands over
// whose operands are known; the solver's answers, right or wrong, become
// the operands of later steps; the last turn boxes the last step's
// result. It knows each problem's structure (its steps), which is what a
// fixed policy over steps is. Usage is counted with the tokenizer's chat
// template as a local model counts it, and the completion comes with its
// token ids (as logprobs), so that a conversation wrapper can count the
// cached prefix as for a model. Safe for concurrent use when its Decider
// is.
type Scripted struct {
	name     string
	decide   Decider
	problems map[string]*Problem // by text
}

// NewScripted returns the program named name that runs decide on
// problems.
func NewScripted(name string, problems []*Problem, decide Decider) *Scripted {
	s := &Scripted{name: name, decide: decide, problems: make(map[string]*Problem, len(problems))}
	for _, p := range problems {
		s.problems[p.Text] = p
	}
	return s
}

func (s *Scripted) Name() string { return s.name }

func (s *Scripted) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p *Problem
	results := map[string]string{} // tool call id -> result text
	var turns []delegate.Message   // the policy's earlier turns
	for _, m := range req.Messages {
		switch m.Role {
		case delegate.RoleUser:
			if q, ok := s.problems[strings.TrimSpace(m.Content)]; ok {
				p = q
			}
		case delegate.RoleTool:
			results[m.ToolCallID] = m.Content
		case delegate.RoleAssistant:
			turns = append(turns, m)
		}
	}
	if p == nil {
		return nil, &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: s.name, Attempts: 1,
			Message: s.name + ": the request holds no known problem"}
	}
	out, err := s.turn(ctx, p, turns, results)
	if err != nil {
		return nil, err
	}
	finish := "stop"
	if len(out.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	prompt := tokenizer.Render(req.Messages, req.Tools, true)
	full := tokenizer.Render(append(append([]delegate.Message(nil), req.Messages...), out), req.Tools, false)
	// The completion's tokens with their logprobs: a program's choice has
	// probability 1.
	gen := full[len(prompt):]
	lps := make([]delegate.TokenLogprob, len(gen))
	for i, id := range gen {
		lps[i] = delegate.TokenLogprob{Token: tokenizer.Piece(id), TokenID: id}
	}
	return &delegate.Response{
		Model:          s.name,
		Choices:        []delegate.Choice{{Message: out, FinishReason: finish, Logprobs: lps}},
		Usage:          delegate.Usage{PromptTokens: len(prompt), CompletionTokens: max(len(gen), 1)},
		PromptTokenIDs: prompt,
	}, nil
}

// turn replays the policy's earlier turns (each asked the steps it handed
// over, in order; results holds the answers) and returns the next one.
func (s *Scripted) turn(ctx context.Context, p *Problem, earlier []delegate.Message, results map[string]string) (delegate.Message, error) {
	n := len(p.Steps)
	known := make([]bool, n)
	value := make([]int64, n)
	decided := make([]int, n) // 0 undecided, 1 compute, 2 delegate
	operand := func(o Operand) (int64, bool) {
		if o.Ref == Literal {
			return o.Value, true
		}
		return value[o.Ref], known[o.Ref]
	}
	ready := func(i int) (int64, int64, bool) {
		x, xok := operand(p.Steps[i].X)
		y, yok := operand(p.Steps[i].Y)
		return x, y, !known[i] && xok && yok
	}
	calls := 0
	for k := 0; ; k++ {
		var blocks []string
		for progress := true; progress; {
			progress = false
			for i := range n {
				x, y, ok := ready(i)
				if !ok {
					continue
				}
				if decided[i] == 0 {
					d, err := s.decide(ctx, p, i, x, y)
					if err != nil {
						return delegate.Message{}, fmt.Errorf("%s: problem %s step %d: %w", s.name, p.ID, i+1, err)
					}
					decided[i] = 1
					if d {
						decided[i] = 2
					}
				}
				if decided[i] == 2 {
					continue
				}
				op := p.Steps[i].Op
				text, v, err := Scratchpad(op, x, y)
				if err != nil {
					// A wrong answer of the solver made the step one the
					// formats cannot write (a negative difference): the
					// policy stops without an answer.
					return delegate.Assistant(strings.Join(blocks, "\n")), nil
				}
				blocks = append(blocks, text)
				value[i], known[i], progress = v, true, true
			}
		}
		out := delegate.Message{Role: delegate.RoleAssistant}
		var asked []int
		for i := range n {
			if x, y, ok := ready(i); ok && decided[i] == 2 {
				calls++
				out.ToolCalls = append(out.ToolCalls, delegate.ToolCall{
					ID: "call_" + strconv.Itoa(calls), Name: strategy.DelegateToolName, Arguments: delegateArgs(Expr(p.Steps[i].Op, x, y)),
				})
				asked = append(asked, i)
			}
		}
		if len(asked) == 0 {
			blocks = append(blocks, Boxed(value[n-1]))
		}
		out.Content = strings.Join(blocks, "\n")
		if k >= len(earlier) || len(asked) == 0 {
			return out, nil
		}
		// Turn k was already said: take its calls' answers.
		for j, i := range asked {
			v := int64(0) // an unreadable or missing answer: the policy goes on with 0
			if j < len(earlier[k].ToolCalls) {
				if a, err := ParseAnswer(results[earlier[k].ToolCalls[j].ID]); err == nil {
					v = a
				}
			}
			value[i], known[i] = v, true
		}
	}
}
