// Package rollout is `delegate process` as a library: for each item of a
// dataset it runs a baseline strategy once and G rollouts of a policy
// strategy concurrently, scores them (Scorer), turns the group's rewards
// into group-relative advantages (Config.Advantages) and writes, append-only,
// into an output directory:
//
//   - artifacts.jsonl: one Artifact per rollout (version ArtifactVersion);
//   - groups.jsonl: one GroupRecord per group in the trajectory-group layout
//     (version GroupVersion): per sequence the policy's messages with its
//     turns marked trained, and, where the backend returned token ids and
//     logprobs, tokens, masks (-100 where untrained) and inference_logprobs
//     (1.0 where masked); scores, advantages and overrides;
//   - summary.json: a Summary accounting for every rollout and group, every
//     dropped group counted by reason.
//
// Its state lives in state.db (package store), so a run interrupted at any
// point and started again with the same settings resumes without losing or
// duplicating a rollout; see Run.
//
// Groups is the same pipeline in memory, for a trainer in the same
// process (`delegate train`): the same rollout (run, classify failures,
// score), the same group rule (failed rollouts, ties, advantages) and the
// same GroupRecord, nothing written; package train hands its groups to
// the rl trainer. Run and Groups take Policies, the strategy of each
// rollout: one for all (Same), or one per rollout around a policy model
// seeded for it, so that a rollout depends on its seed alone and the two
// give the same groups for the same seeds.
//
// RewardScorer is the Scorer that composes the verifiers, the judge and a
// reward function. The policy's agents carry a delegate.Sampler that asks
// their backends for the token ids and logprobs the groups need and, for
// training, sets the trainer's temperature, token cap and per-rollout
// seeds. A caller (the command) wires them:
//
//	sample := delegate.NewSampler(delegate.Sampling{Logprobs: true})
//	policy, _ := strategy.New("decompose", strategy.Roles{
//		Delegator: delegate.Agent{Model: m, Sampler: sample}, ...}, scfg)
//	sc := &rollout.RewardScorer{Judge: j, Verify: verify, Reward: reward.DefaultGraded().Reward}
//	sum, err := rollout.Run(ctx, cfg, tasks, baseline, rollout.Same(policy), sc, progress)
package rollout
