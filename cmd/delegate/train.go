package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/world"
)

// trainFlags are the flags of delegate train that are not fields set in
// place on the run's config.
type trainFlags struct {
	estimator   string
	lr          float64
	quiet       bool
	progress    string
	total       time.Duration
	level       int
	distractors int
	world       string
	api         string
	processes   int
	otlp        string
	gw          trainGatewayFlags
	rlSeeds     []uint
	// worldReward is the world reward's kind (world.WorldRewards).
	worldReward string
	// rewardConfig is a file whose reward section, as in delegate.yaml,
	// tunes the cost-aware rewards.
	rewardConfig string
}

func newTrainCmd(getenv env, log *slog.Logger) *cobra.Command {
	cfg := train.DefaultConfig()
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train [flags]",
		Short: "Train the delegator with GRPO (or a leader with MLPO) and compare it before and after",
		Long:  trainLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := trainConfig(cmd, &cfg, &f); err != nil {
				return err
			}
			return runTrainCmd(cmd, getenv, log, cfg, f)
		},
	}
	addTrainFlags(cmd.Flags(), &cfg, &f)
	return cmd
}

// trainLong is train's help text.
const trainLong = `Train starts from the pretrained checkpoints (by default the shipped
solver and router, embedded in the binary), chooses the best fixed
per-position rule and the best keyword rule (a step's sentence and
operands) on training problems, evaluates the baselines (the delegator
alone, every fixed rule, the keyword rule, the oracle router, the
pretrained delegator) on held-out problems of --split, trains the delegator with GRPO
under route (the delegator has the delegate tool, the solver answers) for
--steps steps (or until only the time the final evaluation needs is left
of --time, when given), then evaluates the trained delegator, random
delegation at its rate and the starting delegator fine-tuned on the
oracle's route transcripts with RL's updates and sequences (kept in
--out/sft), and prints the table with paired acceptance checks.

Everything goes to --out: metrics.jsonl (one line per step), the plots
reward, accuracy, delegator_tokens, delegation_rate and delegation_by_kind
(each .png and .svg), checkpoint/ (the trained policy under
checkpoint/policy), rules.jsonl and keywords.jsonl (the fixed and keyword
rules on training problems), eval.jsonl (every item of every arm) and table.md. Run it again with the same --out to resume
an interrupted run: finished items are kept, training goes on from its last
checkpoint, with a new --time (and what is left of --train-time). A time
budget that ends training before --steps still prints the table, marked as
such, and exits with status 1: the table is not the full run's.

--train solver|both also asks every operation of the held-out problems
of the pretrained and the trained solver, greedy and --solver-samples
times at --temperature, and prints each trained role's own reward before
and after training under the table, paired (also in --out/roles.json).
--handed-calls adds the solver judged on the calls it is handed: those the
delegator of the system as trained (both trained, or the frozen one with
--train solver) makes on the held-out items, asked of both solvers alike.
--solver shipped:solver-weak names the shipped weak solver, which RL has
something to teach; shipped:solver-mid, a solver in between.

--rl-seeds 1,2,3 trains and evaluates the --train policies once per RL
seed, each in --out/seed-N with its own table (the baselines evaluated
once, by the first), and writes --out/seeds.md: the trained delegator's
figures per seed, their mean, sd and range, and how many seeds meet each
acceptance check. With the solver trained it adds each role's own reward
per seed, the paired differences' mean, sd and range, and how many seeds
rise (also in --out/roles-seeds.json).

--mode mlpo trains a leader under lead with frozen peers that solve with
scratch work (--peers, default shipped:peer,shipped:delegator, taken in
turn) on the items most peers do not already solve, and compares it with
its team, alone, each peer model alone, and the peers' majority vote and
its own at the team's cost. Its defaults differ: the MLPO recipe
(--estimator drgrpo, --lambda 0, --mu 0: Dr. GRPO on the correctness of the
leader's answer), --level 2 --distractors 4 (the leader alone is at its
ceiling on plain level-2 problems), --peer-count 2, --train-problems 2048
(the filter samples the peers on every one), --kl 0.04 (the leader keeps
its format alone) and --eval-items 300: the setting chosen on the
validation split (docs/mlpo/README.md).

--mode decompose trains the delegator under decompose, the reference
"Delegation RL" loop: it plans one to four subtasks, the solver answers
them in parallel, and it aggregates the results; each answer is rewarded
against the single-agent baseline's (the starting delegator alone,
greedy): by default the graded comparison (its correctness minus the
baseline's, minus the cost of its tokens and calls, and --format-penalty,
default -1, for a run without a proper answer), with --parity the
reference's win/tie/loss buckets. It starts from the shipped planner (the
delegator pretrained further on two-part problems) and runs --level 3 (two
independent parts, where a plan decides something); the table compares it
with the delegator alone, the pretrained planner under decompose, fixed
plans, the oracle plan and random planning at its rate.

--gateway ADDR --config FILE serves a session gateway on ADDR, as delegate
gateway does, and trains the delegator on its sessions in this process:
the config's model of --gateway-role (default delegator) is the policy,
served from the trainer's memory, each step's update to the sessions that
start after it. Each step takes --items groups of --group finished
sessions, trained as train --api trains a batch; checkpoints and
resuming are --api's (docs/gateway.md).

--world digits runs the default world's problems with another solver, the
shipped solver-digits, right only on products whose first factor is below
50 (and on sums): the best policy reads the numbers, not the keywords
(docs/world.md). It goes with route and in-process training.`

