package reward

import (
	"fmt"

	"github.com/delegatelab/delegate"
)

// The credit rules of a run: how a rollout's samples get advantages.
const (
	// CreditTask gives every sample of a rollout the rollout's advantage,
	// from the task's reward among the attempts at the task.
	CreditTask = "task"
	// CreditRole gives each role's samples advantages among that role's
	// own samples (RoleCredit).
	CreditRole = "role"
	// CreditStep gives every sample its rollout's advantage, from a reward
	// that charges per step. That reward charges each wrong answer the
	// rollout took from a sub-agent as a wrong final answer is charged.
	// train's stepScorer computes it.
	CreditStep = "step"
	// CreditDecision gives each delegate call's tokens an advantage from
	// that decision's own value, among the same kind of decision; the rest
	// of a rollout keeps its advantage. train's creditDecisions computes it.
	CreditDecision = "decision"
	// CreditCounterfactual gives each delegate call's tokens that
	// decision's own value as its advantage, against computing the step
	// inline, which is worth 0. train's creditCounterfactual computes it.
	CreditCounterfactual = "counterfactual"
)

// ParseCredit checks a credit rule's name from a flag or config file.
func ParseCredit(s string) (string, error) {
	switch s {
	case CreditTask, CreditRole, CreditStep, CreditDecision, CreditCounterfactual:
		return s, nil
	}
	return "", fmt.Errorf("credit %q: want %q, %q, %q, %q or %q", s, CreditTask, CreditRole, CreditStep, CreditDecision, CreditCounterfactual)
}

// The comparison groups of RoleCredit.
const (
	// GroupQuestion holds a role's samples given the same question.
	// They are the attempts at one subtask, or a lead's attempts at the task.
	GroupQuestion = "question"
	// GroupRole holds a role's samples whose question no other sample
	// of the role was given.
	GroupRole = "role"
)

// SampleCredit is one sample's reward and advantage under RoleCredit.
type SampleCredit struct {
	Role     string `json:"role"`
	Question string `json:"question"`
	// Group is GroupQuestion or GroupRole; Size counts its samples.
	Group     string  `json:"group"`
	Size      int     `json:"size"`
	Reward    float64 `json:"reward"`
	Advantage float64 `json:"advantage"`
}

// RoleCredit gives each sample of eps, the scored attempts at one task,
// an advantage against its own role's samples. A sample is rewarded by
// its own verifiable result where one exists (Sample.Correct: 1 or 0),
// else by its attempt's Outcome.Reward. It is compared under est with
// the role's samples given the same question where there are several
// (a lead's attempts at the task, sub-agents' attempts at a repeated
// subtask), else with the role's other samples of unrepeated questions.
// A sample alone in its group gets 0. The result has one entry per
// sample of each episode, in order; a non-finite reward is an error.
func RoleCredit(est Estimator, eps []*delegate.Episode) ([][]SampleCredit, error) {
	if _, err := ParseEstimator(string(est)); err != nil {
		return nil, fmt.Errorf("role credit: %w", err)
	}
	type ref struct{ e, s int }
	out := make([][]SampleCredit, len(eps))
	byQuestion := map[[2]string][]ref{} // role, question
	var roles []string
	seen := map[string]bool{}
	for i, e := range eps {
		out[i] = make([]SampleCredit, len(e.Samples))
		for j, s := range e.Samples {
			r := e.Outcome.Reward
			if s.Correct != nil {
				r = 0
				if *s.Correct {
					r = 1
				}
			}
			out[i][j] = SampleCredit{Role: s.Role, Question: s.Question, Reward: r}
			k := [2]string{s.Role, s.Question}
			byQuestion[k] = append(byQuestion[k], ref{i, j})
			if !seen[s.Role] {
				seen[s.Role] = true
				roles = append(roles, s.Role)
			}
		}
	}
	score := func(group string, refs []ref) error {
		rewards := make([]float64, len(refs))
		for n, x := range refs {
			c := &out[x.e][x.s]
			c.Group, c.Size = group, len(refs)
			rewards[n] = c.Reward
		}
		if len(refs) < 2 {
			return nil // nothing to compare with: advantage 0
		}
		adv, err := Advantages(est, rewards)
		if err != nil {
			return err
		}
		for n, x := range refs {
			out[x.e][x.s].Advantage = adv[n]
		}
		return nil
	}
	// Groups in the order their first sample appears, so that errors and
	// rounding do not depend on map order.
	for _, role := range roles {
		var alone []ref
		done := map[string]bool{}
		for i, e := range eps {
			for _, s := range e.Samples {
				if s.Role != role || done[s.Question] {
					continue
				}
				done[s.Question] = true
				refs := byQuestion[[2]string{role, s.Question}]
				if len(refs) == 1 {
					alone = append(alone, refs[0])
					continue
				}
				if err := score(GroupQuestion, refs); err != nil {
					return nil, fmt.Errorf("role credit: %s question %q of episode %d: %w", role, s.Question, i, err)
				}
			}
		}
		if len(alone) > 0 {
			if err := score(GroupRole, alone); err != nil {
				return nil, fmt.Errorf("role credit: %s: %w", role, err)
			}
		}
	}
	return out, nil
}
