// Package rl trains a policy model with the GRPO family of policy-gradient methods.
// It trains on the traces of delegation runs: only the tokens the policy generated carry a loss.
// A Trainer takes scored groups from a Source step by step, updates the parameters between
// calls of the source, logs metrics and checkpoints so that a run resumes where it stopped.
// Lockstep steps the trainers of several policies together.
// docs/rl.md gives the design: episodes, the objective, off-policy groups, normalisation and the loop.
package rl
