package transcript

import (
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// Accuracy is an assumed per-step accuracy profile. It gives expected
// rewards before models exist. A step the delegator computes is right with
// probability Inline. A delegated step is right with Covered inside the
// solver's coverage and Uncovered outside it. Steps fail independently.
type Accuracy struct {
	Inline, Covered, Uncovered float64
	// Coverage is the solver's. The zero value is the default world's.
	Coverage world.Coverage
}

// DesignAccuracy is the profile the package doc's calculation assumes.
func DesignAccuracy() Accuracy { return Accuracy{Inline: 0.99, Covered: 0.99, Uncovered: 0.2} }

// PCorrect is the probability that an episode's answer is right under acc.
func (acc Accuracy) PCorrect(e Episode) float64 {
	pr := 1.0
	for i, s := range e.Problem.Steps {
		switch {
		case !e.Delegated[i]:
			pr *= acc.Inline
		case acc.Coverage.Covers(s.Op, s.X.Value, s.Y.Value):
			pr *= acc.Covered
		default:
			pr *= acc.Uncovered
		}
	}
	return pr
}

// Stats are the mean figures of one protocol and policy over a problem set.
type Stats struct {
	Name string
	N    int
	// Means per episode.
	DelegatorPrompt, DelegatorCached, DelegatorCompletion float64
	SolverPrompt, SolverCompletion                        float64
	DelegatorCalls, SubagentCalls                         float64
	Delegated                                             float64 // share of steps delegated
	Cost                                                  float64 // dollars per million episodes
	CostPrefixCached                                      float64 // the same with every fixed prefix cached
	CostUncached                                          float64 // the same with nothing cached
	PCorrect                                              float64 // under the accuracy profile
	Reward                                                float64 // expected, under the profile
}

// Measure builds one episode per problem with fn and returns the means.
func Measure(name string, problems []*world.Problem, fn func(*world.Problem) Episode, prices world.Prices, rew reward.Graded, acc Accuracy) Stats {
	st := Stats{Name: name, N: len(problems)}
	if len(problems) == 0 {
		return st
	}
	var steps, delegated int
	for _, p := range problems {
		e := fn(p)
		a := e.Bill(false)
		st.CostPrefixCached += e.Bill(true).Cost(prices) * 1e6
		none := a
		none.Delegator.CachedTokens, none.Solver.CachedTokens = 0, 0
		st.CostUncached += none.Cost(prices) * 1e6
		pc := acc.PCorrect(e)
		st.DelegatorPrompt += float64(a.Delegator.PromptTokens)
		st.DelegatorCached += float64(a.Delegator.CachedTokens)
		st.DelegatorCompletion += float64(a.Delegator.CompletionTokens)
		st.SolverPrompt += float64(a.Solver.PromptTokens)
		st.SolverCompletion += float64(a.Solver.CompletionTokens)
		st.DelegatorCalls += float64(a.DelegatorCalls)
		st.SubagentCalls += float64(a.SubagentCalls)
		st.Cost += a.Cost(prices) * 1e6
		st.PCorrect += pc
		st.Reward += pc*world.RewardOf(rew, true, a) + (1-pc)*world.RewardOf(rew, false, a)
		for _, d := range e.Delegated {
			steps++
			if d {
				delegated++
			}
		}
	}
	n := float64(len(problems))
	for _, f := range []*float64{&st.DelegatorPrompt, &st.DelegatorCached, &st.DelegatorCompletion, &st.SolverPrompt,
		&st.SolverCompletion, &st.DelegatorCalls, &st.SubagentCalls, &st.Cost, &st.CostPrefixCached, &st.CostUncached, &st.PCorrect, &st.Reward} {
		*f /= n
	}
	st.Delegated = float64(delegated) / float64(max(steps, 1))
	return st
}

// Report measures every protocol and policy of this world over problems.
// It writes a table: the figures of docs/world.md. The route rows are the
// delegator alone, and every input-independent per-position rule over the
// longest problem's steps. Then come the selective policy, the design's
// optimum, which delegates exactly the steps worth it that the solver
// covers; the oracle router; and random delegation. Decompose and lead
// follow. The oracle delegates a step when the solver answers it right.
// So its figures are the selective transcripts with every delegated step
// right, Covered taken as 1. It also computes the products the solver
// would get wrong, a share 1 − Covered of them, which this leaves out.
// seed seeds the random policy and the lead peers.
func Report(w io.Writer, problems []*world.Problem, seed uint64, prices world.Prices, rew reward.Graded, acc Accuracy) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	route := func(pol world.Policy) func(*world.Problem) Episode {
		return func(p *world.Problem) Episode { return Route(p, pol) }
	}
	steps := 0
	for _, p := range problems {
		steps = max(steps, len(p.Steps))
	}
	rows := []Stats{Measure("single (alone)", problems, Single, prices, rew, acc)}
	for mask := range uint(1) << steps {
		rows = append(rows, Measure("route "+world.PositionRuleName(mask, steps), problems, route(world.PositionRule(mask)), prices, rew, acc))
	}
	oracle := acc
	oracle.Covered = 1
	sel := acc.Coverage.Selective
	rows = append(rows,
		Measure("route selective", problems, route(sel), prices, rew, acc),
		Measure("route oracle", problems, route(sel), prices, rew, oracle),
		Measure("route random 0.5", problems, route(world.Random(0.5, rng)), prices, rew, acc),
		Measure("decompose selective", problems, func(p *world.Problem) Episode { return Decompose(p, sel) }, prices, rew, acc),
		Measure("lead k=3", problems, func(p *world.Problem) Episode { return Lead(p, 3, rng) }, prices, rew, acc),
	)
	if err := writeTable(w, rows); err != nil {
		return err
	}
	c, err := BuildCorpus(problems, DefaultMix(), seed)
	if err != nil {
		return err
	}
	return writeLengths(w, c)
}

// writeLengths writes the mean and longest rendered length of the corpus's
// transcripts per kind: the sequence lengths pretraining works with.
func writeLengths(w io.Writer, c Corpus) error {
	type agg struct{ n, sum, max, gen int }
	by := map[Kind]*agg{}
	var order []Kind
	for _, set := range [][]Transcript{c.Delegator, c.Solver, c.Peers} {
		for _, t := range set {
			a := by[t.Kind]
			if a == nil {
				a = &agg{}
				by[t.Kind] = a
				order = append(order, t.Kind)
			}
			ids, spans := t.Tokens()
			a.n++
			a.sum += len(ids)
			a.max = max(a.max, len(ids))
			for _, sp := range spans {
				if sp.Role == "assistant" {
					a.gen += sp.End - sp.Body
				}
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transcript	count	mean tokens	mean generated	max tokens	")
	for _, k := range order {
		a := by[k]
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%d\t\n", k, a.n, float64(a.sum)/float64(a.n), float64(a.gen)/float64(a.n), a.max)
	}
	return tw.Flush()
}

func writeTable(w io.Writer, rows []Stats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "protocol\tdel.prompt\tcached\tdel.gen\tsub.prompt\tsub.gen\tcalls\tdelegated\tcost/none\tcost\tcost/pfx\tP(correct)\treward\t")
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.3f\t%.3f\t\n", s.Name, s.DelegatorPrompt, s.DelegatorCached,
			s.DelegatorCompletion, s.SolverPrompt, s.SolverCompletion, s.SubagentCalls, s.Delegated, s.CostUncached, s.Cost, s.CostPrefixCached, s.PCorrect, s.Reward)
	}
	return tw.Flush()
}
