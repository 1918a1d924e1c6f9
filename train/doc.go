// Package train is `delegate train`. It trains the synthetic world's
// delegator with GRPO from pretrained nn checkpoints. It measures the
// delegator before and after training on held-out problems, so a run shows
// whether reward taught it when to delegate. The command in cmd/delegate
// only parses flags, draws progress and plots; everything else is here.
//
// # A run
//
// Run loads the frozen solver and the delegator (the policy's start, also
// kept frozen as the "pretrained" arm), serves them in-process (package
// local) and runs the strategies of package strategy on them with the
// world's compact prompts (transcript.StrategyConfig), the same code path as
// remote LLMs. Then:
//
//  1. The best fixed rule: every input-independent per-position rule
//     (world.PositionRule: delegate the steps at some positions, compute
//     the others) on RuleItems training problems (OutDir/rules.jsonl);
//     the one of highest mean reward is the table's strongest fixed
//     baseline (Table.BestRule), chosen without the held-out items.
//     Then the best keyword rule the same way (scripted.KeywordRules,
//     OutDir/keywords.jsonl; Table.BestKeyword).
//  2. The baselines on EvalItems held-out problems of EvalSplit
//     (validation while choosing settings, test for the reported table;
//     bench.Run, per-item records in OutDir/eval.jsonl): the delegator
//     alone without the delegate tool (single), every fixed rule, the
//     best keyword rule and the oracle router (route, programs in the delegator's seat,
//     scripted.Delegator), and the pretrained delegator (route). The last is
//     timed (OutDir/timing.json): the trained delegator's evaluation will
//     take as long.
//  3. GRPO (or Dr. GRPO, RLOO) on route over TrainProblems training
//     problems: the delegator has the delegate tool, the solver answers.
//     Only the delegator's generated tokens are trained (rl masks prompts,
//     tool results and solver outputs); the reward is world.DefaultReward,
//     a setting of reward.Graded: correct − λ·delegator generated tokens −
//     μ·sub-agent calls (Scorer). The rollouts are made, scored and
//     grouped in process by package rollout's pipeline, the one behind
//     `delegate process` (rollout.Groups), and handed to the rl trainer as
//     its source. Training stops at RL.Steps, at TrainTime (summed
//     over resumed invocations), or early enough before Deadline to leave
//     the final evaluation its time.
//  4. The trained delegator (route) on the same items, then random
//     delegation at its rate and the SFT arm (the starting delegator
//     fine-tuned on the oracle's transcripts with RL's compute, kept in
//     OutDir/sft), and the Table: per arm, accuracy with a
//     Wilson 95% interval, mean reward with a normal 95% interval (never of
//     zero width), prompt and generated tokens per role, sub-agent calls,
//     the delegation rate per kind of step (from each record's
//     LabelDelegated), cost at world.DefaultPrices (a conversation's
//     repeated prefix priced as cached only from CacheMinTokens) and
//     latency, all computed from the per-item records (NewTable); an item
//     the strategy reports a failure for counts wrong there and in the
//     training reward. Acceptance decides the training criteria from the
//     table with paired tests on the shared items (Table.Checks, printed
//     under it as PASS or MISS).
//
// Every phase writes as it goes, so an interrupted run resumes in the same
// OutDir: finished items are not run again, training continues from rl's
// last checkpoint, and the trained arm's name carries its step, so records
// of an earlier state of the policy are never mixed in.
//
// # Several policies
//
// Config.Train chooses what a route run trains: the delegator (the default),
// the solver, or both. Every call to the solver is a sample of its own (a
// delegation starts a new sample) and the delegator's turns are another; each
// trained policy gets its own groups of the step's rollouts (the same
// rollouts, rewards and advantages) and its own rl.Trainer (the solver's in
// OutDir/SolverDir), all stepping in lockstep (rl.Lockstep) on one rollout
// pass per step. A trained policy samples at the trainer's temperature with
// logprobs (its agent's delegate.Sampler, the solver seeded apart from the
// delegator); an untrained one plays as in the table (the pretrained
// delegator at EvalTemperature, the solver greedy). The table adds the
// pretrained delegator with the trained solver and, with both, the two
// trained together, and SolverAcceptance's paired checks: a trained solver
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
