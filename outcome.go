package delegate

import "time"

// Outcome is what a task attempt came to: whether it was right, its
// reward, and what it spent. Scorers fill Correct and Reward; the rest
// can be read from the attempt's trace (NewEpisode).
type Outcome struct {
	// Correct is set when the task has a reference answer.
	Correct *bool `json:"correct,omitempty"`
	// Reward is the attempt's scalar reward, when it was scored.
	Reward float64 `json:"reward,omitempty"`
	// Calls counts the sub-agent calls: the work handed on.
	Calls int `json:"calls"`
	// Tokens is the policy's generated tokens.
	Tokens int `json:"tokens"`
	// Cost is the dollars of every role.
	Cost float64 `json:"cost"`
	// Roles holds the calls, tokens and dollars of each role.
	Roles map[string]RoleSpend `json:"roles,omitempty"`
	// Latency is the attempt's wall time.
	Latency time.Duration `json:"latency_ns,omitempty"`
}

// RoleSpend is what one role of an attempt spent.
type RoleSpend struct {
	Calls   int     `json:"calls"`
	Usage   Usage   `json:"usage"`
	Dollars float64 `json:"dollars"`
}