// trainConfig applies the mode's defaults and the flags outside cfg. It
// checks the flags that go together.
func trainConfig(cmd *cobra.Command, cfg *train.Config, f *trainFlags) error {
	if err := checkProgress(f.progress); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if f.quiet {
		f.progress = progressNone
	}
	defaults := map[string][]modeDefault{train.ModeMLPO: mlpoDefaults, train.ModeDecompose: decomposeDefaults}[cfg.Mode]
	if len(defaults) > 0 {
		for _, d := range defaults {
			if !cmd.Flags().Changed(d.flag) {
				if err := cmd.Flags().Set(d.flag, d.value); err != nil {
					return fmt.Errorf("train: %s default --%s %s: %w", cfg.Mode, d.flag, d.value, err) // constant table; tested
				}
			}
		}
	}
	est := reward.Estimator(f.estimator)
	switch est {
	case reward.GRPO, reward.DrGRPO, reward.RLOO:
	default:
		return fmt.Errorf("train: --estimator must be grpo, drgrpo or rloo, got %q", f.estimator)
	}
	cfg.RL.Estimator = est
	cfg.RL.Schedule.MaxLR, cfg.RL.Schedule.MinLR = f.lr, f.lr
	cfg.RL.Schedule.Total = cfg.RL.Steps
	cfg.RL.Schedule.Warmup = min(cfg.RL.Schedule.Warmup, cfg.RL.Steps)
	w, ok := world.Levels()[f.level]
	if !ok {
		return fmt.Errorf("train: --level %d: the world has levels 1 to %d", f.level, len(world.Levels()))
	}
	if cmd.Flags().Changed("distractors") {
		w.Distractors = f.distractors
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	cfg.World = w
	if f.world != "" {
		if err := selectWorld(cmd.Flags(), cfg, *f); err != nil {
			return err
		}
	}
	if err := trainRewardConfig(cmd, cfg, f); err != nil {
		return err
	}
	if f.total > 0 {
		cfg.Deadline = time.Now().Add(f.total)
	}
	if cfg.BatchItems && f.api == "" {
		return errors.New("train: --batch-items goes with --api")
	}
	if f.processes == 0 && f.gw.addr == "" && cmd.Flags().Changed("offpolicy") {
		return errors.New("train: --offpolicy goes with --processes or --gateway")
	}
	if err := checkTrainGateway(cmd, cfg, f); err != nil {
		return err
	}
	if f.otlp != "" && f.api != "" {
		return errors.New("train: --otlp exports the runs of rollouts and evaluations; a trainer from a trajectory API (--api) makes none")
	}
	if len(f.rlSeeds) > 0 && (f.processes != 0 || f.api != "" || f.total > 0 || cmd.Flags().Changed("rl-seed")) {
		return errors.New("train: --rl-seeds runs in process, in place of --rl-seed, without --time (one seed's deadline would starve the next); not with --processes or --api")
	}
	return nil
}

// trainRewardConfig applies the reward flags: the world's reward, the
// reward section and the credit. It refuses those that only a trainer
// scoring its own rollouts can honour.
func trainRewardConfig(cmd *cobra.Command, cfg *train.Config, f *trainFlags) error {
	if cmd.Flags().Changed("world-reward") {
		g, err := world.WorldReward(cfg.Reward, f.worldReward)
		if err != nil {
			return fmt.Errorf("train: --world-reward: %w", err)
		}
		if g.Gate != 0 && (f.processes != 0 || f.api != "" || f.gw.addr != "") {
			return errors.New("train: --world-reward gated: with --processes, --api or --gateway the rollouts are scored elsewhere, not by the trainer")
		}
		cfg.Reward = g
	}
	if f.rewardConfig != "" {
		rc, err := readRewardSection(f.rewardConfig)
		if err != nil {
			return fmt.Errorf("train: --reward-config: %w", err)
		}
		cfg.CostReward = rc
		if !cmd.Flags().Changed("reward") && rc.Kind != "" {
			cfg.RewardKind = rc.Kind
		}
	}
	if cfg.RewardKind != "" && cfg.RewardKind != reward.KindGraded && (f.processes != 0 || f.api != "") {
		return fmt.Errorf("train: --reward %s: with --api or --processes the environments score the rollouts, not the trainer", cfg.RewardKind)
	}
	if (cfg.Credit == reward.CreditStep || cfg.Credit == reward.CreditDecision || cfg.Credit == reward.CreditCounterfactual) && (f.processes != 0 || f.api != "") {
		return fmt.Errorf("train: --credit %s: with --api or --processes the environments score the rollouts, not the trainer", cfg.Credit)
	}
	return nil
}

// runTrainCmd runs train as f says: as processes, from a trajectory API,
// over several RL seeds or once in process.
func runTrainCmd(cmd *cobra.Command, getenv env, log *slog.Logger, cfg train.Config, f trainFlags) error {
	if f.processes != 0 {
		t, err := newTopology(cmd.Flags(), cfg, f.processes, f.level, cfg.Reward.Lambda)
		if err != nil {
			return err
		}
		// This process runs the table's evaluations; the environments
		// get --otlp on their command lines.
		closeOTLP, err := traceTrain(f.otlp, getenv, log, &t.cfg)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer closeOTLP()
		t.otlp = f.otlp
		t.sup = newSupervisor(t.exe, cmd.OutOrStdout())
		return runTrainProcesses(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f.progress, log, t)
	}
	if f.api != "" {
		return runTrainAPI(cmd.Context(), cmd.OutOrStdout(), cfg, f.api, getenv(apiTokenEnv))
	}
	if f.gw.addr != "" {
		offPolicy, err := cmd.Flags().GetInt("offpolicy")
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if offPolicy < 0 {
			return fmt.Errorf("train: --offpolicy %d is negative", offPolicy)
		}
		return runTrainGateway(cmd.Context(), cmd.OutOrStdout(), getenv, log, cfg, f, offPolicy)
	}
	closeOTLP, err := traceTrain(f.otlp, getenv, log, &cfg)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer closeOTLP()
	if len(f.rlSeeds) > 0 {
		seeds := make([]uint64, len(f.rlSeeds))
		for i, s := range f.rlSeeds {
			seeds[i] = uint64(s)
		}
		return runTrainSeeds(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f.progress, log, cfg, seeds)
	}
	return runTrain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f.progress, log, cfg)
}

