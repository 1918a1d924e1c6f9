package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/dataset"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/score"
	"github.com/delegatelab/delegate/trajectory/openenv"
	"github.com/delegatelab/delegate/world"
)

// envTokenEnv names the variable that holds delegate env's token.
const envTokenEnv = "DELEGATE_ENV_TOKEN"

type envFlags struct {
	addr, config, split, token string
	dataset, data              string
	maxEpisodes, maxSteps      int
	budget                     float64       // dollars an episode may spend; 0: no limit
	episodeTime                time.Duration // an episode's time from its reset; 0: no limit
	insecure, skipBad          bool
	otlp                       string
	// The reward of an ended episode, as gateway reads it; reward ""
	// leaves it to the config's reward.kind, else the world's reward.
	reward, costUnit string
	lambda           float64
	lambdaSet        bool
}

func newEnvCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f envFlags
	cmd := &cobra.Command{
		Use:   "env [flags]",
		Short: "Serve delegation tasks as an OpenEnv environment",
		Long: `Env serves delegation tasks over OpenEnv's protocol (HTTP, WebSocket and
MCP), for trainers such as TRL's environment_factory. An episode is one
problem: of the arithmetic world's --split, or of --dataset (gsm8k, math,
mmlu, bbh) read from --data and scored by its exact verifier, or open
questions (--dataset open) that the config's judge compares with its
baseline's answer. The policy
calls two tools: delegate, which hands a question to the sub-agent model
(the config's weak role, else its subagent or default role), and answer.
The reward is the world's, or --reward's (the config's reward.kind).
Listening off loopback needs a token ($` + envTokenEnv + ` or --token) unless
--insecure. docs/openenv.md has the protocol and a TRL example.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.lambdaSet = cmd.Flags().Changed("lambda")
			return serveEnv(cmd.Context(), cmd.OutOrStdout(), getenv, log, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8010", "address to listen on")
	fl.StringVarP(&f.config, "config", "c", "", "config file naming the sub-agent model (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.StringVar(&f.split, "split", "train", "split the world's problems come from: train, validation or test")
	fl.StringVarP(&f.dataset, "dataset", "d", datasetWorld, "problems: world, or gsm8k, math, mmlu or bbh from --data, or open (--data, else the built-in requests of --split train or test; judged)")
	fl.StringVar(&f.data, "data", "", "dataset file (a directory for mmlu, bbh); not used with world")
	fl.BoolVar(&f.skipBad, "skip-bad", false, "leave malformed dataset records out, listing each, instead of failing")
	fl.IntVar(&f.maxEpisodes, "max-episodes", 64, "WebSocket episodes open at once (CAPACITY_REACHED beyond)")
	fl.IntVar(&f.maxSteps, "max-steps", 8, "tool calls that end an episode unanswered")
	fl.Float64Var(&f.budget, "budget", 0, "dollars, both roles at the config's prices, that end an episode unanswered once spent (0: no budget)")
	fl.DurationVar(&f.episodeTime, "episode-time", 0, "time from its reset that ends an episode unanswered, cutting a sub-agent call short (0: no limit)")
	fl.StringVar(&f.token, "token", "", "token clients must send, as a bearer token or a Basic auth password (default $"+envTokenEnv+"; prefer the variable: a flag shows in ps)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening off loopback without a token")
	fl.StringVar(&f.otlp, "otlp", "", "export each episode as OpenTelemetry spans to this OTLP/HTTP receiver (http://localhost:4318); never slows or fails an episode (docs/telemetry.md)")
	fl.StringVar(&f.reward, "reward", "", "reward of an ended episode, as gateway's --reward: graded, world, or "+strings.Join(reward.Kinds()[1:], ", ")+" tuned in the config's reward section (default: the config's reward.kind when it writes one, else the world's reward)")
	fl.Float64Var(&f.lambda, "lambda", 0, "--reward graded or world: cost charged per unit of --cost-unit (default: the reward's)")
	fl.StringVar(&f.costUnit, "cost-unit", "", "--reward graded: what --lambda charges for, tokens or dollars (default: the config's reward.graded.cost_unit, tokens)")
	return cmd
}

func serveEnv(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f envFlags) error {
	if err := f.check(getenv); err != nil {
		return err
	}
	split, err := world.ParseSplit(f.split)
	if err != nil {
		return fmt.Errorf("env: --split: %w", err)
	}
	tasks, what, err := envTasks(out, f, split)
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	name, err := envSubagent(cfg)
	if err != nil {
		return err
	}
	c := rewardChoice{kind: f.reward, lambda: f.lambda, lambdaSet: f.lambdaSet, costUnit: f.costUnit}
	sc, rewardName, err := c.chosen(cfg, []string{name}, "env delegates to")
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	var judgeName, baseName string
	if f.dataset == datasetOpen {
		if judgeName, baseName, err = envJudgeModels(cfg); err != nil {
			return err
		}
	}
	models, closeModels, err := openEnvModels(cfg, getenv, log, name, judgeName, baseName)
	if err != nil {
		return err
	}
	defer closeModels()
	var judgeFn func(context.Context, delegate.Task, string, *reward.Outcome) error
	if judgeName != "" {
		if judgeFn, err = envJudge(cfg, models, judgeName); err != nil {
			return err
		}
	}
	sink, err := openOTLP(f.otlp, getenv, cfg.providers(), log)
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	defer sink.close()
	srv, err := newEnvServer(cfg.Models[name].Price, models[name], split, tasks, judgeFn, f, sc, rewardName, sink, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	// Basic: OpenEnv's Python client sends credentials only from its URL's
	// user information.
	h := edge.Config{Token: f.token, Basic: true, Open: []string{"/health"}, Realm: "delegate env", Refuse: func(w http.ResponseWriter, rf edge.Refusal) {
		openenv.WriteDetail(w, rf.Status, rf.Message)
	}}.Handler(srv)
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	hs := edge.Server(h, edge.DefaultTimeouts(), log, slog.LevelWarn)
	fmt.Fprintf(out, "delegation environment: %s, sub-agent %q (config key %s), at most %d steps an episode, %d episodes at once\n",
		what, models[name].Name(), name, f.maxSteps, f.maxEpisodes)
	if judgeName != "" {
		fmt.Fprintf(out, "answers judged by model %s against the baseline of model %s\n", judgeName, baseName)
	}
	if sc != nil {
		fmt.Fprintf(out, "reward: %s\n", rewardName)
	}
	printEnvAddr(out, log, ln.Addr(), f)
	// Sessions are hijacked connections, which Shutdown does not wait
	// for: close them first.
	return serveUntil(ctx, "env", hs, ln, func() error {
		if err := srv.Close(); err != nil {
			return fmt.Errorf("close sessions: %w", err)
		}
		return nil
	})
}

// openEnvModels opens the sub-agent's model and, for open questions,
// the judge's and the baseline's. The caller calls the returned close.
func openEnvModels(cfg *Config, getenv env, log *slog.Logger, names ...string) (map[string]delegate.Model, func(), error) {
	one := *cfg
	one.Models = map[string]ModelConfig{}
	for _, n := range names {
		if n != "" {
			one.Models[n] = cfg.Models[n]
		}
	}
	return one.openModels(getenv, log)
}

// printEnvAddr says where the environment listens and how it is guarded.
func printEnvAddr(out io.Writer, log *slog.Logger, addr net.Addr, f envFlags) {
	auth := "no token (loopback only)"
	switch {
	case f.token != "":
		auth = "token required"
	case f.insecure:
		auth = "NO TOKEN (--insecure)"
		log.Warn("serving without authentication off loopback (--insecure): anyone who can reach the address can run episodes", "addr", addr.String())
	}
	fmt.Fprintf(out, "serving OpenEnv on http://%s (WebSocket ws://%s/ws, MCP http://%s/mcp), %s\n", addr, addr, addr, auth)
	if f.otlp != "" {
		fmt.Fprintf(out, "each episode exported as OpenTelemetry spans to %s\n", redactURL(f.otlp))
	}
}

// check reads the token from the environment when no flag gave it and
// checks the flags.
func (f *envFlags) check(getenv env) error {
	if f.token == "" {
		f.token = getenv(envTokenEnv)
	}
	f.token = strings.TrimSpace(f.token)
	if err := edge.CheckExposure(f.addr, f.token != "", f.insecure, "a token: set $"+envTokenEnv+" (or --token)"); err != nil {
		return fmt.Errorf("env: %w", err)
	}
	if f.maxEpisodes <= 0 || f.maxSteps <= 0 {
		return fmt.Errorf("env: --max-episodes (%d) and --max-steps (%d) must be positive", f.maxEpisodes, f.maxSteps)
	}
	if f.budget < 0 || math.IsNaN(f.budget) || math.IsInf(f.budget, 0) {
		return fmt.Errorf("env: --budget %g: want dollars, 0 (no budget) or more", f.budget)
	}
	if f.episodeTime < 0 {
		return fmt.Errorf("env: --episode-time %v: want a duration, 0 (no limit) or more", f.episodeTime)
	}
	return nil
}

// envSubagent is the config key of the sub-agent model: the weak role,
// else the subagent or default role.
func envSubagent(cfg *Config) (string, error) {
	name := cfg.Roles.Weak
	for _, n := range []string{cfg.Roles.Subagent, cfg.Roles.Default} {
		if name == "" {
			name = n
		}
	}
	if name == "" {
		return "", errors.New("env: the config names no sub-agent model: set roles.weak (or roles.subagent or roles.default)")
	}
	return name, nil
}

// newEnvServer is the delegation environment's OpenEnv server. sub is the
// sub-agent at price, the world's solver price when zero. Each episode is
// exported to sink. sc, when not nil, is the chosen reward, named so.
// judgeFn judges answers to tasks without a reference answer.
func newEnvServer(price delegate.Price, sub delegate.Model, split world.Split, tasks []delegate.Task, judgeFn func(context.Context, delegate.Task, string, *reward.Outcome) error, f envFlags, sc *rollout.RewardScorer, rewardName string, sink *otlpSink, log *slog.Logger) (*openenv.Server, error) {
	prices := world.DefaultPrices()
	if price.Input != 0 || price.CachedInput != 0 || price.Output != 0 {
		prices.Solver = price
	}
	dc := openenv.DelegationConfig{Subagent: sub, Split: split, MaxSteps: f.maxSteps, Budget: f.budget, EpisodeTime: f.episodeTime, Prices: &prices}
	if tasks != nil {
		dc.Tasks, dc.Verify, dc.Judge = tasks, score.Verify, judgeFn
	}
	if sink != nil {
		dc.Ended = sink.episodes()
	}
	if sc != nil {
		dc.Score, dc.ScoreName, dc.GeneratedTokens = sc.Reward, rewardName, sc.GeneratedTokens
	}
	d, err := openenv.NewDelegation(dc)
	if err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	oc := openenv.DefaultConfig() // the episode ends at --max-steps; the server's step limit stays a backstop
	oc.New, oc.Name, oc.Metadata, oc.Schema, oc.Tools = d.New, "delegation", d.Metadata(), d.Schema(), d.Tools()
	oc.MaxSessions, oc.Log = f.maxEpisodes, log
	srv, err := openenv.NewServer(oc)
	if err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	return srv, nil
}

// envTasks loads --dataset's tasks, nil for the world's problems, and
// says what the episodes draw from.
func envTasks(out io.Writer, f envFlags, split world.Split) ([]delegate.Task, string, error) {
	switch f.dataset {
	case datasetWorld:
		if f.data != "" {
			return nil, "", errors.New("--data is not used with --dataset world")
		}
		return nil, fmt.Sprintf("%s problems", split), nil
	case "gsm8k", "math", "mmlu", "bbh", datasetOpen:
	default:
		return nil, "", fmt.Errorf("--dataset %q: want world, gsm8k, math, mmlu, bbh or open", f.dataset)
	}
	df := datasetFlags{dataset: f.dataset, data: f.data, skipBad: f.skipBad, maxRec: dataset.DefaultMaxRecord, split: f.split}
	tasks, desc, err := df.load(out)
	if err != nil {
		return nil, "", err
	}
	return tasks, desc, nil
}
