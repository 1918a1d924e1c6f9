package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/dataset"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
)

// processFlags are the flags of `delegate process`.
type processFlags struct {
	config      string
	dataset     string // a format of package dataset, "open" or "builtin"
	data        string // the file or directory of the dataset
	split       string // builtin: train or test
	n           int
	seed        int64
	group       int
	strategy    string
	concurrency int
	out         string
	advantage   string
	parity      bool
	lambda      float64
	reward      string // graded or world
	costUnit    string
	skipBad     bool
	logprobs    bool
	keepTies    bool
	omitTraces  bool
	progress    string // auto, bar, plain, none
	push        pushFlags
	temperature float64 // the trained stages' temperature; < 0 keeps the config's
	world       worldFlags
}

// Progress display modes.
const (
	progressAuto  = "auto"
	progressBar   = "bar"
	progressPlain = "plain"
	progressNone  = "none"
)

func newProcessCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f processFlags
	cmd := &cobra.Command{
		Use:   "process [flags]",
		Short: "Run grouped rollouts of a strategy over a dataset and write training groups",
		Long: `Process runs N items of a dataset: the single-model baseline once per item
and G rollouts of a strategy, at most --concurrency in flight. Each rollout is
scored (the dataset's reference answer where it has one, else the judge
against the baseline), rewarded (graded by default, the reference's buckets
with --parity) and the group's rewards turned into advantages (--advantage).
It appends to --out: artifacts.jsonl (one record per rollout), groups.jsonl
(one trajectory group per item) and summary.json, with its state in
state.db. Interrupt it and run the same command again: it resumes without
losing or duplicating a rollout.

Datasets: gsm8k, math, mmlu, bbh and open (JSONL {"id","prompt"}) read
--data (mmlu and bbh: a file or a directory); builtin is the built-in
open-ended requests (--split train or test) and needs no file; world is -n
arithmetic word problems of package world at --level (the problems the
shipped local models were trained on, --split train by default, drawn with
--seed), graded on their integer answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return process(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, cmd.Flags().Changed("lambda"))
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.StringVarP(&f.dataset, "dataset", "d", "builtin", "dataset: gsm8k, math, mmlu, bbh, open, builtin or world")
	fl.StringVar(&f.data, "data", "", "dataset file or directory (every dataset but builtin)")
	fl.StringVar(&f.split, "split", "train", "builtin datasets: the train or test split; world: train, validation or test")
	fl.IntVarP(&f.n, "n", "n", 0, "items to sample from the dataset (0: all)")
	fl.Int64Var(&f.seed, "seed", 1, "seed of the item sample, recorded in every artifact")
	fl.IntVarP(&f.group, "group", "g", 4, "rollouts per item (G), at least 2")
	fl.StringVarP(&f.strategy, "strategy", "s", strategy.NameDecompose, "strategy to roll out: "+strings.Join(strategy.Names(), ", "))
	fl.IntVar(&f.concurrency, "concurrency", 0, "rollouts in flight at once (0: G)")
	fl.StringVarP(&f.out, "out", "o", "", "output directory (required; resumed when it holds this run)")
	fl.StringVar(&f.advantage, "advantage", string(reward.GRPO), "advantage estimator: grpo, drgrpo or rloo")
	fl.BoolVar(&f.parity, "parity", false, "use the reference environment's reward buckets instead of the graded reward")
	fl.StringVar(&f.reward, "reward", rewardGraded, "reward: graded (reward.DefaultGraded) or world (the reward delegate train trains with: world.DefaultReward, λ per token the policy generated, μ per sub-agent call)")
	fl.Float64Var(&f.lambda, "lambda", 0, "graded reward: cost charged per unit of --cost-unit (default 1e-5 per token; --reward world: 0.001)")
	fl.StringVar(&f.costUnit, "cost-unit", reward.CostTokens, "graded reward: what --lambda charges for, tokens or dollars")
	fl.BoolVar(&f.skipBad, "skip-bad", false, "leave malformed dataset records out, reporting each, instead of failing")
	fl.BoolVar(&f.logprobs, "logprobs", false, "ask the trained role's backend for token logprobs (and ids) for groups.jsonl")
	fl.BoolVar(&f.keepTies, "keep-ties", false, "write groups whose rewards all tie, with zero advantages, instead of dropping them")
	fl.BoolVar(&f.omitTraces, "omit-traces", false, "leave full traces out of artifacts.jsonl")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress display: auto (a bar on a terminal, lines otherwise), bar, plain or none")
	fl.Float64Var(&f.temperature, "temperature", -1, "sampling temperature of the trained stages (route's strong turns, decompose's plan and aggregation, lead's leader, single's call), overriding the config's; group-relative advantages need rollouts that differ (default: the config's)")
	fl.StringVar(&f.push.url, "push", "", "also push every written group to the trajectory API at this URL (delegate api, or Atropos's), as an Atropos environment (implies --logprobs); token from $DELEGATE_API_TOKEN")
	fl.StringVar(&f.push.name, "push-name", "delegate", "--push: the environment's name")
	fl.Float64Var(&f.push.weight, "push-weight", 1, "--push: the environment's weight in batches")
	fl.IntVar(&f.push.maxTokenLen, "push-max-tokens", 4096, "--push: the environment's max_token_length")
	fl.IntVar(&f.push.offPolicy, "push-offpolicy", 3, "--push: pause while the API's queue holds this many batches (Atropos's max_batches_offpolicy)")
	f.world.register(cmd)
	return cmd
}

func process(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f processFlags, lambdaSet bool) error {
	if f.out == "" {
		return errors.New("process: --out is required")
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
	tasks, err := loadTasks(out, f)
	if err != nil {
		return err
	}
	if f.parity && !needsJudge(tasks) {
		return errors.New("process: --parity reproduces the reference environment's judge buckets, which need open-ended tasks (open or builtin); this dataset has reference answers")
	}
	sc, rewardDesc, err := newScorer(f, lambdaSet)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	for _, name := range []string{strategy.NameSingle, f.strategy} {
		if err := cfg.checkRoles(name); err != nil {
			return fmt.Errorf("process: %w", err)
		}
	}
	models, closeModels, err := cfg.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()

	baseRoles := cfg.strategyRoles(models)
	baseline, err := strategy.New(strategy.NameSingle, baseRoles, cfg.Strategy)
	if err != nil {
		return fmt.Errorf("process: baseline: %w", err)
	}
	pcfg := cfg.Strategy
	identity := rewardDesc
	if f.temperature >= 0 {
		if f.temperature > 2 {
			return fmt.Errorf("process: --temperature %g: want 0 to 2", f.temperature)
		}
		for _, g := range trainedStages(&pcfg, f.strategy) {
			g.Temperature = f.temperature
		}
		identity += fmt.Sprintf("; policy temperature %g", f.temperature)
	}
	policy, err := strategy.New(f.strategy, policyRoles(baseRoles, f.strategy, f.logprobs), pcfg)
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	jcfg := cfg.Judge
	if needsJudge(tasks) {
		a, ok := cfg.agent(models, judge.Role, cfg.Roles.Judge)
		if !ok {
			return errors.New("process: the dataset has tasks without reference answers, which need a judge: set roles.judge (or roles.default) in the config")
		}
		if sc.Judge, err = judge.New(a, jcfg); err != nil {
			return fmt.Errorf("process: judge: %w", err)
		}
	}
	fp, err := fingerprint(cfg, jcfg, identity, f.logprobs)
	if err != nil {
		return err
	}
	rc := rollout.Config{
		GroupSize: f.group, Concurrency: f.concurrency, Estimator: f.advantage, KeepTies: f.keepTies,
		Seed: f.seed, OutDir: f.out, Fingerprint: fp, OmitTraces: f.omitTraces,
	}
	if err := rc.Validate(); err != nil {
		return fmt.Errorf("process: %w", err)
	}
	if f.push.url != "" {
		fmt.Fprintf(out, "process: registering with the trajectory API at %s (waits for a trainer to start)\n", f.push.url)
		sink, err := newPushSink(ctx, out, f.push, getenv("DELEGATE_API_TOKEN"), f.group)
		if err != nil {
			return err
		}
		defer func() {
			// Telling the API we are gone is a courtesy: it loses nothing.
			_ = sink.Close(context.WithoutCancel(ctx))
		}()
		rc.Sink = sink
	}
	fmt.Fprintf(out, "process: %d items × %d rollouts of %s against single, %s, %s advantages → %s\n",
		len(tasks), f.group, f.strategy, rewardDesc, f.advantage, f.out)

	progress := make(chan rollout.Progress, 64)
	view := newProgressView(out, f.progress, len(tasks))
	viewDone := make(chan struct{})
	go func() {
		defer close(viewDone)
		view.run(progress)
	}()
	sum, runErr := rollout.Run(ctx, rc, tasks, baseline, rollout.Same(policy), sc, progress)
	close(progress)
	<-viewDone
	view.finish(sum)

	if sum.Version != 0 {
		if err := printSummary(out, sum); err != nil {
			return err
		}
	}
	if runErr != nil && ctx.Err() != nil {
		return fmt.Errorf("%w; run the same command again to resume", runErr)
	}
	return runErr
}

// loadTasks reads and samples the dataset, reporting what it read and
// every record it skipped.
func loadTasks(out io.Writer, f processFlags) ([]delegate.Task, error) {
	var tasks []delegate.Task
	switch f.dataset {
	case "builtin":
		if f.data != "" {
			return nil, errors.New("process: --data is not used with the builtin dataset")
		}
		train, test := dataset.Builtin()
		switch f.split {
		case "train":
			tasks = train
		case "test":
			tasks = test
		default:
			return nil, fmt.Errorf("process: --split %q: want train or test", f.split)
		}
		fmt.Fprintf(out, "dataset builtin/%s: %d requests\n", f.split, len(tasks))
	case "gsm8k", "math", "mmlu", "bbh", "open":
		if f.data == "" {
			return nil, fmt.Errorf("process: --data is required with --dataset %s", f.dataset)
		}
		var rep dataset.Report
		var err error
		tasks, rep, err = dataset.Load(f.dataset, f.data, dataset.Options{SkipBad: f.skipBad})
		if err != nil {
			if !f.skipBad {
				return nil, fmt.Errorf("process: %w (--skip-bad leaves malformed records out)", err)
			}
			return nil, fmt.Errorf("process: %w", err)
		}
		fmt.Fprintf(out, "dataset %s %s: %d records read, %d malformed skipped\n", f.dataset, f.data, rep.Read, len(rep.Skipped))
		for _, s := range rep.Skipped {
			fmt.Fprintf(out, "  skipped %s:%d: %s\n", s.File, s.Line, s.Reason)
		}
	case datasetWorld:
		if f.data != "" {
			return nil, errors.New("process: --data is not used with --dataset world: its problems are drawn by --level, --split, -n and --seed")
		}
		if f.n < 0 {
			return nil, fmt.Errorf("process: --n %d is negative", f.n)
		}
		ts, desc, err := worldTasks(f.world, f.split, uint64(f.seed), f.n)
		if err != nil {
			return nil, fmt.Errorf("process: %w", err)
		}
		fmt.Fprintf(out, "dataset %s\n", desc)
		return ts, nil
	default:
		return nil, fmt.Errorf("process: --dataset %q: want gsm8k, math, mmlu, bbh, open, builtin or world", f.dataset)
	}
	if f.n < 0 {
		return nil, fmt.Errorf("process: --n %d is negative", f.n)
	}
	if f.n > 0 {
		if f.n > len(tasks) {
			return nil, fmt.Errorf("process: --n %d, but the dataset has %d tasks", f.n, len(tasks))
		}
		tasks = dataset.Sample(tasks, f.n, uint64(f.seed))
	}
	if len(tasks) == 0 {
		return nil, errors.New("process: the dataset has no tasks")
	}
	return tasks, nil
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

// Rewards of --reward.
const (
	rewardGraded = "graded"
	rewardWorld  = "world"
)

// newScorer returns the scorer of the reward the flags choose and a
// description of the reward for the run's identity.
func newScorer(f processFlags, lambdaSet bool) (*rollout.RewardScorer, string, error) {
	if f.parity {
		if lambdaSet {
			return nil, "", errors.New("process: --lambda applies to the graded reward, not to --parity")
		}
		if f.reward != rewardGraded {
			return nil, "", fmt.Errorf("process: --reward %s and --parity: choose one", f.reward)
		}
		return &rollout.RewardScorer{Reward: reward.Parity}, "parity reward", nil
	}
	sc := &rollout.RewardScorer{}
	var g reward.Graded
	switch f.reward {
	case rewardGraded:
		g = reward.DefaultGraded()
		g.CostUnit = f.costUnit
	case rewardWorld:
		if f.costUnit != reward.CostTokens {
			return nil, "", fmt.Errorf("process: --reward world charges per token, not --cost-unit %s", f.costUnit)
		}
		g = world.DefaultReward()
		sc.GeneratedTokens = true
	default:
		return nil, "", fmt.Errorf("process: --reward %q: want %s or %s", f.reward, rewardGraded, rewardWorld)
	}
	if lambdaSet {
		g.Lambda = f.lambda
	}
	if err := g.Validate(); err != nil {
		return nil, "", fmt.Errorf("process: reward: %w", err)
	}
	sc.Reward = g.Reward
	if f.dataset == datasetWorld {
		sc.Verify = func(t delegate.Task, response string) (bool, error) {
			correct, _, err := worldVerify(t, response)
			return correct, err
		}
	}
	desc := fmt.Sprintf("graded reward (λ %g per %s, μ %g per call, format %g)", g.Lambda, strings.TrimSuffix(g.CostUnit, "s"), g.Mu, g.FormatPenalty)
	if sc.GeneratedTokens {
		// The graded reward's description stays as it was, so that runs
		// written before --reward existed still resume.
		desc = fmt.Sprintf("world reward (λ %g per generated token, μ %g per call, format %g)", g.Lambda, g.Mu, g.FormatPenalty)
	}
	return sc, desc, nil
}

// policyRoles are the roles of the rolled-out strategy: the trained role
// asks for logprobs when wanted, and single's agent plays role "single"
// (the baseline's plays "baseline").
func policyRoles(r strategy.Roles, name string, logprobs bool) strategy.Roles {
	r.Single.Role = strategy.RoleSingle
	if !logprobs {
		return r
	}
	var a *delegate.Agent
	role, _ := rollout.DefaultTrainRole(name)
	switch role {
	case strategy.RoleDelegator:
		a = &r.Delegator
	case strategy.RoleStrong:
		a = &r.Strong
	case strategy.RoleLeader:
		a = &r.Leader
	case strategy.RoleSingle:
		a = &r.Single
	}
	if a != nil && a.Model != nil {
		a.Model = rollout.Policy(a.Model, rollout.Sampling{})
	}
	return r
}

// trainedStages are the generation settings of the stages whose calls a
// strategy's trained role makes.
func trainedStages(c *strategy.Config, name string) []*strategy.Generation {
	switch name {
	case strategy.NameDecompose:
		return []*strategy.Generation{&c.Plan, &c.Aggregate}
	case strategy.NameRoute:
		return []*strategy.Generation{&c.Strong}
	case strategy.NameLead:
		return []*strategy.Generation{&c.Leader}
	}
	return []*strategy.Generation{&c.Single}
}

// fingerprint describes, as canonical JSON, what decides the rollouts'
// content besides the dataset and the flags rollout checks itself: the
// models (not their transport: address, timeouts, retries and limits may
// change between a run and its resume), the roles, the strategy config,
// the judge and the reward. A resume under other settings is refused
// naming each key that differs.
func fingerprint(cfg *Config, jcfg judge.Config, rewardDesc string, logprobs bool) (string, error) {
	type model struct {
		Kind, Model, Checkpoint string
		Price                   delegate.Price
		TokenIDs                bool
		// A local Hugging Face checkpoint's template and context decide
		// its prompts; empty (and so absent, as in fingerprints written
		// before they existed) for every other model.
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

// progressView shows a run's progress: an mpb bar on a terminal, or a
// plain line at most every plainEvery otherwise.
type progressView struct {
	release func() // gives the log back to stderr once the bars are done
	out     io.Writer
	mode    string
	items   int

	mu   sync.Mutex // guards last, for the bar's decorators
	last rollout.Progress

	p   *mpb.Progress
	bar *mpb.Bar

	lastLine time.Time
}

const plainEvery = 10 * time.Second

// checkProgress rejects a --progress value that is not a mode.
func checkProgress(mode string) error {
	switch mode {
	case progressAuto, progressBar, progressPlain, progressNone:
		return nil
	}
	return fmt.Errorf("--progress %q: want auto, bar, plain or none", mode)
}

// resolveProgress turns progressAuto into what w gets: a bar on a
// terminal, plain lines elsewhere.
func resolveProgress(mode string, w io.Writer) string {
	if mode != progressAuto {
		return mode
	}
	if isTerminal(w) {
		return progressBar
	}
	return progressPlain
}

func newProgressView(out io.Writer, mode string, items int) *progressView {
	v := &progressView{out: out, mode: resolveProgress(mode, out), items: items}
	if v.mode == progressBar {
		v.p = mpb.New(mpb.WithOutput(out), mpb.WithWidth(100), mpb.WithAutoRefresh(), mpb.WithRefreshRate(200*time.Millisecond))
		v.release = logs.above(v.p)
		v.bar = v.p.AddBar(int64(items),
			mpb.PrependDecorators(decor.Name("items "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return v.status() })),
		)
	}
	return v
}

// status is the text after the bar: rollouts, mean reward and ETA.
func (v *progressView) status() string {
	v.mu.Lock()
	p := v.last
	v.mu.Unlock()
	s := fmt.Sprintf("rollouts %d/%d", p.RolloutsDone, p.Rollouts)
	if p.RolloutsFailed > 0 {
		s += fmt.Sprintf(" (%d failed)", p.RolloutsFailed)
	}
	s += fmt.Sprintf("  mean reward %+.3f  ETA %s", p.MeanReward, eta(p))
	return s
}

// eta extrapolates the rollouts done by this run (not the resumed ones)
// to those left.
func eta(p rollout.Progress) string {
	done := p.RolloutsDone - p.Resumed
	left := p.Rollouts - p.RolloutsDone
	switch {
	case left <= 0:
		return "0s"
	case done <= 0:
		return "?"
	}
	d := time.Duration(float64(p.Elapsed) * float64(left) / float64(done))
	return d.Round(time.Second).String()
}

// run reads progress until the channel closes.
func (v *progressView) run(progress <-chan rollout.Progress) {
	for p := range progress {
		v.mu.Lock()
		v.last = p
		v.mu.Unlock()
		switch v.mode {
		case progressBar:
			v.bar.SetCurrent(int64(p.ItemsDone))
		case progressPlain:
			if now := time.Now(); now.Sub(v.lastLine) >= plainEvery {
				v.lastLine = now
				fmt.Fprintf(v.out, "items %d/%d  %s\n", p.ItemsDone, p.Items, v.status())
			}
		}
	}
}

// finish draws the run's last state, taken from its summary (progress
// events may have been dropped): the bar completed or aborted where it
// stands, or a last plain line. A summary of a run that never started
// (Version 0) leaves the last progress as it was.
func (v *progressView) finish(sum rollout.Summary) {
	v.mu.Lock()
	if sum.Version != 0 {
		v.last.Items, v.last.ItemsDone = sum.Items, sum.ItemsDone
		v.last.Rollouts, v.last.RolloutsDone, v.last.RolloutsFailed = sum.RolloutsPlanned, sum.Rollouts, sum.RolloutsFailed
		v.last.MeanReward = sum.MeanReward
	}
	p := v.last
	v.mu.Unlock()
	switch v.mode {
	case progressBar:
		v.bar.SetCurrent(int64(p.ItemsDone))
		if !sum.Complete {
			v.bar.Abort(false)
		}
		v.p.Wait()
		v.release()
	case progressPlain:
		fmt.Fprintf(v.out, "items %d/%d  %s\n", p.ItemsDone, v.items, v.status())
	}
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
