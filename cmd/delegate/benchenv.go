package main

import (
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

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world/transcript"
)

// envArm names the one arm of bench --env.
const envArm = "env"

// envSubagentRole names the environment's own model calls in the bench
// report, as the environment's state accounts for them.
const envSubagentRole = "env-subagent"

// envOutcome is what one episode ended with, for the grader.
type envOutcome struct {
	reward  *float64
	correct *bool
}

// envStrategy plays one episode per item against an OpenEnv server. An
// item's prompt is "seed N": the seed its reset sends.
type envStrategy struct {
	client    *openenv.Client
	transport string // "ws" or "http"
	policy    openenv.Policy

	mu       sync.Mutex
	outcomes map[int64]envOutcome
}

func (e *envStrategy) Name() string { return envArm }

// envPrompt is the item prompt of seed, and envSeed reads it back.
func envPrompt(seed int64) string { return "seed " + strconv.FormatInt(seed, 10) }

func envSeed(prompt string) (int64, error) {
	s, ok := strings.CutPrefix(prompt, "seed ")
	if !ok {
		return 0, fmt.Errorf("env item %q: want \"seed N\"", prompt)
	}
	return strconv.ParseInt(s, 10, 64)
}

// Run plays the episode of the request's seed. The environment's failure
// is the trace's failure, as a strategy records a failed call.
func (e *envStrategy) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	seed, err := envSeed(request)
	if err != nil {
		return delegate.NewRecorder(envArm, request, events).Finish("", delegate.Failed(delegate.FailurePrompt, "%v", err)), nil
	}
	var s openenv.Stepper
	if e.transport == "http" {
		s = e.client.OpenMCP()
	} else {
		ws, err := e.client.Dial(ctx)
		if err != nil {
			return delegate.NewRecorder(envArm, request, events).Finish("", delegate.Failed(delegate.FailureCall, "%v", err)), ctx.Err()
		}
		s = ws
	}
	pl, err := e.policy.Play(ctx, s, seed, events)
	if cerr := s.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close session: %w", cerr)
	}
	tr := pl.Trace
	if tr == nil {
		tr = delegate.NewRecorder(envArm, request, events).Finish("", delegate.Failure{})
	}
	tr.Request = request
	if err != nil {
		f := delegate.Failed(delegate.FailureCall, "%v", err)
		tr.Failure, tr.FailureKind = f.Message, f.Kind
	}
	if sp := pl.Spend; sp != nil && sp.Subagent.Calls > 0 {
		t := delegate.Totals{Calls: sp.Subagent.Calls, Cost: sp.Subagent.Dollars, Usage: delegate.Usage{
			PromptTokens: sp.Subagent.PromptTokens, CompletionTokens: sp.Subagent.CompletionTokens, CachedTokens: sp.Subagent.CachedTokens}}
		tr.Roles[envSubagentRole] = t
		tr.Total = tr.Total.Add(t)
	}
	e.mu.Lock()
	e.outcomes[seed] = envOutcome{reward: pl.Reward, correct: pl.Correct}
	e.mu.Unlock()
	return tr, ctx.Err()
}

// grade reads an episode's outcome. It is correct as the environment's
// state says, else when the reward is above 0. The reward goes in
// Extracted and Score.
func (e *envStrategy) grade(_ context.Context, task delegate.Task, _ string) (bench.Grade, error) {
	seed, err := envSeed(task.Prompt)
	if err != nil {
		return bench.Grade{}, err
	}
	e.mu.Lock()
	o, ok := e.outcomes[seed]
	e.mu.Unlock()
	if !ok || o.reward == nil {
		return bench.Grade{Extracted: "no reward: the episode did not end"}, nil
	}
	r := *o.reward
	correct := r > 0
	if o.correct != nil {
		correct = *o.correct
	}
	return bench.Grade{Correct: correct, Extracted: fmt.Sprintf("reward %.4f", r), Score: &r}, nil
}

// benchEnvSettings are the settings that define an env run's results.
type benchEnvSettings struct {
	Env       string             `json:"env"`
	Transport string             `json:"transport"`
	Policy    string             `json:"policy"`
	Model     benchModelSettings `json:"model"`
	Episodes  int                `json:"episodes"`
	Seed      uint64             `json:"seed"`
}

