// Package world is a synthetic world where delegation matters and answers
// are exact. It defines what a problem is and what is right, so small
// models can learn when to delegate. It owns the seeded arithmetic word
// problems and their splits, and the digit formats the two models write.
// It says what the solver covers and which steps are worth delegating.
// It holds the delegation policies, the answer parser and verifier, the
// prices and the reward. docs/world.md gives the design in full, with its
// figures.
//
// Around it, each concern in its own package:
//
//   - world/transcript: what the models say. The compact prompts and the
//     strategy configuration that sends them, every strategy's
//     transcripts under a policy, their token bills, the pretraining
//     corpus mix, and the design figures of docs/world.md.
//   - world/scripted: a policy run as a program in the delegator's seat
//     of route, without a slip: position rules, random delegation, the
//     oracle router, always-delegate. These are delegate train's
//     baselines.
//   - pretrain: trains the shipped models on the transcripts and grades
//     them, with pretrain.GradeSolver and pretrain.GradeDelegator, the
//     latter through bench.Run.
//
// # Problems
//
// A problem is one quantity built by a chain of steps, or two such
// quantities combined by a last step. Config holds the knobs. DefaultConfig
// is the world delegate train runs, and Levels numbers the pretraining
// curriculum. Generation is deterministic from a seed. The hash of the
// text decides the split, SplitOf, so the splits are disjoint by
// construction. Distinct estimates how many distinct problems a config can
// generate.
//
// # Formats and models
//
// Every digit a model reads sits at a fixed offset, Width digits wide, so
// a tiny causal transformer can learn the formats. The delegator, the
// policy, computes a step itself with a Scratchpad: accurate, because every
// line is a local lookup, and long. The solver, the sub-agent, answers one
// bare question tersely, SolverAnswer. It is trained only inside its
// Coverage: every sum and the products of factors up to SolverMaxFactor
// digits, never a difference. Outside it, the solver is wrong by design.
// A delegate call is short, so delegating a product saves the delegator
// many tokens. Delegating a sum saves about what the call is charged, and
// delegating a difference loses the answer. WorthDelegating says which
// steps are worth it.
//
// # Policies
//
// Policy is a decision per step from the problem alone: Never, Always,
// Random, Selective, PositionRule, RandomRate, KindRule, FirstFactorBelow.
// The best policy, Selective, delegates the steps worth it that the solver
// covers and computes the rest. Which steps those are depends on what each
// sentence says, not on its position, so no PositionRule matches it. The
// digits world, Named "digits", swaps in DigitsCoverage: only the products
// whose first factor is below 50 are covered. No keyword tells which, so
// no KindRule matches its Selective either; FirstFactorBelow(50) does.
//
// # Prices and reward
//
// DefaultPrices prices the two models' tokens, the delegator's dearer.
// DefaultReward charges each delegator token generated and each sub-agent
// call. Account is an episode's token bill, which transcript.Episode.Bill
// builds from the transcripts. Cost prices it and RewardOf rewards it.
//
// # Answers
//
// ParseAnswer reads an answer from \boxed{}, <answer>, "Final Output:" or
// "Final answer:", else the last integer. Leading zeros are fine. Correct
// compares it with a value. Problem.Task is a problem as a
// delegate.Task, and Verify is the delegate.Verifier of those tasks.
package world
