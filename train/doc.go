// Package train is `delegate train`. It trains the synthetic world's
// delegator with GRPO from pretrained nn checkpoints. It measures the
// delegator before and after training on held-out problems, so a run shows
// whether reward taught it when to delegate. The command in cmd/delegate
// only parses flags, draws progress and plots; everything else is here.
//
// # A run
//
// Run loads the frozen solver and the delegator, the policy's start. It
// also keeps the delegator frozen as the "pretrained" arm. It serves them
// in-process through package local. It runs package strategy's strategies
// on them with the world's compact prompts (transcript.StrategyConfig),
// the same code path as remote LLMs. Then:
//
//  1. The best fixed rule. Every input-independent per-position rule runs
//     on RuleItems training problems (OutDir/rules.jsonl). Such a rule,
//     world.PositionRule, delegates the steps at some positions and
//     computes the others. The one of highest mean reward is the table's
//     strongest fixed baseline (Table.BestRule), chosen without the
//     held-out items. The best keyword rule is chosen the same way
//     (scripted.KeywordRules, OutDir/keywords.jsonl, Table.BestKeyword).
//  2. The baselines on EvalItems held-out problems of EvalSplit. The split
//     is validation while choosing settings, test for the reported table.
//     bench.Run writes per-item records to OutDir/eval.jsonl. The arms are
//     the delegator alone without the delegate tool (single), every fixed
//     rule, the best keyword rule, and the oracle router. The rules and the
//     oracle are programs in route's delegator seat (scripted.Delegator).
//     Last comes the pretrained delegator under route. It is timed
//     (OutDir/timing.json), since the trained delegator's evaluation will
//     take as long.
//  3. GRPO, Dr. GRPO or RLOO on route over TrainProblems training problems.
//     The delegator has the delegate tool, and the solver answers. Only the
//     delegator's generated tokens are trained; rl masks prompts, tool
//     results and solver outputs. The reward is world.DefaultReward, a
//     setting of reward.Graded: correct − λ·delegator generated tokens −
//     μ·sub-agent calls (Scorer). Package rollout's pipeline makes, scores
//     and groups the rollouts in process, as behind `delegate process`
//     (rollout.Groups). It hands them to the rl trainer as its source.
//     Training stops at RL.Steps, at TrainTime summed over resumed
//     invocations, or early enough before Deadline to leave the final
//     evaluation its time.
//  4. The trained delegator under route on the same items. Then random
//     delegation at its rate, and the SFT arm: the starting delegator
//     fine-tuned on the oracle's transcripts with RL's compute, kept in
//     OutDir/sft. Then the Table, computed from the per-item records
//     (NewTable). Per arm it gives accuracy with a Wilson 95% interval,
//     and mean reward with a normal 95% interval that is never of zero
//     width. It gives prompt and generated tokens per role, sub-agent
//     calls, and the delegation rate per kind of step, from each record's
//     LabelDelegated. It gives cost at world.DefaultPrices, and latency. A
//     conversation's repeated prefix is priced as cached only from
//     CacheMinTokens. An item the strategy reports a failure for counts
//     wrong there and in the training reward. Acceptance decides the
//     training criteria from the table, with paired tests on the shared
//     items. They are kept in Table.Checks and printed under the table as
//     PASS or MISS.
//
// Every phase writes as it goes, so an interrupted run resumes in the same
// OutDir: finished items are not run again, training continues from rl's
// last checkpoint, and the trained arm's name carries its step, so records
// of an earlier state of the policy are never mixed in.
//
// # Several policies
//
// Config.Train chooses what a route run trains: the delegator by default,
// the solver, or both. Every call to the solver is a sample of its own,
// since a delegation starts a new sample. The delegator's turns are
// another. Each trained policy gets its own groups of the step's rollouts,
// with the same rollouts, rewards and advantages. Each gets its own
// rl.Trainer; the solver's lives in OutDir/SolverDir. All step in lockstep
// (rl.Lockstep) on one rollout pass per step. A trained policy samples at
// the trainer's temperature with logprobs, through its agent's
// delegate.Sampler. The solver is seeded apart from the delegator. An
// untrained policy plays as in the table: the pretrained delegator at
// EvalTemperature, the solver greedy. The table adds the pretrained
// delegator with the trained solver, and with both the two trained
// together. It adds SolverAcceptance's paired checks: a trained solver
// beats the pretrained one under the same delegator.
//
// # Roles
//
// Whatever the strategy, the delegator in the main seat has trace role
// RoleDelegator and sub-agents RoleSubagent (a solver answering a whole
// problem alone would be RoleSolver), so the columns mean the same in
// every row.
//
// # MLPO
//
// ModeMLPO trains a leader under lead: K frozen peers answer first, the
// leader sees their answers and writes its own. The peers are the models
// of Peers taken in turn (by default the shipped peer and the shipped
// delegator, whose mistakes differ); each solves with scratch work in the
// delegator's format, and the leader reads its answer condensed to one
// line per step (scratchPeer, transcript.Condense). Each problem's peer
// answers are fixed: seeded by the problem, computed once by a memoized
// local model (local.Model.Memoized) and shared by every rollout, the
// filter and the table. The training items are those the peers solve
// less than FilterMaxRate of the time (rl.FilterSolved over PeerSamples
// answers, kept in OutDir/filter.json). The table
// compares the trained leader with its team and alone, the untrained
// leader likewise, each peer model alone (greedy), the peers' majority
// vote over K+1 answers (the team's number of generations: K peers and
// one leader), and at the team's dollar cost the peers' majority and the
// trained leader's own majority. delegate train --mode mlpo runs it
// with the MLPO paper's recipe (Dr. GRPO, reward = the leader's
// correctness) on level 2 (world.MLPOLevel) with up to
// world.MLPODistractors distractor sentences, where the leader alone has
// room to improve.
package train
