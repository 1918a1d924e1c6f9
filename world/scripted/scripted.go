// Package scripted runs a delegation policy as a program in route's
// delegator seat. It writes the exact format of the route transcripts and
// never slips, so it measures the policy rather than a model. These
// programs are delegate train's baselines.
//
// A Decider decides per step once its operands are known. FromPolicy
// turns a world.Policy, such as world.PositionRule or world.RandomRate,
// into one. Oracle asks the solver first and delegates exactly the
// products it answers right. Threshold is the rule on a product's first
// factor, and FitThreshold reads that threshold off the solver's answers:
// the digits world's baseline. New returns the program as a
// delegate.Model, graded like a model.
package scripted

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// A Decider decides whether a route policy hands step i of p to the solver.
// It runs once the step's operands are known. x and y are their values as
// the policy holds them: for steps it handed over, the solver's answers,
// right or wrong.
type Decider func(ctx context.Context, p *world.Problem, i int, x, y int64) (bool, error)

// FromPolicy is the Decider of a world.Policy, which looks at the problem only.
func FromPolicy(pol world.Policy) Decider {
	return func(_ context.Context, p *world.Problem, i int, _, _ int64) (bool, error) { return pol(p, i), nil }
}

// Oracle is the upper bound of routing: per step, the cheaper choice that is
// right. It delegates a step that world.WorthDelegating allows exactly when
// the solver answers it right. It learns that by asking the solver first,
// greedily, under route's prompts; each question is asked once and not
// billed. Every other step it computes, never wrong. The solver must answer
// the same question the same way each time, as greedy decoding does.
func Oracle(solver delegate.Model) Decider {
	var mu sync.Mutex
	right := map[string]bool{}
	wcfg := transcript.StrategyConfig().Weak
	return func(ctx context.Context, p *world.Problem, i int, x, y int64) (bool, error) {
		s := p.Steps[i]
		if !world.WorthDelegating(world.Step{Op: s.Op, X: world.Operand{Value: x}, Y: world.Operand{Value: y}}) {
			return false, nil
		}
		q := world.Expr(s.Op, x, y)
		mu.Lock()
		ok, seen := right[q]
		mu.Unlock()
		if seen {
			return ok, nil
		}
		temp := 0.0
		resp, err := solver.Chat(ctx, &delegate.Request{
			Messages:    transcript.SolverMessages(q),
			Temperature: &temp, MaxTokens: wcfg.MaxTokens,
		})
		if err != nil {
			return false, fmt.Errorf("oracle: ask the solver %s: %w", q, err)
		}
		ok = world.Correct(resp.Text(), s.Op.Apply(x, y))
		mu.Lock()
		right[q] = ok
		mu.Unlock()
		return ok, nil
	}
}

// Delegator is a route policy run by a program in the delegator's seat.
// It executes its Decider without a slip, in the exact format of
// transcript.Route, so it measures the policy, not a model's execution of
// it. Each turn writes the scratchpads of every step
// it can compute now, then calls the solver for every step it hands over
// whose operands are known; the solver's answers, right or wrong, become
// the operands of later steps; the last turn boxes the last step's
// result. It knows each problem's structure, its steps, which is what a
// fixed policy over steps is. Usage is counted with the tokenizer's chat
// template as a local model counts it. The completion comes with its token
// ids as logprobs, so that a conversation wrapper can count the cached
// prefix as for a model. Safe for concurrent use when its Decider
// is.
type Delegator struct{ program }

// New returns the program named name that runs decide on
// problems.
func New(name string, problems []*world.Problem, decide Decider) *Delegator {
	return &Delegator{newProgram(name, problems, decide)}
}

// program is what a program in the delegator's seat holds, for Delegator
// and Planner. It has its name, its Decider and the problems it knows by
// text, which is how it recognises a request's problem.
type program struct {
	name     string
	decide   Decider
	problems map[string]*world.Problem
}

func newProgram(name string, problems []*world.Problem, decide Decider) program {
	m := make(map[string]*world.Problem, len(problems))
	for _, p := range problems {
		m[p.Text] = p
	}
	return program{name: name, decide: decide, problems: m}
}

func (s program) Name() string { return s.name }

// unknown is the error of a request that holds none of the problems.
func (s program) unknown() error {
	return &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: s.name, Attempts: 1,
		Message: s.name + ": the request holds no known problem"}
}

func (s *Delegator) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p *world.Problem
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
		return nil, s.unknown()
	}
	out, err := s.turn(ctx, p, turns, results)
	if err != nil {
		return nil, err
	}
	return respond(s.name, req, out), nil
}

// respond is a program's response with out to req. It counts usage with
// the tokenizer's chat template as a local model does. It returns the
// completion's token ids as logprobs, since a program's choice has
// probability 1. A conversation wrapper can then count the cached prefix
// as for a model.
func respond(name string, req *delegate.Request, out delegate.Message) *delegate.Response {
	finish := "stop"
	if len(out.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	prompt := tokenizer.Render(req.Messages, req.Tools, true)
	full := tokenizer.Render(append(append([]delegate.Message(nil), req.Messages...), out), req.Tools, false)
	gen := full[len(prompt):]
	lps := make([]delegate.TokenLogprob, len(gen))
	for i, id := range gen {
		lps[i] = delegate.TokenLogprob{Token: tokenizer.Piece(id), TokenID: id}
	}
	return &delegate.Response{
		Model:          name,
		Choices:        []delegate.Choice{{Message: out, FinishReason: finish, Logprobs: lps}},
		Usage:          delegate.Usage{PromptTokens: len(prompt), CompletionTokens: max(len(gen), 1)},
		PromptTokenIDs: prompt,
	}
}

// turn replays the policy's earlier turns and returns the next one. Each
// turn asked the steps it handed over, in order; results holds the
// answers.
func (s *Delegator) turn(ctx context.Context, p *world.Problem, earlier []delegate.Message, results map[string]string) (delegate.Message, error) {
	n := len(p.Steps)
	known := make([]bool, n)
	value := make([]int64, n)
	decided := make([]int, n) // 0 undecided, 1 compute, 2 delegate
	operand := func(o world.Operand) (int64, bool) {
		if o.Ref == world.Literal {
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
				text, v, err := world.Scratchpad(op, x, y)
				if err != nil {
					// A wrong answer of the solver made the step a
					// negative difference, which the formats cannot
					// write: the policy stops without an answer.
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
				out.ToolCalls = append(out.ToolCalls, transcript.DelegateCall(calls, world.Expr(p.Steps[i].Op, x, y)))
				asked = append(asked, i)
			}
		}
		if len(asked) == 0 {
			blocks = append(blocks, world.Boxed(value[n-1]))
		}
		out.Content = strings.Join(blocks, "\n")
		if k >= len(earlier) || len(asked) == 0 {
			return out, nil
		}
		// Turn k was already said: take its calls' answers.
		for j, i := range asked {
			v := int64(0) // an unreadable or missing answer: the policy goes on with 0
			if j < len(earlier[k].ToolCalls) {
				if a, err := world.ParseAnswer(results[earlier[k].ToolCalls[j].ID]); err == nil {
					v = a
				}
			}
			value[i], known[i] = v, true
		}
	}
}
