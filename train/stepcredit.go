package train

import (
	"context"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/world"
)

// stepScorer is the scorer of reward.CreditStep. It is the world's reward,
// less 1 for each wrong answer the rollout took from the solver. The one a
// wrong final answer already pays for is not charged again. The task's reward
// pays 1 for a wrong answer however many delegated steps made it wrong, so a
// rollout that hands over two products the solver gets wrong scores as one
// that hands over one: the second decision goes unpunished, and a right one
// beside a wrong one goes unrewarded. Charging each wrong answer makes the
// reward the sum of the steps' exact values, each delegated step judged by
// the world on its own (world.ParseExpr, world.Correct). It equals the task's
// reward on every rollout with at most one wrong answer from the solver, so
// the optimal policy is the same.
type stepScorer struct{ base *rollout.RewardScorer }

// At is a copy that scores rollouts sampled for trainer step step.
func (s stepScorer) At(step int) stepScorer { return stepScorer{s.base.At(step)} }

// Score scores tr with the base scorer and charges its wrong answers.
func (s stepScorer) Score(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (rollout.Score, error) {
	sc, err := s.base.Score(ctx, rec, task, base, tr)
	if err != nil {
		return sc, err
	}
	wrong := 0.0
	if sc.Candidate != 1 {
		wrong = 1
	}
	sc.Reward -= max(wrong, float64(solverWrong(tr))) - wrong
	return sc, nil
}

// solverWrong counts the solver's answers in tr that the world judges
// wrong. Those are calls whose question is a world operation, such as
// "47*28", and whose reply misses the exact result.
func solverWrong(tr *delegate.Trace) int {
	n := 0
	for _, c := range tr.Calls() {
		if c.Role != RoleSubagent || len(c.Messages) == 0 {
			continue
		}
		op, x, y, err := world.ParseExpr(strings.TrimSpace(c.Messages[len(c.Messages)-1].Content))
		if err != nil {
			continue
		}
		if c.Output == nil || !world.Correct(c.Output.Content, op.Apply(x, y)) {
			n++
		}
	}
	return n
}
