// Package rollout is `delegate process` as a library.
// For each item of a dataset it runs a baseline once and G rollouts of a policy concurrently.
// It scores the rollouts, turns each group's rewards into group-relative advantages,
// and appends artifacts.jsonl, groups.jsonl and summary.json to an output directory.
// Its state lives in state.db, so an interrupted run resumes without losing or duplicating a rollout.
// Groups is the same pipeline in memory, for the trainer of `delegate train`.
// Given the same seeds, Run and Groups make the same groups.
// docs/process.md describes the files, the group rules and resuming.
//
// RewardScorer composes the verifiers, the judge and a reward function.
// The policy's agents carry a delegate.Sampler that asks for token ids and logprobs.
// A command wires them:
//
//	sample := delegate.NewSampler(delegate.Sampling{Logprobs: true})
//	policy, _ := strategy.New("decompose", strategy.Roles{
//		Delegator: delegate.Agent{Model: m, Sampler: sample}, ...}, scfg)
//	sc := &rollout.RewardScorer{Judge: j, Verify: verify, Reward: reward.DefaultGraded().Reward}
//	sum, err := rollout.Run(ctx, cfg, tasks, baseline, rollout.Same(policy), sc, progress)
package rollout
