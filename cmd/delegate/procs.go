package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// topology is `delegate train --processes N`: the RL loop of
// docs/topology.md as child processes of this executable, supervised.
type topology struct {
	exe   string // the executable the children run
	envs  int    // environments
	level int    // the world's --level
	cfg   train.Config
	// trainerFlags are the flags of the command line the trainer gets as
	// they are (its RL settings and starting checkpoint).
	trainerFlags []string
	lambda       *float64 // --lambda when given, for the environments' reward
	// offPolicy is --offpolicy. 0 samples each batch on-policy, as
	// process --push-sync. More lets the environments run that many
	// batches ahead, as process --push-offpolicy.
	offPolicy int
	// otlp is --otlp: the environments export their rollouts' traces.
	otlp string

	sup *supervisor
}

// Layout of --out under --processes.
const (
	procsAPIDir     = "api"        // the API's JetStream store
	procsTrainerDir = "trainer"    // the trainer's --out: metrics.jsonl, checkpoint/
	procsServeFile  = "serve.yaml" // the policy server's config
	procsEnvFile    = "env.yaml"   // the environments' config
)

// procsEnvDir is environment i's --out (from 1).
func procsEnvDir(i int) string { return "env-" + strconv.Itoa(i) }

// trainerPassFlags are train's flags the trainer child gets as given.
var trainerPassFlags = []string{"estimator", "lr", "clip", "kl", "epochs", "temperature", "entropy", "max-new-tokens", "delegator", "solver", "seed", "rl-seed", "strict-tool-calls", "credit", "train"}

// procsRefused are train's flags that --processes cannot honour. Only
// route trains from a trajectory API, the environments' reward has the
// world's μ, and the run ends at its steps.
var procsRefused = []string{"mode", "peers", "mu", "api", "train-time", "parity", "reward", "reward-config"}

