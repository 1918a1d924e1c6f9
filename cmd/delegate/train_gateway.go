package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// gatewayDir is the gateway's directory in train --gateway's output
// directory: its session store and group records.
const gatewayDir = "gateway"

// trainGatewayFlags are train's flags for --gateway: the gateway's own,
// named as delegate gateway names them.
type trainGatewayFlags struct {
	addr, config, role, token string
	reward                    string
	insecure                  bool
	hosts                     []string
	roles                     map[string]string
	ttl, wait                 time.Duration
	maxStaleness              int
}

// addTrainGatewayFlags declares train's --gateway flags.
func addTrainGatewayFlags(fl *pflag.FlagSet, f *trainGatewayFlags) {
	fl.StringVar(&f.addr, "gateway", "", "serve a session gateway on this address (127.0.0.1:8090) and train the delegator on its sessions in this process, serving the policy being trained; as delegate gateway plus train --api, in one process (docs/gateway.md)")
	fl.StringVarP(&f.config, "config", "c", "", "--gateway: the config of the served models (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.StringVar(&f.role, "gateway-role", train.RoleDelegator, "--gateway: the role whose calls train the policy; the config's model of that role (by --role, or by name) is served from the policy")
	fl.StringToStringVar(&f.roles, "role", nil, "--gateway: the role of a model's calls, MODEL=ROLE by config key (default the model's name)")
	fl.StringVar(&f.reward, "gateway-reward", "", "--gateway: the reward of a verified session, as delegate gateway's --reward (world, graded, or a kind tuned in the config's reward section; default: the config's reward.kind when it writes one, else 1 if right, 0 if wrong)")
	fl.DurationVar(&f.ttl, "ttl", 30*time.Minute, "--gateway: a session's life from its start")
	fl.DurationVar(&f.wait, "gateway-wait", 10*time.Second, "--gateway: how long POST /sessions waits while the trainer's queue is full (--offpolicy) before it answers 503")
	fl.IntVar(&f.maxStaleness, "max-staleness", 0, "--gateway: drop a group sampled more than this many steps before the step that takes it (0: keep all), as delegate api --max-staleness")
	fl.StringVar(&f.token, "token", "", "--gateway: bearer token of the session API (default $"+gatewayTokenEnv+"; prefer the variable: a flag shows in ps)")
	fl.BoolVar(&f.insecure, "insecure", false, "--gateway: allow listening off loopback without a token")
	fl.StringSliceVar(&f.hosts, "allow-host", nil, "--gateway: a host name clients may reach the gateway by, besides IP addresses and localhost")
}

// trainGatewayOnly are the flags that go with --gateway alone.
var trainGatewayOnly = []string{"config", "gateway-role", "gateway-reward", "role", "ttl", "gateway-wait", "max-staleness", "token", "insecure", "allow-host"}

// checkTrainGateway refuses what cannot go with --gateway, and --gateway's
// flags without it.
func checkTrainGateway(cmd *cobra.Command, cfg *train.Config, f *trainFlags) error {
	fl := cmd.Flags()
	if f.gw.addr == "" {
		for _, name := range trainGatewayOnly {
			if fl.Changed(name) {
				return fmt.Errorf("train: --%s goes with --gateway", name)
			}
		}
		return nil
	}
	why := map[string]string{
		"api":           "--api trains on a trajectory API's batches, --gateway on its own sessions",
		"processes":     "--processes runs its own environments; the gateway's sessions come from agents",
		"rl-seeds":      "the gateway serves one policy",
		"world":         "the agents choose the problems",
		"delegator":     "the policy starts from the config's model of --gateway-role",
		"time":          "a gateway run has no table to leave time for",
		"train-time":    "a gateway run has no table to leave time for",
		"otlp":          "the rollouts are the agents' (delegate gateway --otlp exports sessions)",
		"reward-config": "the gateway rewards sessions (given or verified), not the trainer",
	}
	for _, name := range slices.Sorted(maps.Keys(why)) {
		if fl.Changed(name) {
			return fmt.Errorf("train: --gateway goes without --%s: %s", name, why[name])
		}
	}
	if cfg.Mode != train.ModeRoute || cfg.Train != train.TrainDelegator || cfg.Credit != reward.CreditTask {
		return fmt.Errorf("train: --gateway trains the delegator under route with task credit (the gateway serves one trained policy, and its groups carry one advantage a session), not --mode %s --train %s --credit %s", cfg.Mode, cfg.Train, cfg.Credit)
	}
	if cfg.RewardKind != "" && cfg.RewardKind != reward.KindGraded {
		return fmt.Errorf("train: --reward %s: with --gateway the gateway rewards the sessions (given or verified), not the trainer", cfg.RewardKind)
	}
	if f.gw.maxStaleness < 0 {
		return fmt.Errorf("train: --max-staleness %d is negative", f.gw.maxStaleness)
	}
	if f.gw.wait < 0 {
		return fmt.Errorf("train: --gateway-wait %v is negative", f.gw.wait)
	}
	return nil
}

// runTrainGateway serves a gateway on f.gw.addr and trains the delegator
// on its sessions in this process (train.GatewayRun). The config model of
// the trained role is served from the policy being trained. Every other
// model is served as delegate gateway serves it. offPolicy steps of groups
// may wait beyond the step being taken before new sessions wait.
func runTrainGateway(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, cfg train.Config, f trainFlags, offPolicy int) error {
	gf := gatewayFlags{addr: f.gw.addr, out: filepath.Join(cfg.OutDir, gatewayDir), token: f.gw.token, insecure: f.gw.insecure,
		hosts: f.gw.hosts, trained: []string{f.gw.role}, roles: f.gw.roles, ttl: f.gw.ttl, group: cfg.RL.GroupSize,
		temperature: cfg.RL.Temperature, estimator: string(cfg.RL.Estimator), reward: f.gw.reward}
	est, err := gf.check(getenv)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	mcfg, err := LoadConfig(configPath(f.gw.config, getenv))
	if err != nil {
		return err
	}
	names, err := servedNames(mcfg, nil)
	if err != nil {
		return fmt.Errorf("train --gateway: %w", err)
	}
	for m := range gf.roles {
		if !slices.Contains(names, m) {
			return fmt.Errorf("train --gateway: --role names model %q, which is not served (%s)", m, strings.Join(names, ", "))
		}
	}
	policyName, err := policyModel(mcfg, names, gf.roles, f.gw.role)
	if err != nil {
		return err
	}
	mc := mcfg.Models[policyName]
	cfg.Delegator = mc.Checkpoint
	others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == policyName })
	models, closeModels, err := openServed(mcfg, others, getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()

	feed := gateway.NewFeed((offPolicy + 1) * cfg.RL.ItemsPerStep)
	recovered, err := gateway.ReadSent(gf.out)
	if err != nil {
		return fmt.Errorf("train --gateway: %w", err)
	}
	progress, printed := printSteps(out, cfg)
	run, err := train.NewGatewayRun(cfg, train.GatewayConfig{Model: localModelConfig(policyName, mc, mcfg.localTools()),
		Feed: feed, Recovered: recovered, MaxStaleness: f.gw.maxStaleness, Log: log}, progress)
	if err != nil {
		close(progress)
		<-printed
		return err
	}
	models[policyName] = run.Model()
	err = serveTrainGateway(ctx, out, log, cfg, run, feed, mcfg, names, models, gf, est, f.gw.wait)
	close(progress)
	<-printed
	if cerr := run.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("train --gateway: %w", cerr)
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w; run the same command again to resume", err)
	}
	return err
}

