// Package world is a synthetic world where delegation matters and answers
// are exact: seeded multi-step arithmetic word problems, the digit formats
// two small models write, transcripts of every delegation strategy for
// supervised pretraining, a verifier, graders, a price table and the
// reward.
//
// # Problems
//
// A problem is one quantity built by a chain of 1 to 3 steps, or, in the
// harder levels, two such quantities combined by a last step:
//
//	Ann has 81 boxes of 12 nails. Ann gives away 17. Ann gets 81 more.
//	How many nails does Ann have?
//
//	s1 = 81*12     = 972
//	s2 = s1-17     = 955
//	s3 = s2+81     = 1036   the answer
//
//	Max has 69 seeds. Max gives away 68. How many seeds does Max have?
//
//	s1 = 69-68     = 1      the answer
//
// Sentences come from short templates over 8 names, 8 items and 6
// containers: a quantity starts with a product of two 2-digit numbers ("x
// C of y I") or a plain 2-digit number, then gets or gives away 2-digit
// amounts; distractors are ages or counts of other items. Config holds the
// knobs (steps, probability of two parts, of a product start, product
// sizes, digits of amounts, "times as many" steps, distractors).
// DefaultConfig is the world delegate train runs: 1 to 3 steps, a product
// start in 4 problems of 5, one distractor at most. Levels numbers it 5
// after the pretraining curriculum (1: one product; 2: a product and an
// amount; 3: two parts, 3 or 4 steps, combined by a sum or a difference;
// 4: up to 6 steps, two distractors). Every quantity of a part stays below
// 5000, so every number the formats write fits Width = 4 digits.
// Generation is deterministic from a seed; the split is decided by the
// FNV-1a hash of the text (SplitOf): 90% train, 5% validation, 5% test,
// disjoint by construction. Distinct estimates how many distinct problems
// a config can generate (figures: docs/world.md).
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
//   - The route prompt declares the delegate tool as its name only (Tool),
//     and the chat template writes a call compactly,
//     delegate{"question":"47*28"} (package tokenizer); CompactTools
//     rewrites a request's tool declaration so that strategy.New on the
//     local delegator sends exactly the transcripts' prompts. System
//     prompts are two or three words ("Solve or delegate.").
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
// one-line prompt "Compute." and writes tersely (SolverAnswer): the digit
// and carry pairs of each partial product and of their sum, then \boxed{}:
// 31 tokens for 47*28, 21 for a sum. It is trained only inside its
// coverage (SolverCovers, SolverCorpus): every sum and the products of
// 2-digit numbers, never a difference. Every "gives away" and every "how
// many more" step is a difference, outside what it has seen: there it is
// wrong by design (the shipped solver's figures: models/README.md).
//
// A delegate call costs the delegator 31 generated tokens (the compact
// call, byte by byte) plus μ. So delegating a product saves 130 delegator
// tokens (WorthDelegating); delegating a sum saves 20, which μ takes back
// (a tie); delegating a difference loses the answer.
//
// # Why the best policy reads the input
//
// In the default world the first step is a product in 4 problems of 5
// and an amount got or given away in the others; the later steps are
// amounts. The best policy (Selective) delegates the products and computes
// the differences, so whether it hands the first step over depends on
// what the text says ("boxes of", "gives away"). No rule that decides by
// position can do that: delegating the first step always gains 0.11 on
// 80% of problems and loses the answer on the 10% that start with a
// difference; never delegating gives up the gain. The expected reward of
// every policy under the design accuracies (DesignAccuracy), and what the
// shipped models measure, are in docs/world.md (go test ./world -run
// TestDesignFigures -v computes and checks them).
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
// Real APIs price a prompt's prefix as cached only when it is long
// (OpenAI: 1,024 tokens or more); every conversation here is shorter, so
// delegate train prices nothing as cached by default.
//
// DefaultReward: reward = correct − λ·(delegator generated tokens) −
// μ·(sub-agent calls), λ = 0.001, μ = 0.02. Per step: delegating a
// product gains 0.001·130 − 0.02 = +0.110; delegating a sum gains 0.000;
// delegating a difference loses the answer.
//
// # Transcripts
//
// Prompts overrides every strategy prompt template with a compact one, and
// StrategyConfig returns the strategy configuration that uses them, so
// strategy.New on the local models (the delegator wrapped with
// CompactTools under route) sends exactly the prompts of the transcripts
// (a test replays every strategy against the transcripts and compares each
// request token for token). Single, Route, Decompose and Lead build an
// Episode per problem: the delegator's conversations and the sub-agents'
// (Episode.Bill gives the token account, Reward.Of the reward). Route
// takes a Policy per step; BuildCorpus mixes never, always and random
// delegation per problem (Mix) so the pretrained delegator is a stochastic
// policy RL can sharpen. Lead shows the leader K terse peer solutions,
// some wrong (sometimes the majority), and teaches it to copy the steps
// they agree on and to compute those they dispute; Condense turns a
// scratchpad reply into such a terse solution, so that peers that need
// scratch work can take part. ParseAnswer reads an
// answer (\boxed{}, <answer>, "Final Output:", "Final answer:", else the
// last integer; leading zeros are fine).
//
// # Grading
//
// GradeSolver grades any delegate.Model as the solver, per operation and
// size, greedily. GradeDelegator runs the delegator alone (single) or
// under route with a solver, greedily, and reports accuracy, delegation
// rate and delegator tokens. Scripted runs a policy as a program in the
// delegator's seat of route, without a slip, graded like a model: the
// fixed per-position rules (PositionRule), random delegation at a rate
// (RandomRate), the oracle router (Oracle, which asks the solver first)
// and always-delegate are delegate train's baselines.
package world