// newTopology checks the command line of train --processes.
func newTopology(fl *pflag.FlagSet, cfg train.Config, envs, level int, lambda float64) (*topology, error) {
	if runtime.GOOS == "windows" {
		return nil, errors.New("train --processes: stopping children needs process groups, which Windows lacks")
	}
	if envs < 1 || envs > 64 {
		return nil, fmt.Errorf("train --processes %d: want 1 to 64 environments", envs)
	}
	for _, name := range procsRefused {
		if fl.Changed(name) {
			return nil, fmt.Errorf("train --processes: --%s does not apply (the loop trains route to its --steps, with the world's reward but for --lambda)", name)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("train --processes: the executable to run: %w", err)
	}
	t := &topology{exe: exe, envs: envs, level: level, cfg: cfg}
	if t.offPolicy, err = fl.GetInt("offpolicy"); err != nil {
		return nil, fmt.Errorf("train --processes: %w", err)
	}
	switch {
	case t.offPolicy < 0:
		return nil, fmt.Errorf("train --processes: --offpolicy %d: want 0 (on-policy) or more batches ahead", t.offPolicy)
	case t.offPolicy == 0 && envs > cfg.RL.ItemsPerStep:
		return nil, fmt.Errorf("train --processes %d: on-policy (--offpolicy 0) each environment samples a share of a step's %d items: want at most %d environments", envs, cfg.RL.ItemsPerStep, cfg.RL.ItemsPerStep)
	}
	for _, name := range trainerPassFlags {
		if f := fl.Lookup(name); f != nil && f.Changed {
			t.trainerFlags = append(t.trainerFlags, "--"+name, f.Value.String())
		}
	}
	if fl.Changed("lambda") {
		t.lambda = &lambda
	}
	return t, nil
}

// writeConfigs writes the policy server's and the environments' configs
// under dir. The server has the delegator and the solver. Each follows its
// trainer's checkpoint when trained, and is frozen otherwise. The
// environments reach both through it.
func (t *topology) writeConfigs(dir, serveAddr string) error {
	checkpoint := func(path, shipped string) string {
		if path == "" {
			return shippedPrefix + shipped
		}
		if abs, err := filepath.Abs(path); err == nil {
			return abs
		}
		return path
	}
	// follow is a model's lines that follow the checkpoint of the
	// trainer in sub of the trainer's --out, or none when not trained.
	follow := func(trained bool, sub string) (string, error) {
		if !trained {
			return "", nil
		}
		d, err := filepath.Abs(rl.CheckpointDir(filepath.Join(dir, procsTrainerDir, sub)))
		if err != nil {
			return "", fmt.Errorf("train --processes: %w", err)
		}
		return fmt.Sprintf("    follow: %q\n    follow_every: 10ms\n", d), nil
	}
	followDelegator, err := follow(t.cfg.Train != train.TrainSolver, "")
	if err != nil {
		return err
	}
	solverTrained := t.cfg.Train != train.TrainDelegator
	followSolver, err := follow(solverTrained, train.SolverDir)
	if err != nil {
		return err
	}
	prices := world.DefaultPrices()
	price := func(p struct{ in, cached, out float64 }) string {
		return fmt.Sprintf("{input: %g, cached_input: %g, output: %g}", p.in, p.cached, p.out)
	}
	dp := price(struct{ in, cached, out float64 }{prices.Delegator.Input, prices.Delegator.CachedInput, prices.Delegator.Output})
	sp := price(struct{ in, cached, out float64 }{prices.Solver.Input, prices.Solver.CachedInput, prices.Solver.Output})
	serve := fmt.Sprintf(`# written by delegate train --processes: the policy server
models:
  delegator:
    kind: local
    checkpoint: %q
%s    max_batch: 64
    price: %s
  solver:
    kind: local
    checkpoint: %q
%s    max_batch: 64
    price: %s
`, checkpoint(t.cfg.Delegator, t.cfg.StartModel()), followDelegator, dp, checkpoint(t.cfg.Solver, "solver"), followSolver, sp)
	// The strategy as the in-process trainer runs route: its turns, and
	// every call capped at --max-new-tokens.
	sc := transcript.StrategyConfig()
	capped := func(g strategy.Generation) int { return min(g.MaxTokens, t.cfg.RL.MaxNewTokens) }
	env := fmt.Sprintf(`# written by delegate train --processes: an environment sampling the
# policy server; the preset declares the world's tools and prompts, the
# strategy is route as delegate train runs it.
preset: world
models:
  delegator: {kind: openai, base_url: "http://%[1]s/v1", api_key_env: %[8]s, model: delegator, token_ids: true, max_retries: 8, price: %[2]s}
  solver: {kind: openai, base_url: "http://%[1]s/v1", api_key_env: %[8]s, model: solver, token_ids: %[10]v, max_retries: 8, price: %[3]s}
roles: {default: delegator, subagent: solver, weak: solver}
strategy:
  max_turns: %[4]d
  strict_tool_calls: %[9]v
  single: {temperature: 0, max_tokens: %[5]d}
  strong: {temperature: 0, max_tokens: %[6]d}
  weak: {temperature: 0, max_tokens: %[7]d}
`, serveAddr, dp, sp, t.cfg.MaxTurns, capped(sc.Single), capped(sc.Strong), capped(sc.Weak), serveKeyEnv, t.cfg.StrictToolCalls, solverTrained)
	for name, doc := range map[string]string{procsServeFile: serve, procsEnvFile: env} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			return fmt.Errorf("train --processes: %w", err)
		}
	}
	return nil
}