// addTrainFlags declares train's flags over cfg and f.
func addTrainFlags(fl *pflag.FlagSet, cfg *train.Config, f *trainFlags) {
	fl.StringVar(&cfg.Mode, "mode", cfg.Mode, "route (GRPO on the delegator under route), mlpo (a leader under lead) or decompose (the delegator plans and aggregates)")
	fl.BoolVar(&cfg.Parity, "parity", cfg.Parity, "decompose: reward with the reference's win/tie/loss buckets against the single-agent baseline instead of the graded comparison")
	fl.StringVar(&cfg.Train, "train", cfg.Train, "route: the policies trained, each on its own samples of the same rollouts: delegator, solver or both (the solver's trainer in OUT/solver)")
	fl.StringVar(&cfg.Credit, "credit", cfg.Credit, "route: advantages of the samples: task (each its rollout's), role (each role against its own samples; the solver by its own answer; with --api from the role and question each pushed sequence names) step (each its rollout's, from a reward that charges every wrong answer taken from the solver; delegator only) or decision (each delegate call's tokens from that call's own value against the step's calls on the same operation, the rest its rollout's; delegator only) or counterfactual (each delegate call's tokens get that call's own value, against computing the step inline, worth 0; the rest its rollout's; delegator only)")
	fl.BoolVar(&cfg.SkipCredit, "skip-credit", cfg.SkipCredit, "route with --credit decision or counterfactual: also give a delegate call's advantage to the token at which the delegator wrote a later step's block in place of the delegated step's, the token that chose to delegate")
	fl.BoolVar(&cfg.CentreCalls, "centre-calls", cfg.CentreCalls, "route with --credit counterfactual: a delegate call's value less the mean of the step's other calls on the same operation, capped at 0, where those calls both gain and lose: a product is credited against the average product call")
	fl.BoolVar(&cfg.InlineCredit, "inline-credit", cfg.InlineCredit, "route with --credit counterfactual: the first token of each block the delegator writes for a step gets advantage 0, the value of computing inline, in place of its rollout's, so the choice between a call and a block is credited by the call's value alone")
	fl.StringVar(&cfg.Solver, "solver", cfg.Solver, "solver checkpoint directory, or a shipped model as shipped:NAME (shipped:solver-weak, the weak solver RL has something to teach) (frozen unless --train solver|both; default: the shipped solver, embedded)")
	fl.IntVar(&cfg.SolverSamples, "solver-samples", cfg.SolverSamples, "route with --train solver|both: answers the solver samples per held-out call, at --temperature, for the role report under the table (0: greedy answers only)")
	fl.BoolVar(&cfg.HandedCalls, "handed-calls", cfg.HandedCalls, "route with --train solver|both: also judge the solver on the calls it is handed, those the delegator of the system as trained makes on the held-out items, paired, with its check (the held-out records keep the calls' questions: records written without it have none, and the report then fails naming the label)")
	fl.StringVar(&cfg.Delegator, "delegator", cfg.Delegator, "delegator checkpoint directory (the policy's start; default, embedded: the shipped router; decompose: the shipped planner; mlpo: the shipped delegator)")
	fl.StringSliceVar(&cfg.Peers, "peers", cfg.Peers, "mlpo: the peers' checkpoints, directories or shipped:NAME, taken in turn (default: shipped:peer,shipped:delegator)")
	fl.IntVar(&cfg.PeerCount, "peer-count", cfg.PeerCount, "mlpo: peers of the leader (K) (mlpo default 2)")
	fl.Float64Var(&cfg.FilterMaxRate, "filter-max-rate", cfg.FilterMaxRate, "mlpo: train only on items the peers solve less than this share of the time, in (0, 1]")
	fl.StringVarP(&cfg.OutDir, "out", "o", cfg.OutDir, "output directory; an existing run there is resumed")
	fl.DurationVar(&f.total, "time", 0, "wall-time budget of this invocation, table included: training stops early enough to leave time for the final evaluation, and the command then exits 1; 0: none")
	fl.DurationVar(&cfg.TrainTime, "train-time", cfg.TrainTime, "training time budget (rollouts and updates, summed over resumed invocations); 0: none")
	fl.IntVar(&cfg.RL.Steps, "steps", cfg.RL.Steps, "most RL steps")
	fl.StringVar(&f.estimator, "estimator", string(cfg.RL.Estimator), "advantages: grpo, drgrpo or rloo (mlpo default drgrpo)")
	fl.Float64Var(&f.lr, "lr", cfg.RL.Schedule.MaxLR, "learning rate (constant after warmup)")
	fl.Float64Var(&cfg.RL.ClipEps, "clip", cfg.RL.ClipEps, "PPO clip range ε of the importance ratio")
	fl.Float64Var(&cfg.RL.KLBeta, "kl", cfg.RL.KLBeta, "weight of the KL penalty to the pretrained delegator (0: none) (mlpo default 0.04)")
	fl.IntVar(&cfg.RL.Epochs, "epochs", cfg.RL.Epochs, "optimizer steps per batch of rollouts")
	fl.IntVar(&cfg.RL.GroupSize, "group", cfg.RL.GroupSize, "rollouts per item (G)")
	fl.IntVar(&cfg.RL.ItemsPerStep, "items", cfg.RL.ItemsPerStep, "items per step")
	fl.Float64Var(&cfg.RL.Temperature, "temperature", cfg.RL.Temperature, "sampling temperature of training rollouts")
	fl.Float64Var(&cfg.RL.EntropyBonus, "entropy", cfg.RL.EntropyBonus, "entropy bonus c: each trained token's advantage gains c times its surprisal under the sampler, so rare choices are not dropped before they are learned (0: none)")
	fl.IntVar(&cfg.RL.MaxNewTokens, "max-new-tokens", cfg.RL.MaxNewTokens, "cap on every model call's completion")
	fl.StringVar(&cfg.RewardKind, "reward", reward.KindGraded, "route: the reward of training rollouts: graded (the world's, --lambda and --mu), or a cost-aware one of "+strings.Join(reward.Kinds()[1:], ", ")+" tuned by --reward-config, scored at the trainer's step; the table keeps the world's (default: --reward-config's kind, else graded)")
	fl.StringVar(&f.rewardConfig, "reward-config", "", "a YAML file whose reward section (as in delegate.yaml: kind, success_gated, efficiency, critical_path, per_call) tunes --reward")
	fl.StringVar(&f.worldReward, "world-reward", world.RewardGraded, "route: the world's reward, of training, credit, rule searches and every arm of the table: graded (correct − λ·tokens − μ·calls) or gated (1 − min(λ·tokens + μ·calls, 2) if right, −2 otherwise: any right answer above any wrong or unfinished one); not with --processes, --api or --gateway")
	fl.Float64Var(&cfg.Reward.Lambda, "lambda", cfg.Reward.Lambda, "reward cost per delegator token (λ) (mlpo default 0)")
	fl.Float64Var(&cfg.Reward.Mu, "mu", cfg.Reward.Mu, "reward cost per sub-agent call (μ) (mlpo default 0)")
	fl.Float64Var(&cfg.Reward.FormatPenalty, "format-penalty", cfg.Reward.FormatPenalty, "decompose: reward added (≤ 0) to a rollout that ends without a proper answer, on top of counting it wrong (decompose default -1)")
	fl.IntVar(&cfg.TrainProblems, "train-problems", cfg.TrainProblems, "training problems (mlpo default 2048)")
	fl.IntVar(&cfg.EvalItems, "eval-items", cfg.EvalItems, "held-out problems of the table (mlpo default 300)")
	fl.StringVar(&cfg.EvalSplit, "split", cfg.EvalSplit, "split of the table's items: validation while choosing settings, test for the reported table")
	fl.IntVar(&cfg.RuleItems, "rule-items", cfg.RuleItems, "training problems each fixed per-position rule runs on to choose the best")
	fl.IntVar(&cfg.CacheMinTokens, "cache-min-tokens", cfg.CacheMinTokens, "shortest shared prefix of a conversation priced as cached input (real APIs: 1024); 0: every shared prefix")
	fl.Float64Var(&cfg.EvalTemperature, "eval-temperature", cfg.EvalTemperature, "delegator temperature in the table (0: greedy)")
	fl.BoolVar(&cfg.StrictToolCalls, "strict-tool-calls", cfg.StrictToolCalls, "route: the delegator writes well-formed delegate calls only, enforced while sampling (training and table)")
	fl.IntVar(&cfg.EvalConcurrency, "eval-concurrency", cfg.EvalConcurrency, "items in flight in the table")
	fl.IntVar(&f.level, "level", world.DefaultLevel, "world difficulty (world.Levels: 1 one product, 2 a product and an amount, 3 two parts, the default world, 4 the longest, 5 one quantity of 1 to 3 steps; mlpo default 2)")
	fl.StringVar(&f.world, "world", "", "a named world (world.WorldNames): default; digits, the default world's problems with the shipped solver-digits; or band, with solver-band and λ 0.003 (route only; not with --level, --processes or --api)")
	fl.IntVar(&f.distractors, "distractors", 0, "most distractor sentences a problem gets, uniformly 0..N (default: the level's; mlpo default 4)")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the problems, the random baseline and the models' unseeded calls (the training item order and rollouts have --rl-seed)")
	fl.Uint64Var(&cfg.RL.Seed, "rl-seed", cfg.RL.Seed, "seed of the trainer: its training item order and its rollouts' samples")
	fl.UintSliceVar(&f.rlSeeds, "rl-seeds", nil, "route: train and evaluate the --train policies once per RL seed (1,2,3), each in OUT/seed-N, and summarize them in OUT/seeds.md (and the roles' own rewards in OUT/roles-seeds.json)")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress display on stderr: auto (a bar on a terminal, lines otherwise), bar, plain or none")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress display (--progress none)")
	fl.StringVar(&f.otlp, "otlp", "", otlpUsage)
	fl.IntVar(&f.processes, "processes", 0, "run the loop as child processes instead of in this one: the trajectory API, a policy server following the trainer's checkpoint, this many environments pushing route rollouts, and a trainer (train --api), each restarted if it dies; then the same table (0: in process)")
	fl.Int("offpolicy", 0, "with --processes: batches the environments may sample ahead of the trainer's updates (0: each batch is sampled by the policy of the trainer's last step, once it is loaded, as in process; 1 or more: sampling overlaps the updates and the older groups are trained off-policy, with truncated importance weights); with --gateway: steps of finished groups that may wait beyond the step being taken before new sessions wait (0: one step's)")
	fl.BoolVar(&cfg.BatchItems, "batch-items", false, "with --api: ask the API for batches of --items groups, whatever their sequences (delegate api's batch_groups), not of --items × --group sequences; --processes gives it to its trainer")
	fl.StringVar(&f.api, "api", "", "train on the batches of the trajectory API at this URL (delegate api, or Atropos's) instead of running rollouts: an Atropos trainer; token from $DELEGATE_API_TOKEN")
	addTrainGatewayFlags(fl, &f.gw)
}

