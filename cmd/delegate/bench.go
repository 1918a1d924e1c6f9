package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/score"
	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
)

// benchFlags are the flags of `delegate bench`.
type benchFlags struct {
	datasetFlags
	config      string
	strategies  string
	out         string
	concurrency int
	itemTimeout time.Duration
	baseline    string
	trace       bool
	cache       bool
	noCache     bool
	cacheDB     string
	passScore   float64
	progress    string
	frontier    string // "STRONG,WEAK": the arms of the frontier's oracle and mixing line
	otlp        string
	// env is an OpenEnv server's URL: evaluate a policy there instead of
	// strategies on a dataset (benchenv.go).
	env, envTransport string
}

// Files of a bench output directory besides bench.Files.
const (
	benchResults      = "results.jsonl"
	benchCache        = "cache.sqlite"
	benchSettingsFile = "settings.json"
)

// Arms added beside route, for PGR and the oracle router. They are the
// strong and the weak model each alone, with single's prompt and settings.
const (
	armStrong = "strong"
	armWeak   = "weak"
)

func newBenchCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench --dataset NAME [--data PATH] [--out DIR] [flags]",
		Short: "Run strategies side by side on a dataset and tabulate accuracy, cost and latency",
		Long: `Bench runs every strategy of --strategies on the same sample of a dataset,
under the same config, and saves one record per strategy and item in
DIR/results.jsonl (DIR: --out, default runs/bench) as each finishes. It then writes DIR/table.md, DIR/table.csv,
DIR/report.json and plots of accuracy against cost, of the accuracy-dollars
Pareto frontier and of latency (PNG and SVG), and prints the
Markdown table: accuracy with a Wilson 95% interval, a paired McNemar p-value
against the baseline, tokens per role, dollars, dollars per correct answer
(cost of pass, bootstrap interval), latency p50/p95, calls per item
and, when route runs, its PGR and the oracle router (route adds the strong and
weak models alone as arms "strong" and "weak").

Datasets (the same flags as process's): gsm8k, math, mmlu, bbh (graded by
their verifiers; --data names the file, or for mmlu and bbh a directory), open
(--data FILE of {"id","prompt"} lines or, with no file, the built-in
open-ended requests, --split test by default), graded by the judge role's
0-100 rubric: an answer is correct at --pass-score or above, and world (the
arithmetic word problems the shipped local models were trained on: --n
problems of --level, of the validation split unless --split names another
(--split test for a published table), drawn with --seed; graded on their
integer answer).

Run the same command again to resume: items already in DIR/results.jsonl are
not run again. The settings that define the results (dataset and sample,
models, endpoints, prices, roles, strategy and judge settings) are recorded in
DIR/settings.json, and a resume under other settings is refused, naming each
difference (more --strategies are allowed). Responses to temperature-0 or seeded requests are cached in
SQLite (DIR/cache.sqlite, or --cache-db): by default the judge's only; --cache
adds every role, --no-cache turns caching off.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --progress was a bool before it took process's modes.
			switch f.progress {
			case "true":
				f.progress = progressAuto
			case "false":
				f.progress = progressNone
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), getenv, log, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.StringVar(&f.strategies, "strategies", "single,route,decompose,lead", "comma-separated strategies: "+strings.Join(strategy.Names(), ", "))
	fl.StringVarP(&f.out, "out", "o", "runs/bench", "output directory (results, tables, plots, cache); a rerun into it resumes, under the same settings only")
	fl.IntVar(&f.concurrency, "concurrency", bench.DefaultConfig().Concurrency, "items run at once")
	fl.DurationVar(&f.itemTimeout, "item-timeout", 0, "time limit of one item (0: none); an item out of time is recorded as an error")
	fl.StringVar(&f.baseline, "baseline", "", "arm the McNemar tests compare with (default: the first strategy)")
	fl.BoolVar(&f.trace, "trace", false, "save each item's whole trace in the results")
	fl.BoolVar(&f.cache, "cache", false, "serve every role's temperature-0 or seeded requests from the response cache (the judge's always are)")
	fl.BoolVar(&f.noCache, "no-cache", false, "use no response cache, not even for the judge")
	fl.StringVar(&f.cacheDB, "cache-db", "", "response cache database (default DIR/"+benchCache+"); share one between runs to reuse answers")
	fl.Float64Var(&f.passScore, "pass-score", 70, "open datasets: judge score (0-100) at or above which an answer counts as correct")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress display on stderr: auto (a bar on a terminal, lines otherwise), bar, plain or none")
	fl.StringVar(&f.frontier, "frontier", "", "STRONG,WEAK: the arms the frontier plot draws the oracle and random mixing between (default: route's strong and weak arms)")
	fl.StringVar(&f.otlp, "otlp", "", otlpUsage)
	fl.StringVar(&f.env, "env", "", "an OpenEnv server's URL: play --n episodes (seeds from --seed) with the config's strong model (else default) as the policy, acting through the environment's tools; token from $"+envTokenEnv)
	fl.StringVar(&f.envTransport, "env-transport", "ws", "with --env: ws (OpenEnv's WebSocket) or http (MCP sessions over POST /mcp)")
	f.datasetFlags.register(cmd, "")
	return cmd
}

// validate checks the flags among themselves, before anything is opened.
func (f benchFlags) validate() error {
	var errs []error
	if err := checkProgress(f.progress); err != nil {
		errs = append(errs, err)
	}
	if err := f.datasetFlags.validate(); err != nil {
		errs = append(errs, err)
	}
	if f.out == "" {
		errs = append(errs, errors.New("--out is empty: give the directory for results, tables and plots"))
	}
	if f.cache && f.noCache {
		errs = append(errs, errors.New("--cache and --no-cache contradict each other"))
	}
	if f.noCache && f.cacheDB != "" {
		errs = append(errs, errors.New("--cache-db and --no-cache contradict each other"))
	}
	if f.frontier != "" {
		if s, w, ok := strings.Cut(f.frontier, ","); !ok || s == "" || w == "" || s == w || strings.Contains(w, ",") {
			errs = append(errs, fmt.Errorf("--frontier %q: want two different arms, STRONG,WEAK", f.frontier))
		}
	}
	if f.passScore < 0 || f.passScore > 100 {
		errs = append(errs, fmt.Errorf("--pass-score: %v is outside 0..100", f.passScore))
	}
	if _, err := parseStrategies(f.strategies); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parseStrategies splits the --strategies list, checking every name once.
func parseStrategies(s string) ([]string, error) {
	known := map[string]bool{}
	for _, n := range strategy.Names() {
		known[n] = true
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			continue
		case !known[n]:
			return nil, fmt.Errorf("--strategies: unknown strategy %q (known: %s)", n, strings.Join(strategy.Names(), ", "))
		case seen[n]:
			return nil, fmt.Errorf("--strategies: %q named twice", n)
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, errors.New("--strategies: none given")
	}
	return names, nil
}

// cacheScope says where a model is served. Cache entries of two servers
// with the same model name then stay apart.
func (c *Config) cacheScope(name string) string {
	m := c.Models[name]
	if m.Kind == "local" {
		return "local:" + m.Checkpoint
	}
	return redactURL(m.BaseURL)
}

// redactURL drops a password and query from a base URL. A credential
// written into it then reaches neither the table nor the cache.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}

// benchModels are the models as bench gives them to roles: raw, or
// wrapped by the response cache. The strategies' and the judge's wrappers
// are apart, so that their cache counts are too.
type benchModels struct {
	strategies map[string]delegate.Model // the strategies' roles
	judge      map[string]delegate.Model // the judge role
	// cachedStrategies and cachedJudge are the cache wrappers, nil for
	// roles served directly.
	cachedStrategies, cachedJudge map[string]*store.CachedModel
}

func (c *Config) benchModels(raw map[string]delegate.Model, db *store.DB, cacheStrategies, cacheJudge bool) benchModels {
	bm := benchModels{strategies: raw, judge: raw}
	wrap := func() (map[string]delegate.Model, map[string]*store.CachedModel) {
		ms, cms := map[string]delegate.Model{}, map[string]*store.CachedModel{}
		for name, m := range raw {
			cm := store.Cached(m, db, c.cacheScope(name))
			ms[name], cms[name] = cm, cm
		}
		return ms, cms
	}
	if db == nil {
		return bm
	}
	if cacheStrategies {
		bm.strategies, bm.cachedStrategies = wrap()
	}
	if cacheJudge {
		bm.judge, bm.cachedJudge = wrap()
	}
	return bm
}

// benchArms builds one arm per strategy, in the order given. With route
// among them and a strong and a weak model assigned, it adds their arms
// for PGR and the oracle router. Each uses single's prompt and settings
// with its model.
func (c *Config) benchArms(names []string, models map[string]delegate.Model) ([]bench.Arm, error) {
	roles := c.strategyRoles(models)
	var arms []bench.Arm
	for _, name := range names {
		s, err := strategy.New(name, roles, c.Strategy)
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", name, err)
		}
		arms = append(arms, bench.Arm{Name: name, Strategy: s})
	}
	if !slices.Contains(names, strategy.NameRoute) {
		return arms, nil
	}
	for _, alone := range []struct {
		arm   string
		agent delegate.Agent
		role  bench.Role
	}{{armStrong, roles.Strong, bench.RoleStrong}, {armWeak, roles.Weak, bench.RoleWeak}} {
		s, err := strategy.New(strategy.NameSingle, strategy.Roles{Single: alone.agent}, c.Strategy)
		if err != nil {
			return nil, fmt.Errorf("arm %s (single with the %s model): %w", alone.arm, alone.arm, err)
		}
		arms = append(arms, bench.Arm{Name: alone.arm, Strategy: s, Role: alone.role})
	}
	return arms, nil
}

// judgeGrader grades open-ended answers with the judge's pointwise rubric:
// correct at pass or above. Each rating's calls are recorded and returned as
// the grade's Grading, under the judge's role.
func judgeGrader(j *judge.Judge, pass float64) bench.Grader {
	return func(ctx context.Context, task delegate.Task, answer string) (bench.Grade, error) {
		rec := delegate.NewRecorder("judge", task.Prompt, nil)
		rating, err := j.Rate(ctx, rec, nil, task.Prompt, answer)
		tr := rec.Finish("", delegate.Failure{})
		g := bench.Grade{Grading: tr.Roles}
		if err != nil {
			return g, fmt.Errorf("judge: %w", err)
		}
		score := rating.Score
		g.Correct, g.Score = score >= pass, &score
		g.Extracted = fmt.Sprintf("judge score %.1f", score)
		return g, nil
	}
}

func runBench(ctx context.Context, out, errOut io.Writer, getenv env, log *slog.Logger, f benchFlags) error {
	if f.env != "" {
		return runBenchEnv(ctx, out, errOut, getenv, log, f)
	}
	if err := f.validate(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	names, _ := parseStrategies(f.strategies) // checked by validate
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := cfg.checkRoles(name); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	open := f.dataset == datasetOpen
	if open && cfg.Roles.Judge == "" && cfg.Roles.Default == "" {
		return errors.New("bench: --dataset open is graded by the judge, and the config assigns no model to roles.judge (or roles.default)")
	}
	tasks, desc, err := f.load(errOut)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if len(tasks) == 0 {
		return errors.New("bench: the sample holds no items")
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}

	raw, closeModels, err := cfg.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	db, closeDB, err := openBenchCache(ctx, f, open, log)
	if err != nil {
		return err
	}
	defer closeDB()
	models := cfg.benchModels(raw, db, f.cache, open)
	arms, err := cfg.benchArms(names, models.strategies)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	closeOTLP, err := traceArms(f.otlp, getenv, cfg, log, arms)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer closeOTLP()
	grade, err := benchGrader(cfg, models, f, open)
	if err != nil {
		return err
	}
	armNames, err := checkFrontier(f.frontier, arms)
	if err != nil {
		return err
	}
	settings, err := cfg.benchSettings(f, tasks)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := bench.CheckSettings(filepath.Join(f.out, benchSettingsFile), filepath.Join(f.out, benchResults), armNames, settings); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep, results, err := runBenchArms(ctx, errOut, f, tasks, arms, grade)
	if err != nil {
		return err
	}
	return reportBench(out, f, cfg, desc, tasks, arms, armNames, models, rep, results)
}

// runBenchArms runs arms on tasks with a progress view on errOut, and
// returns the report and the results file.
func runBenchArms(ctx context.Context, errOut io.Writer, f benchFlags, tasks []delegate.Task, arms []bench.Arm, grade bench.Grader) (*bench.Report, string, error) {
	ecfg := bench.DefaultConfig()
	ecfg.Results, ecfg.Concurrency, ecfg.Baseline = filepath.Join(f.out, benchResults), f.concurrency, f.baseline
	ecfg.ItemTimeout, ecfg.Trace = f.itemTimeout, f.trace
	progress := make(chan bench.Progress, len(tasks)*len(arms))
	barDone := make(chan struct{})
	view := newProgressView(errOut, f.progress)
	go showProgress(view, len(tasks)*len(arms), progress, barDone)
	rep, runErr := bench.RunGraded(ctx, ecfg, tasks, arms, grade, progress)
	close(progress)
	<-barDone
	view.finish(runErr == nil)
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("bench interrupted; finished items are saved in %s: run the same command again to resume", ecfg.Results)
		}
		return nil, "", fmt.Errorf("bench: %w", runErr)
	}
	return rep, ecfg.Results, nil
}

// openBenchCache opens the response cache, or returns nil when there is
// none. It serves the judge of open datasets unless turned off, and every
// role with --cache. The caller closes it with the function returned.
func openBenchCache(ctx context.Context, f benchFlags, open bool, log *slog.Logger) (*store.DB, func(), error) {
	if f.noCache || !(open || f.cache) {
		return nil, func() {}, nil
	}
	path := f.cacheDB
	if path == "" {
		path = filepath.Join(f.out, benchCache)
	}
	db, err := store.Open(ctx, path)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: open response cache: %w", err)
	}
	return db, func() {
		if err := db.Close(); err != nil {
			log.Warn("close response cache", "err", err)
		}
	}, nil
}

// benchGrader grades answers: by the judge on open datasets, else by the
// dataset's verifier.
func benchGrader(cfg *Config, models benchModels, f benchFlags, open bool) (bench.Grader, error) {
	grade := bench.Verified(score.Verify)
	if f.dataset == datasetWorld {
		grade = bench.Verified(world.Verify)
	}
	if open {
		judgeAgent, _ := cfg.agent(models.judge, judge.Role, cfg.Roles.Judge) // assigned: checked above
		j, err := judge.New(judgeAgent, cfg.Judge)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		grade = judgeGrader(j, f.passScore)
	}

	return grade, nil
}

// checkFrontier checks that --frontier names two arms, and returns the
// arms' names.
func checkFrontier(frontier string, arms []bench.Arm) ([]string, error) {
	var armNames []string
	for _, a := range arms {
		armNames = append(armNames, a.Name)
	}
	if frontier != "" {
		strong, weak, _ := strings.Cut(frontier, ",")
		for _, a := range []string{strong, weak} {
			if !slices.Contains(armNames, a) {
				return nil, fmt.Errorf("bench: --frontier: no arm %q (the arms are %s)", a, strings.Join(armNames, ", "))
			}
		}
	}
	return armNames, nil
}

// reportBench writes a finished run's report to f.out and out. It adds the
// run's notes and the response cache's figures.
func reportBench(out io.Writer, f benchFlags, cfg *Config, desc string, tasks []delegate.Task, arms []bench.Arm, armNames []string, models benchModels, rep *bench.Report, results string) error {
	rep.FrontierStrong, rep.FrontierWeak, _ = strings.Cut(f.frontier, ",")
	rep.Notes = append(rep.Notes, benchNotes(cfg, f, desc, arms)...)
	failed, err := allFailedNotes(results, rep)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep.Notes = append(rep.Notes, failed...)
	if st := cacheStats(models.cachedStrategies); st.Hits > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Response cache: %d of the %d strategy calls made now were served from it (--cache); "+
			"the latency of items served from it is the cache's, not the models'.", st.Hits, st.Hits+st.Misses+st.Bypassed))
	}
	if _, err := rep.WriteFiles(f.out); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := rep.WriteMarkdown(out); err != nil {
		return err
	}
	produced, err := itemsWithResult(results, armNames)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	nothing := ""
	if produced == 0 {
		nothing = "; nothing produced: every item ended in an error"
	}
	fmt.Fprintf(out, "\n%d items run now, %d taken from %s%s; tables and plots in %s\n",
		len(tasks)*len(arms)-rep.Resumed, rep.Resumed, results, nothing, f.out)
	for _, c := range []struct {
		who    string
		models map[string]*store.CachedModel
	}{{"strategies", models.cachedStrategies}, {"judge", models.cachedJudge}} {
		if c.models != nil {
			st := cacheStats(c.models)
			fmt.Fprintf(out, "response cache, %s: %d hits, %d misses, %d requests not cacheable (temperature above 0 without a seed)\n",
				c.who, st.Hits, st.Misses, st.Bypassed)
		}
	}
	if produced == 0 {
		return fmt.Errorf("bench: nothing produced: all %d items of every arm ended in an error (the notes name the first of each arm)", len(tasks))
	}
	return nil
}

// itemsWithResult counts the records of arms that end with an answer,
// however wrong. It skips errors and failures that left no answer: a
// failed call, a panic, a cancel, a prompt that did not render.
func itemsWithResult(results string, arms []string) (int, error) {
	recs, _, err := bench.ReadResults(results)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if !slices.Contains(arms, r.Arm) || r.Error != "" {
			continue
		}
		switch r.FailureKind {
		case delegate.FailureCall, delegate.FailurePanic, delegate.FailureCanceled, delegate.FailurePrompt:
			continue
		}
		n++
	}
	return n, nil
}

// benchRunSettings are the settings that define a benchmark's results,
// recorded in DIR/settings.json: a resume must match them key for key.
// Transport (timeouts, retries, concurrency, rate limits), the cache and
// the display may change between a run and its resume; the list of arms
// may grow.
type benchRunSettings struct {
	Dataset struct {
		Name string `json:"name"`
		// Sample is --n, with 0 for all, and Seed the sample's seed.
		// Tasks and TasksSHA256 identify the items sampled by IDs,
		// prompts and references, whatever file they were read from.
		Sample int    `json:"sample"`
		Seed   uint64 `json:"seed"`
		// World's knobs (--dataset world), beside the hash of the problems.
		Level       int    `json:"level,omitempty"`
		Distractors int    `json:"distractors,omitempty"`
		Split       string `json:"split,omitempty"`
		Tasks       int    `json:"tasks"`
		TasksSHA256 string `json:"tasks_sha256"`
	} `json:"dataset"`
	Preset   string                        `json:"preset"`
	Models   map[string]benchModelSettings `json:"models"` // the models the roles name
	Roles    RolesConfig                   `json:"roles"`
	Strategy strategy.Config               `json:"strategy"`
	// Judge and PassScore grade open-ended datasets; nil and 0 otherwise.
	Judge     *judge.Config `json:"judge,omitempty"`
	PassScore float64       `json:"pass_score,omitempty"`
}

// benchModelSettings is what of a model decides its answers and costs.
type benchModelSettings struct {
	Kind       string         `json:"kind,omitempty"`
	Model      string         `json:"model,omitempty"`
	Endpoint   string         `json:"endpoint,omitempty"` // base URL without credentials
	Checkpoint string         `json:"checkpoint,omitempty"`
	Price      delegate.Price `json:"price"`
	TokenIDs   bool           `json:"token_ids,omitempty"`
}

func (c *Config) benchSettings(f benchFlags, tasks []delegate.Task) (*benchRunSettings, error) {
	var s benchRunSettings
	s.Dataset.Name = f.dataset
	s.Dataset.Sample, s.Dataset.Seed, s.Dataset.Tasks = f.n, f.seed, len(tasks)
	if f.dataset == datasetWorld {
		s.Dataset.Level, s.Dataset.Distractors, s.Dataset.Split = f.world.level, f.world.distractors, f.split
	}
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(tasks); err != nil {
		return nil, fmt.Errorf("hash tasks: %w", err)
	}
	s.Dataset.TasksSHA256 = hex.EncodeToString(h.Sum(nil))[:16]
	s.Preset, s.Roles, s.Strategy = c.Preset, c.Roles, c.Strategy
	open := f.dataset == datasetOpen
	if open {
		j := c.Judge
		s.Judge, s.PassScore = &j, f.passScore
	} else {
		s.Roles.Judge = "" // not used: the dataset's verifier grades
	}
	used := append([]string{s.Roles.Default, s.Roles.Delegator, s.Roles.Subagent, s.Roles.Judge, s.Roles.Baseline,
		s.Roles.Leader, s.Roles.Strong, s.Roles.Weak}, s.Roles.Peers...)
	s.Models = map[string]benchModelSettings{}
	for _, name := range used {
		m, ok := c.Models[name]
		if !ok {
			continue
		}
		ms := benchModelSettings{Kind: m.Kind, Model: m.Model, Price: m.Price, TokenIDs: m.TokenIDs}
		if m.Kind == "local" {
			ms.Checkpoint = m.Checkpoint
			if abs, err := filepath.Abs(m.Checkpoint); err == nil && !strings.HasPrefix(m.Checkpoint, shippedPrefix) {
				ms.Checkpoint = abs
			}
		} else {
			ms.Endpoint = redactURL(m.BaseURL)
		}
		s.Models[name] = ms
	}
	return &s, nil
}

// benchNotes are the notes printed under the table: what it cannot say by
// itself.
func benchNotes(cfg *Config, f benchFlags, desc string, arms []bench.Arm) []string {
	notes := []string{"Dataset: " + desc + "."}
	if f.dataset == datasetOpen {
		notes = append(notes, fmt.Sprintf("Open-ended answers graded by the judge's 0-100 pointwise rubric; correct at %g or above.", f.passScore))
	}
	var ms []string
	for _, name := range cfg.ModelNames() {
		m := cfg.Models[name]
		what := fmt.Sprintf("%s at %s", m.Model, redactURL(m.BaseURL))
		if m.Kind == "local" {
			what = "local checkpoint " + m.Checkpoint
		}
		ms = append(ms, fmt.Sprintf("%s = %s ($%g/$%g per M tokens in/out)", name, what, m.Price.Input, m.Price.Output))
	}
	notes = append(notes, "Models: "+strings.Join(ms, "; ")+".")
	r := cfg.Roles
	roles := fmt.Sprintf("Roles: baseline %s, delegator %s, subagent %s, strong %s, weak %s, leader %s, peers %s",
		orDefault(r.Baseline, r.Default), orDefault(r.Delegator, r.Default), orDefault(r.Subagent, r.Default),
		orDefault(r.Strong, r.Default), orDefault(r.Weak, r.Default), orDefault(r.Leader, r.Default),
		orDefault(strings.Join(r.Peers, ","), r.Default))
	if f.dataset == datasetOpen {
		roles += ", judge " + orDefault(r.Judge, r.Default)
	}
	notes = append(notes, roles+".")
	for _, a := range arms {
		if a.Name == armStrong || a.Name == armWeak {
			notes = append(notes, `Arms "strong" and "weak": single's prompt and settings with route's strong and weak models, for PGR and the oracle router.`)
			break
		}
	}
	return notes
}

// allFailedNotes says why the first item failed, for each arm whose items
// all failed. A row of zeros says nothing by itself: a model whose
// context cannot hold the prompt, say, or a key refused.
func allFailedNotes(results string, rep *bench.Report) ([]string, error) {
	var arms []string
	for _, r := range rep.Rows {
		if !r.Oracle && r.N > 0 && r.Failures+r.Errors >= r.N {
			arms = append(arms, r.Arm)
		}
	}
	if len(arms) == 0 {
		return nil, nil
	}
	recs, _, err := bench.ReadResults(results)
	if err != nil {
		return nil, err
	}
	var notes []string
	for _, arm := range arms {
		for _, r := range recs {
			if r.Arm != arm || !r.Failed() {
				continue
			}
			why := r.Error
			if why == "" {
				why = r.Failure
			}
			notes = append(notes, fmt.Sprintf("Arm %q failed on every item; the first (task %s): %s.", arm, r.TaskID, strings.TrimSuffix(why, ".")))
			break
		}
	}
	return notes, nil
}

func orDefault(v, def string) string {
	switch {
	case v != "":
		return v
	case def != "":
		return def
	}
	return "none"
}

// cacheStats sums the cache's counts over models.
func cacheStats(cached map[string]*store.CachedModel) store.CacheStats {
	var s store.CacheStats
	for _, m := range cached {
		st := m.Stats()
		s.Hits += st.Hits
		s.Misses += st.Misses
		s.Bypassed += st.Bypassed
	}
	return s
}

// showProgress feeds a benchmark's items to the progress view. It stops
// when progress is closed, then closes done. One phase counts items, arm ×
// task, those from the results file included. Its status is the correct
// and failed counts.
func showProgress(v *progressView, total int, progress <-chan bench.Progress, done chan<- struct{}) {
	defer close(done)
	v.begin("bench", "items")
	var correct, finished, failed, resumed int
	for pr := range progress {
		finished++
		if pr.Correct {
			correct++
		}
		if pr.Failed {
			failed++
		}
		if pr.Resumed {
			resumed++
		}
		v.update(progressFigures{Done: pr.Done, Total: total, Resumed: resumed,
			Status: fmt.Sprintf("%d/%d correct, %d failed", correct, finished, failed)})
	}
}