// children are the processes of the topology: the API, the policy
// server, the trainer and the environments. secrets holds the API's token
// and the policy server's key, which every child gets in its environment:
// a page in a browser, or another user's process, cannot reach either
// server without them.
func (t *topology) children(dir, apiAddr, serveAddr string, secrets []string) []child {
	url := "http://" + apiAddr
	c := t.cfg
	// Batches of a step's items: the solver's samples make groups vary
	// in size, and a repaired tool call adds a sequence.
	trainer := append([]string{"train", "--api", url, "--out", filepath.Join(dir, procsTrainerDir), "--batch-items",
		"--steps", strconv.Itoa(c.RL.Steps), "--items", strconv.Itoa(c.RL.ItemsPerStep), "--group", strconv.Itoa(c.RL.GroupSize)},
		t.trainerFlags...)
	out := []child{
		{name: "api", args: []string{"api", "--addr", apiAddr, "--data", filepath.Join(dir, procsAPIDir)}, env: secrets},
		{name: "serve", args: []string{"serve", "--config", filepath.Join(dir, procsServeFile), "--addr", serveAddr,
			// Every environment's rollouts at once, as the in-process loop
			// runs a step's: batched by the models' engines.
			"--max-concurrent", "128", "--max-queue", "256"}, env: secrets},
		{name: "trainer", args: trainer, env: secrets, finishes: true},
	}
	// Enough items for every step from any one environment; the pacing
	// of the API (its queue) keeps them from running far ahead.
	items := c.RL.Steps * c.RL.ItemsPerStep
	conc := max(c.RL.Concurrency/t.envs, c.RL.GroupSize)
	for i := 1; i <= t.envs; i++ {
		pace := []string{
			// At most --offpolicy batches ahead of the trainer.
			"--push-offpolicy", strconv.Itoa(t.offPolicy)}
		if t.offPolicy == 0 {
			// On-policy: environment i samples its share of each step's
			// items, all at once, with the policy of the trainer's last
			// step, as the in-process loop samples.
			share := c.RL.ItemsPerStep / t.envs
			if i <= c.RL.ItemsPerStep%t.envs {
				share++
			}
			pace = []string{"--push-sync", strconv.Itoa(share), "--push-sync-policy", "http://" + serveAddr}
			conc = share * c.RL.GroupSize
		}
		args := []string{"process", "--config", filepath.Join(dir, procsEnvFile), "--dataset", datasetWorld,
			"--level", strconv.Itoa(t.level), "--distractors", strconv.Itoa(c.World.Distractors),
			// The in-process run's items and rollout seeds: its training
			// pool and item order, environment i taking its part of each
			// step's items (as the on-policy pacing starts them).
			"-n", strconv.Itoa(items), "--seed", strconv.FormatUint(c.Seed, 10),
			"--train-pool", strconv.Itoa(c.TrainProblems), "--train-seed", strconv.FormatUint(c.RLSeed(), 10), "--step-items", strconv.Itoa(c.RL.ItemsPerStep),
			"--step-share", fmt.Sprintf("%d/%d", i, t.envs), "-g", strconv.Itoa(c.RL.GroupSize),
			"--concurrency", strconv.Itoa(conc), "--strategy", "route", "--temperature", strconv.FormatFloat(c.RL.Temperature, 'g', -1, 64),
			// The world's reward reads the reference answer: no baseline
			// call before each item's rollouts. The groups carry what the
			// trainer needs; artifacts.jsonl keeps the extracted fields.
			"--keep-ties", "--no-baseline", "--omit-traces", "--reward", rewardWorld, "--advantage", string(c.RL.Estimator), "--progress", "none",
			"--out", filepath.Join(dir, procsEnvDir(i)), "--push", url, "--push-name", fmt.Sprintf("env-%d", i)}
		args = append(args, pace...)
		switch c.Train {
		case train.TrainBoth:
			// The delegator's turns and the solver's answers, each a sample.
			args = append(args, "--train-roles", strategy.RoleStrong+","+strategy.RoleWeak)
		case train.TrainSolver:
			// The solver's answers alone. An item whose rollouts never call
			// it gives an empty group, which keeps its step's batch whole.
			args = append(args, "--train-roles", strategy.RoleWeak)
		}
		if t.otlp != "" {
			args = append(args, "--otlp", t.otlp)
		}
		if t.lambda != nil {
			args = append(args, "--lambda", strconv.FormatFloat(*t.lambda, 'g', -1, 64))
		}
		out = append(out, child{name: fmt.Sprintf("env %d", i), args: args, env: secrets, finishes: true})
	}
	return out
}

