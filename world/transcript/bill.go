package transcript

import (
	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
)

// Usage bills the conversation. Each assistant message is one call. Its
// prompt is everything rendered before it, the <|assistant|> token
// included, and its completion is its body up to its <|end|>. A
// call after the first is charged its predecessor's prompt and completion
// as cached. With cachePrefix, the first call's fixed prefix is cached
// too, as a backend that keeps that prefix's KV cache across requests
// serves it. The prefix is everything before the first user message: the
// tool declarations and the system prompt, the same for every request of
// the role.
func (t Transcript) Usage(cachePrefix bool) (u delegate.Usage, calls int) {
	_, spans := t.Tokens()
	prevEnd := 0
	if cachePrefix {
		for _, sp := range spans {
			if sp.Role == delegate.RoleUser {
				prevEnd = sp.Start
				break
			}
		}
	}
	for _, sp := range spans {
		if sp.Role != delegate.RoleAssistant {
			continue
		}
		u.PromptTokens += sp.Body
		u.CompletionTokens += sp.End - sp.Body
		u.CachedTokens += prevEnd
		prevEnd = sp.End
		calls++
	}
	return u, calls
}

// Bill returns the account of an episode; cachePrefix as in
// Transcript.Usage.
func (e Episode) Bill(cachePrefix bool) world.Account {
	var a world.Account
	for _, t := range e.Delegator {
		u, n := t.Usage(cachePrefix)
		a.Delegator = a.Delegator.Add(u)
		a.DelegatorCalls += n
	}
	for _, t := range e.Subagents {
		u, n := t.Usage(cachePrefix)
		a.Solver = a.Solver.Add(u)
		a.SubagentCalls += n
	}
	return a
}