// readRewardSection reads a YAML file's reward section over
// reward.DefaultConfig, as delegate.yaml writes it. Other top-level keys
// are left alone; unknown keys inside the section are refused.
func readRewardSection(path string) (reward.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return reward.Config{}, err
	}
	var doc struct {
		Reward yaml.Node `yaml:"reward"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return reward.Config{}, fmt.Errorf("%s: %w", path, err)
	}
	rc := reward.DefaultConfig()
	if doc.Reward.Kind == 0 {
		return reward.Config{}, fmt.Errorf("%s: no reward section", path)
	}
	section, err := yaml.Marshal(&doc.Reward)
	if err != nil {
		return reward.Config{}, fmt.Errorf("%s: reward: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(section))
	dec.KnownFields(true)
	if err := dec.Decode(&rc); err != nil {
		return reward.Config{}, fmt.Errorf("%s: reward: %w", path, err)
	}
	return rc, nil
}

// modeDefault is a flag whose default differs under a mode.
type modeDefault struct{ flag, value string }

// mlpoDefaults are the flags whose default differs under --mode mlpo, in
// the order they are applied.
var mlpoDefaults = []modeDefault{
	{"estimator", "drgrpo"},
	{"lambda", "0"},
	{"mu", "0"},
	{"level", strconv.Itoa(world.MLPOLevel)},
	{"distractors", strconv.Itoa(world.MLPODistractors)},
	{"peer-count", strconv.Itoa(train.MLPOPeerCount)},
	{"train-problems", "2048"},
	{"kl", strconv.FormatFloat(train.MLPOKLBeta, 'g', -1, 64)},
	{"eval-items", "300"},
}

// decomposeDefaults are the flags whose default differs under --mode
// decompose. They choose two-part problems, where the plan decides what
// is handed over. They set a penalty for a rollout without a proper
// answer. Without it, the cost term makes a malformed plan, a wrong answer
// after a few tokens, pay better than an attempt that fails
// (docs/decompose.md). They use fewer training items for choosing the best
// fixed plan, since the plans are few and cheap to tell apart.
var decomposeDefaults = []modeDefault{
	{"level", "3"},
	{"format-penalty", "-1"},
	{"rule-items", "100"},
}

// runTrainSeeds runs the job once per RL seed (train.RunSeeds) and
// prints each seed's table and their summary on out.
func runTrainSeeds(ctx context.Context, out, progress io.Writer, mode string, log *slog.Logger, cfg train.Config, seeds []uint64) error {
	start := time.Now()
	var (
		runs []train.SeedRun
		sum  *train.Seeds
	)
	err := withTrainProgress(progress, mode, log, cfg, func(o train.Options) (err error) {
		runs, sum, err = train.RunSeeds(ctx, cfg, seeds, o)
		return err
	})
	if err != nil {
		return err
	}
	var short []uint64
	for _, r := range runs {
		dir := train.SeedDir(cfg.OutDir, r.Seed)
		for _, d := range trainerDirs(dir, cfg.Train) {
			if _, err := train.WritePlots(d); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "\nRL seed %d: %d RL steps (%s, %.0f s of training); table in %s\n",
			r.Seed, r.Result.Steps, stopReason(r.Result.StoppedBy), r.Result.TrainSeconds, filepath.Join(dir, train.TableFile))
		if r.Result.StoppedBy == "time" {
			short = append(short, r.Seed)
		}
	}
	fmt.Fprintf(out, "\n%d RL seeds, %s in all:\n\n", len(runs), time.Since(start).Round(time.Second))
	if err := sum.WriteMarkdown(out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nwritten: %s", filepath.Join(cfg.OutDir, train.SeedsFile))
	if sum.Roles != nil {
		fmt.Fprintf(out, ", %s", filepath.Join(cfg.OutDir, train.SeedRolesFile))
	}
	fmt.Fprintln(out)
	if len(short) > 0 {
		return fmt.Errorf("train: the time budget ended training of RL seeds %v before --steps; run the same command again to go on", short)
	}
	return nil
}

// withTrainProgress runs fn with options that report to the progress
// display. The display is of --progress mode, on progress unless nil. It
// closes the display before it returns. A cancelled run says how to resume it.
func withTrainProgress(progress io.Writer, mode string, log *slog.Logger, cfg train.Config, fn func(train.Options) error) error {
	trainCh := make(chan rl.Progress, 64)
	evalCh := make(chan bench.Progress, 256)
	phases := make(chan string, 8)
	bars := newTrainProgress(progress, mode, cfg.RL.Steps)
	var wg sync.WaitGroup
	wg.Go(func() { bars.observe(trainCh, evalCh, phases) })
	err := fn(train.Options{
		TrainProgress: trainCh,
		EvalProgress:  evalCh,
		Phase:         bars.phaseFunc(phases),
		Log:           log,
	})
	close(trainCh)
	close(evalCh)
	close(phases)
	wg.Wait()
	bars.finish()
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted; run the same command again to resume from %s: %w", cfg.OutDir, err)
	}
	return err
}

// runTrain runs the job, showing its progress under the --progress mode
// on progress, unless nil. Then it writes the plots and prints the table
// on out.
func runTrain(ctx context.Context, out, progress io.Writer, mode string, log *slog.Logger, cfg train.Config) error {
	start := time.Now()
	var res *train.Result
	err := withTrainProgress(progress, mode, log, cfg, func(o train.Options) (err error) {
		res, err = train.Run(ctx, cfg, o)
		return err
	})
	if err != nil {
		return err
	}
	dirs := trainerDirs(cfg.OutDir, cfg.Train)
	var plots []string
	for _, d := range dirs {
		ps, perr := train.WritePlots(d)
		if perr != nil {
			return perr
		}
		plots = append(plots, ps...)
	}
	fmt.Fprintf(out, "\n%d RL steps (%s, %.0f s of training); trained policy in %s; %s in all\n\n",
		res.Steps, stopReason(res.StoppedBy), res.TrainSeconds, res.Checkpoint, time.Since(start).Round(time.Second))
	if err := res.Table.WriteMarkdown(out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nwritten: %s, %s, %s, %s",
		filepath.Join(dirs[0], rl.MetricsFile), filepath.Join(cfg.OutDir, train.EvalFile), filepath.Join(cfg.OutDir, train.TableFile), res.Checkpoint)
	if len(dirs) > 1 {
		fmt.Fprintf(out, ", %s, %s", filepath.Join(dirs[1], rl.MetricsFile), res.SolverCheckpoint)
	}
	if res.Table.Roles != nil {
		fmt.Fprintf(out, ", %s", filepath.Join(cfg.OutDir, train.RolesFile))
	}
	for _, p := range plots {
		fmt.Fprintf(out, ", %s", p)
	}
	fmt.Fprintln(out)
	if res.StoppedBy == "time" {
		return fmt.Errorf("train: the time budget ended training after %d of %d steps, so this table is not the full run's; run the same command again to go on from the checkpoint in %s", res.Steps, cfg.RL.Steps, cfg.OutDir)
	}
	return nil
}

// trainerDirs are the trainers' directories of a run in out that trains
// the policies trained names. The lead trainer's comes first: the
// delegator's, or the solver's when only the solver is trained; with
// both, the solver's follows.
func trainerDirs(out, trained string) []string {
	switch trained {
	case train.TrainSolver:
		return []string{filepath.Join(out, train.SolverDir)}
	case train.TrainBoth:
		return []string{out, filepath.Join(out, train.SolverDir)}
	}
	return []string{out}
}

func stopReason(s string) string {
	switch s {
	case "steps":
		return "all steps done"
	case "time":
		return "stopped by --time"
	}
	return "not trained in this run"
}

// trainProgress shows delegate train's work on the shared progress view.
// Each evaluation is a phase counting items, with the correct and failed
// counts as its status. The training phase counts steps, with the last
// finished step's figures and the rollouts of the step in progress.
type trainProgress struct {
	v     *progressView
	steps int

	train            bool        // the current phase is training
	first            int         // the step this run started after (a resumed run's)
	started          bool        // a step event came in this run
	last             *rl.Metrics // the last finished step
	correct, failed  int         // the evaluation's items so far
	finished, resume int
	lastDone         int // the evaluation's last count: a phase may run several

	// shown, when set, gets a value once a phase is shown (phaseFunc).
	// The events sent before it are shown first.
	shown chan struct{}
}

// phaseFunc is the train.Options.Phase that sends each phase to observe
// on phases. It returns once the phase is shown. Every event sent before
// the phase shows under the phase before it, and every event after under
// it. Events and phases come on different channels, and a select that
// finds both ready takes either.
func (t *trainProgress) phaseFunc(phases chan<- string) func(string) {
	t.shown = make(chan struct{})
	return func(name string) {
		phases <- name
		<-t.shown
	}
}

// newTrainProgress shows a run of steps steps on w under the --progress
// mode (w nil: none).
func newTrainProgress(w io.Writer, mode string, steps int) *trainProgress {
	if w == nil {
		w, mode = io.Discard, progressNone
	}
	return &trainProgress{v: newProgressView(w, mode), steps: steps}
}

// stepLine is the figures of a finished step.
func stepLine(m *rl.Metrics) string {
	return fmt.Sprintf("reward %.3f acc %.2f delegation %.2f tokens %.0f", m.Reward, m.Accuracy, m.DelegationRate, train.DelegatorTokens(m))
}

// observe consumes events until every channel is closed, from one
// goroutine, as the view wants.
func (t *trainProgress) observe(steps <-chan rl.Progress, ev <-chan bench.Progress, phases <-chan string) {
	// step and eval show one event each, or forget a closed channel.
	step := func(pr rl.Progress, ok bool) {
		if !ok {
			steps = nil
			return
		}
		t.trainEvent(pr)
	}
	eval := func(pr bench.Progress, ok bool) {
		if !ok {
			ev = nil
			return
		}
		t.evalEvent(pr)
	}
	// pending shows the events already sent: with phaseFunc, those of the
	// phase before.
	pending := func() {
		for {
			select {
			case pr, ok := <-steps:
				step(pr, ok)
			case pr, ok := <-ev:
				eval(pr, ok)
			default:
				return
			}
		}
	}
	onPhase := func(name string, ok bool) {
		if !ok {
			phases = nil
			return
		}
		if t.shown != nil {
			pending()
		}
		t.phase(name)
		if t.shown != nil {
			t.shown <- struct{}{}
		}
	}
	for steps != nil || ev != nil || phases != nil {
		// A phase that began is shown before the events that follow it.
		select {
		case name, ok := <-phases:
			onPhase(name, ok)
			continue
		default:
		}
		select {
		case name, ok := <-phases:
			onPhase(name, ok)
		case pr, ok := <-steps:
			step(pr, ok)
		case pr, ok := <-ev:
			eval(pr, ok)
		}
	}
}

func (t *trainProgress) phase(name string) {
	t.train = name == "train"
	t.correct, t.failed, t.finished, t.resume, t.lastDone = 0, 0, 0, 0, 0
	if !t.train {
		t.v.begin(name, "items")
		return
	}
	t.v.begin(name, "steps")
	t.v.update(progressFigures{Total: t.steps, Status: "first step"})
}

func (t *trainProgress) trainEvent(pr rl.Progress) {
	if !t.started {
		t.started, t.first = true, pr.Step-1
	}
	status := "first step"
	if t.last != nil {
		status = stepLine(t.last)
	}
	done := pr.Step - 1
	if pr.Metrics != nil {
		t.last, done = pr.Metrics, pr.Step
		status = stepLine(pr.Metrics)
	} else if pr.Rollouts > 0 {
		status += fmt.Sprintf("  rollouts %d/%d", pr.RolloutsDone, pr.Rollouts)
	}
	t.v.update(progressFigures{Done: done, Total: pr.Steps, Resumed: t.first, Status: status})
}

func (t *trainProgress) evalEvent(pr bench.Progress) {
	if pr.Done <= t.lastDone { // a new evaluation in the same phase counts from 1
		t.correct, t.failed, t.finished, t.resume = 0, 0, 0, 0
	}
	t.lastDone = pr.Done
	t.finished++
	if pr.Correct {
		t.correct++
	}
	if pr.Failed {
		t.failed++
	}
	if pr.Resumed {
		t.resume++
	}
	t.v.update(progressFigures{Done: pr.Done, Total: pr.Total, Resumed: t.resume,
		Status: fmt.Sprintf("%d/%d correct, %d failed", t.correct, t.finished, t.failed)})
}

// finish ends the display.
func (t *trainProgress) finish() { t.v.finish(true) }

// runTrainAPI trains on a trajectory API's batches, printing a line per
// step; the environments (process --push) make the rollouts.
func runTrainAPI(ctx context.Context, out io.Writer, cfg train.Config, url, token string) error {
	// Each GET /batch is held by delegate's API until the batch is ready
	// (up to 10 s, then asked again): the batch comes as the last group
	// of it does. Atropos's server answers at once, and is polled.
	client := atropos.DefaultTrainerClient()
	client.URL, client.Token, client.Poll, client.Wait = url, token, 20*time.Millisecond, 10*time.Second
	progress, done := printSteps(out, cfg)
	fmt.Fprintf(out, "train: pulling batches of %d sequences from %s; checkpoints in %s\n",
		cfg.RL.ItemsPerStep*cfg.RL.GroupSize, url, rl.CheckpointDir(cfg.OutDir))
	err := train.FromAPI(ctx, cfg, &client, progress)
	close(progress)
	<-done
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w; run the same command again to resume", err)
	}
	return err
}

// printSteps prints a line on out for each step's metrics sent on the
// returned channel. done is closed once the channel is closed and every
// line printed.
func printSteps(out io.Writer, cfg train.Config) (chan<- rl.Progress, <-chan struct{}) {
	progress := make(chan rl.Progress, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range progress {
			if m := p.Metrics; m != nil {
				fmt.Fprintf(out, "step %d/%d: %d groups, %d sequences, mean score %.4f, accuracy %.2f, delegation %.2f, %d tokens trained, loss %.4f, waited %.1fs for the batch",
					m.Step, m.Steps, m.Groups, m.Rollouts, m.Reward, m.Accuracy, m.DelegationRate, m.TrainedTokens, m.Loss, m.RolloutSeconds)
				if m.OffPolicySequences > 0 {
					fmt.Fprintf(out, "; %d off-policy sequences, staleness mean %.1f max %d (%d groups unknown), importance weights %.3f [%.3f, %.3f], %.1f%% truncated",
						m.OffPolicySequences, m.StalenessMean, m.StalenessMax, m.UnknownVersion, m.ISWeightMean, m.ISWeightMin, m.ISWeightMax, 100*m.ISTruncFrac)
				}
				if m.QuarantinedGroups > 0 {
					fmt.Fprintf(out, "; %d groups quarantined (not trained: see %s)", m.QuarantinedGroups, filepath.Join(cfg.OutDir, train.QuarantineFile))
				}
				fmt.Fprintln(out)
			}
		}
	}()
	return progress, done
}

// worldSolvers are the shipped solvers of the named worlds other than
// the default one.
var worldSolvers = map[string]string{"digits": "solver-digits", "band": "solver-band"}

// selectWorld sets the world, its λ unless --lambda is given, and, unless
// --solver is given, the shipped solver of the named world f.world.
func selectWorld(fl *pflag.FlagSet, cfg *train.Config, f trainFlags) error {
	w, cov, err := world.Named(f.world)
	if err != nil {
		return fmt.Errorf("train --world: %w", err)
	}
	if cfg.Mode != train.ModeRoute {
		return fmt.Errorf("train: --world goes with --mode %s, not %s", train.ModeRoute, cfg.Mode)
	}
	for _, name := range []string{"level", "processes", "api"} {
		if fl.Changed(name) {
			return fmt.Errorf("train: --world goes without --%s", name)
		}
	}
	if fl.Changed("distractors") {
		w.Distractors = f.distractors
	}
	cfg.World, cfg.Coverage = w, cov
	if !fl.Changed("lambda") {
		cfg.Reward.Lambda = world.NamedReward(f.world).Lambda
	}
	if s, ok := worldSolvers[f.world]; ok && !fl.Changed("solver") {
		cfg.Solver = train.ShippedPrefix + s
	}
	return nil
}