// run starts the topology under dir and supervises it. It returns nil once
// the trainer has taken its steps. It stops early when ctx ends or a child
// dies more often than the supervisor restarts it. Every child is stopped
// before it returns, in the order that lets each leave cleanly: the
// environments (which tell the API they go), then the trainer, then the
// server and the API.
func (t *topology) run(ctx context.Context, dir string) error {
	children, apiAddr, serveAddr, err := t.prepare(dir)
	if err != nil {
		return err
	}
	const api, serve, trainer = 0, 1, 2 // children's first three; the environments follow

	// One context per stage of the stop, each ended only by the stop.
	base := context.WithoutCancel(ctx)
	infraCtx, stopInfra := context.WithCancel(base)
	trainerCtx, stopTrainer := context.WithCancel(base)
	envCtx, stopEnvs := context.WithCancel(base)
	defer stopInfra()
	defer stopTrainer()
	defer stopEnvs()
	stop := make(chan struct{})
	requestStop := sync.OnceFunc(func() { close(stop) })

	errs := make([]error, len(children))
	var infraWG, trainerWG, envWG sync.WaitGroup
	start := func(i int, wg *sync.WaitGroup, cctx context.Context) {
		wg.Go(func() {
			errs[i] = t.sup.run(cctx, children[i])
			switch {
			case errs[i] != nil && cctx.Err() == nil:
				t.sup.printf("giving up: %v; stopping every process", errs[i])
				requestStop()
			case errs[i] == nil && i == trainer:
				t.sup.printf("the trainer took its %d steps; stopping every process", t.cfg.RL.Steps)
				requestStop()
			}
		})
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			t.sup.printf("interrupted; stopping every process")
		case <-stop:
		}
		stopEnvs()
		envWG.Wait()
		stopTrainer()
		trainerWG.Wait()
		stopInfra()
		infraWG.Wait()
	}()
	// The API and the server first, so that the others find them up.
	start(api, &infraWG, infraCtx)
	start(serve, &infraWG, infraCtx)
	werr := waitHTTP(trainerCtx, "http://"+apiAddr+"/status", "api")
	if werr == nil {
		werr = waitHTTP(trainerCtx, "http://"+serveAddr+"/health", "serve")
	}
	if werr == nil && ctx.Err() == nil {
		start(trainer, &trainerWG, trainerCtx)
		for i := trainer + 1; i < len(children); i++ {
			start(i, &envWG, envCtx)
		}
	} else {
		requestStop()
	}
	<-stopped
	return outcome(dir, children, errs, errs[trainer], werr)
}

// prepare lays out dir and picks the servers' addresses, and returns the
// children to start with their secrets.
func (t *topology) prepare(dir string) (children []child, apiAddr, serveAddr string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", "", fmt.Errorf("train --processes: %w", err)
	}
	if apiAddr, err = freeLoopback(); err != nil {
		return nil, "", "", err
	}
	if serveAddr, err = freeLoopback(); err != nil {
		return nil, "", "", err
	}
	if err := t.writeConfigs(dir, serveAddr); err != nil {
		return nil, "", "", err
	}
	secrets := []string{apiTokenEnv + "=" + randomSecret(), serveKeyEnv + "=" + randomSecret()}
	return t.children(dir, apiAddr, serveAddr, secrets), apiAddr, serveAddr, nil
}

// outcome is the error of a stopped topology, or nil when the trainer
// took its steps. It is a failed child's error, the wait for the servers',
// or an interruption before the trainer finished (trainerErr or waitErr
// set).
func outcome(dir string, children []child, errs []error, trainerErr, waitErr error) error {
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("train --processes: %s: %w", children[i].name, err)
		}
	}
	if waitErr != nil && !errors.Is(waitErr, context.Canceled) {
		return fmt.Errorf("train --processes: %w", waitErr)
	}
	if trainerErr != nil || waitErr != nil {
		// Interrupted before the trainer had finished.
		return fmt.Errorf("train --processes: interrupted; run the same command again to resume from %s: %w", dir, context.Canceled)
	}
	return nil
}

// randomSecret returns 128 random bits in hex: a token or key of a run.
func randomSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on a broken system source)
	return hex.EncodeToString(b[:])
}

// freeLoopback returns a loopback address whose port is free now.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("train --processes: a free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("train --processes: a free loopback port: %w", err)
	}
	return addr, nil
}

