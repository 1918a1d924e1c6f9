// Package world is a synthetic world where delegation matters and answers
// are exact. It defines what a problem is and what is right, so small
// models can learn when to delegate. It owns the seeded arithmetic word
// problems and their splits, and the digit formats the two models write.
// It says what the solver covers and which steps are worth delegating.
// It holds the delegation policies, the answer parser and verifier, the
// prices and the reward.
//
// Around it, each concern in its own package:
//
//   - world/transcript: what the models say. The compact prompts and the
//     strategy configuration that sends them, every strategy's
//     transcripts under a policy, their token bills, the pretraining
//     corpus mix, and the design figures of docs/world.md.
//   - world/scripted: a policy run as a program in the delegator's seat
//     of route, without a slip (position rules, random delegation, the
//     oracle router, always-delegate): delegate train's baselines.
//   - pretrain: trains the shipped models on the transcripts and grades
//     them (pretrain.GradeSolver; pretrain.GradeDelegator, through bench.Run).
//
// # Problems
//
// A problem is one quantity built by a chain of 1 to 3 steps, or two such
// quantities combined by a last step, as in the default world:
//
//	Gus has 58 trays of 83 coins. Gus gets 88 more. Eve has 74 jars of
//	40 coins. How many more coins does Gus have than Eve?
//
//	s1 = 58*83     = 4814
//	s2 = s1+88     = 4902
//	s3 = 74*40     = 2960
//	s4 = s2-s3     = 1942   the answer
//
//	Max has 69 seeds. Max gives away 68. How many seeds does Max have?
//
//	s1 = 69-68     = 1      the answer
//
// Sentences come from short templates over 8 names, 8 items and 6
// containers: a quantity starts with a product of two 2-digit numbers ("x
// C of y I") or a plain 2-digit number, then gets or gives away 2-digit
// amounts; distractors are ages or counts of other items. Config holds the
// knobs: steps, the probabilities of two parts and of a product start,
// product sizes, digits of amounts, "times as many" steps, distractors.
// DefaultConfig is the world delegate train runs, level 3 of Levels: two
// quantities, each a product, one of them sometimes followed by an amount,
// combined by a sum or a difference ("how many in all", "how many more");
// 3 or 4 steps, one distractor at most. Levels numbers the pretraining
// curriculum: 1 one product; 2 a product and an amount; 3 the default
// world; 4 up to 6 steps, two distractors; 5 one quantity of 1 to 3 steps
// (a product start in 4 problems of 5), the default world before level 3.
// Every quantity of a part stays below 5000, so every number the formats
// write fits Width = 4 digits. Generation is deterministic from a seed.
// The FNV-1a hash of the text decides the split (SplitOf): 90% train, 5%
// validation, 5% test, disjoint by construction. Distinct estimates how
// many distinct problems a config can generate; docs/world.md has the
// figures.
//
// # Formats a tiny model can learn
//
// Every digit a model reads sits at a fixed offset (docs/world.md says
// why, and what an earlier design without this measured):
//
//   - Operands of + and - and every result are zero-padded to Width digits
//     ("1316-0085", "\boxed{1231}"); products keep their factors as the
//     text gives them, always two digits in the default world ("47*28").
//   - Work is written least significant digit first, with carries written
//     out, so each output digit depends on at most three digits: two
//     operand digits at fixed offsets and the carry just written.
//   - Numbers are small (2-digit literals, quantities below 5000), so
//     scratchpads and transcripts fit the delegator's context of 768
//     tokens and the solver's of 80.
//   - The route prompt declares the delegate tool as its name only
//     (transcript.Tool), and the chat template writes a call compactly,
//     delegate{"question":"47*28"} (package tokenizer). System prompts
//     are two or three words ("Solve or delegate.").
//
// # Two models and why delegation matters
//
// The delegator (the policy) computes a step itself with a scratchpad
// (Scratchpad) made of blocks of one shape: a header with both operands
// padded, one elementary digit operation per line ("a+b+c=rd", "a-b-c=rd",
// "a*d+c=rd"), and the padded result. A product is a block per digit of
// its second factor and a sum of the shifted partials: 161 tokens for
// 47*28; a sum or a difference is 51. It is accurate because every line is
// a local lookup, and long.
//
// The solver (the sub-agent) answers one bare question, "47*28", under the
// one-line prompt "Compute." and writes tersely (SolverAnswer): the digit and
// carry pairs of each partial product and of their sum, then \boxed{}: 31
// tokens for 47*28, 21 for a sum. It is trained only inside its coverage
// (SolverCovers, SolverSizes, Coverage; transcript.SolverCorpus): every sum
// and the products of 2-digit numbers, never a difference. Every "gives away"
// and every "how many more" step is a difference, outside what it has seen:
// there it is wrong by design (the shipped solver's figures:
// models/README.md).
//
// A delegate call costs the delegator 31 generated tokens (the compact
// call, byte by byte) plus μ. So delegating a product saves 130 delegator
// tokens (WorthDelegating); delegating a sum saves 20, which μ takes back
// (a tie); delegating a difference loses the answer.
//
// # Why the best policy reads the input
//
// In the default world the two products are worth delegating and the
// rest is not: the amount is a difference half the time, the combining
// step a difference half the time (the solver has never seen one), and a
// sum saves nothing. Where the products stand depends on the text: the
// second product is step 2 when the first quantity gets no amount, step 3
// when it does ("Gus gets 88 more." comes before "Eve has 74 jars of 40
// coins."). The best policy, Selective, delegates the products and
// computes the rest. It hands both products over in the first turn, since
// route runs a turn's calls in parallel. So what it hands over depends on
// what each sentence says. No rule that decides by position can do that
// (PositionRule). "Delegate steps 1 and 2" hands over an amount in half
// the problems, and the solver gets a difference wrong. Policy is a
// decision per step from the problem alone: Never, Always, Random,
// Selective, PositionRule, RandomRate. docs/world.md gives every policy's
// expected reward under the design accuracies (transcript.DesignAccuracy),
// and what the shipped models measure. This computes and checks them:
//
//	go test ./world/transcript -run TestDesignFigures -v
//
// # The digits world
//
// In the default world the best policy is readable from a keyword: every
// product is worth delegating, nothing else is. The digits world, Named
// "digits", keeps DefaultConfig's problems and swaps the solver. Its
// Coverage, DigitsCoverage, holds the sums and only the products whose
// first factor is below 50, which a keyword cannot tell. Its Selective
// policy delegates those and computes the rest. Every rule on positions
// (PositionRule) or on keywords (KindRule, by StepKind) falls short of it
// by a clear margin. The threshold rule FirstFactorBelow(50) matches it. The router's pretraining corpus delegates at random, so
// the rule on the digits has to come from reward. Figures: docs/world.md.
//
// # Prices and reward
//
// DefaultPrices, in dollars per million tokens (a delegator token costs 5
// solver tokens; output 5 input; cached input a tenth of input):
//
//	              input  cached  output
//	delegator     1.00   0.10    5.00
//	solver        0.20   0.02    1.00
//
// Real APIs price a prompt's prefix as cached only when it is long;
// OpenAI needs 1,024 tokens or more. Every conversation here is shorter,
// so delegate train prices nothing as cached by default. Route hands the
// delegator back only the solver's answer, not its working
// (strategy.ToolResultAnswer). So a later turn's prompt grows by the call
// and a 4-digit answer.
//
// DefaultReward: reward = correct − λ·(delegator generated tokens) −
// μ·(sub-agent calls), λ = 0.001, μ = 0.02. Per step: delegating a
// product gains 0.001·130 − 0.02 = +0.110; delegating a sum gains 0.000;
// delegating a difference loses the answer. Account is an episode's token
// bill, which transcript.Episode.Bill builds from the transcripts. Cost
// prices it and RewardOf rewards it.
//
// # Answers
//
// ParseAnswer reads an answer from \boxed{}, <answer>, "Final Output:" or
// "Final answer:", else the last integer. Leading zeros are fine. Correct
// compares it with a value. Problem.Task is a problem as a
// delegate.Task, and Verify is the delegate.Verifier of those tasks.
package world
