// Package world is a synthetic world where delegation matters and answers
// are exact: seeded multi-step arithmetic word problems, the digit formats
// two small models write, transcripts of every delegation strategy for
// supervised pretraining, a verifier, graders, a price table and the
// reward.
//
// # Problems
//
// A problem is two independent parts, each a quantity built by a short
// chain of steps, combined by a last step:
//
//	Max has 47 bags of 57 nails. Dot has 24 crates of 16 nails.
//	Dot gives away 46. How many more nails does Max have than Dot?
//
//	s1 = 47*57     = 2679   part 0
//	s2 = 24*16     = 384    part 1, independent of s1
//	s3 = s2-46     = 338    part 1
//	s4 = s1-s3     = 2341   the answer
//
// Sentences come from short templates over 8 names, 8 items and 6
// containers: a part starts with a product of two 2-digit numbers ("x C of
// y I") or a 2-digit number, then gets or gives away a 2-digit amount;
// distractors are ages or counts of other items. Config holds the knobs
// (steps, probability of two parts, product sizes, digits of amounts,
// "times as many" steps, distractors); Levels gives four difficulties (1:
// one product; 2: a product and an amount; 3: DefaultConfig, 3 or 4 steps
// in two parts, one distractor at most; 4: up to 6 steps, two
// distractors). Every quantity of a part stays below 5000, so every number
// the formats write fits Width = 4 digits. Generation is deterministic
// from a seed; the split is decided by the FNV-1a hash of the text
// (SplitOf), so training and test sets are disjoint by construction.
// Distinct problems (capture-recapture over two samples of 20000,
// Distinct): level 1 about 2.4e6; levels 2 to 4 showed no repeat, so more
// than 4e8.
//
// # Why this design: learnable by tiny models in minutes
//
// The first design of this world (variable-width numbers, products up to
// 4 by 3 digits, the solver writing unpadded partial products) needed a
// delegator context of about 1300 tokens, and its learnability probe
// trained a 142k-parameter solver for 20 minutes: it learned the format but
// not the arithmetic (5 to 8 of 40 right on one-digit questions, 0 to 2 of
// 40 on anything longer). A token of those formats depended on digits
// whose position varied with the lengths of the numbers, which a causal
// transformer cannot see before it reads past them.
//
// This design puts every digit a model reads at a fixed offset:
//
//   - Operands of + and - and every result are zero-padded to Width digits
//     ("1316-0085", "\boxed{1231}"); products keep their factors as the
//     text gives them, always two digits in the default world ("47*28").
//   - Work is written least significant digit first, with carries written
//     out, so each output digit depends on at most three digits: two
//     operand digits at fixed offsets and the carry just written.
//   - Numbers are small (2-digit literals, quantities below 5000), so
//     scratchpads and transcripts are short: a route transcript is 528
//     tokens on average under the chat template (1 token per byte), 688 at
//     most; the delegator's context is 768 and the solver's 80.
//   - The route prompt declares the delegate tool as its name only (Tool,
//     19 tokens, against 372 for strategy.DelegateTool's description and
//     schema), and the chat template writes a call compactly,
//     delegate{"question":"47*28"} (package tokenizer): 31 generated
//     tokens with its special tokens, against 55 in the JSON envelope
//     {"name":...,"arguments":...} it used first; CompactTools rewrites a request's tool declaration so that
//     strategy.New on the local delegator sends exactly the transcripts'
//     prompts. System prompts are two or three words ("Solve or
//     delegate.").
//
// What the shipped models measure in these formats, and the figures of
// every strategy's transcripts: docs/world.md.
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
// wrong by design (measured: 0 of 120 held-out differences right, and 0 of
// 80 products of a 3-digit number, the "larger numbers" it never saw).
//
// A delegate call costs the delegator 31 generated tokens (the compact
// call, byte by byte) plus μ. So delegating a product saves 130 delegator
// tokens (WorthDelegating); delegating a sum saves 20, which μ takes back
// (a tie); delegating a difference loses the answer. Never delegating is
// accurate and costly, always delegating is cheap and wrong whenever the
// problem has a difference, and the best policy (Selective: delegate the
// products) depends on the step's operation, which a small policy can read
// from the text ("bags of", "gives away", "how many more").
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
// DefaultReward: reward = correct − λ·(delegator generated tokens) −
// μ·(sub-agent calls), λ = 0.001, μ = 0.02. Per step: delegating a
// product gains 0.001·130 − 0.02 = +0.110; delegating a sum gains 0.000;
// delegating a difference loses the answer.
//
// # Figures
//
// The expected reward and cost of every fixed policy on the default world
// and on TrainLevel, from the transcripts of this package and the
// per-step accuracies of DesignAccuracy, and what delegate train reaches:
// docs/world.md (reproduce with WORLD_REPORT=1 go test ./world -run
// TestReport -v). delegate train runs level 2 (TrainLevel) by default: a
// product, then an amount got or given away; --mode mlpo adds up to
// MLPODistractors distractor sentences a problem.
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
// they agree on and to compute those they dispute. ParseAnswer reads an
// answer (\boxed{}, <answer>, "Final Output:", "Final answer:", else the
// last integer; leading zeros are fine).
//
// # Grading
//
// GradeSolver grades any delegate.Model as the solver, per operation and
// size, greedily. GradeDelegator runs the delegator alone (single) or
// under route with a solver, greedily, and reports accuracy, delegation
// rate and delegator tokens. AlwaysDelegate is the always-delegate policy
// as a program in the delegator's seat of route (every step handed to the
// solver as soon as its operands are known), graded like a model and used
// as the always-delegate arm of delegate train's table.
package world