// serveTrainGateway opens the gateway over models, its group records
// going to feed, serves it and runs the trainer. Once the trainer is done
// it stops serving: sessions open then are counted lost at the next start.
func serveTrainGateway(ctx context.Context, out io.Writer, log *slog.Logger, cfg train.Config, run *train.GatewayRun, feed *gateway.Feed,
	mcfg *Config, names []string, models map[string]delegate.Model, gf gatewayFlags, est reward.Estimator, wait time.Duration) (err error) {
	gcfg, served, err := gatewayConfig(mcfg, names, models, gf, est)
	if err != nil {
		return err
	}
	if err := gatewayReward(&gcfg, mcfg, names, gf); err != nil {
		return fmt.Errorf("train --gateway: %w", err)
	}
	gcfg.Sink, gcfg.SinkWait = feed, wait
	g, err := gateway.Open(ctx, gcfg, slog.New(infoHandler{log.Handler()}), served...)
	if err != nil {
		return fmt.Errorf("train --gateway: %w", err)
	}
	defer func() {
		if cerr := g.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("train --gateway: %w", cerr)
		}
	}()
	timeouts := server.DefaultTimeouts()
	g.SetWriteTimeout(timeouts.Write)
	ln, err := net.Listen("tcp", gf.addr)
	if err != nil {
		return fmt.Errorf("train --gateway: %w", err)
	}
	srv := edge.Server(g, timeouts, log, slog.LevelWarn)
	// A server that stops serving stops the trainer, which would wait
	// for sessions forever.
	tctx, stopTraining := context.WithCancel(ctx)
	defer stopTraining()
	serving := make(chan error, 1)
	go func() {
		serving <- srv.Serve(ln)
		stopTraining()
	}()
	fmt.Fprintf(out, "train: model %q plays %s and is the policy, served from memory: version %d (the trainer's steps done); %d groups of the last run to train first\n",
		run.Model().Name(), gf.trained[0], run.Start(), run.Pending())
	fmt.Fprintf(out, "train: steps of %d groups of %d sessions; checkpoints in %s\n", cfg.RL.ItemsPerStep, gf.group, rl.CheckpointDir(cfg.OutDir))
	printGateway(out, log, g, gcfg, names, models, ln.Addr(), gf)

	trainErr := run.Run(tctx)
	// The feed first: sessions waiting for room are answered at once.
	feed.Close()
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	serr := srv.Shutdown(shutdown)
	if e := <-serving; !errors.Is(e, http.ErrServerClosed) {
		serr = fmt.Errorf("train --gateway: serve: %w", e) // it stopped the trainer
	}
	counts, cerr := g.Counts(context.WithoutCancel(ctx))
	if cerr == nil {
		fmt.Fprintf(out, "train: gateway stopped after %d steps; sessions %s\n", run.StepsDone(), sessionCounts(counts))
	}
	if trainErr != nil {
		return trainErr
	}
	return errors.Join(serr, cerr)
}

