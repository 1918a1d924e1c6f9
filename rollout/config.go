package rollout

import (
	"context"
	"errors"
	"fmt"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
)

// Scorer turns a rollout into its reward.
// It compares the rollout's trace with the baseline's, by a verifier, a judge or both,
// and applies the reward rules.
// baseline is nil when the run has none, as when the trainer runs Groups.
// Model calls it makes, such as a judge's, go through rec; the rollout's artifact embeds that trace.
// Score may be called from many goroutines at once.
// Its error is for a rollout that could not be scored at all, as when every judge call failed.
// The rollout is then recorded as failed and left out of its group.
type Scorer interface {
	Score(ctx context.Context, rec *delegate.Recorder, task delegate.Task, baseline, rollout *delegate.Trace) (Score, error)
}

// ScorerFunc adapts a function to Scorer.
type ScorerFunc func(ctx context.Context, rec *delegate.Recorder, task delegate.Task, baseline, rollout *delegate.Trace) (Score, error)

// Score calls f.
func (f ScorerFunc) Score(ctx context.Context, rec *delegate.Recorder, task delegate.Task, baseline, rollout *delegate.Trace) (Score, error) {
	return f(ctx, rec, task, baseline, rollout)
}

// Score is what a Scorer says about one rollout.
type Score struct {
	// Reward is what the policy is trained on.
	Reward float64 `json:"reward"`
	// Candidate and Baseline are the scores of the rollout's and the baseline's answers.
	// A judge scores 0-100; a verifier 1 for correct and 0 for incorrect.
	Candidate float64 `json:"candidate"`
	Baseline  float64 `json:"baseline"`
	// Outcome is the comparison's word ("win", "loss", "tie", "correct",
	// ...), "" when none was made.
	Outcome string `json:"outcome,omitempty"`
	// Fixed says what fixed the reward without a comparison: FixedFormat or FixedTruncated.
	// It is "" when the reward came from scoring the answer.
	Fixed string `json:"fixed,omitempty"`
	// Judge is the judge's verdict, when one was asked.
	// It holds raw responses, parsed scores and the order of the answers in each call.
	Judge *judge.Verdict `json:"judge,omitempty"`
	// Inputs is what the reward was computed from, when the scorer says.
	Inputs *reward.Outcome `json:"inputs,omitempty"`
}

// What may fix a reward, as Score.Fixed says.
const (
	FixedFormat    = "format"
	FixedTruncated = "truncated"
)

// Advantages turns the rewards of one group's scored rollouts, in rollout
// order, into advantages of the same length. It must be deterministic.
type Advantages func(rewards []float64) ([]float64, error)

// Config configures Run. DefaultConfig holds the defaults; a zero field
// means zero, except Items and TrainRoles, whose zero is stated.
type Config struct {
	// Items is how many tasks to run, from the start of the task list; 0
	// runs them all.
	Items int `json:"items"`
	// GroupSize (G) is the number of policy rollouts per item, at least 2.
	GroupSize int `json:"group_size"`
	// Concurrency bounds the rollouts in flight at once, at least 1. The
	// baseline of the next item runs beside them.
	Concurrency int `json:"concurrency"`
	// Estimator names the advantage estimator ("grpo", "drgrpo", "rloo",
	// see reward.Estimator); it is part of the run's identity.
	Estimator string `json:"estimator"`
	// Advantages computes the advantages; nil uses
	// reward.Advantages(Estimator, ...).
	Advantages Advantages `json:"-"`
	// KeepTies writes groups whose rewards are all equal with zero
	// advantages (and set_advantage_to_zero overrides) instead of dropping
	// them. Either way they are counted.
	KeepTies bool `json:"keep_ties"`
	// Seed is the seed the caller sampled the dataset and models with.
	// It is part of the run's identity and recorded in every artifact.
	Seed int64 `json:"seed"`
	// OutDir receives artifacts.jsonl, groups.jsonl, summary.json and the
	// state database state.db. It is created when missing.
	OutDir string `json:"out_dir"`
	// TrainRoles are the roles whose calls are the policy's turns, marked
	// trained in groups.jsonl. Default: the policy strategy's deciding role
	// (decompose: delegator, route: strong, lead: leader, single: single).
	TrainRoles []string `json:"train_roles,omitempty"`
	// Fingerprint describes what else makes two runs the same run.
	// It covers the configuration of the strategies, models, judge and reward, such as a hash of the config file.
	// Run cannot see inside a Strategy or a Scorer,
	// so this is how a resume with other prompts, models or rewards is refused.
	Fingerprint string `json:"fingerprint,omitempty"`
	// OmitTraces leaves the full traces out of artifacts.jsonl (the
	// extracted fields stay).
	OmitTraces bool `json:"omit_traces,omitempty"`
	// Sink, when set, receives every group written to groups.jsonl (see
	// Sink); it is not part of the run's identity.
	Sink Sink `json:"-"`
}

