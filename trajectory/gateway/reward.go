package gateway

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
)

// Terms are what a reward computed by Config.Reward was made of.
// A user reads in them why a session got its reward.
type Terms struct {
	// Reward names the reward function (Config.RewardName).
	Reward string `json:"reward"`
	// Quality is the verifier's word: 1 right, 0 wrong.
	Quality float64 `json:"quality"`
	// Outcome is the reward function's whole input. Its cost is the
	// session's dollars, tokens the trained roles' tokens, calls the
	// calls of the other roles: the sub-agent calls. Latency runs from
	// the first call's start to the last call's end.
	reward.Outcome
}

// traceStrategy names the strategy of a session's trace. No strategy of
// package strategy has this name, so rollout.RewardScorer takes the
// policy roles from PolicyRoles alone.
const traceStrategy = "gateway"

// computeReward gives fin the reward of Config.Reward. A session's calls
// become a trace that rollout.RewardScorer scores, as process scores a
// rollout. The trained roles are the policy; the step is the session's
// policy version, so that an annealed reward anneals.
func (g *Gateway) computeReward(ctx context.Context, fin *Finished, answer string) error {
	step := 0
	if fin.PolicyVersion != nil {
		step = *fin.PolicyVersion
	}
	sc := &rollout.RewardScorer{Verify: g.cfg.Verify, Reward: g.cfg.Reward, PolicyRoles: policyRoles(fin.Calls),
		GeneratedTokens: g.cfg.GeneratedTokens, Step: step}
	res, err := sc.Score(ctx, nil, fin.Task, nil, sessionTrace(fin.Calls, answer))
	if err != nil {
		return fmt.Errorf("reward: %w", err)
	}
	in := res.Inputs
	if in == nil || in.Correct == nil {
		// Score verifies every task with a reference answer, and the
		// caller has checked that there is one.
		return fmt.Errorf("reward: task %q was not verified", fin.Task.ID)
	}
	if math.IsNaN(res.Reward) || math.IsInf(res.Reward, 0) {
		return fmt.Errorf("reward: %s gives %v for this session", g.cfg.RewardName, res.Reward)
	}
	t := &Terms{Reward: g.cfg.RewardName, Outcome: *in}
	if *in.Correct {
		t.Quality = 1
	}
	fin.Reward, fin.Correct, fin.Terms = res.Reward, in.Correct, t
	return nil
}

// JudgedDataset is the dataset of open questions, which no verifier
// checks: with Config.Judge, the judge compares a session's answer with
// the task's reference answer.
const JudgedDataset = "open"

// judgeSession gives fin the judge's reward. The judge compares answer
// with the task's reference, its baseline; the quality is its Diff/100.
// With Config.Reward the quality takes the verifier's place in it, as
// process's reward of a judged rollout; else the reward is the quality.
func (g *Gateway) judgeSession(ctx context.Context, fin *Finished, answer string) error {
	step := 0
	if fin.PolicyVersion != nil {
		step = *fin.PolicyVersion
	}
	rewardOf, name := g.cfg.Reward, g.cfg.RewardName
	if rewardOf == nil {
		rewardOf, name = judgedQuality, "judge's quality"
	}
	task := fin.Task
	base := &delegate.Trace{Version: delegate.TraceVersion, Strategy: traceStrategy, Answer: task.Answer}
	task.Answer = "" // the reference is the judge's baseline, not a verifier's
	sc := &rollout.RewardScorer{Judge: g.cfg.Judge, Reward: rewardOf, PolicyRoles: policyRoles(fin.Calls),
		GeneratedTokens: g.cfg.GeneratedTokens, Step: step}
	res, err := sc.Score(ctx, nil, task, base, sessionTrace(fin.Calls, answer))
	if err != nil {
		return fmt.Errorf("reward: %w", err)
	}
	in := res.Inputs
	if in == nil || in.Verdict == nil {
		return fmt.Errorf("reward: task %q was not judged", fin.Task.ID)
	}
	if math.IsNaN(res.Reward) || math.IsInf(res.Reward, 0) {
		return fmt.Errorf("reward: %s gives %v for this session", name, res.Reward)
	}
	fin.Reward, fin.Terms = res.Reward, &Terms{Reward: name, Quality: in.Verdict.Diff / 100, Outcome: *in}
	return nil
}

// judgedQuality is the reward of a judged session without a reward
// function: the judge's Diff/100, NaN when the verdict is unusable.
func judgedQuality(o reward.Outcome) float64 {
	if o.Verdict == nil || o.Verdict.Unparseable {
		return math.NaN()
	}
	return o.Verdict.Diff / 100
}

// policyRoles are the roles of the trained calls, sorted.
func policyRoles(calls []Call) []string {
	var roles []string
	for _, c := range calls {
		if c.Trained && !slices.Contains(roles, c.Role) {
			roles = append(roles, c.Role)
		}
	}
	slices.Sort(roles)
	return roles
}

// sessionTrace is a session's calls as a rollout's trace: one call node
// per answered call under the root, in call order, answering answer. A
// failed call has no answer and no usage, so it is not charged. Calls
// that overlap in time ran side by side (delegate.CriticalPath). The
// trace's latency runs from the first call's start to the last call's end.
func sessionTrace(calls []Call, answer string) *delegate.Trace {
	root := &delegate.Node{Name: traceStrategy}
	var first, last time.Time
	for i := range calls {
		c := &calls[i]
		if c.Failed {
			continue
		}
		out := c.Output
		root.Children = append(root.Children, &delegate.Node{ID: i + 1, Name: c.Role, Role: c.Role, Model: c.Model,
			PolicyVersion: c.PolicyVersion, Output: &out, Usage: c.Usage, Cost: c.Cost, Start: c.Start, Latency: c.Latency,
			FinishReason: c.FinishReason})
		end := c.Start.Add(c.Latency)
		if first.IsZero() || c.Start.Before(first) {
			first = c.Start
		}
		if last.IsZero() || end.After(last) {
			last = end
		}
	}
	root.Start, root.Latency = first, last.Sub(first)
	tr := &delegate.Trace{Version: delegate.TraceVersion, Strategy: traceStrategy, Answer: answer, Start: first,
		Latency: root.Latency, Root: root}
	tr.Roles, tr.Total = delegate.Tally(root)
	return tr
}
