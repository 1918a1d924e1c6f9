package main

import (
	"fmt"

	"github.com/delegatelab/delegate/strategy"
)

// promptOverflow says why a stage of strategy name cannot fit its local
// model's context. It assumes the stages it reads used their budgets. It
// returns "" when no stage is known to overflow. contexts holds the context of
// each local model by name; remote models, whose context is not known
// here, are never judged.
//
// The estimate counts only the replies a prompt carries, each at its
// max_tokens: a lower bound of the prompt once they are that long (the
// question and the template come on top). A model that stops early may
// still fit, but a budget the replies fill cannot.
func (c *Config) promptOverflow(name string, contexts map[string]int) string {
	s := c.Strategy
	over := func(role, model string, need int, what, keys string) string {
		ctx, ok := contexts[model]
		if !ok || need < ctx {
			return ""
		}
		return fmt.Sprintf("its %s (model %s, a context of %d tokens) reads %s: %d tokens before the question and the template (%s)",
			role, model, ctx, what, need, keys)
	}
	switch name {
	case strategy.NameLead:
		if s.Peer.MaxTokens <= 0 {
			return ""
		}
		leader := orDefault(c.Roles.Leader, c.Roles.Default)
		if why := over("leader", leader, s.Peers*s.Peer.MaxTokens,
			fmt.Sprintf("%d peers' answers of up to %d tokens each", s.Peers, s.Peer.MaxTokens),
			"strategy.peers, strategy.peer.max_tokens"); why != "" {
			return why
		}
		if s.Rounds > 0 && s.Leader.MaxTokens > 0 {
			peers := c.Roles.Peers
			if len(peers) == 0 {
				peers = []string{c.Roles.Default}
			}
			for _, p := range peers {
				if why := over("peer", p, s.Peer.MaxTokens+s.Leader.MaxTokens,
					fmt.Sprintf("in a refinement round its own answer of up to %d tokens and the leader's of up to %d", s.Peer.MaxTokens, s.Leader.MaxTokens),
					"strategy.peer.max_tokens, strategy.leader.max_tokens"); why != "" {
					return why
				}
			}
		}
	case strategy.NameDecompose:
		if s.Subagent.MaxTokens <= 0 {
			return ""
		}
		delegator := orDefault(c.Roles.Delegator, c.Roles.Default)
		return over("aggregator", delegator, s.MinSubtasks*s.Subagent.MaxTokens,
			fmt.Sprintf("at least %d sub-agents' results of up to %d tokens each", s.MinSubtasks, s.Subagent.MaxTokens),
			"strategy.min_subtasks, strategy.subagent.max_tokens")
	}
	return ""
}