// waitHTTP polls url until it answers (any status), for 2 minutes.
func waitHTTP(ctx context.Context, url, what string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within 2 minutes: %w", what, url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runTrainProcesses is train --processes: the topology until the trainer
// is done, then the table of train.Run's evaluation for its checkpoint.
func runTrainProcesses(ctx context.Context, out, progress io.Writer, mode string, log *slog.Logger, t *topology) error {
	start := time.Now()
	dir := t.cfg.OutDir
	fmt.Fprintf(out, "train --processes: the API, a policy server, %d environments and a trainer as child processes of %s, under %s; the table's baselines evaluated meanwhile\n", t.envs, t.exe, dir)
	// The table's baselines (the fixed rules, the policies that are not
	// trained) do not depend on the trained policy: this process, which
	// would only wait for the children, evaluates them while they train,
	// as the in-process run evaluates them before it trains. Evaluate
	// below finds them done.
	bctx, stopBaselines := context.WithCancel(ctx)
	defer stopBaselines()
	baselines := make(chan error, 1)
	go func() { baselines <- train.EvaluateBaselines(bctx, t.cfg, train.Options{Log: log}) }()
	if err := t.run(ctx, dir); err != nil {
		stopBaselines()
		<-baselines // cancelled: what it finished is kept, and resumed
		return err
	}
	trainedAt := time.Since(start)
	if err := <-baselines; err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted; run the same command again to resume from %s: %w", dir, err)
		}
		return fmt.Errorf("train --processes: the table's baselines: %w", err)
	}
	if wait := time.Since(start) - trainedAt; wait >= time.Second {
		fmt.Fprintf(out, "\nthe table's baselines took %s after the trainer's last step\n", wait.Round(100*time.Millisecond))
	}
	trainerDir := filepath.Join(dir, procsTrainerDir)
	// The lead trainer's metrics: the solver's when it alone is trained.
	leadDir := trainerDir
	if t.cfg.Train == train.TrainSolver {
		leadDir = filepath.Join(trainerDir, train.SolverDir)
	}
	ms, err := readTrainerMetrics(leadDir)
	if err != nil {
		return err
	}
	trained := train.Result{StoppedBy: "steps", Checkpoint: filepath.Join(rl.CheckpointDir(trainerDir), "policy")}
	if t.cfg.Train != train.TrainDelegator {
		trained.SolverCheckpoint = filepath.Join(rl.CheckpointDir(filepath.Join(trainerDir, train.SolverDir)), "policy")
	}
	for _, m := range ms {
		trained.Steps = max(trained.Steps, m.Step)
		trained.TrainSeconds += m.RolloutSeconds + m.UpdateSeconds
	}
	fmt.Fprintf(out, "\n%d RL steps by the trainer in %s; evaluating its policy as delegate train does\n", trained.Steps, trainedAt.Round(time.Second))

	trainCh := make(chan rl.Progress)
	close(trainCh)
	evalCh := make(chan bench.Progress, 256)
	phases := make(chan string, 8)
	bars := newTrainProgress(progress, mode, t.cfg.RL.Steps)
	var wg sync.WaitGroup
	wg.Go(func() { bars.observe(trainCh, evalCh, phases) })
	res, err := train.Evaluate(ctx, t.cfg, trained, train.Options{
		EvalProgress: evalCh,
		Phase:        bars.phaseFunc(phases),
		Log:          log,
	})
	close(evalCh)
	close(phases)
	wg.Wait()
	bars.finish()
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted; run the same command again to resume from %s: %w", dir, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d RL steps (%.0f s of the trainer's waits and updates); trained policy in %s; %s in all\n\n",
		res.Steps, res.TrainSeconds, res.Checkpoint, time.Since(start).Round(time.Second))
	if err := res.Table.WriteMarkdown(out); err != nil {
		return err
	}
	written := []string{filepath.Join(trainerDir, rl.MetricsFile), filepath.Join(dir, train.EvalFile), filepath.Join(dir, train.TableFile), res.Checkpoint}
	if res.SolverCheckpoint != "" {
		written = append(written, res.SolverCheckpoint)
	}
	fmt.Fprintf(out, "\nwritten: %s\n", strings.Join(written, ", "))
	return nil
}

// readTrainerMetrics reads the metrics log of a trainer's --out.
func readTrainerMetrics(dir string) ([]rl.Metrics, error) {
	f, err := os.Open(filepath.Join(dir, rl.MetricsFile))
	if err != nil {
		return nil, fmt.Errorf("train --processes: the trainer's metrics: %w", err)
	}
	defer f.Close()
	ms, err := rl.ReadMetrics(f)
	if err != nil {
		return nil, fmt.Errorf("train --processes: the trainer's metrics: %w", err)
	}
	return ms, nil
}

// newSupervisor is the supervisor of train --processes, running exe and
// writing to out.
func newSupervisor(exe string, out io.Writer) *supervisor {
	return &supervisor{exe: exe, out: out, grace: 10 * time.Second, maxRestarts: 5, backoff: 500 * time.Millisecond, maxBackoff: 8 * time.Second}
}