// Sink receives the groups a run writes; process --push hands them to a trajectory API.
// Wait is called before each item's rollouts start, and may block to pace the run,
// as when an API's queue is full.
// It returns the policy version, the trainer's step, that the item's rollouts are sampled with;
// the group records it. Its error stops the run.
//
// Send is called from one goroutine with each written group, in order, after the group is on disk.
// Once Send returns nil the group is recorded as sent.
// A resumed run sends the written groups that were not.
// Send's error stops the run, and the group is sent again on resume.
// A receiver should therefore drop a group it already has; GroupRecord.ID names it.
type Sink interface {
	Wait(ctx context.Context) (policyVersion int, err error)
	Send(ctx context.Context, g *GroupRecord) error
}

// DefaultTrainRole is the role whose calls are trained when Config.TrainRoles names none.
// It is the role that decides: decompose's delegator, route's strong model, lead's leader, single's agent.
func DefaultTrainRole(strategyName string) (string, bool) {
	r, ok := defaultTrainRoles[strategyName]
	return r, ok
}

// defaultTrainRoles maps a strategy name to the role it trains by default.
var defaultTrainRoles = map[string]string{
	strategy.NameDecompose: strategy.RoleDelegator,
	strategy.NameRoute:     strategy.RoleStrong,
	strategy.NameLead:      strategy.RoleLeader,
	strategy.NameSingle:    strategy.RoleSingle,
}

// DefaultConfig returns the defaults: groups of 4 with GRPO advantages,
// 4 rollouts in flight. OutDir is left to set.
func DefaultConfig() Config {
	return Config{GroupSize: 4, Concurrency: 4, Estimator: string(reward.GRPO)}
}

// Validate reports every invalid field, naming it.
func (c Config) Validate() error {
	errs := c.validateGroups()
	if c.Items < 0 {
		errs = append(errs, fmt.Errorf("items: %d is negative", c.Items))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("out_dir: empty"))
	}
	return errors.Join(errs...)
}

// validateGroups checks the fields that decide groups, the ones Groups
// uses too.
func (c Config) validateGroups() []error {
	var errs []error
	if c.GroupSize < 2 {
		errs = append(errs, fmt.Errorf("group_size: %d, want at least 2 (advantages are relative to the group)", c.GroupSize))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency: %d, want at least 1", c.Concurrency))
	}
	if _, err := reward.ParseEstimator(c.Estimator); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// resolve fills Advantages from Estimator and TrainRoles from policy, the
// strategy's name, when they are unset.
func (c Config) resolve(policy string) (Config, error) {
	if c.Advantages == nil {
		est := reward.Estimator(c.Estimator)
		c.Advantages = func(r []float64) ([]float64, error) { return reward.Advantages(est, r) }
	}
	if len(c.TrainRoles) == 0 {
		r, ok := defaultTrainRoles[policy]
		if !ok {
			return c, fmt.Errorf("train_roles: none given and strategy %q has no default", policy)
		}
		c.TrainRoles = []string{r}
	}
	return c, nil
}
