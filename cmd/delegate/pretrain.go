package main

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/delegatelab/delegate/pretrain"
)

func newPretrainCmd(getenv env, log *slog.Logger) *cobra.Command {
	var (
		f        pretrain.Options
		progress string
	)
	cmd := &cobra.Command{
		Use:   "pretrain [flags]",
		Short: "Train the world's solver and delegator from scratch on generated transcripts",
		Long: `Pretrain trains the two local models of package world from scratch with
supervised learning (package pretrain) on transcripts generated from training
problems (the loss is on the assistant's tokens only), and writes each as a
checkpoint under --out: solver/ and delegator/. Everything is seeded by
--seed; with --steps the run is deterministic, with --time the number of
steps is fitted to the machine's speed. It shows progress (--progress: a bar
with the loss, the last held-out accuracy and an ETA on a terminal, a line
every 10 seconds elsewhere) and the held-out accuracy at intervals; after
training it grades the solver per operation and size, and the delegator
alone, under route with the solver (its natural delegation rate) and against
always-delegate. An interrupted run resumes from the state under
--out/<model>.state, removed when the model is done. The delegator's route
grading uses the solver found under --solver (default: --out/solver). --init
starts from a checkpoint's weights (with a fresh optimizer and schedule), for
a second phase of training.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProgress(progress); err != nil {
				return fmt.Errorf("pretrain: %w", err)
			}
			v := newPretrainView(cmd.OutOrStdout(), progress)
			f.Progress = v.step
			err := pretrain.Run(cmd.Context(), v.text(), f)
			v.finish(err == nil)
			if err != nil && cmd.Context().Err() != nil {
				return fmt.Errorf("%w; run the same command again to resume from the state under %s", err, f.Out)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Model, "model", "all", "which model: solver, delegator or all")
	fl.IntVar(&f.Steps, "steps", 0, "optimizer steps (0: the model's default, 5000 solver, 2400 delegator)")
	fl.DurationVar(&f.Time, "time", 0, "train each model for about this long instead of a number of steps")
	fl.StringVar(&f.Out, "out", "runs/pretrain", "directory the checkpoints are written under")
	fl.BoolVar(&f.Force, "force", false, "replace a trained checkpoint already under --out (models/ holds the shipped ones)")
	fl.Uint64Var(&f.Seed, "seed", 1, "seed of the data, the initial weights and the batch order")
	fl.IntVar(&f.Batch, "batch", 0, "sequences per step (0: the model's default)")
	fl.Float64Var(&f.LR, "lr", 0, "peak learning rate (0: the model's default)")
	fl.IntVar(&f.Eval, "eval", 40, "held-out items per evaluation: questions per size (solver), problems (delegator)")
	fl.IntVar(&f.EvalEvery, "eval-every", 500, "evaluate every so many steps (0: only at the end)")
	fl.StringVar(&f.Solver, "solver", "", "solver checkpoint for the delegator's route grading (default OUT/solver)")
	fl.StringVar(&f.Init, "init", "", "start from this checkpoint's weights instead of random ones (a second phase; one --model only)")
	fl.IntSliceVar(&f.Levels, "levels", nil, "delegator: train on 40000 problems of these world levels, split evenly, and grade on each (world.Levels, 1 easiest; default: levels 1 to 3 weighted to 3, graded on the default world)")
	fl.BoolVar(&f.WithPeers, "with-peers", false, "delegator: also train on lead's terse peer answers, so that it can be its own frozen peers under MLPO")
	fl.StringVar(&progress, "progress", progressAuto, "progress display: auto (a bar on a terminal, a line every 10 s otherwise), bar, plain or none")
	_ = getenv // pretrain reads no environment
	_ = log
	return cmd
}

// pretrainView shows the steps of a pretraining run under the modes of
// --progress: an mpb bar per model (steps, loss, last held-out score, ETA)
// with the run's own lines printed above it; a plain line every plainEvery,
// at every evaluation and at the last step; or nothing. Its step method is
// called on the training goroutine and never blocks on the terminal.
type pretrainView struct {
	out  io.Writer
	mode string

	p       *mpb.Progress
	release func() // gives the log back to stderr once the bars are done

	bar *mpb.Bar // the current model's bar

	mu       sync.Mutex        // guards what the bar's decorators read
	model    string            // the model being trained
	frozen   map[string]string // the last figures of the models done (a done bar shows no ETA)
	last     pretrain.Progress
	first    int       // the step before this run's first (a resumed run starts past 0)
	held     string    // the last evaluation, "" before one
	lastLine time.Time // plain: when the last line was printed
}

func newPretrainView(out io.Writer, mode string) *pretrainView {
	v := &pretrainView{out: out, mode: resolveProgress(mode, out), frozen: map[string]string{}}
	if v.mode == progressBar {
		opts := []mpb.ContainerOption{mpb.WithOutput(out), mpb.WithRefreshRate(200 * time.Millisecond), mpb.WithAutoRefresh()}
		if !isTerminal(out) {
			opts = append(opts, mpb.WithWidth(120)) // --progress bar into a file: no terminal to measure
		}
		v.p = mpb.New(opts...)
		v.release = logs.above(v.p)
	}
	return v
}

// text is where the run's own lines go: above the bars while they are
// drawn.
func (v *pretrainView) text() io.Writer {
	if v.p != nil {
		return v.p
	}
	return v.out
}

// eta extrapolates the steps this run made to those left.
func (v *pretrainView) eta() string {
	pr := v.last
	done := pr.Step - v.first
	left := pr.Steps - pr.Step
	switch {
	case left <= 0:
		return "0s"
	case done <= 0:
		return "?"
	}
	d := time.Duration(float64(pr.Elapsed) * float64(left) / float64(done))
	return d.Round(time.Second).String()
}

// figures are the step's numbers after the bar or in a line.
func (v *pretrainView) figures() string {
	s := fmt.Sprintf("loss %.4f  lr %.2e", v.last.Loss, v.last.LR)
	if v.held != "" {
		s += "  held-out " + v.held
	}
	return s
}

func (v *pretrainView) step(model string, pr pretrain.Progress) {
	// The bar's decorators lock mu while mpb draws, and mpb's calls wait
	// for the drawing: no mpb call is made with mu held.
	v.mu.Lock()
	fresh := model != v.model
	if fresh {
		if v.model != "" {
			v.frozen[v.model] = v.figures() // the finished bar keeps its last figures
		}
		v.model, v.held = model, ""
		v.first = pr.Step - 1
		v.lastLine = time.Now() // the first plain line comes after plainEvery
	}
	v.last = pr
	if pr.Evaluated {
		v.held = fmt.Sprintf("%.3f", pr.Score)
	}
	line := ""
	if now := time.Now(); v.mode == progressPlain && (pr.Evaluated || pr.Step == pr.Steps || now.Sub(v.lastLine) >= plainEvery) {
		v.lastLine = now
		line = fmt.Sprintf("%s step %d/%d (%.0f%%)  %s  elapsed %s  ETA %s", model, pr.Step, pr.Steps,
			100*float64(pr.Step)/float64(max(pr.Steps, 1)), v.figures(), pr.Elapsed.Round(time.Second), v.eta())
		if pr.Evaluated {
			line += fmt.Sprintf("  (%s)", pr.Detail)
		}
	}
	v.mu.Unlock()
	switch v.mode {
	case progressBar:
		if fresh {
			v.addBar(model, pr.Steps)
		}
		v.bar.SetTotal(int64(pr.Steps), false)
		v.bar.SetCurrent(int64(pr.Step))
		if pr.Evaluated {
			fmt.Fprintf(v.p, "%s step %d/%d held-out %.3f (%s)\n", model, pr.Step, pr.Steps, pr.Score, pr.Detail)
		}
	case progressPlain:
		if line != "" {
			fmt.Fprintln(v.out, line)
		}
	}
}

// addBar starts the bar of the next model. Only the training goroutine
// (step) touches v.bar until finish.
func (v *pretrainView) addBar(model string, steps int) {
	if v.bar != nil && !v.bar.Completed() {
		v.bar.Abort(false) // the previous model stopped early: keep its bar
	}
	// The figures come before the bar, so that a narrow terminal cuts the
	// bar rather than them.
	live := func(suffix string, f func() string) decor.Decorator {
		return decor.Any(func(decor.Statistics) string {
			v.mu.Lock()
			defer v.mu.Unlock()
			if v.model != model {
				return v.frozen[model+suffix]
			}
			return f()
		}, decor.WCSyncSpaceR)
	}
	v.bar = v.p.AddBar(int64(steps),
		mpb.PrependDecorators(decor.Name(model, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d steps", decor.WCSyncSpaceR),
			live("", v.figures)),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), live(" ETA", func() string { return " ETA " + v.eta() })),
	)
}

// finish ends the display: the bars stop (an unfinished one stays where
// it stood) and the log goes back to stderr.
func (v *pretrainView) finish(ok bool) {
	if v.p == nil {
		return
	}
	if v.bar != nil && (!ok || !v.bar.Completed()) {
		v.bar.Abort(false)
	}
	v.p.Wait()
	v.release()
}