// runBenchEnv evaluates the config's strong model (else its default) as
// the policy of f.n episodes of the environment at f.env.
func runBenchEnv(ctx context.Context, out, errOut io.Writer, getenv env, log *slog.Logger, f benchFlags) error {
	if err := checkBenchEnvFlags(f); err != nil {
		return err
	}
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	name := cfg.Roles.Strong
	if name == "" {
		name = cfg.Roles.Default
	}
	if name == "" {
		return errors.New("bench: --env needs a policy model: set roles.strong (or roles.default)")
	}
	one := *cfg
	one.Models = map[string]ModelConfig{name: cfg.Models[name]}
	models, closeModels, err := one.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	m := cfg.Models[name]
	settings := benchEnvSettings{Env: redactURL(f.env), Transport: f.envTransport, Policy: name, Episodes: f.n, Seed: f.seed,
		Model: benchModelSettings{Kind: m.Kind, Model: m.Model, Price: m.Price, TokenIDs: m.TokenIDs, Checkpoint: m.Checkpoint}}
	results := filepath.Join(f.out, benchResults)
	if err := bench.CheckSettings(filepath.Join(f.out, benchSettingsFile), results, []string{envArm}, settings); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	es := &envStrategy{
		client:    &openenv.Client{BaseURL: f.env, Token: strings.TrimSpace(getenv(envTokenEnv))},
		transport: f.envTransport,
		policy: openenv.Policy{Agent: delegate.Agent{Role: "policy", Model: models[name], Price: m.Price},
			Messages: transcript.RouteMessages, Temperature: 0,
			// The world's models were trained on route: the delegate tool by
			// name alone, the answer in text.
			AnswerInText: cfg.Preset == PresetWorld, NamesOnly: cfg.Preset == PresetWorld},
		outcomes: map[int64]envOutcome{},
	}
	arms := []bench.Arm{{Name: envArm, Strategy: es}}
	closeOTLP, err := traceArms(f.otlp, getenv, cfg, log, arms)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer closeOTLP()
	rep, err := runEnvEpisodes(ctx, errOut, f, results, arms, es)
	if err != nil {
		return err
	}
	return writeBenchEnv(out, f, rep, results, name, models[name].Name())
}

// checkBenchEnvFlags checks bench's flags as --env uses them.
func checkBenchEnvFlags(f benchFlags) error {
	var errs []error
	if f.n <= 0 {
		errs = append(errs, errors.New("--n is required with --env: the number of episodes"))
	}
	if f.dataset != "" || f.data != "" {
		errs = append(errs, errors.New("--dataset and --data are not used with --env: the environment draws the problems, by --seed"))
	}
	if f.envTransport != "ws" && f.envTransport != "http" {
		errs = append(errs, fmt.Errorf("--env-transport %q: want ws or http", f.envTransport))
	}
	if !strings.HasPrefix(f.env, "http://") && !strings.HasPrefix(f.env, "https://") {
		errs = append(errs, fmt.Errorf("--env %q: want the server's http:// or https:// URL", f.env))
	}
	if err := checkProgress(f.progress); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// runEnvEpisodes plays the f.n episodes of seeds f.seed on, with a
// progress bar, and grades them by their outcomes.
func runEnvEpisodes(ctx context.Context, errOut io.Writer, f benchFlags, results string, arms []bench.Arm, es *envStrategy) (*bench.Report, error) {
	tasks := make([]delegate.Task, f.n)
	for i := range tasks {
		seed := int64(f.seed) + int64(i)
		tasks[i] = delegate.Task{ID: "seed-" + strconv.FormatInt(seed, 10), Dataset: "env", Prompt: envPrompt(seed)}
	}
	progress := make(chan bench.Progress, len(tasks))
	barDone := make(chan struct{})
	view := newProgressView(errOut, f.progress)
	go showProgress(view, len(tasks), progress, barDone)
	ecfg := bench.DefaultConfig()
	ecfg.Results, ecfg.Concurrency, ecfg.ItemTimeout, ecfg.Trace = results, f.concurrency, f.itemTimeout, f.trace
	rep, runErr := bench.RunGraded(ctx, ecfg, tasks, arms, es.grade, progress)
	close(progress)
	<-barDone
	view.finish(runErr == nil)
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bench interrupted; finished episodes are saved in %s: run the same command again to resume", results)
		}
		return nil, fmt.Errorf("bench: %w", runErr)
	}
	return rep, nil
}

// writeBenchEnv writes the report, its mean reward in its notes, to
// f.out and out. policy is the config key of the policy, model its name.
func writeBenchEnv(out io.Writer, f benchFlags, rep *bench.Report, results, policy, model string) error {
	recs, _, err := bench.ReadResults(results)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	sum, n := 0.0, 0
	for _, r := range recs {
		if r.Arm == envArm && r.Score != nil {
			sum += *r.Score
			n++
		}
	}
	mean := "none ended"
	if n > 0 {
		mean = fmt.Sprintf("%.4f", sum/float64(n))
	}
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("Environment %s over %s; policy %q (%s) acting through its tools, seeds %d to %d.", redactURL(f.env), f.envTransport, policy, model, f.seed, f.seed+uint64(f.n)-1),
		fmt.Sprintf("Mean reward: %s over %d ended episodes of %d. The score column is the reward; correct is the environment's verdict; role %s is its sub-agent's spend, as its state reports it.", mean, n, len(recs), envSubagentRole))
	if _, err := rep.WriteFiles(f.out); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := rep.WriteMarkdown(out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nmean reward %s over %d episodes; results, tables and plots in %s\n", mean, n, f.out)
	return nil
}
