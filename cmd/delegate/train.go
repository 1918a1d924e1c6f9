package main

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/delegatelab/delegate/api"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/world"
)

// trainFlags are the flags of delegate train that are not fields set in
// place on the run's config.
type trainFlags struct {
	estimator   string
	lr          float64
	quiet       bool
	total       time.Duration
	level       int
	distractors int
	api         string
	processes   int
}

func newTrainCmd(getenv env, log *slog.Logger) *cobra.Command {
	cfg := train.DefaultConfig()
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train [flags]",
		Short: "Train the delegator with GRPO (or a leader with MLPO) and compare it before and after",
		Long: `Train starts from the pretrained checkpoints (by default the shipped
solver and delegator, embedded in the binary), chooses the best fixed
per-position rule on training problems, evaluates the baselines (the
delegator alone, every fixed rule, the oracle router, the pretrained
delegator) on held-out problems of --split, trains the delegator with GRPO
under route (the delegator has the delegate tool, the solver answers) for
--steps steps or until only the time the final evaluation needs is left of
--time (9m30s), whichever comes first, then evaluates the trained delegator
and random delegation at its rate, and prints the table with paired
acceptance checks.

Everything goes to --out: metrics.jsonl (one line per step), the plots
reward, accuracy, delegator_tokens, delegation_rate and delegation_by_kind
(each .png and .svg), checkpoint/ (the trained policy under
checkpoint/policy), rules.jsonl (the fixed rules on training problems),
eval.jsonl (every item of every arm) and table.md. Run it again with the same --out to resume
an interrupted run: finished items are kept, training goes on from its last
checkpoint, with a new --time (and what is left of --train-time).

--mode mlpo trains a leader under lead with frozen peers that solve with
scratch work (--peers, default shipped:peer,shipped:delegator, taken in
turn) on the items most peers do not already solve, and compares it with
its team, alone, each peer model alone, and the peers' majority vote and
its own at the team's cost. Its defaults differ: the MLPO recipe
(--estimator drgrpo, --lambda 0, --mu 0: Dr. GRPO on the correctness of the
leader's answer), --level 2 --distractors 4 (the leader alone is at its
ceiling on plain level-2 problems), --train-problems 256 (the filter samples the peers
on every one) and --eval-items 300.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Mode == train.ModeMLPO {
				for _, d := range mlpoDefaults {
					if !cmd.Flags().Changed(d.flag) {
						if err := cmd.Flags().Set(d.flag, d.value); err != nil {
							return fmt.Errorf("train: mlpo default --%s %s: %w", d.flag, d.value, err) // constant table; tested
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
			if f.total > 0 {
				cfg.Deadline = time.Now().Add(f.total)
			}
			if f.processes == 0 && cmd.Flags().Changed("offpolicy") {
				return errors.New("train: --offpolicy goes with --processes")
			}
			if f.processes != 0 {
				t, err := newTopology(cmd.Flags(), cfg, f.processes, f.level, cfg.Reward.Lambda)
				if err != nil {
					return err
				}
				t.sup = newSupervisor(t.exe, cmd.OutOrStdout())
				var progress io.Writer = cmd.ErrOrStderr()
				if f.quiet {
					progress = nil
				}
				return runTrainProcesses(cmd.Context(), cmd.OutOrStdout(), progress, log, t)
			}
			if f.api != "" {
				return runTrainAPI(cmd.Context(), cmd.OutOrStdout(), cfg, f.api, getenv("DELEGATE_API_TOKEN"))
			}
			var progress io.Writer = cmd.ErrOrStderr()
			if f.quiet {
				progress = nil
			}
			return runTrain(cmd.Context(), cmd.OutOrStdout(), progress, log, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Mode, "mode", cfg.Mode, "route (GRPO on the delegator under route) or mlpo (a leader under lead)")
	fl.StringVar(&cfg.Solver, "solver", cfg.Solver, "solver checkpoint directory (frozen; default: the shipped solver, embedded)")
	fl.StringVar(&cfg.Delegator, "delegator", cfg.Delegator, "delegator checkpoint directory (the policy's start; default: the shipped delegator, embedded)")
	fl.StringSliceVar(&cfg.Peers, "peers", cfg.Peers, "mlpo: the peers' checkpoints, directories or shipped:NAME, taken in turn (default: shipped:peer,shipped:delegator)")
	fl.IntVar(&cfg.PeerCount, "peer-count", cfg.PeerCount, "mlpo: peers of the leader (K)")
	fl.Float64Var(&cfg.FilterMaxRate, "filter-max-rate", cfg.FilterMaxRate, "mlpo: train only on items the peers solve less than this share of the time, in (0, 1]")
	fl.StringVarP(&cfg.OutDir, "out", "o", cfg.OutDir, "output directory; an existing run there is resumed")
	fl.DurationVar(&f.total, "time", 570*time.Second, "wall-time budget of this invocation, table included: training stops early enough to leave time for the final evaluation; 0: none")
	fl.DurationVar(&cfg.TrainTime, "train-time", cfg.TrainTime, "training time budget (rollouts and updates, summed over resumed invocations); 0: none")
	fl.IntVar(&cfg.RL.Steps, "steps", cfg.RL.Steps, "most RL steps")
	fl.StringVar(&f.estimator, "estimator", string(cfg.RL.Estimator), "advantages: grpo, drgrpo or rloo (mlpo default drgrpo)")
	fl.Float64Var(&f.lr, "lr", cfg.RL.Schedule.MaxLR, "learning rate (constant after warmup)")
	fl.Float64Var(&cfg.RL.ClipEps, "clip", cfg.RL.ClipEps, "PPO clip range ε of the importance ratio")
	fl.Float64Var(&cfg.RL.KLBeta, "kl", cfg.RL.KLBeta, "weight of the KL penalty to the pretrained delegator (0: none)")
	fl.IntVar(&cfg.RL.Epochs, "epochs", cfg.RL.Epochs, "optimizer steps per batch of rollouts")
	fl.IntVar(&cfg.RL.GroupSize, "group", cfg.RL.GroupSize, "rollouts per item (G)")
	fl.IntVar(&cfg.RL.ItemsPerStep, "items", cfg.RL.ItemsPerStep, "items per step")
	fl.Float64Var(&cfg.RL.Temperature, "temperature", cfg.RL.Temperature, "sampling temperature of training rollouts")
	fl.IntVar(&cfg.RL.MaxNewTokens, "max-new-tokens", cfg.RL.MaxNewTokens, "cap on every model call's completion")
	fl.Float64Var(&cfg.Reward.Lambda, "lambda", cfg.Reward.Lambda, "reward cost per delegator token (λ) (mlpo default 0)")
	fl.Float64Var(&cfg.Reward.Mu, "mu", cfg.Reward.Mu, "reward cost per sub-agent call (μ) (mlpo default 0)")
	fl.IntVar(&cfg.TrainProblems, "train-problems", cfg.TrainProblems, "training problems (mlpo default 256)")
	fl.IntVar(&cfg.EvalItems, "eval-items", cfg.EvalItems, "held-out problems of the table (mlpo default 300)")
	fl.StringVar(&cfg.EvalSplit, "split", cfg.EvalSplit, "split of the table's items: validation while choosing settings, test for the reported table")
	fl.IntVar(&cfg.RuleItems, "rule-items", cfg.RuleItems, "training problems each fixed per-position rule runs on to choose the best")
	fl.IntVar(&cfg.CacheMinTokens, "cache-min-tokens", cfg.CacheMinTokens, "shortest shared prefix of a conversation priced as cached input (real APIs: 1024); 0: every shared prefix")
	fl.Float64Var(&cfg.EvalTemperature, "eval-temperature", cfg.EvalTemperature, "delegator temperature in the table (0: greedy)")
	fl.IntVar(&cfg.EvalConcurrency, "eval-concurrency", cfg.EvalConcurrency, "items in flight in the table")
	fl.IntVar(&f.level, "level", world.DefaultLevel, "world difficulty (world.Levels: 1 one product, 2 a product and an amount, 3 two parts, 4 the longest, 5 the default world; mlpo default 2)")
	fl.IntVar(&f.distractors, "distractors", 0, "most distractor sentences a problem gets, uniformly 0..N (default: the level's; mlpo default 4)")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the problems, the rollouts and the item order")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fl.IntVar(&f.processes, "processes", 0, "run the loop as child processes instead of in this one: the trajectory API, a policy server following the trainer's checkpoint, this many environments pushing route rollouts, and a trainer (train --api), each restarted if it dies; then the same table (0: in process)")
	fl.Int("offpolicy", 0, "with --processes: batches the environments may sample ahead of the trainer's updates (0: each batch is sampled by the policy of the trainer's last step, once it is loaded, as in process; 1 or more: sampling overlaps the updates and the older groups are trained off-policy, with truncated importance weights)")
	fl.StringVar(&f.api, "api", "", "train on the batches of the trajectory API at this URL (delegate api, or Atropos's) instead of running rollouts: an Atropos trainer; token from $DELEGATE_API_TOKEN")
	return cmd
}

// mlpoDefaults are the flags whose default differs under --mode mlpo, in
// the order they are applied.
var mlpoDefaults = []struct{ flag, value string }{
	{"estimator", "drgrpo"},
	{"lambda", "0"},
	{"mu", "0"},
	{"level", strconv.Itoa(world.MLPOLevel)},
	{"distractors", strconv.Itoa(world.MLPODistractors)},
	{"train-problems", "256"},
	{"eval-items", "300"},
}

// train runs the job, drawing progress bars on progress (nil: none), then
// writes the plots and prints the table on out.
func runTrain(ctx context.Context, out, progress io.Writer, log *slog.Logger, cfg train.Config) error {
	trainCh := make(chan rl.Progress, 64)
	evalCh := make(chan bench.Progress, 256)
	phases := make(chan string, 8)
	start := time.Now()
	bars := newTrainBars(ctx, progress, cfg.RL.Steps, isTerminal(progress), 0)
	var wg sync.WaitGroup
	wg.Go(func() { bars.observe(trainCh, evalCh, phases) })
	res, err := train.Run(ctx, cfg, train.Options{
		TrainProgress: trainCh,
		EvalProgress:  evalCh,
		Phase:         func(name string) { phases <- name },
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
	if err != nil {
		return err
	}
	plots, perr := writeTrainPlots(cfg.OutDir)
	if perr != nil {
		return perr
	}
	fmt.Fprintf(out, "\n%d RL steps (%s, %.0f s of training); trained policy in %s; %s in all\n\n",
		res.Steps, stopReason(res.StoppedBy), res.TrainSeconds, res.Checkpoint, time.Since(start).Round(time.Second))
	if err := res.Table.WriteMarkdown(out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nwritten: %s, %s, %s, %s",
		filepath.Join(cfg.OutDir, rl.MetricsFile), filepath.Join(cfg.OutDir, train.EvalFile), filepath.Join(cfg.OutDir, train.TableFile), res.Checkpoint)
	for _, p := range plots {
		fmt.Fprintf(out, ", %s", p)
	}
	fmt.Fprintln(out)
	return nil
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

// trainBars draws the progress of a run: on a terminal one bar per phase,
// elsewhere plain lines. With no output it only drains the events.
type trainBars struct {
	p       *mpb.Progress
	release func()    // gives the log back to stderr once the bars are done
	lines   io.Writer // set when not drawing bars
	steps   int

	mu    sync.Mutex
	last  *rl.Metrics // the last finished step
	rolls rl.Progress // the step in progress
	cur   *mpb.Bar
}

// newTrainBars draws bars on w when bars is set, else lines; width is the
// bars' line width (0: the terminal's).
func newTrainBars(ctx context.Context, w io.Writer, steps int, bars bool, width int) *trainBars {
	b := &trainBars{steps: steps}
	switch {
	case w == nil:
	case bars:
		opts := []mpb.ContainerOption{mpb.WithOutput(w), mpb.WithRefreshRate(250 * time.Millisecond), mpb.WithAutoRefresh()}
		if width > 0 {
			opts = append(opts, mpb.WithWidth(width))
		}
		b.p = mpb.NewWithContext(ctx, opts...)
		b.release = logs.above(b.p)
	default:
		b.lines = w
	}
	return b
}

// stepLine is the figures of a finished step.
func stepLine(m *rl.Metrics) string {
	return fmt.Sprintf("reward %.3f acc %.2f delegation %.2f tokens %.0f", m.Reward, m.Accuracy, m.DelegationRate, delegatorTokens(m))
}

// observe consumes events until every channel is closed.
func (b *trainBars) observe(steps <-chan rl.Progress, ev <-chan bench.Progress, phases <-chan string) {
	for steps != nil || ev != nil || phases != nil {
		// A phase that began is drawn before the events that follow it.
		select {
		case name, ok := <-phases:
			if !ok {
				phases = nil
				continue
			}
			b.phase(name)
			continue
		default:
		}
		select {
		case name, ok := <-phases:
			if !ok {
				phases = nil
				continue
			}
			b.phase(name)
		case pr, ok := <-steps:
			if !ok {
				steps = nil
				continue
			}
			b.trainEvent(pr)
		case pr, ok := <-ev:
			if !ok {
				ev = nil
				continue
			}
			b.evalEvent(pr)
		}
	}
}

func (b *trainBars) phase(name string) {
	if b.lines != nil {
		fmt.Fprintf(b.lines, "== %s\n", name)
	}
	if b.p == nil {
		return
	}
	// mpb is called without b.mu held: the bar's decorators take b.mu
	// while mpb draws, so holding it here could wait on each other.
	b.mu.Lock()
	old := b.cur
	b.cur = nil
	b.mu.Unlock()
	if old != nil {
		old.Abort(false)
	}
	total := int64(1)
	if name == "train" {
		total = int64(b.steps)
	}
	figures := decor.Any(func(decor.Statistics) string {
		if name != "train" {
			return ""
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		roll := ""
		if b.rolls.Rollouts > 0 {
			roll = fmt.Sprintf("  rollouts %d/%d", b.rolls.RolloutsDone, b.rolls.Rollouts)
		}
		if b.last == nil {
			return "first step" + roll
		}
		return stepLine(b.last) + roll
	}, decor.WCSyncSpaceR)
	// The figures come before the bar, so that a narrow terminal cuts
	// the bar rather than them.
	bar := b.p.AddBar(total,
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpaceR), figures),
		mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_MMSS)))
	b.mu.Lock()
	b.cur = bar
	b.mu.Unlock()
}

func (b *trainBars) trainEvent(pr rl.Progress) {
	if pr.Metrics == nil {
		b.mu.Lock()
		b.rolls = pr
		b.mu.Unlock()
		return
	}
	if b.lines != nil {
		fmt.Fprintf(b.lines, "step %d/%d  %s  (%.1f s)\n", pr.Step, pr.Steps, stepLine(pr.Metrics), pr.Metrics.RolloutSeconds+pr.Metrics.UpdateSeconds)
	}
	b.mu.Lock()
	b.last = pr.Metrics
	b.rolls = rl.Progress{}
	cur := b.cur
	b.mu.Unlock()
	if cur != nil {
		cur.SetCurrent(int64(pr.Step))
	}
}

func (b *trainBars) evalEvent(pr bench.Progress) {
	b.mu.Lock()
	cur := b.cur
	b.mu.Unlock()
	if cur != nil {
		cur.SetTotal(int64(pr.Total), false)
		cur.SetCurrent(int64(pr.Done))
	}
}

// finish completes the last bar and waits for the drawing to end.
func (b *trainBars) finish() {
	if b.p == nil {
		return
	}
	b.mu.Lock()
	cur := b.cur
	b.mu.Unlock()
	if cur != nil {
		cur.Abort(false)
	}
	b.p.Wait()
	b.release()
}

// delegatorTokens is the delegator's generated tokens per rollout.
func delegatorTokens(m *rl.Metrics) float64 {
	if v, ok := m.Scalars["delegator_tokens"]; ok {
		return v
	}
	return m.PolicyTokensMean
}

// trainPlots are the plots of a run's metrics: file name without its
// extension (each is written as PNG and SVG), y label, value.
var trainPlots = []struct {
	file, label string
	value       func(*rl.Metrics) float64
}{
	{"reward", "mean reward", func(m *rl.Metrics) float64 { return m.Reward }},
	{"accuracy", "accuracy", func(m *rl.Metrics) float64 { return m.Accuracy }},
	{"delegator_tokens", "delegator tokens per rollout", delegatorTokens},
	{"delegation_rate", "delegation rate", func(m *rl.Metrics) float64 { return m.DelegationRate }},
}

// smoothWindow is the number of steps the plots' moving mean spans.
const smoothWindow = 20

// movingMean returns, at each point, the mean of the values of the last
// window points up to it (fewer at the start).
func movingMean(xys plotter.XYs, window int) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	var sum float64
	for i, p := range xys {
		sum += p.Y
		if i >= window {
			sum -= xys[i-window].Y
		}
		out[i] = plotter.XY{X: p.X, Y: sum / float64(min(i+1, window))}
	}
	return out
}

// writeTrainPlots draws every trainPlots figure over the steps of dir's
// metrics log and returns the files written.
func writeTrainPlots(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, rl.MetricsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("train: plots: %w", err)
	}
	ms, err := rl.ReadMetrics(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("train: plots: %w", err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	var files []string
	for _, tp := range trainPlots {
		p := plot.New()
		p.Title.Text = tp.label + " over RL steps"
		p.X.Label.Text = "step"
		p.Y.Label.Text = tp.label
		p.Add(plotter.NewGrid())
		var xys plotter.XYs
		for i := range ms {
			if v := tp.value(&ms[i]); !math.IsNaN(v) && !math.IsInf(v, 0) {
				xys = append(xys, plotter.XY{X: float64(ms[i].Step), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return files, fmt.Errorf("train: plot %s: %w", tp.file, err)
		}
		points.Radius = vg.Points(2)
		line.Color = color.Gray{Y: 150}
		points.Color = color.Gray{Y: 150}
		p.Add(line, points)
		p.Legend.Add("per step", line, points)
		if len(xys) >= 2*smoothWindow {
			avg, err := plotter.NewLine(movingMean(xys, smoothWindow))
			if err != nil {
				return files, fmt.Errorf("train: plot %s: %w", tp.file, err)
			}
			avg.Width = vg.Points(2)
			avg.Color = color.RGBA{R: 200, A: 255}
			p.Add(avg)
			p.Legend.Add(fmt.Sprintf("mean of the last %d steps", smoothWindow), avg)
		}
		base := filepath.Join(dir, tp.file)
		paths := []string{base + ".png", base + ".svg"}
		if err := bench.SavePlot(p, 6*vg.Inch, 3.8*vg.Inch, bench.LegendBelow, paths...); err != nil {
			return files, fmt.Errorf("train: %w", err)
		}
		files = append(files, paths...)
	}
	kinds, err := writeKindPlot(dir, ms)
	return append(files, kinds...), err
}

// writeKindPlot draws the delegation rate per kind of step over training
// (the moving mean of the rate's numerator and denominator): what the
// policy learned to hand over.
func writeKindPlot(dir string, ms []rl.Metrics) ([]string, error) {
	p := plot.New()
	p.Title.Text = "delegation rate per kind of step over RL steps"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "share of the steps delegated"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	kinds := []struct {
		op  world.Op
		col color.Color
	}{{world.Mul, color.RGBA{R: 200, A: 255}}, {world.Add, color.RGBA{B: 200, A: 255}}, {world.Sub, color.RGBA{G: 150, A: 255}}}
	drawn := 0
	for _, k := range kinds {
		var xys plotter.XYs
		var num, den float64
		for i := range ms {
			num += ms[i].Scalars[train.DelegatedMetric(k.op)]
			den += ms[i].Scalars[train.StepsMetric(k.op)]
			if i >= smoothWindow {
				num -= ms[i-smoothWindow].Scalars[train.DelegatedMetric(k.op)]
				den -= ms[i-smoothWindow].Scalars[train.StepsMetric(k.op)]
			}
			if den > 1e-9 {
				xys = append(xys, plotter.XY{X: float64(ms[i].Step), Y: num / den})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("train: plot delegation by kind: %w", err)
		}
		line.Width, line.Color = vg.Points(2), k.col
		p.Add(line)
		p.Legend.Add(map[world.Op]string{world.Mul: "products", world.Add: "sums", world.Sub: "differences"}[k.op], line)
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	p.Legend.Add(fmt.Sprintf("(rates over the last %d steps)", smoothWindow))
	base := filepath.Join(dir, "delegation_by_kind")
	paths := []string{base + ".png", base + ".svg"}
	if err := bench.SavePlot(p, 6*vg.Inch, 3.8*vg.Inch, bench.LegendBelow, paths...); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return paths, nil
}

// runTrainAPI trains on a trajectory API's batches, printing a line per
// step; the environments (process --push) make the rollouts.
func runTrainAPI(ctx context.Context, out io.Writer, cfg train.Config, url, token string) error {
	client := &api.TrainerClient{Client: api.Client{URL: url, Token: token}, Poll: 20 * time.Millisecond}
	progress := make(chan rl.Progress, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range progress {
			if m := p.Metrics; m != nil {
				fmt.Fprintf(out, "step %d/%d: %d groups, %d sequences, mean score %.4f, %d tokens trained, loss %.4f, waited %.1fs for the batch",
					m.Step, m.Steps, m.Groups, m.Rollouts, m.Reward, m.TrainedTokens, m.Loss, m.RolloutSeconds)
				if m.OffPolicySequences > 0 {
					fmt.Fprintf(out, "; %d off-policy sequences, staleness mean %.1f max %d (%d groups unknown), importance weights %.3f [%.3f, %.3f], %.1f%% truncated",
						m.OffPolicySequences, m.StalenessMean, m.StalenessMax, m.UnknownVersion, m.ISWeightMean, m.ISWeightMin, m.ISWeightMax, 100*m.ISTruncFrac)
				}
				fmt.Fprintln(out)
			}
		}
	}()
	fmt.Fprintf(out, "train: pulling batches of %d sequences from %s; checkpoints in %s\n",
		cfg.RL.ItemsPerStep*cfg.RL.GroupSize, url, rl.CheckpointDir(cfg.OutDir))
	err := train.FromAPI(ctx, cfg, client, progress)
	close(progress)
	<-done
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w; run the same command again to resume", err)
	}
	return err
}
