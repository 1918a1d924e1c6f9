package world

import (
	"context"
	"fmt"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// AlwaysDelegate is the fixed always-delegate policy in the delegator's
// seat of route (NewAlwaysDelegate): a program, not a model, that hands every step of the
// problem to the solver as soon as its operands are known (the solver's
// answers, right or wrong, become the operands of later steps), in the
// exact format of the world's route transcripts, and boxes the last
// step's result. It knows each problem's structure (its steps), which is
// what a fixed policy over steps is; it never slips in the protocol, so it
// measures the policy, not a model's slips. Usage is counted with the
// tokenizer's chat template as a local model counts it, and the completion
// comes with its token ids (as logprobs), so that conversation counts the
// cached prefix as for a model. Safe for
// concurrent use.
type AlwaysDelegate struct {
	problems map[string]*Problem // by text
}

func NewAlwaysDelegate(problems []*Problem) *AlwaysDelegate {
	a := &AlwaysDelegate{problems: make(map[string]*Problem, len(problems))}
	for _, p := range problems {
		a.problems[p.Text] = p
	}
	return a
}

func (a *AlwaysDelegate) Name() string { return "always-delegate" }

func (a *AlwaysDelegate) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p *Problem
	results := map[string]string{} // tool call id -> result text
	for _, m := range req.Messages {
		switch m.Role {
		case delegate.RoleUser:
			if q, ok := a.problems[strings.TrimSpace(m.Content)]; ok {
				p = q
			}
		case delegate.RoleTool:
			results[m.ToolCallID] = m.Content
		}
	}
	if p == nil {
		return nil, &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: a.Name(), Attempts: 1,
			Message: "always-delegate: the request holds no known problem"}
	}
	known := make([]bool, len(p.Steps))
	value := make([]int64, len(p.Steps))
	operand := func(o Operand) (int64, bool) {
		if o.Ref == Literal {
			return o.Value, true
		}
		return value[o.Ref], known[o.Ref]
	}
	ready := func() []int {
		var out []int
		for i, s := range p.Steps {
			_, xok := operand(s.X)
			_, yok := operand(s.Y)
			if !known[i] && xok && yok {
				out = append(out, i)
			}
		}
		return out
	}
	// Replay the turns so far: each assistant turn asked the steps ready
	// before it, in order; their results are the tool messages.
	for _, m := range req.Messages {
		if m.Role != delegate.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		asked := ready()
		for j, tc := range m.ToolCalls {
			if j >= len(asked) {
				break
			}
			v, err := ParseAnswer(results[tc.ID])
			if err != nil {
				v = 0 // an unreadable answer: the policy goes on with 0
			}
			value[asked[j]], known[asked[j]] = v, true
		}
	}
	out := delegate.Message{Role: delegate.RoleAssistant}
	calls := 0
	for _, m := range req.Messages {
		calls += len(m.ToolCalls)
	}
	finish := "stop"
	if asked := ready(); len(asked) > 0 {
		for _, i := range asked {
			s := p.Steps[i]
			x, _ := operand(s.X)
			y, _ := operand(s.Y)
			calls++
			args := fmt.Sprintf(`{"question":%q}`, Expr(s.Op, x, y))
			out.ToolCalls = append(out.ToolCalls, delegate.ToolCall{ID: fmt.Sprintf("call_%d", calls), Name: strategy.DelegateToolName, Arguments: args})
		}
		finish = "tool_calls"
	} else {
		last := len(p.Steps) - 1
		out.Content = Boxed(value[last])
	}
	prompt := tokenizer.Render(req.Messages, req.Tools, true)
	full := tokenizer.Render(append(append([]delegate.Message(nil), req.Messages...), out), req.Tools, false)
	// The completion's tokens with their logprobs: a program's choice has
	// probability 1. conversation reads the ids to count the next turn's
	// cached prefix, as for a model.
	gen := full[len(prompt):]
	lps := make([]delegate.TokenLogprob, len(gen))
	for i, id := range gen {
		lps[i] = delegate.TokenLogprob{Token: tokenizer.Piece(id), TokenID: id}
	}
	return &delegate.Response{
		Model:          a.Name(),
		Choices:        []delegate.Choice{{Message: out, FinishReason: finish, Logprobs: lps}},
		Usage:          delegate.Usage{PromptTokens: len(prompt), CompletionTokens: max(len(gen), 1)},
		PromptTokenIDs: prompt,
	}, nil
}
