package scripted

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// Planner is a decompose policy run by a program in the delegator's seat. Its
// plan turn hands the solver the ready steps, by world.Step.Ready, that its
// Decider picks, in the exact format of transcript.Decompose. That means at
// least one subtask, the first ready step when the Decider picks none, and at
// most transcript.MaxSubtasks. The aggregation turn writes the scratchpads of
// every other step, then "Final Output: N". The solver's answers, right or
// wrong, stand for the steps handed over. Like Delegator it measures the
// policy, not a model executing it, and counts usage and returns token ids as
// a local model does. Safe for concurrent use when its Decider is.
type Planner struct{ program }

// NewPlanner returns the program named name that runs decide on problems.
func NewPlanner(name string, problems []*world.Problem, decide Decider) *Planner {
	return &Planner{newProgram(name, problems, decide)}
}

// ReadyRule is a fixed planning rule by position among the ready steps.
// It hands over the k-th ready step, from 0 in step order, when bit k of
// mask is set. Like world.PositionRule it
// ignores what the steps are.
func ReadyRule(mask uint) Decider {
	return func(_ context.Context, p *world.Problem, i int, _, _ int64) (bool, error) {
		k := 0
		for j := range i {
			if p.Steps[j].Ready() {
				k++
			}
		}
		return k < 64 && mask>>uint(k)&1 == 1, nil
	}
}

// ReadyRuleName names a ReadyRule over ready steps. The name is "every
// ready step" or the ordinals it hands over, as in "ready steps 1, 2".
func ReadyRuleName(mask uint, ready int) string {
	var pos []string
	for k := range ready {
		if mask>>uint(k)&1 == 1 {
			pos = append(pos, strconv.Itoa(k+1))
		}
	}
	switch {
	case len(pos) == ready && ready > 1:
		return "hand over every ready step"
	case len(pos) == 1:
		return "hand over ready step " + pos[0]
	}
	return "hand over ready steps " + strings.Join(pos, ", ")
}

// ReadySteps is the number of steps of p computable from its text.
func ReadySteps(p *world.Problem) int {
	n := 0
	for _, st := range p.Steps {
		if st.Ready() {
			n++
		}
	}
	return n
}

func (s *Planner) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var user string
	for _, m := range req.Messages {
		if m.Role == delegate.RoleUser {
			user = m.Content
		}
	}
	var out delegate.Message
	var err error
	if p, ok := s.problems[strings.TrimSpace(user)]; ok {
		out, err = s.plan(ctx, p)
	} else {
		head, rest, _ := strings.Cut(user, "\n")
		p, ok := s.problems[strings.TrimSpace(head)]
		if !ok {
			return nil, s.unknown()
		}
		out = aggregate(p, rest)
	}
	if err != nil {
		return nil, err
	}
	return respond(s.name, req, out), nil
}

// plan is the plan turn: the subtasks the Decider picks among the ready
// steps, as transcript.Decompose writes them.
func (s *Planner) plan(ctx context.Context, p *world.Problem) (delegate.Message, error) {
	chosen := make([]bool, len(p.Steps))
	for i, st := range p.Steps {
		if !st.Ready() {
			continue
		}
		d, err := s.decide(ctx, p, i, st.X.Value, st.Y.Value)
		if err != nil {
			return delegate.Message{}, fmt.Errorf("%s: problem %s step %d: %w", s.name, p.ID, i+1, err)
		}
		chosen[i] = d
	}
	ep := transcript.Decompose(p, func(_ *world.Problem, i int) bool { return chosen[i] })
	msgs := ep.Delegator[0].Messages
	return delegate.Assistant(msgs[len(msgs)-1].Content), nil
}

// aggregate is the aggregation turn of p. It takes the aggregation
// prompt's lines after the problem: the plan's reasoning, then "subtask
// gave result" blocks. A step whose question was answered takes the answer's
// value, or 0 when it has none, as Delegator goes on. Every other step is
// computed with a scratchpad from the values known. A wrong answer may make
// a step one the formats cannot write, a negative difference; then the
// turn stops without a final output.
func aggregate(p *world.Problem, rest string) delegate.Message {
	answers := map[string]string{}
	var cur string
	for _, line := range strings.Split(rest, "\n") {
		if q, a, ok := strings.Cut(line, " gave "); ok {
			cur = strings.TrimSpace(q)
			answers[cur] = a
			continue
		}
		if cur != "" {
			answers[cur] += "\n" + line
		}
	}
	n := len(p.Steps)
	value := make([]int64, n)
	operand := func(o world.Operand) int64 {
		if o.Ref == world.Literal {
			return o.Value
		}
		return value[o.Ref]
	}
	var blocks []string
	for i, st := range p.Steps {
		x, y := operand(st.X), operand(st.Y)
		if a, ok := answers[st.Expr()]; ok && st.Ready() {
			v, err := world.ParseAnswer(a)
			if err != nil {
				v = 0
			}
			value[i] = v
			continue
		}
		text, v, err := world.Scratchpad(st.Op, x, y)
		if err != nil {
			return delegate.Assistant(strings.Join(blocks, "\n"))
		}
		blocks = append(blocks, text)
		value[i] = v
	}
	blocks = append(blocks, delegate.FinalOutputMarker+" "+strconv.FormatInt(value[n-1], 10))
	return delegate.Assistant(strings.Join(blocks, "\n"))
}
