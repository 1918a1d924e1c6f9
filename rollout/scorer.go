package rollout

import (
	"context"
	"errors"
	"fmt"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/score"
)

// RewardScorer is the Scorer of `delegate process`.
// It reads a rollout's format from its trace and checks the answer with Verify where there is a reference.
// It asks the judge to compare with the baseline only when reward.NeedsJudge says that can change the reward.
// Then it applies the reward function.
// It is safe for concurrent use when Judge, Verify and Reward are.
// Without a baseline, as when the trainer runs Groups, Baseline is 0
// and only tasks with a reference answer can be scored.
type RewardScorer struct {
	// Judge compares answers to open-ended requests; nil when every task has
	// a reference answer.
	Judge *judge.Judge
	// Verify says whether a response answers a task with a reference
	// answer correctly; nil uses score.Verify.
	Verify delegate.Verifier
	// Reward is the reward function: reward.Parity, or one a
	// reward.Config selects.
	Reward func(reward.Outcome) float64
	// PolicyRoles are the policy's roles, whose tokens the cost term counts.
	// The calls of every other role count as delegated calls.
	// The default is the trace strategy's deciding role, as for Config.TrainRoles.
	PolicyRoles []string
	// GeneratedTokens makes the cost term count only the policy roles' completion tokens.
	// That is what the training world's world.RewardOf does, instead of counting their whole usage.
	GeneratedTokens bool
	// Step is the trainer step the scored rollouts were sampled for, set
	// in every reward.Outcome; 0 outside training. See At.
	Step int
}

// At is a copy of s that scores rollouts sampled for trainer step step.
// A reward annealed over training, such as reward.CriticalPath, then anneals.
func (s *RewardScorer) At(step int) *RewardScorer {
	c := *s
	c.Step = step
	return &c
}

// Score implements Scorer.
func (s *RewardScorer) Score(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (Score, error) {
	if s.Reward == nil {
		return Score{}, errors.New("reward scorer: no reward function")
	}
	o, err := s.outcome(task, base, tr)
	if err != nil {
		return Score{}, err
	}
	sc := Score{}
	if o.Correct != nil {
		sc.Outcome, sc.Candidate = "incorrect", 0
		if *o.Correct {
			sc.Outcome, sc.Candidate = "correct", 1
		}
		if base != nil {
			ok, err := s.verify(task, base.Answer)
			if err != nil {
				return Score{}, fmt.Errorf("score task %q: baseline: %w", task.ID, err)
			}
			if ok {
				sc.Baseline = 1
			}
		}
	}
	if reward.NeedsJudge(o) {
		if s.Judge == nil {
			return Score{}, fmt.Errorf("score task %q: no reference answer and no judge", task.ID)
		}
		if base == nil {
			return Score{}, fmt.Errorf("score task %q: no reference answer and no baseline to compare with", task.ID)
		}
		v, err := s.Judge.Compare(ctx, rec, nil, task.Prompt, tr.Answer, base.Answer)
		if err != nil {
			return Score{}, fmt.Errorf("score task %q: %w", task.ID, err)
		}
		o.Verdict = &v
		sc.Judge = &v
		sc.Outcome, sc.Candidate, sc.Baseline = v.Outcome, v.Candidate, v.Baseline
	}
	switch {
	case o.Truncated:
		sc.Fixed = FixedTruncated
	case !o.FormatOK:
		sc.Fixed = FixedFormat
	}
	sc.Reward = s.Reward(o)
	sc.Inputs = &o
	return sc, nil
}

// outcome reads what the reward needs from the traces.
func (s *RewardScorer) outcome(task delegate.Task, base, tr *delegate.Trace) (reward.Outcome, error) {
	roles := s.PolicyRoles
	if len(roles) == 0 {
		if r, ok := defaultTrainRoles[tr.Strategy]; ok {
			roles = []string{r}
		}
	}
	o := reward.Outcome{FormatOK: true, Cost: tr.Total.Cost, Latency: tr.Latency, AllCalls: tr.Total.Calls, Step: s.Step}
	o.CriticalPath, o.CriticalCalls = delegate.CriticalPath(tr.Root)
	for _, n := range tr.Calls() {
		if o.ModelCalls == nil {
			o.ModelCalls = map[string]int{}
		}
		o.ModelCalls[n.Model]++
	}
	for role, t := range tr.Roles {
		switch {
		case containsString(roles, role) && s.GeneratedTokens:
			o.Tokens += t.Usage.CompletionTokens
		case containsString(roles, role):
			o.Tokens += t.Usage.Total()
		default:
			o.Calls += t.Calls
		}
	}
	switch tr.FailureKind {
	case "":
	case delegate.FailureTruncated:
		o.FormatOK, o.Truncated, o.FailedStage, o.FormatFailure = false, true, reward.StageAnswer, tr.Failure
	case delegate.FailureAnswerFormat:
		o.FormatOK, o.FailedStage, o.FormatFailure = false, reward.StageAnswer, tr.Failure
	case delegate.FailurePlan, delegate.FailurePlanTruncated, delegate.FailureMaxTurns:
		o.FormatOK, o.FailedStage, o.FormatFailure = false, reward.StagePlan, tr.Failure
		o.Truncated = tr.FailureKind == delegate.FailurePlanTruncated
	default:
		// Call failures and panics never reach a scorer (Run records them
		// as failed rollouts); anything else is a failure of the rollout.
		o.Error = tr.Failure
	}
	if base != nil {
		switch base.FailureKind {
		case delegate.FailureAnswerFormat, delegate.FailureTruncated:
			o.BaselineFailure = base.Failure
		}
	}
	if task.Answer != "" && o.FormatOK && o.Error == "" {
		ok, err := s.verify(task, tr.Answer)
		if err != nil {
			return o, fmt.Errorf("score task %q: %w", task.ID, err)
		}
		o.Correct = &ok
	}
	return o, nil
}

func (s *RewardScorer) verify(t delegate.Task, response string) (bool, error) {
	verify := s.Verify
	if verify == nil {
		verify = score.Verify
	}
	v, err := verify(t, response)
	return v.Correct, err
}