// sessionCounts is counts by status in a fixed order.
func sessionCounts(counts map[string]int) string {
	var parts []string
	for _, s := range []string{"finished", "open", "lost", "expired"} {
		parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
	}
	return strings.Join(parts, ", ")
}

// policyModel is the config key of the model whose calls play role: the
// one --role maps to it, or else the one named role. It must be one of
// delegate's own local checkpoints, which the trainer can train, and
// follow no trainer.
func policyModel(cfg *Config, names []string, roles map[string]string, role string) (string, error) {
	var found []string
	for _, n := range names {
		r, ok := roles[n]
		if !ok {
			r = n
		}
		if r == role {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("train --gateway: no served model plays role %q (served: %s); name one so, or map it with --role MODEL=%s", role, strings.Join(names, ", "), role)
	case 1:
	default:
		return "", fmt.Errorf("train --gateway: models %s all play role %q: the policy is one of them; map the others to other roles with --role", strings.Join(found, ", "), role)
	}
	n := found[0]
	mc := cfg.Models[n]
	if mc.Follow != "" {
		return "", fmt.Errorf("train --gateway: model %s follows %s; the policy is served from the trainer's memory: remove follow", n, mc.Follow)
	}
	if !strings.HasPrefix(mc.Checkpoint, shippedPrefix) {
		hf, err := infer.IsHF(mc.Checkpoint)
		if err != nil {
			return "", fmt.Errorf("train --gateway: model %s: %w", n, err)
		}
		if hf || infer.IsGGUF(mc.Checkpoint) {
			return "", fmt.Errorf("train --gateway: model %s: %s is not a checkpoint of delegate's own format, which the trainer trains", n, mc.Checkpoint)
		}
	}
	return n, nil
}
