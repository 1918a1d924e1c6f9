// Package rl trains a policy model with the GRPO family of policy-gradient
// methods on traces of delegation runs.
//
// # Episodes
//
// A rollout is one run of a strategy on an item; its trace holds every
// model call. Each call made by the policy role (Config.PolicyRole, e.g.
// "strong", "delegator", "leader") becomes an Episode: the prompt ids the
// backend reported (Node.PromptTokenIDs) followed by the generated ids and
// the sampler's logprobs (Node.Logprobs). Only generated tokens carry a
// loss; the prompt, and with it every tool result, sub-agent output and
// earlier turn, has weight 0, as does the padding of a micro-batch. The
// policy must be called with logprobs: its agent's delegate.Sampler asks
// for them and also sets the trainer's temperature, token cap and
// per-rollout seed. The calls
// of one multi-turn conversation (route's turns), each of whose prompts
// starts with the previous call's prompt and output, are trained as one
// sequence (Merge): the same gradient, but the shared prefix runs through
// the model once.
//
// # Objective
//
// Rewards of the G rollouts of an item give group-relative advantages
// (package reward: grpo, drgrpo, rloo); every token of a rollout, across
// all its policy calls, gets the rollout's advantage A. For token t with
// current logprob l, old logprob l_old and r = exp(l − l_old):
//
//	loss_t = −min(r·A, clip(r, 1−ε, 1+ε)·A) + β·k3_t,   k3_t = exp(l_ref − l) − (l_ref − l) − 1
//
// where l_ref is the logprob under the frozen starting parameters. The old
// logprob is the trainer's own at the parameters the rollouts were sampled
// with, computed before the first update: r is exactly 1 in the first
// epoch, and the sampler's logprobs must agree with it within
// Config.MaxLogprobGap (the sampler and the trainer use different kernels,
// so they agree to about 1e-5, not bit for bit). The loss is folded into
// the weights of nn's token-weighted cross-entropy, whose gradient is
// −w·∇l with w constant: w = A·r where the clip is inactive, 0 where it is
// active, plus β·(exp(l_ref − l) − 1) for the KL term (see objective.go).
//
// # Off-policy groups
//
// Groups from a Source (rollouts made by environments beside the trainer,
// over a trajectory API) may have been sampled by an older policy, or by
// another engine: Group.Staleness says how many steps behind (or -1,
// unknown). For their tokens the old logprob above is the trainer's own
// before the update (the proximal policy), and the loss is reweighted to
// the behaviour policy that sampled them, with the truncated importance
// weight of each token (as TRL's and AReaL's asynchronous trainers do):
//
//	loss_t = −min(ρ_t, C)·min(r·A, clip(r, 1−ε, 1+ε)·A) + β·k3_t,   ρ_t = exp(l_old − l_behaviour)
//
// with C = Config.MaxImportanceWeight. The metrics report the staleness of
// each batch and the weights' mean, range and truncated share. On-policy
// groups (the in-process loop's) take exactly the loss above with ρ = 1.
//
// # Normalisation
//
// Each token's loss is multiplied by a coefficient c and the step's loss
// is the sum Σ c·loss_t, computed with our own normalisation (the weights
// are passed with norm 1), our own global-norm gradient clipping and
// train.AdamW.Update:
//
//	seq-mean   (GRPO, the default for grpo and rloo): c = 1/(L_i·N), the
//	           mean over rollout i's L_i policy tokens (all its calls
//	           together), then the mean over the N rollouts that generated
//	           tokens. Every rollout weighs the same, whatever its length.
//	token-sum  (Dr. GRPO, the default for drgrpo): c = 1/(MaxNewTokens·G·
//	           ItemsPerStep), a constant: a token's gradient does not depend
//	           on the length of its sequence, which removes GRPO's bias
//	           towards long wrong answers and short right ones.
//	token-mean (DAPO): c = 1/(all policy tokens of the step).
//
// A rollout whose call failed before generating contributes no episode; a
// rollout that failed is left out of its group and counted (Group.Failed);
// a group with too few rollouts for advantages trains nothing and is
// counted as failed; a group whose advantages are all zero (its rewards
// all equal, or a tie the producer zeroed) is counted as degenerate (with
// β = 0 its tokens are left out of the passes, which changes nothing in
// the gradient). A step where nothing carries a
// gradient takes no optimizer step and says so (Metrics.Skipped).
//
// # The loop
//
// The trainer consumes groups: a Source hands it each step's scored
// groups. In `delegate train` the source is the rollout pipeline in the
// same process (rollout.Groups, the code behind `delegate process`: it
// runs G rollouts of each item at most Concurrency at once, scores them,
// applies process's rules to failed rollouts and ties, and computes the
// advantages; package train wires it, the step's items drawn by Items and
// each rollout seeded with RolloutSeed); in `delegate train --api` it is a
// trajectory API's batches. Trainer.Run, step by step: take the step's
// groups from the source, describe them in the step's metrics (computing
// the advantages of groups that carry none), give every sequence its
// coefficient, take Epochs optimizer steps, append a Metrics line to
// OutDir/metrics.jsonl, checkpoint every CheckpointEvery steps. Parameters
// change only between calls of the source, never while a policy call is
// in flight. A run resumed in the same OutDir continues from its
// checkpoint and truncates the metrics log to it; Items replays the
// earlier steps' draws, so the resumed steps train on the items they
// would have.
//
// # Several policies
//
// The policies of one multi-agent rollout (route's delegator and the
// solver it calls) are trained by a Trainer each, over its own parameters,
// OutDir, metrics and checkpoint, stepping together (Lockstep): each
// step, each trainer in turn takes its groups from its source and
// updates. The sources are views of one rollout pass (package train's):
// the step's rollouts are made once, on the first trainer's Next, and
// every policy's groups hold its own calls only as sequences, each
// rollout's with the rollout's advantage (a rollout in which a policy
// made no call gives it no tokens). Trainers resumed at different steps,
// after a crash between their checkpoints, are brought level before they
// go on together.
package rl
