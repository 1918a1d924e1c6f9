package world

import (
	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
)

// Prices is the price table of the two local models. Each is a
// delegate.Price, in dollars per million tokens. See DefaultPrices.
type Prices struct {
	Delegator delegate.Price `json:"delegator" yaml:"delegator"`
	Solver    delegate.Price `json:"solver" yaml:"solver"`
}

// DefaultPrices is the local models' price table. A delegator token costs
// 5 times a solver token of the same kind. The delegator has several times
// the solver's parameters, and a forward pass costs in proportion. Within
// a model, a generated token costs 5 times a prompt token: prefill runs
// the prompt through the model in one batched pass, decoding runs one
// token at a time. A cached prompt token costs a tenth of a prompt token;
// a backend kept its keys and values from the conversation's previous
// call. The ratios are the common API ones; the scale is arbitrary.
//
//	              input  cached  output
//	delegator     1.00   0.10    5.00
//	solver        0.20   0.02    1.00
func DefaultPrices() Prices {
	return Prices{
		Delegator: delegate.Price{Input: 1, CachedInput: 0.1, Output: 5},
		Solver:    delegate.Price{Input: 0.2, CachedInput: 0.02, Output: 1},
	}
}

// Account is the token bill of one episode. It counts under package
// tokenizer's chat template: one token per byte plus the specials.
type Account struct {
	// Delegator sums the delegator's calls. CachedTokens counts, for each
	// call after the first of a conversation, the tokens of the previous
	// call's prompt and completion. The next prompt starts with them, since
	// the template is prefix-stable. A backend keeping the conversation's
	// KV cache does not recompute them.
	Delegator delegate.Usage `json:"delegator"`
	// Solver sums the sub-agents' calls: the solver's, or the peers' under
	// lead.
	Solver delegate.Usage `json:"solver"`
	// DelegatorCalls and SubagentCalls count the calls.
	DelegatorCalls int `json:"delegator_calls"`
	SubagentCalls  int `json:"subagent_calls"`
}

// Add returns the sum of two accounts.
func (a Account) Add(b Account) Account {
	return Account{
		Delegator:      a.Delegator.Add(b.Delegator),
		Solver:         a.Solver.Add(b.Solver),
		DelegatorCalls: a.DelegatorCalls + b.DelegatorCalls,
		SubagentCalls:  a.SubagentCalls + b.SubagentCalls,
	}
}

// Cost is the account priced by p, in dollars.
func (a Account) Cost(p Prices) float64 {
	return p.Delegator.Cost(a.Delegator) + p.Solver.Cost(a.Solver)
}

// DefaultReward is the reward this world is designed for. It is a setting
// of reward.Graded; the package doc shows the arithmetic:
//
//	reward = correct − 0.001·(delegator generated tokens) − 0.02·(sub-agent calls)
//
// with correct 1 for a right final answer and 0 otherwise; an answer the
// strategy reports a failure for counts as wrong (format penalty 0).
func DefaultReward() reward.Graded {
	return reward.Graded{Lambda: 0.001, CostUnit: reward.CostTokens, Mu: 0.02, FormatPenalty: 0}
}

// RewardOf is g's reward of an episode's bill given its correctness: the
// delegator's generated tokens are the policy's tokens.
func RewardOf(g reward.Graded, correct bool, a Account) float64 {
	return g.Reward(reward.Outcome{FormatOK: true, Correct: &correct, Tokens: a.Delegator.CompletionTokens, Calls: a.SubagentCalls, Cost: 0})
}
