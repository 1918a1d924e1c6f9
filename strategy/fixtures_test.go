package strategy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

// The fixed inputs and scripted replies of the happy paths, shared by the
// strategy tests and the golden prompt tests.
const (
	testRequest = "Plan a three-day visit to Rome on a small budget."
	mathRequest = "A shop sells 6 boxes of 7 pens and then 3 more pens. How many pens did it sell?"
)

var testSubtasks = []string{
	"List free or cheap sights in Rome, grouped by district.",
	"Suggest inexpensive places to eat near those districts.",
	"Explain how to get around Rome cheaply for three days.",
}

const (
	testPlanReasoning = "A good plan needs sights, food and transport; each can be researched on its own."
	testAggregate     = "I combined the three results.\nFinal Output:\nDay 1: Colosseum area. Day 2: Vatican. Day 3: Trastevere."
	testAnswer        = "Day 1: Colosseum area. Day 2: Vatican. Day 3: Trastevere."
)

// decomposeFixture returns a planning delegator and a sub-agent for decompose tests.
// The delegator plans the three test subtasks, closing them with closing,
// and aggregates. The sub-agent answers "Result for: <subtask>".
func decomposeFixture(closing string) (delegator, subagent *counted) {
	delegator = fake("delegator-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Subtask 1:") {
			return modeltest.Text(testAggregate), nil
		}
		return modeltest.Text(planText(testPlanReasoning, closing, testSubtasks...)), nil
	})
	subagent = fake("subagent-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("Result for: " + subtaskOf(req)), nil
	})
	return delegator, subagent
}

// barrier lets a test prove that n calls were in flight at once: each
// caller waits until n have arrived. If they never do, wait gives up after
// a while with an error, so a sequential implementation fails instead of
// hanging.
type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errors.New("barrier: the calls were not in flight at the same time")
	}
}

// routeFixture returns a strong and a weak model for route tests.
// The strong one delegates two questions at once in turn 1 and answers in
// \boxed{} in turn 2. The weak one answers them, each call waiting at a
// barrier until both are in flight.
func routeFixture() (strong, weak *counted) {
	strong = fake("strong-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		for _, m := range req.Messages {
			if m.Role == delegate.RoleTool {
				return modeltest.Text("6 boxes of 7 is 42, plus 3 is 45.\n\\boxed{45}"), nil
			}
		}
		return modeltest.ToolCalls(
			modeltest.Call("call_a", "delegate", `{"question": "What is 6 * 7?"}`),
			modeltest.Call("call_b", "delegate", "```json\n{\"question\": \"What is 42 + 3?\"}\n```"),
		), nil
	})
	b := newBarrier(2)
	weak = fake("weak-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if err := b.wait(ctx); err != nil {
			return nil, err
		}
		switch q := modeltest.LastUser(req); {
		case strings.Contains(q, "6 * 7"):
			return modeltest.Text("6 * 7 = \\boxed{42}"), nil
		case strings.Contains(q, "42 + 3"):
			return modeltest.Text("42 + 3 = \\boxed{45}"), nil
		}
		return modeltest.Text("I do not know."), nil
	})
	return strong, weak
}

// leadFixture returns a peer and a leader for lead tests.
// The peer answers 45 and, when refining, confirms it. The leader
// aggregates into <answer>45</answer>, and in later rounds into
// <answer>45 pens</answer>.
func leadFixture() (leader, peer *counted) {
	peer = fake("peer-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if len(req.Messages) > 2 {
			return modeltest.Text("The leader agrees with 45; I keep it. <answer>45</answer>"), nil
		}
		return modeltest.Text("6 * 7 = 42, and 42 + 3 = 45. <answer>45</answer>"), nil
	})
	leader = fake("leader-model", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Your previous aggregation:") {
			return modeltest.Text("The refined answers still agree. <answer>45 pens</answer>"), nil
		}
		return modeltest.Text("All three agents computed 42 + 3. <answer>45</answer>"), nil
	})
	return leader, peer
}
