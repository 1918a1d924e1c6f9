package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/world"
)

// processFlags are the flags of `delegate process`.
type processFlags struct {
	datasetFlags
	config      string
	group       int
	strategy    string
	concurrency int
	out         string
	advantage   string
	parity      bool
	lambda      float64
	reward      string // graded, world or a reward.Kinds name
	rewardSet   bool   // --reward was given: it overrides the config's reward.kind
	costUnit    string // "" keeps the config's reward.graded.cost_unit
	logprobs    bool
	keepTies    bool
	noBaseline  bool // run no baseline per item (a reward from a reference answer needs none)
	omitTraces  bool
	progress    string // auto, bar, plain, none
	push        pushFlags
	otlp        string
	temperature float64 // the trained stages' temperature; < 0 keeps the config's
	order       trainOrder
	trainRoles  []string // the roles sampled as policies; nil: the strategy's deciding role
}

func newProcessCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f processFlags
	cmd := &cobra.Command{
		Use:     "process [flags]",
		Aliases: []string{"rollout"}, // the name of its library, package rollout
		Short:   "Run grouped rollouts of a strategy over a dataset and write training groups",
		Long: `Process runs N items of a dataset: the single-model baseline once per item
and G rollouts of a strategy, at most --concurrency in flight. Each rollout is
scored (the dataset's reference answer where it has one, else the judge
against the baseline), rewarded (graded by default, the reference's buckets
with --parity) and the group's rewards turned into advantages (--advantage).
It appends to --out: artifacts.jsonl (one record per rollout), groups.jsonl
(one trajectory group per item) and summary.json, with its state in
state.db. Interrupt it and run the same command again: it resumes without
losing or duplicating a rollout.

Datasets (the same flags as bench's): gsm8k, math, mmlu and bbh read --data
(mmlu and bbh: a file or a directory); open is --data FILE of {"id","prompt"}
lines or, with no file, the built-in open-ended requests (--split train, the
default, or test); world is -n arithmetic word problems of package world at
--level (the problems the shipped local models were trained on, --split
train by default, drawn with --seed), graded on their integer answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.rewardSet = cmd.Flags().Changed("reward")
			return process(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, cmd.Flags().Changed("lambda"))
		},
	}
	fl, d := cmd.Flags(), rollout.DefaultConfig()
	fl.StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.IntVarP(&f.group, "group", "g", d.GroupSize, "rollouts per item (G), at least 2")
	fl.StringVarP(&f.strategy, "strategy", "s", strategy.NameDecompose, "strategy to roll out: "+strings.Join(strategy.Names(), ", "))
	fl.IntVar(&f.concurrency, "concurrency", 0, "rollouts in flight at once (0: G)")
	fl.StringVarP(&f.out, "out", "o", "", "output directory (required; resumed when it holds this run)")
	fl.StringVar(&f.advantage, "advantage", d.Estimator, "advantage estimator: grpo, drgrpo or rloo")
	fl.BoolVar(&f.parity, "parity", false, "use the reference environment's reward buckets instead of the graded reward")
	fl.StringVar(&f.reward, "reward", rewardGraded, "reward: graded (reward.DefaultGraded), world (the reward delegate train trains with: world.DefaultReward, λ per token the policy generated, μ per sub-agent call), or a cost-aware one tuned in the config's reward section: "+strings.Join(reward.Kinds()[1:], ", ")+" (default: the config's reward.kind, else graded)")
	fl.Float64Var(&f.lambda, "lambda", 0, "graded reward: cost charged per unit of --cost-unit (default 1e-5 per token; --reward world: 0.001)")
	fl.StringVar(&f.costUnit, "cost-unit", "", "graded reward: what --lambda charges for, tokens or dollars (default: the config's reward.graded.cost_unit, tokens)")
	fl.BoolVar(&f.logprobs, "logprobs", false, "ask the trained role's backend for token logprobs (and ids) for groups.jsonl")
	fl.BoolVar(&f.keepTies, "keep-ties", false, "write groups whose rewards all tie, with zero advantages, instead of dropping them")
	fl.BoolVar(&f.noBaseline, "no-baseline", false, "run no single-model baseline per item: a reward read from the reference answer (world, or any dataset with answers) needs none, a judge does; saves a call per item that runs before its rollouts")
	fl.BoolVar(&f.omitTraces, "omit-traces", false, "leave full traces out of artifacts.jsonl")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress display: auto (a bar on a terminal, lines otherwise), bar, plain or none")
	fl.StringVar(&f.otlp, "otlp", "", otlpUsage)
	fl.Float64Var(&f.temperature, "temperature", -1, "sampling temperature of the trained stages (route's strong turns, decompose's plan and aggregation, lead's leader, single's call), overriding the config's; group-relative advantages need rollouts that differ (default: the config's)")
	fl.StringVar(&f.push.url, "push", "", "also push every written group to the trajectory API at this URL (delegate api, or Atropos's), as an Atropos environment (implies --logprobs); token from $DELEGATE_API_TOKEN")
	fl.StringVar(&f.push.name, "push-name", "delegate", "--push: the environment's name")
	fl.Float64Var(&f.push.weight, "push-weight", 1, "--push: the environment's weight in batches")
	fl.IntVar(&f.push.maxTokenLen, "push-max-tokens", 4096, "--push: the environment's max_token_length")
	fl.IntVar(&f.push.sync, "push-sync", 0, "--push: sample on-policy, this many items per trainer step: each starts only once the trainer has finished every batch handed out and the queue holds less than a batch (0: pace by --push-offpolicy)")
	fl.StringVar(&f.push.syncPolicy, "push-sync-policy", "", "--push-sync: also wait until the delegate serve at this URL serves the trainer's step (its /health's policy_versions), so that no item's first call is answered by the step before")
	fl.IntVar(&f.push.offPolicy, "push-offpolicy", 3, "--push: pause while the API's queue holds this many batches (Atropos's max_batches_offpolicy)")
	fl.StringSliceVar(&f.trainRoles, "train-roles", nil, "the roles whose calls are the trained samples, sampled with logprobs at --temperature (default: the strategy's deciding role; route: strong, weak or both, weak being the sub-agent that answers its delegate calls)")
	f.datasetFlags.register(cmd, "train")
	f.order.register(cmd)
	return cmd
}

// process writes grouped, scored rollouts of a dataset for a trainer.
// It checks the flags against the dataset, opens the models, builds the
// baseline and the trained policies, and runs them.
func process(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f processFlags, lambdaSet bool) error {
	if err := checkProcessFlags(&f); err != nil {
		return err
	}
	tasks, at, err := loadTasks(out, f)
	if err != nil {
		return err
	}
	if err := checkDatasetFlags(f, tasks); err != nil {
		return err
	}
	if err := checkRewardFlags(f, lambdaSet); err != nil {
		return err
	}
	cfg, sc, rewardDesc, err := loadProcessConfig(getenv, f, lambdaSet)
	if err != nil {
		return err
	}
	models, closeModels, err := cfg.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()

	baseline, policies, identity, err := processStrategies(cfg, models, f, at, rewardDesc)
	if err != nil {
		return err
	}
	closeOTLP, err := traceRollouts(f.otlp, getenv, cfg, log, &baseline, &policies)
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	defer closeOTLP()
	if err := setJudge(cfg, models, tasks, sc); err != nil {
		return err
	}
	rc, err := processRolloutConfig(cfg, f, identity)
	if err != nil {
		return err
	}
	if f.push.url != "" {
		sink, err := pushSink(ctx, out, getenv, f, at)
		if err != nil {
			return err
		}
		defer func() {
			// Telling the API we are gone is a courtesy: it loses nothing.
			_ = sink.Close(context.WithoutCancel(ctx))
		}()
		rc.Sink = sink
	}
	return runProcess(ctx, out, f, rc, tasks, baseline, policies, sc, rewardDesc)
}

// checkDatasetFlags refuses --no-baseline and --parity where the
// dataset's tasks do not allow them.
func checkDatasetFlags(f processFlags, tasks []delegate.Task) error {
	if f.noBaseline && (f.parity || needsJudge(tasks)) {
		return errors.New("process: --no-baseline: the judge compares each rollout with the baseline, and this dataset has tasks without reference answers (or --parity asks for the judge's buckets)")
	}
	if f.parity && !needsJudge(tasks) {
		return errors.New("process: --parity reproduces the reference environment's judge buckets, which need open-ended tasks (open or builtin); this dataset has reference answers")
	}
	return nil
}

// loadProcessConfig reads the config file and builds the reward's scorer.
// It also checks that every role of single, the baseline, and of the
// chosen strategy has a model.
func loadProcessConfig(getenv env, f processFlags, lambdaSet bool) (*Config, *rollout.RewardScorer, string, error) {
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return nil, nil, "", err
	}
	sc, rewardDesc, err := newScorer(f, lambdaSet, cfg)
	if err != nil {
		return nil, nil, "", err
	}
	for _, name := range []string{strategy.NameSingle, f.strategy} {
		if err := cfg.checkRoles(name); err != nil {
			return nil, nil, "", fmt.Errorf("process: %w", err)
		}
	}
	return cfg, sc, rewardDesc, nil
}

// processRolloutConfig is the rollout pipeline's configuration from the
// flags. Its fingerprint covers cfg, its judge and the policies' identity,
// so that a resume under other settings is refused.
func processRolloutConfig(cfg *Config, f processFlags, identity string) (rollout.Config, error) {
	fp, err := fingerprint(cfg, cfg.Judge, identity, f.logprobs)
	if err != nil {
		return rollout.Config{}, err
	}
	rc := rollout.DefaultConfig()
	rc.GroupSize, rc.Concurrency, rc.Estimator, rc.KeepTies = f.group, f.concurrency, f.advantage, f.keepTies
	rc.Seed, rc.OutDir, rc.Fingerprint, rc.OmitTraces = int64(f.seed), f.out, fp, f.omitTraces
	if len(f.trainRoles) > 0 {
		rc.TrainRoles = f.trainRoles
	}
	if rc.Concurrency == 0 { // the flag's 0: one group's rollouts at once
		rc.Concurrency = rc.GroupSize
	}
	if err := rc.Validate(); err != nil {
		return rollout.Config{}, fmt.Errorf("process: %w", err)
	}
	return rc, nil
}

// pushSink registers with the trajectory API at --push and returns the
// sink that pushes each written group there. The caller closes it.
func pushSink(ctx context.Context, out io.Writer, getenv env, f processFlags, at []stepItem) (*atropos.Pusher, error) {
	fmt.Fprintf(out, "process: registering with the trajectory API at %s (waits for a trainer to start)\n", f.push.url)
	sink, err := atropos.NewPusher(ctx, out, f.push.config(getenv(apiTokenEnv), f.group))
	if err != nil {
		return nil, err
	}
	if at != nil {
		sink.BatchOrder = func(item int) int { return at[item].index }
	}
	if f.dataset == datasetWorld && f.strategy == strategy.NameRoute {
		// Each of the solver's answers to a world operation carries its
		// own result, as train checks it in process.
		sink.CheckSample = func(sm delegate.Sample) *bool {
			if sm.Role != strategy.RoleWeak {
				return nil
			}
			return train.SubtaskCorrect(sm.Question, sm.Answer)
		}
	}
	return sink, nil
}

// setJudge gives sc the config's judge when tasks need one: those
// without reference answers.
func setJudge(cfg *Config, models map[string]delegate.Model, tasks []delegate.Task, sc *rollout.RewardScorer) error {
	if !needsJudge(tasks) {
		return nil
	}
	a, ok := cfg.agent(models, judge.Role, cfg.Roles.Judge)
	if !ok {
		return errors.New("process: the dataset has tasks without reference answers, which need a judge: set roles.judge (or roles.default) in the config")
	}
	var err error
	if sc.Judge, err = judge.New(a, cfg.Judge); err != nil {
		return fmt.Errorf("process: judge: %w", err)
	}
	return nil
}

// checkProcessFlags checks the flags that need no file read, and turns
// on logprobs for a trainer.
func checkProcessFlags(f *processFlags) error {
	if f.out == "" {
		return errors.New("process: --out is required")
	}
	switch {
	case f.push.sync < 0:
		return fmt.Errorf("process: --push-sync %d: want the items per trainer step, or 0", f.push.sync)
	case f.push.sync > 0 && f.push.url == "":
		return errors.New("process: --push-sync goes with --push")
	case f.push.syncPolicy != "" && f.push.sync == 0:
		return errors.New("process: --push-sync-policy goes with --push-sync")
	}
	if f.push.url != "" {
		f.logprobs = true // a trainer needs the policy's token ids and logprobs
	}
	if err := checkProgress(f.progress); err != nil {
		return fmt.Errorf("process: %w", err)
	}
	if _, ok := rollout.DefaultTrainRole(f.strategy); !ok {
		return fmt.Errorf("process: --strategy %q: want one of %s", f.strategy, strings.Join(strategy.Names(), ", "))
	}
	return checkTrainRoles(f.strategy, f.trainRoles)
}

// trainableRoles are the roles process can sample as policies, by
// strategy, beside its deciding role (rollout.DefaultTrainRole).
var trainableRoles = map[string][]string{
	strategy.NameRoute: {strategy.RoleStrong, strategy.RoleWeak},
}

// checkTrainRoles checks --train-roles against the strategy's roles.
func checkTrainRoles(name string, roles []string) error {
	def, _ := rollout.DefaultTrainRole(name)
	can := trainableRoles[name]
	if can == nil {
		can = []string{def}
	}
	for i, r := range roles {
		switch {
		case !slices.Contains(can, r):
			return fmt.Errorf("process: --train-roles %s: strategy %s trains %s", r, name, strings.Join(can, " or "))
		case slices.Contains(roles[:i], r):
			return fmt.Errorf("process: --train-roles names %s twice", r)
		}
	}
	return nil
}

// trainedRoles are the roles whose calls are samples: --train-roles, or
// the strategy's deciding role.
func (f processFlags) trainedRoles() []string {
	if len(f.trainRoles) > 0 {
		return f.trainRoles
	}
	def, _ := rollout.DefaultTrainRole(f.strategy)
	return []string{def}
}

// processStrategies are the baseline and policy strategies of every
// rollout, and the run's identity. The baseline is nil with --no-baseline.
// The identity is the reward and how the policy samples.
func processStrategies(cfg *Config, models map[string]delegate.Model, f processFlags, at []stepItem, rewardDesc string) (delegate.Strategy, rollout.Policies, string, error) {
	var err error
	baseRoles := cfg.strategyRoles(models)
	var baseline delegate.Strategy
	if !f.noBaseline {
		if baseline, err = strategy.New(strategy.NameSingle, baseRoles, cfg.Strategy); err != nil {
			return nil, nil, "", fmt.Errorf("process: baseline: %w", err)
		}
	}
	pcfg := cfg.Strategy
	identity := rewardDesc
	trained := f.trainedRoles()
	if f.temperature >= 0 {
		if f.temperature > 2 {
			return nil, nil, "", fmt.Errorf("process: --temperature %g: want 0 to 2", f.temperature)
		}
		for _, g := range trainedStages(&pcfg, f.strategy, trained) {
			g.Temperature = f.temperature
		}
		identity += fmt.Sprintf("; policy temperature %g", f.temperature)
	}
	if slices.Contains(trained, strategy.RoleWeak) {
		// A turn's delegate calls one at a time, as train runs them: the
		// sub-agent's samples take their seeds in call order.
		pcfg.ToolConcurrency = 1
	}
	policy, err := strategy.New(f.strategy, policyRoles(baseRoles, trained, f.logprobs, nil), pcfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("process: %w", err)
	}
	policies := rollout.Same(policy)
	if at != nil {
		// Each rollout samples with train's seed of it: one strategy per
		// rollout, around the policy seeded for it. The sub-agent's
		// seeds are train's solver's.
		identity += fmt.Sprintf("; rollouts seeded as delegate train seeds them under seed %d", f.order.seed)
		policies = func(i, k int) (delegate.Strategy, error) {
			seed := func(role string) *int64 {
				base := f.order.seed
				if role == strategy.RoleWeak {
					base ^= train.SolverSalt
				}
				s := at[i].seed(base, f.group, k)
				return &s
			}
			return strategy.New(f.strategy, policyRoles(baseRoles, trained, f.logprobs, seed), pcfg)
		}
	}
	return baseline, policies, identity, nil
}

// runProcess runs the rollouts of rc with a progress view and reports
// their summary.
func runProcess(ctx context.Context, out io.Writer, f processFlags, rc rollout.Config, tasks []delegate.Task, baseline delegate.Strategy, policies rollout.Policies, sc rollout.Scorer, rewardDesc string) error {
	against := "against single"
	if baseline == nil {
		against = "without a baseline"
	}
	fmt.Fprintf(out, "process: %d items × %d rollouts of %s %s, %s, %s advantages → %s\n",
		len(tasks), f.group, f.strategy, against, rewardDesc, f.advantage, f.out)

	progress := make(chan rollout.Progress, 64)
	view := &processProgress{v: newProgressView(out, f.progress)}
	viewDone := make(chan struct{})
	go func() {
		defer close(viewDone)
		view.run(progress)
	}()
	sum, runErr := rollout.Run(ctx, rc, tasks, baseline, policies, sc, progress)
	close(progress)
	<-viewDone
	view.end(sum)

	if sum.Version != 0 {
		if err := printSummary(out, sum); err != nil {
			return err
		}
	}
	if runErr != nil && ctx.Err() != nil {
		return fmt.Errorf("%w; run the same command again to resume", runErr)
	}
	if runErr == nil && sum.Version != 0 && sum.RolloutsScored == 0 {
		why := nothingProduced(sum)
		fmt.Fprintf(out, "nothing produced: %s\n", why)
		return fmt.Errorf("process: nothing produced: %s", why)
	}
	return runErr
}

// nothingProduced says why a run scored no rollout: every one failed, or
// none ran because every baseline failed.
func nothingProduced(s rollout.Summary) string {
	why := fmt.Sprintf("no rollout of %d succeeded", s.RolloutsPlanned)
	if len(s.Failed) > 0 {
		why += fmt.Sprintf(" (failed by reason: %s)", rollout.FailedCounts(s.Failed))
	}
	if s.RolloutsSkipped > 0 {
		why += fmt.Sprintf("; %d never ran because their item's baseline failed", s.RolloutsSkipped)
	}
	return why
}

// loadTasks reads and samples the dataset (datasetFlags.load). It reports
// the loader's account of a file, or describes tasks from no file, such
// as the world's or the built-in requests.
// With --train-pool it draws the world's items as delegate train does,
// and says where each sits in the trainer's steps (nil otherwise).
func loadTasks(out io.Writer, f processFlags) ([]delegate.Task, []stepItem, error) {
	if f.order.pool != 0 {
		if f.dataset != datasetWorld {
			return nil, nil, fmt.Errorf("process: --train-pool draws the world's problems as delegate train does: it goes with --dataset %s", datasetWorld)
		}
		if err := f.validate(); err != nil {
			return nil, nil, fmt.Errorf("process: %w", err)
		}
		tasks, at, desc, err := f.order.tasks(f.world, f.split, f.seed, f.n)
		if err != nil {
			return nil, nil, fmt.Errorf("process: %w", err)
		}
		fmt.Fprintf(out, "dataset %s\n", desc)
		return tasks, at, nil
	}
	tasks, desc, err := f.load(out)
	if err != nil {
		return nil, nil, fmt.Errorf("process: %w", err)
	}
	if f.data == "" {
		fmt.Fprintf(out, "dataset %s\n", desc)
	}
	return tasks, nil, nil
}

// needsJudge reports whether some task has no reference answer.
func needsJudge(tasks []delegate.Task) bool {
	for _, t := range tasks {
		if t.Answer == "" {
			return true
		}
	}
	return false
}

// Rewards of --reward besides the config's kinds (reward.Kinds).
const (
	rewardGraded = reward.KindGraded
	rewardWorld  = "world"
)

// checkRewardFlags refuses the reward flags that contradict each other,
// before any config is read.
func checkRewardFlags(f processFlags, lambdaSet bool) error {
	if f.parity {
		if lambdaSet {
			return errors.New("process: --lambda applies to the graded reward, not to --parity")
		}
		if f.reward != rewardGraded {
			return fmt.Errorf("process: --reward %s and --parity: choose one", f.reward)
		}
		return nil
	}
	if err := f.rewardChoice(lambdaSet).check(); err != nil {
		return fmt.Errorf("process: %w", err)
	}
	return nil
}

// rewardChoice is f's choice of reward.
func (f processFlags) rewardChoice(lambdaSet bool) rewardChoice {
	return rewardChoice{kind: f.reward, lambda: f.lambda, lambdaSet: lambdaSet, costUnit: f.costUnit}
}

// newScorer returns the scorer of the reward the flags and cfg choose. It
// also describes the reward for the run's identity. --reward, when
// given, overrides cfg's reward.kind. cfg nil is a config without a
// reward section.
func newScorer(f processFlags, lambdaSet bool, cfg *Config) (*rollout.RewardScorer, string, error) {
	if err := checkRewardFlags(f, lambdaSet); err != nil {
		return nil, "", err
	}
	kind := f.reward
	if !f.rewardSet && f.reward == rewardGraded && cfg != nil && cfg.Reward.Kind != "" {
		kind = cfg.Reward.Kind
	}
	if f.parity {
		if kind != rewardGraded {
			return nil, "", fmt.Errorf("process: --parity and the config's reward.kind %s: choose one", kind)
		}
		return &rollout.RewardScorer{Reward: reward.Parity}, "parity reward", nil
	}
	var used []string
	if cfg != nil {
		used = cfg.strategyModels(f.strategy)
	}
	sc, desc, err := f.rewardChoice(lambdaSet).scorer(kind, cfg, used, "strategy "+f.strategy+" calls")
	if err != nil {
		return nil, "", fmt.Errorf("process: %w", err)
	}
	if f.dataset == datasetWorld {
		sc.Verify = world.Verify
	}
	return sc, desc, nil
}

// rewardChoice is a command's choice of reward by --reward, --lambda and
// --cost-unit. Process and gateway read it alike.
type rewardChoice struct {
	kind      string // graded, world or a reward.Kinds name
	lambda    float64
	lambdaSet bool
	costUnit  string // "" keeps the config's reward.graded.cost_unit
}

// check refuses flags that contradict each other.
func (c rewardChoice) check() error {
	switch {
	case c.kind == rewardGraded:
	case c.kind == rewardWorld:
		if c.costUnit != "" && c.costUnit != reward.CostTokens {
			return fmt.Errorf("--reward world charges per token, not --cost-unit %s", c.costUnit)
		}
	case slices.Contains(reward.Kinds(), c.kind):
		if c.lambdaSet || c.costUnit != "" {
			return fmt.Errorf("--lambda and --cost-unit tune graded and world; --reward %s takes its settings from the config's reward.%s section", c.kind, c.kind)
		}
	default:
		return fmt.Errorf("--reward %q: want %s or %s", c.kind, strings.Join(reward.Kinds(), ", "), rewardWorld)
	}
	return nil
}

// scorer returns the scorer of the reward kind, tuned by c and cfg's
// reward section, and its description. kind is --reward or the config's
// reward.kind. A cost-aware kind needs cfg to price the models in used,
// which user names in errors ("strategy route calls"). cfg nil is a
// config without a reward section. The scorer's Verify is left nil.
func (c rewardChoice) scorer(kind string, cfg *Config, used []string, user string) (*rollout.RewardScorer, string, error) {
	rc := reward.DefaultConfig()
	if cfg != nil {
		rc = cfg.Reward
	}
	sc := &rollout.RewardScorer{}
	var g reward.Graded
	switch kind {
	case rewardGraded:
		g = rc.Graded
		if c.costUnit != "" {
			g.CostUnit = c.costUnit
		}
	case rewardWorld:
		g = world.DefaultReward()
		sc.GeneratedTokens = true
	default:
		if c.lambdaSet || c.costUnit != "" {
			return nil, "", fmt.Errorf("--lambda and --cost-unit tune graded and world; the config's reward.kind %s takes its settings from its reward.%s section", kind, kind)
		}
		rc.Kind = kind
		if err := costReward(&rc, cfg, used, user); err != nil {
			return nil, "", err
		}
		fn, err := rc.Func()
		if err != nil {
			return nil, "", fmt.Errorf("reward: %w", err)
		}
		sc.Reward = fn
		return sc, rc.Describe(), nil
	}
	if c.lambdaSet {
		g.Lambda = c.lambda
	}
	if err := g.Validate(); err != nil {
		return nil, "", fmt.Errorf("reward: %w", err)
	}
	sc.Reward = g.Reward
	desc := fmt.Sprintf("graded reward (λ %g per %s, μ %g per call, format %g)", g.Lambda, strings.TrimSuffix(g.CostUnit, "s"), g.Mu, g.FormatPenalty)
	if sc.GeneratedTokens {
		// The graded reward's description stays as it was, so that runs
		// written before --reward existed still resume.
		desc = fmt.Sprintf("world reward (λ %g per generated token, μ %g per call, format %g)", g.Lambda, g.Mu, g.FormatPenalty)
	}
	return sc, desc, nil
}

// costReward checks that cfg prices every model in used, for the
// cost-aware reward rc selects; user says who uses them. It rekeys
// per_call's fees from the config's model names to the names the traces
// record. A price is never assumed: a model without one written in the
// config is an error naming the key to set.
func costReward(rc *reward.Config, cfg *Config, used []string, user string) error {
	if cfg == nil {
		return fmt.Errorf("reward %s needs a config that prices its models", rc.Kind)
	}
	var errs []error
	switch rc.Kind {
	case reward.KindSuccessGated, reward.KindEfficiency:
		for _, m := range used {
			if _, ok := cfg.lines["models."+m+".price"]; !ok {
				errs = append(errs, cfg.at("models."+m, "reward %s charges dollars: write this model's price (input, cached_input, output per million tokens; 0 when it is free)", rc.Kind))
			}
		}
	case reward.KindPerCall:
		fees := map[string]float64{}
		for _, m := range slices.Sorted(maps.Keys(rc.PerCall.Fees)) {
			mc, ok := cfg.Models[m]
			if !ok {
				errs = append(errs, cfg.at("reward.per_call.fees."+m, "names no model defined under models"))
				continue
			}
			traced := m
			if mc.Kind != "local" {
				traced = mc.Model
			}
			if prev, dup := fees[traced]; dup && prev != rc.PerCall.Fees[m] {
				errs = append(errs, cfg.at("reward.per_call.fees."+m, "model %q is priced twice, at different fees", traced))
			}
			fees[traced] = rc.PerCall.Fees[m]
		}
		for _, m := range used {
			if _, ok := rc.PerCall.Fees[m]; !ok {
				errs = append(errs, cfg.at("reward.per_call.fees", "no fee for model %s, which %s", m, user))
			}
		}
		rc.PerCall.Fees = fees
	}
	return errors.Join(errs...)
}

// policyRoles are the roles of the rolled-out strategy. Each trained
// role asks for logprobs when wanted and, with seed set, samples its calls
// with seed(role), the next integer, and so on. Single's agent plays role
// "single"; the baseline's plays "baseline".
func policyRoles(r strategy.Roles, trained []string, logprobs bool, seed func(role string) *int64) strategy.Roles {
	r.Single.Role = strategy.RoleSingle
	if !logprobs && seed == nil {
		return r
	}
	for _, role := range trained {
		var a *delegate.Agent
		switch role {
		case strategy.RoleDelegator:
			a = &r.Delegator
		case strategy.RoleStrong:
			a = &r.Strong
		case strategy.RoleWeak:
			a = &r.Weak
		case strategy.RoleLeader:
			a = &r.Leader
		case strategy.RoleSingle:
			a = &r.Single
		}
		if a == nil || a.Model == nil {
			continue
		}
		var s *int64
		if seed != nil {
			s = seed(role)
		}
		a.Sampler = delegate.NewSampler(delegate.Sampling{Seed: s, Logprobs: true})
	}
	return r
}

// trainedStages are the generation settings of the stages whose calls a
// strategy's trained roles make.
func trainedStages(c *strategy.Config, name string, trained []string) []*strategy.Generation {
	switch name {
	case strategy.NameDecompose:
		return []*strategy.Generation{&c.Plan, &c.Aggregate}
	case strategy.NameRoute:
		var gs []*strategy.Generation
		if slices.Contains(trained, strategy.RoleStrong) {
			gs = append(gs, &c.Strong)
		}
		if slices.Contains(trained, strategy.RoleWeak) {
			gs = append(gs, &c.Weak)
		}
		return gs
	case strategy.NameLead:
		return []*strategy.Generation{&c.Leader}
	}
	return []*strategy.Generation{&c.Single}
}

// fingerprint describes, as canonical JSON, what decides the rollouts'
// content. The dataset and the flags rollout checks itself are left out. It
// covers the models, the roles, the strategy config, the judge and the
// reward. A model's transport is left out: address, timeouts, retries and
// limits may change between a run and its resume. A resume under other
// settings is refused naming each key that differs.
func fingerprint(cfg *Config, jcfg judge.Config, rewardDesc string, logprobs bool) (string, error) {
	type model struct {
		Kind, Model, Checkpoint string
		Price                   delegate.Price
		TokenIDs                bool
		// A local Hugging Face checkpoint's template and context decide
		// its prompts. They are empty for every other model, and so
		// absent, as in fingerprints written before they existed.
		ChatTemplate string `json:",omitempty"`
		Context      int    `json:",omitempty"`
	}
	ms := map[string]model{}
	for name, m := range cfg.Models {
		fm := model{Kind: m.Kind, Model: m.Model, Checkpoint: m.Checkpoint, Price: m.Price, TokenIDs: m.TokenIDs}
		if m.Kind == "local" {
			fm.ChatTemplate, fm.Context = m.ChatTemplate, m.Context
		}
		ms[name] = fm
	}
	data, err := json.Marshal(struct {
		Models   map[string]model
		Roles    RolesConfig
		Strategy strategy.Config
		Judge    judge.Config
		Reward   string
		Logprobs bool
	}{ms, cfg.Roles, cfg.Strategy, jcfg, rewardDesc, logprobs})
	if err != nil {
		return "", fmt.Errorf("process: fingerprint: %w", err)
	}
	return string(data), nil
}

// processProgress feeds a rollout run's progress to the progress view. One
// phase counts rollouts. Its status is the items done, the failed rollouts
// and the mean reward.
type processProgress struct {
	v     *progressView
	begun bool
	last  rollout.Progress
}

func (p *processProgress) show(pr rollout.Progress) {
	if !p.begun {
		p.begun = true
		p.v.begin("process", "rollouts")
	}
	p.last = pr
	status := fmt.Sprintf("items %d/%d", pr.ItemsDone, pr.Items)
	if pr.RolloutsFailed > 0 {
		status += fmt.Sprintf(", %d failed", pr.RolloutsFailed)
	}
	status += fmt.Sprintf("  mean reward %+.3f", pr.MeanReward)
	p.v.update(progressFigures{Done: pr.RolloutsDone, Total: pr.Rollouts, Resumed: pr.Resumed, Elapsed: pr.Elapsed, Status: status})
}

// run shows progress until the channel closes.
func (p *processProgress) run(progress <-chan rollout.Progress) {
	for pr := range progress {
		p.show(pr)
	}
}

// end shows the run's last state, taken from its summary (progress events
// may have been dropped), and ends the view. A summary of a run that never
// started (Version 0) leaves the figures as they were.
func (p *processProgress) end(sum rollout.Summary) {
	if sum.Version != 0 {
		pr := p.last
		pr.Items, pr.ItemsDone = sum.Items, sum.ItemsDone
		pr.Rollouts, pr.RolloutsDone, pr.RolloutsFailed = sum.RolloutsPlanned, sum.Rollouts, sum.RolloutsFailed
		pr.MeanReward = sum.MeanReward
		p.show(pr)
	}
	p.v.finish(sum.Complete)
}

// printSummary writes the run's account: rollouts, groups, losses by
// reason, and tokens and dollars per role.
func printSummary(w io.Writer, s rollout.Summary) error {
	if _, err := fmt.Fprint(w, s.String()); err != nil {
		return err
	}
	if s.Resumed > 0 {
		fmt.Fprintf(w, "resumed %d rollouts recorded by an earlier run\n", s.Resumed)
	}
	rows := byRole(s.Roles)
	var total delegate.Totals
	for _, r := range rows {
		total = total.Add(r.t)
	}
	rows = append(rows, roleRow{"baselines", s.Baselines}, roleRow{"total", total.Add(s.Baselines)})
	return writeRoleTable(w, rows, false)
}
