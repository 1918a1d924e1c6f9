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
// Measured with delegate pretrain (package pretrain, see models/README.md):
// the solver in this format, 195k parameters trained 5000 steps (6 minutes
// on one core), answers 98% of held-out questions inside its coverage
// exactly (greedy). The delegator, 248k parameters trained 55 minutes in
// three phases on levels 1 to 3, wrote every format and protocol and
// solved held-out one-product problems alone 15 times in 16, but not a
// whole default problem (0 of 40 alone or under route: one slip in about
// 400 tokens loses it). A fourth phase of 19 minutes on level 2 only and a
// fifth of 29 on levels 1 to 3 and the peer format make it solve 40 of 40
// held-out level-1 and level-2 problems alone (3 of 40 of level 3) and
// execute the route protocol without a slip; its greedy route policy
// delegates every step, differences included, where the solver is wrong by
// design (18 of 40 on level 2, as always-delegate): the choice delegate
// train corrects (see The training world).
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
// Means per problem over 2000 test problems (seed 1) of DefaultConfig
// (level 3) and of TrainLevel (level 2), from the transcripts of this
// package (exact token counts under package tokenizer); P(correct) and
// reward assume the per-step accuracies of DesignAccuracy (0.99 for the
// delegator's scratchpads and the solver inside its coverage, 0.2 outside;
// the trained solver measures 0.98 and 0). Reproduce with WORLD_REPORT=1
// go test ./world -run TestReport -v.
//
//	level 3 (default)    del.prompt cached del.gen sol.prompt sol.gen calls cost/none  cost cost/pfx P(correct) reward
//	single (alone)              128      0     415          0       0  0.00      2205  2205     2197      0.965  0.550
//	route never                 162      0     415          0       0  0.00      2239  2239     2200      0.965  0.550
//	route always               1013    748     127         73      97  3.51      1758  1085     1040      0.451  0.254
//	route random 0.5            757    543     271         36      48  1.74      2168  1679     1637      0.689  0.383
//	route selective             452    223     152         38      64  2.00      1286  1085     1042      0.965  0.773
//	decompose selective         516      0     220         38      64  2.00      1686  1686     1538      0.965  0.706
//	lead k=3 (leader)           418      0     188        471     197  3.00      1648  1648     1560      0.965  0.718
//
//	level 2 (training)   del.prompt cached del.gen sol.prompt sol.gen calls cost/none  cost cost/pfx P(correct) reward
//	single (alone)               98      0     227          0       0  0.00      1233  1233     1225      0.980  0.753
//	route never                 132      0     227          0       0  0.00      1267  1267     1228      0.980  0.753
//	route always                584    395      79         42      54  2.00      1042   687      644      0.585  0.466
//	route random 0.5            379    218     154         21      26  0.98      1181   985      944      0.781  0.607
//	route selective             329    163      96         19      32  1.00       844   698      657      0.980  0.864
//	decompose selective         399      0     148         19      32  1.00      1173  1173     1027      0.980  0.812
//	lead k=3 (leader)           333      0     141        380     142  3.00      1258  1258     1170      0.980  0.779
//
// Costs are dollars per million problems. "cached" counts the earlier
// turns of a conversation, which every later turn starts with; "cost"
// prices them as cached, "cost/none" as fresh input, "cost/pfx" also
// prices the fixed prefix of every request (tool declaration and system
// prompt) as cached. In both worlds selective has the best expected reward
// (level 3: 0.773 against 0.550 never, 0.254 always, 0.383 for the random
// mix a pretrained delegator starts from; level 2: 0.864 against 0.753,
// 0.466 and 0.607) at the accuracy of solving alone, and costs less than
// solving alone: 51% less on level 3 with conversation prefixes cached (42%
// with nothing cached), 43% less on level 2 (32% with nothing cached).
//
// Rendered lengths of the pretraining corpus (BuildCorpus with DefaultMix
// over the same problems):
//
//	                     level 3                          level 2
//	transcript  count  mean  generated  max      count  mean  generated  max
//	route        2000   486        272  640       2000   314        152  379
//	single        530   543        415  598        489   325        227  339
//	plan          482   324         99  379        503   272         77  286
//	aggregate     482   475        216  565        503   274         71  289
//	leader        517   603        186  921        517   477        144  584
//	peer         1551   222         65  259       1551   174         47  189
//	solver       3499    48         28   51       2024    48         27   51
//	subagent      610    51         32   51        503    51         32   51
//
// # The training world
//
// delegate train runs level 2 (TrainLevel) by default: a product of two
// 2-digit numbers, then an amount added ("gets") or taken away ("gives
// away"), one distractor at most. The decision it teaches is the one of
// the default world, per step: delegate the product (the solver is right,
// and it saves 130 delegator tokens), compute the difference (the solver is
// wrong), either for a sum. The default world (level 3) is the target it
// does not yet reach with the shipped 248k-parameter delegator: after 55
// minutes of pretraining on levels 1 to 3 the delegator solved 0 of 40
// level-3 problems alone and 0.03 of level-2 problems under route (it
// misread operands copied from the text and confused "gets" with "gives
// away"), so GRPO had no correct answer to reinforce and collapsed to
// the shortest reply. Two more phases, one on level 2 only
// (models/README.md), make level 2 a world whose policies a small model
// can execute, so that what RL changes is the decision: delegate train
// (200 GRPO steps, about 3 minutes) turns the delegator's greedy
// always-delegate (0.53 right on 100 held-out problems) into the selective
// policy (1.00 right, one call a problem, 43% cheaper than solving alone).
// On level 3 the shipped delegator solves 3 problems in 40 alone.
//
// delegate train --mode mlpo runs level 2 with up to MLPODistractors (4)
// distractor sentences a problem instead of one. On plain level 2 the
// leader alone is right on 0.98 of problems before training, which leaves
// nothing for MLPO's "better alone" to show; with up to 4 distractors it
// is right on 0.73 (300 held-out problems, greedy): it multiplies the
// wrong number, computes a distractor as one more step, or ends with
// aggregate's "Final Output:" instead of \boxed{}. Training under
// lead, whose prompt carries the same problem text, lifts it alone to
// 0.85. Distractors are the knob because every other one leaves the
// shipped delegator nowhere: any change of digit sizes (2x1 or 3x1
// products, 1- or 3-digit amounts) takes it to 0 of 40.
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
