package scripted

import (
	"context"
	"fmt"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// Threshold runs the threshold rule world.FirstFactorBelow. It delegates
// the products whose first factor is below t and computes the rest.
func Threshold(t int64) Decider { return FromPolicy(world.FirstFactorBelow(t)) }

// MinThreshold and MaxThreshold bound what FitThreshold returns. No
// 2-digit first factor is below MinThreshold, so nothing is delegated.
// Every one is below MaxThreshold.
const (
	MinThreshold = 10
	MaxThreshold = 100
)

// FitThreshold finds the threshold from the solver's answers, without a
// model. It asks the solver, greedily and once per question, each product
// of problems that the threshold rule could delegate. It returns the t
// whose rule earns most on them: gain for a product delegated and answered
// right, minus loss for one answered wrong. On a tie it returns the
// smallest such t.
func FitThreshold(ctx context.Context, solver delegate.Model, problems []*world.Problem, gain, loss float64) (int64, error) {
	wcfg := transcript.StrategyConfig().Weak
	temp := 0.0
	// score[x] sums what delegating the products of first factor x earns.
	var score [MaxThreshold]float64
	asked := map[string]bool{}
	all := world.FirstFactorBelow(MaxThreshold)
	for _, p := range problems {
		for i, s := range p.Steps {
			if !all(p, i) || asked[s.Expr()] {
				continue
			}
			asked[s.Expr()] = true
			resp, err := solver.Chat(ctx, &delegate.Request{
				Messages:    transcript.SolverMessages(s.Expr()),
				Temperature: &temp, MaxTokens: wcfg.MaxTokens,
			})
			if err != nil {
				return 0, fmt.Errorf("fit threshold: ask the solver %s: %w", s.Expr(), err)
			}
			if world.Correct(resp.Text(), s.Result) {
				score[s.X.Value] += gain
			} else {
				score[s.X.Value] -= loss
			}
		}
	}
	best, bestSum, sum := int64(MinThreshold), 0.0, 0.0
	for t := int64(MinThreshold + 1); t <= MaxThreshold; t++ {
		sum += score[t-1]
		if sum > bestSum {
			best, bestSum = t, sum
		}
	}
	return best, nil
}
