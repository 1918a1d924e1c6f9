package train

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

// The trace roles of every arm and rollout, so that tokens, calls and
// prices line up across arms whatever the strategy: the delegator in the
// main seat (route's strong, single's single, lead's leader) is
// RoleDelegator; the sub-agents (route's weak, lead's peers) are
// RoleSubagent; the solver answering a whole problem alone is RoleSolver.
const (
	RoleDelegator = "delegator"
	RoleSubagent  = "subagent"
	RoleSolver    = "solver"
)

// loadCheckpoint loads an nn checkpoint directory, or with dir "" the
// shipped model named what from the binary, and names it in errors.
func loadCheckpoint(what, dir string) (*nn.Params, error) {
	load := func() (*nn.Params, map[string]string, error) { return nn.Load(dir) }
	if dir == "" {
		load = func() (*nn.Params, map[string]string, error) { return models.Load(what) }
	}
	p, _, err := load()
	if err != nil {
		return nil, fmt.Errorf("load %s checkpoint %s: %w", what, dir, err)
	}
	return p, nil
}

// checkpointName is how tables and notes name a checkpoint setting.
func checkpointName(dir string) string {
	if dir == "" {
		return "shipped (embedded)"
	}
	return dir
}

// seeded sets the seed of every request it forwards: base plus the number
// of requests it has forwarded, so a rollout's sampling depends on its seed
// only, not on what else the engine serves meanwhile. Safe for concurrent
// use; concurrent calls then get seeds in the order they arrive.
type seeded struct {
	m    delegate.Model
	mu   sync.Mutex
	next int64
}

func newSeeded(m delegate.Model, base uint64) *seeded {
	return &seeded{m: m, next: int64(base & (1<<62 - 1))}
}

func (s *seeded) Name() string { return s.m.Name() }

func (s *seeded) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	s.mu.Lock()
	seed := s.next
	s.next++
	s.mu.Unlock()
	r := *req
	r.Seed = &seed
	return s.m.Chat(ctx, &r)
}

// conversation reports, on each response of one conversation's model, the
// prompt tokens a backend keeping the conversation's KV cache would not
// recompute: the longest common prefix of the prompt with the previous
// call's prompt followed by its generated tokens. It asks for logprobs to
// know the generated token ids (and leaves them in the response: a trainer
// below may need them). The calls of one conversation are
// sequential; one conversation per value (make one per run).
type conversation struct {
	m    delegate.Model
	mu   sync.Mutex
	prev []int // the previous call's prompt and generated ids
}

func (c *conversation) Name() string { return c.m.Name() }

func (c *conversation) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	r := *req
	r.Logprobs = true
	resp, err := c.m.Chat(ctx, &r)
	if err != nil || resp == nil {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := resp.PromptTokenIDs
	n := 0
	for n < len(ids) && n < len(c.prev) && ids[n] == c.prev[n] {
		n++
	}
	resp.Usage.CachedTokens = n
	if len(resp.Choices) > 0 {
		next := append([]int(nil), ids...)
		for _, lp := range resp.Choices[0].Logprobs {
			next = append(next, lp.TokenID)
		}
		c.prev = next
	}
	return resp, nil
}

// alwaysDelegate is the fixed always-delegate policy in the delegator's
// seat of route: a program, not a model, that hands every step of the
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
type alwaysDelegate struct {
	problems map[string]*world.Problem // by text
}

func newAlwaysDelegate(problems []*world.Problem) *alwaysDelegate {
	a := &alwaysDelegate{problems: make(map[string]*world.Problem, len(problems))}
	for _, p := range problems {
		a.problems[p.Text] = p
	}
	return a
}

func (a *alwaysDelegate) Name() string { return "always-delegate" }

func (a *alwaysDelegate) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p *world.Problem
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
	operand := func(o world.Operand) (int64, bool) {
		if o.Ref == world.Literal {
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
			v, err := world.ParseAnswer(results[tc.ID])
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
			args := fmt.Sprintf(`{"question":%q}`, world.Expr(s.Op, x, y))
			out.ToolCalls = append(out.ToolCalls, delegate.ToolCall{ID: fmt.Sprintf("call_%d", calls), Name: strategy.DelegateToolName, Arguments: args})
		}
		finish = "tool_calls"
	} else {
		last := len(p.Steps) - 1
		out.Content = world.Boxed(value[last])
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
