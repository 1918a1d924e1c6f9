// Command gatewaytrain trains the shipped router from an unmodified
// JavaScript agent through `delegate gateway`, and measures the held-out
// reward before and after. It runs `delegate api`, `delegate train --api`
// and `delegate gateway --push` as child processes, the gateway's
// delegator following the trainer's checkpoint, and the Agents SDK app
// (examples/agents-js/agents.mjs) on world training problems for the
// trainer's steps. Before and after, the app solves the same validation
// problems greedily through a gateway on the shipped and on the trained
// router. A paired bootstrap and McNemar's test compare the two, and
// delegate train's route table evaluates the trained checkpoint on the
// same items in process. With -reward world the gateways reward each
// session as delegate train rewards a rollout: correctness less the
// delegator's tokens and the solver calls.
//
// Usage: go run ./perf/gatewaytrain -bin ./delegate (docs/gateway.md)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
)

const token = "perf-gatewaytrain-token"

type flags struct {
	bin, node, agents, out string
	reward                 string // the gateways' --reward; "" for 1 or 0
	steps, items, group    int
	evalItems, workers     int
	lr, temperature        float64
	seed                   uint64
	table                  bool
}

func main() {
	var f flags
	flag.StringVar(&f.bin, "bin", "./delegate", "the delegate binary")
	flag.StringVar(&f.node, "node", "node", "the Node.js command")
	flag.StringVar(&f.agents, "agents", "examples/agents-js", "the folder of agents.mjs, its packages installed (npm ci)")
	flag.StringVar(&f.out, "out", "", "output directory (default a new temporary one, removed at the end)")
	flag.IntVar(&f.steps, "steps", 12, "trainer steps")
	flag.IntVar(&f.items, "items", 2, "training problems per step")
	flag.IntVar(&f.group, "group", 8, "sessions per training problem")
	flag.IntVar(&f.evalItems, "eval-items", 60, "validation problems evaluated before and after")
	flag.IntVar(&f.workers, "workers", 8, "agent runs at once while evaluating")
	flag.Float64Var(&f.lr, "lr", 3e-4, "the trainer's learning rate (delegate train's default is 1e-4, for 200 steps)")
	flag.Float64Var(&f.temperature, "temperature", 1, "the gateway's sampling temperature of the delegator while training")
	flag.Uint64Var(&f.seed, "seed", 1, "seed of the problems")
	flag.BoolVar(&f.table, "table", true, "also evaluate the trained checkpoint with delegate train's route table, in process")
	flag.StringVar(&f.reward, "reward", "", "the gateways' reward of verified sessions (delegate gateway --reward): world is delegate train's, correctness less the delegator's generated tokens and the solver calls; \"\" gives 1 if right, 0 if wrong")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "perf/gatewaytrain:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	var err error
	if f.bin, err = filepath.Abs(f.bin); err != nil {
		return err
	}
	if f.agents, err = filepath.Abs(f.agents); err != nil {
		return err
	}
	root, err := filepath.Abs(filepath.Join(f.agents, "..", ".."))
	if err != nil {
		return err
	}
	dir := f.out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gatewaytrain"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	trainerDir := filepath.Join(dir, "trainer")
	trained := filepath.Join(rl.CheckpointDir(trainerDir), "policy")
	configs := map[string]string{
		"before": routerConfig(root, filepath.Join(root, "models", "router"), ""),
		"train":  routerConfig(root, filepath.Join(root, "models", "router"), rl.CheckpointDir(trainerDir)),
		"after":  routerConfig(root, trained, ""),
	}
	for name, doc := range configs {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	evalSet, err := world.Generate(world.DefaultConfig(), f.seed, world.Validation, f.evalItems)
	if err != nil {
		return err
	}
	trainSet, err := world.Generate(world.DefaultConfig(), f.seed, world.Train, f.steps*f.items)
	if err != nil {
		return err
	}
	fmt.Printf("machine: load average %s\n", loadavg())
	fmt.Printf("run: %d steps of %d training problems × %d sessions at temperature %g, lr %g; %d validation problems greedily before and after\n",
		f.steps, f.items, f.group, f.temperature, f.lr, f.evalItems)

	start := time.Now()
	before, err := evaluate(ctx, f, filepath.Join(dir, "before.yaml"), filepath.Join(dir, "eval-before"), evalSet)
	if err != nil {
		return fmt.Errorf("evaluate the shipped router: %w", err)
	}
	fmt.Printf("before: %s (%s)\n", before.summary(), time.Since(start).Round(time.Second))

	t0 := time.Now()
	if err := trainLoop(ctx, f, dir, trainerDir, trainSet); err != nil {
		return err
	}
	fmt.Printf("training: %s\n", time.Since(t0).Round(time.Second))

	t1 := time.Now()
	after, err := evaluate(ctx, f, filepath.Join(dir, "after.yaml"), filepath.Join(dir, "eval-after"), evalSet)
	if err != nil {
		return fmt.Errorf("evaluate the trained router: %w", err)
	}
	fmt.Printf("after: %s (%s)\n", after.summary(), time.Since(t1).Round(time.Second))
	paired(before, after)
	fmt.Printf("total: %s; load average %s\n", time.Since(start).Round(time.Second), loadavg())

	if f.table {
		t2 := time.Now()
		if err := routeTable(ctx, f, trained, filepath.Join(dir, "table")); err != nil {
			return fmt.Errorf("route table: %w", err)
		}
		fmt.Printf("route table: %s\n", time.Since(t2).Round(time.Second))
	}
	return nil
}

// routerConfig is examples/world.yaml's models with the delegator from
// checkpoint, following follow when set.
func routerConfig(root, checkpoint, follow string) string {
	extra := ""
	if follow != "" {
		extra = fmt.Sprintf("    follow: %q\n    follow_every: 100ms\n", follow)
	}
	return fmt.Sprintf(`preset: world
models:
  delegator:
    kind: local
    checkpoint: %q
%s    system_prompt: Solve or delegate.
    price: {input: 1.00, cached_input: 0.10, output: 5.00}
  solver:
    kind: local
    checkpoint: %q
    system_prompt: Compute.
    price: {input: 0.20, cached_input: 0.02, output: 1.00}
roles: {default: delegator, subagent: solver, weak: solver}
`, checkpoint, extra, filepath.Join(root, "models", "solver"))
}

// outcome is one agent run's session: right or not, its reward, and
// whether the model failed the run (agents.mjs said "failed").
type outcome struct {
	right, failed bool
	reward        float64
}

type outcomes []outcome

func (o outcomes) summary() string {
	right, failed, sum := 0, 0, 0.0
	for _, x := range o {
		if x.right {
			right++
		}
		if x.failed {
			failed++
		}
		sum += x.reward
	}
	return fmt.Sprintf("%d of %d right (reward %.3f), %d runs failed by the model", right, len(o), sum/float64(len(o)), failed)
}

// evaluate runs the app once per problem through a gateway on config,
// the agent's own temperature (0) kept, f.workers at once.
func evaluate(ctx context.Context, f flags, config, out string, problems []*world.Problem) (outcomes, error) {
	gw, err := start(ctx, f.bin, `gateway on (http://\S+):`, []string{gatewayTokenEnv + "=" + token},
		append([]string{"gateway", "--addr", "127.0.0.1:0", "--config", config, "--out", out, "--group", "2", "--train", "delegator"}, f.rewardArgs()...)...)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	if _, err := f.rewardLine(gw); err != nil {
		return nil, err
	}
	res := make(outcomes, len(problems))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.workers)
	for i, p := range problems {
		g.Go(func() error {
			o, err := solve(gctx, f, gw.url, p, "eval")
			res[i] = o
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return res, gw.stop()
}

// trainLoop runs the API, the trainer and a pushing gateway, and the app
// on each step's problems, group sessions each, until the trainer ends.
func trainLoop(ctx context.Context, f flags, dir, trainerDir string, problems []*world.Problem) error {
	api, err := start(ctx, f.bin, `(http://127\.0\.0\.1:\d+)`, nil, "api", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "api"))
	if err != nil {
		return err
	}
	defer api.stop()
	trainer, err := start(ctx, f.bin, `(train: pulling)`, nil, "train", "--api", api.url, "--out", trainerDir,
		"--steps", strconv.Itoa(f.steps), "--items", strconv.Itoa(f.items), "--group", strconv.Itoa(f.group),
		"--lr", strconv.FormatFloat(f.lr, 'g', -1, 64), "--progress", "none")
	if err != nil {
		return err
	}
	defer trainer.stop()
	gw, err := start(ctx, f.bin, `gateway on (http://\S+):`, []string{gatewayTokenEnv + "=" + token},
		append([]string{"gateway", "--addr", "127.0.0.1:0", "--config", filepath.Join(dir, "train.yaml"), "--out", filepath.Join(dir, "gateway"),
			"--group", strconv.Itoa(f.group), "--train", "delegator", "--temperature", strconv.FormatFloat(f.temperature, 'g', -1, 64),
			"--push", api.url, "--push-offpolicy", "1", "--push-wait", "5m"}, f.rewardArgs()...)...)
	if err != nil {
		return err
	}
	defer gw.stop()
	line, err := f.rewardLine(gw)
	if err != nil {
		return err
	}
	fmt.Println("training", line)
	for s := range f.steps {
		t := time.Now()
		batch := problems[s*f.items : (s+1)*f.items]
		res := make(outcomes, len(batch)*f.group)
		g, gctx := errgroup.WithContext(ctx)
		for i := range res {
			g.Go(func() error {
				o, err := solve(gctx, f, gw.url, batch[i%len(batch)], "")
				res[i] = o
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("training step %d: %w", s+1, err)
		}
		fmt.Printf("training step %d: %s (%s)\n", s+1, res.summary(), time.Since(t).Round(time.Second))
	}
	if err := trainer.wait(ctx); err != nil {
		return fmt.Errorf("train --api: %w\n%s", err, trainer.out.String())
	}
	for line := range strings.Lines(trainer.out.String()) {
		if strings.HasPrefix(line, "step ") {
			fmt.Print("trainer ", line)
		}
	}
	return errors.Join(gw.stop(), api.stop())
}

// solve runs agents.mjs on p in a new session of the gateway at base and
// ends the session with the world's verifier. A run the model failed
// gets reward 0; with -reward it is verified with no answer instead, so
// that it is wrong and pays its costs, as delegate train charges a failed
// rollout. group is the session's group key ("" for p's id).
func solve(ctx context.Context, f flags, base string, p *world.Problem, group string) (outcome, error) {
	body, err := json.Marshal(map[string]any{"task": p.Task(), "group": group})
	if err != nil {
		return outcome{}, err
	}
	var cr struct {
		SessionID string `json:"session_id"`
		BaseURL   string `json:"base_url"`
	}
	if err := (gateway.Admin{Base: base, Token: token}).Post(ctx, "/sessions", string(body), &cr); err != nil {
		return outcome{}, err
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	cmd := exec.CommandContext(actx, f.node, "agents.mjs", cr.BaseURL, p.Text)
	cmd.Dir = f.agents
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	cancel()
	var res struct {
		Failed string `json:"failed"`
	}
	if err != nil || json.Unmarshal(out, &res) != nil {
		return outcome{}, fmt.Errorf("agents.mjs on %s: %v: %s%s", p.ID, err, out, stderr.String())
	}
	verdict := `{}`
	switch {
	case res.Failed != "" && f.reward != "":
		verdict = `{"answer":""}`
	case res.Failed != "":
		verdict = `{"reward":0}`
	}
	var rr gateway.RewardResponse
	if err := (gateway.Admin{Base: base, Token: token}).Post(ctx, "/sessions/"+cr.SessionID+"/reward", verdict, &rr); err != nil {
		return outcome{}, err
	}
	return outcome{right: rr.Correct != nil && *rr.Correct, failed: res.Failed != "", reward: rr.Reward}, nil
}

// paired prints the paired comparison of the same problems before and
// after: the reward's difference with a paired bootstrap interval, and
// McNemar's test on the problems only one got right.
func paired(before, after outcomes) {
	n := len(before)
	r := func(o outcomes, i int) float64 { return o[i].reward }
	iv, ok := bench.PairedBootstrap(n, 10000, 1, func(idx []int) float64 {
		d := 0.0
		for _, i := range idx {
			d += r(after, i) - r(before, i)
		}
		return d / float64(len(idx))
	})
	gained, lost := 0, 0
	for i := range n {
		switch {
		case after[i].right && !before[i].right:
			gained++
		case before[i].right && !after[i].right:
			lost++
		}
	}
	diff := 0.0
	for i := range n {
		diff += r(after, i) - r(before, i)
	}
	diff /= float64(n)
	mc := bench.McNemarTest(lost, gained)
	fmt.Printf("paired: reward %+.3f", diff)
	if ok {
		fmt.Printf(" [95%% paired bootstrap %+.3f, %+.3f]", iv.Lo, iv.Hi)
	}
	fmt.Printf("; %d problems gained, %d lost, McNemar p = %.3g\n", gained, lost, mc.P)
}

// routeTable evaluates the checkpoint with delegate train's table on the
// same validation items, in process, and prints it.
func routeTable(ctx context.Context, f flags, checkpoint, out string) error {
	cfg := train.DefaultConfig()
	cfg.OutDir, cfg.Seed, cfg.EvalSplit, cfg.EvalItems = out, f.seed, world.Validation.String(), f.evalItems
	cfg.RuleItems = min(cfg.RuleItems, 50)
	cfg.RL.Steps, cfg.RL.GroupSize, cfg.RL.ItemsPerStep = f.steps, f.group, f.items
	res, err := train.Evaluate(ctx, cfg, train.Result{Checkpoint: checkpoint, Steps: f.steps, StoppedBy: "steps"}, train.Options{})
	if err != nil {
		return err
	}
	return res.Table.WriteMarkdown(os.Stdout)
}

// rewardArgs are the gateways' flags of f.reward.
func (f flags) rewardArgs() []string {
	if f.reward == "" {
		return nil
	}
	return []string{"--reward", f.reward}
}

// rewardLine is the gateway's line that names the reward of its verified
// sessions. It must name f.reward's, or 1 or 0 without it.
func (f flags) rewardLine(gw *child) (string, error) {
	want := "1 if right, 0 if wrong"
	if f.reward != "" {
		want = "the " + f.reward + " reward"
	}
	for line := range strings.Lines(gw.out.String()) {
		if rest, ok := strings.CutPrefix(line, "gateway: verified sessions get "); ok {
			if !strings.HasPrefix(rest, want) {
				return "", fmt.Errorf("the gateway rewards verified sessions with %q, want %s", strings.TrimSpace(rest), want)
			}
			return strings.TrimSpace(line), nil
		}
	}
	return "", fmt.Errorf("the gateway named no reward of its verified sessions:\n%s", gw.out.String())
}

// gatewayTokenEnv names the variable of the gateway's session token.
const gatewayTokenEnv = "DELEGATE_GATEWAY_TOKEN"

// child is a delegate child process.
type child struct {
	cmd  *exec.Cmd
	url  string
	out  *syncBuffer
	done chan error
	once sync.Once
	err  error
}

// start runs `bin args...` and waits for the first match of re in its
// output, whose first group is its URL.
func start(ctx context.Context, bin, re string, env []string, args ...string) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	found := make(chan string, 1)
	rx := regexp.MustCompile(re)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.out.Write([]byte(sc.Text() + "\n"))
			if m := rx.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		// Drain what the scanner could not take, so that the child never blocks.
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		c.done <- err
	}()
	select {
	case c.url = <-found:
		return c, nil
	case err := <-c.done:
		c.done <- err
		return nil, fmt.Errorf("%s exited before it was ready: %v\n%s", args[0], err, c.out.String())
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s was not ready in 3 minutes:\n%s", args[0], c.out.String())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

// wait waits for the child to exit by itself.
func (c *child) wait(ctx context.Context) error {
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop interrupts the child, once, and returns its exit error.
func (c *child) stop() error {
	c.once.Do(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Signal(syscall.SIGINT) // it may have exited already
		}
		select {
		case c.err = <-c.done:
		case <-time.After(time.Minute):
			_ = c.cmd.Process.Kill()
			c.err = fmt.Errorf("%s did not stop in a minute after SIGINT", c.cmd.Args[1])
		}
		if c.err != nil {
			c.err = fmt.Errorf("%s: %w\n%s", c.cmd.Args[1], c.err, c.out.String())
		}
	})
	return c.err
}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loadavg is the machine's load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
