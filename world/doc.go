// Package world is a synthetic world where delegation matters and answers
// are exact: seeded multi-step arithmetic word problems, the digit-level
// formats two small models write, transcripts of every delegation strategy
// for supervised pretraining, a verifier, a price table and the reward.
//
// # Problems
//
// A problem is one or two independent parts, each a quantity built by a
// chain of steps, combined by a last step when there are two:
//
//	Dot has 57 bags of 209 beads. Eve has 166 crates of 85 beads.
//	Eve is 12 years old. How many more beads does Eve have than Dot?
//
//	s1 = 57*209 = 11913   part 0
//	s2 = 166*85 = 14110   part 1, independent of s1
//	s3 = s2-s1  = 2197    the answer
//
// Sentences come from ten short templates over 8 names, 8 items and 6
// containers; a part starts with a product ("x C of y I") or a number,
// then adds ("gets y more"), takes away ("gives away y") or multiplies by
// one digit ("then has y times as many"); distractors are ages or counts
// of other items. Config holds the knobs (steps, probability of two
// parts, product sizes by weight, digits of added numbers, distractors);
// Levels gives four difficulties. Every Problem carries its Steps (op,
// operands with the step each comes from, exact result, part) and Answer.
// Generation is deterministic from a seed; the split is decided by the
// FNV-1a hash of the text (SplitOf), so training and test sets are
// disjoint by construction, whatever the seeds. Distinct problems
// (capture-recapture over two samples of 20000, Distinct): level 1 (one
// product) about 8e7; levels 2 to 4 showed no repeat, so more than 4e8.
//
// # Two models and why delegation matters
//
// The delegator (the policy) computes a step with a digit-level
// scratchpad (Scratchpad): one elementary digit operation per line, least
// significant digit first, carries written out, a product by a long
// number as one block per digit interleaved with the additions of the
// shifted partial products. Each token depends on at most three digits
// found by position, which is what a tiny transformer learns reliably; it
// is also long: 136 tokens for 347*28, 189 for 57*209, 251 for 347*283,
// 321 for 4321*567, but only about 40 to 65 for a sum, a difference or a
// product by one digit.
//
// The solver (the sub-agent) answers one bare question, "347*28", under
// the one-line prompt "Compute." and writes tersely (SolverAnswer): the
// shifted partial products and running sums least significant digit
// first, then \boxed{}: 28 tokens for 347*28, 43 for 347*283. Several
// digit operations per token make it cheap and less robust, and it is
// trained only inside its coverage (SolverCovers, SolverCorpus): every
// sum, products by up to 3 digits, but differences of at most 2 digits
// only. A difference of larger numbers, which the default world asks in
// every "gives away" and "how many more" step, is outside what it has
// seen: it is unreliable there by design (assumed 20% right below; the
// WORLD_PROBE test measures it once models train).
//
// A delegate call costs the delegator about 57 tokens (the tool call's
// JSON, byte by byte) plus μ. So delegating a product by two or three
// digits saves 80 to 260 delegator tokens (WorthDelegating); delegating a
// sum or a product by one digit saves nothing; delegating a large
// difference loses the answer. Never delegating is accurate and costly,
// always delegating is cheap and wrong on differences, and the best policy
// (Selective: delegate the long products) depends on the step's operation
// and size, features a small policy can read from the text.
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
// μ·(sub-agent calls), λ = 0.001, μ = 0.02. Per step: delegating 347*28
// gains 0.001·(136−56) − 0.02 = +0.06, 347*283 +0.17; delegating a sum
// loses 0.03; delegating a 5-digit difference loses about 0.8 of expected
// correctness. A reply of garbage scores about 0, far below solving.
//
// # Figures
//
// Means per problem over 2000 test problems of DefaultConfig (seed 1),
// from the transcripts of this package (tokens under package tokenizer,
// one per byte), assuming per-step accuracy 0.99 for the delegator's
// scratchpads and the solver inside its coverage, 0.2 outside. Reproduce
// with WORLD_REPORT=1 go test ./world -run TestReport -v.
//
//	protocol / policy    del.prompt cached del.gen sol.prompt sol.gen calls cost/none  cost cost/pfx P(correct) reward
//	single (alone)              143      0     397          0       0  0.00      2127  2127     2090      0.975  0.578
//	route never                 527      0     397          0       0  0.00      2511  2511     2129      0.975  0.578
//	route always               1979   1368     159         55      79  2.50      2866  1634     1246      0.589  0.380
//	route random 0.5           1403    834     280         27      39  1.23      2849  2098     1713      0.777  0.472
//	route selective            1196    609     170         30      56  1.46      2107  1558     1173      0.975  0.776
//	decompose selective         464      0     195         30      56  1.46      1499  1499     1352      0.975  0.752
//	lead k=3 (leader)           393      0     209        421     189  3.00      1712  1712     1624      0.975  0.706
//
// Costs are dollars per million problems. "cached" counts the earlier
// turns of a conversation, which every later turn starts with; "cost"
// prices them as cached, "cost/none" as fresh input, "cost/pfx" also
// prices the fixed prefix of every request (tool declarations and system
// prompt) as cached. Selective reaches the best expected reward (0.776
// against 0.578 never, 0.380 always, 0.472 for the random mix a pretrained
// delegator starts from) at the accuracy of solving alone. Its cost
// depends on caching: 44% below single with every shared prefix cached,
// 38% below route never and 27% below single with conversation prefixes
// cached, but with nothing cached only 16% below route never and 1% below
// single (decompose, whose prompts carry no tool declaration: 30%). Route's
// prompt carries the delegate tool's 372-token JSON declaration and every
// extra turn re-reads it, so the 40% cost claim needs a backend that keeps
// KV caches of shared prefixes (as hosted APIs do) and reports them as
// CachedTokens, or a compact tool declaration.
//
// Rendered lengths of the pretraining corpus (BuildCorpus with DefaultMix
// over the same problems), the sequence lengths training works with: a
// delegator needs a context of about 1300 tokens for route, the solver 80.
//
//	transcript  count  mean tokens  mean generated  max tokens
//	route        2000          849             281        1283
//	single        487          545             402         895
//	plan          502          297              89         362
//	aggregate     502          406             169         703
//	leader        527          590             197        1146
//	peer         1581          203              63         249
//	solver       2417           54              32          74
//	subagent      551           59              39          74
//
// # Learnability probe
//
// WORLD_PROBE=1 go test ./world -run TestSolverProbe -v trains a solver
// from scratch on SolverCorpus (WORLD_PROBE_SECONDS, default 120) and
// grades it greedily, 40 questions per operation and size (GradeSolver
// grades any delegate.Model the same way, a local one included). On this 2-core
// machine shared with other jobs, 20 minutes (1069 steps of 32 sequences,
// a 142k-parameter model of width 64, 2 layers) learned the format
// (the right number of partial products, the least-significant-first
// digits copied reversed into \boxed{}) but not the digit arithmetic:
// 5 to 8 of 40 right on one-digit questions, 0 to 2 of 40 on anything
// longer, covered or not (2 minutes: the same, slightly worse). The
// solver needs a far longer offline pretraining than this probe, or a
// format whose digit lookups are easier (operands padded to a fixed
// width); the figures above assume a trained solver.
//
// # Transcripts
//
// Prompts overrides every strategy prompt template with a compact one, and
// StrategyConfig returns the strategy configuration that uses them, so
// strategy.New on the local models sends exactly the prompts of the
// transcripts (a test replays every strategy against the transcripts and
// compares each request token for token). Single, Route, Decompose and
// Lead build an Episode per problem: the delegator's conversations and the
// sub-agents' (Episode.Bill gives the token account, Reward.Of the
// reward). Route takes a Policy per step; BuildCorpus mixes never, always
// and random delegation per problem (Mix) so the pretrained delegator is a
// stochastic policy RL can sharpen. Lead shows the leader K terse peer
// solutions, some wrong (sometimes the majority), and teaches it to copy
// the steps they agree on and to compute those they dispute.
// ParseAnswer reads an answer (\boxed{}, <answer>, "Final Output:",
// "Final answer:", else the last integer).
package world
