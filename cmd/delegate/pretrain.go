package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate/pretrain"
	"github.com/delegatelab/delegate/world"
)

func newPretrainCmd(getenv env, log *slog.Logger) *cobra.Command {
	var (
		f         pretrain.Options
		progress  string
		worldName string
		otlp      string
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
always-delegate, on problems of the validation split (--grade-split test
is for a published table only: the test split is read once per table, and
docs/test-reads.md logs every read). An interrupted run resumes from the state under
--out/<model>.state, removed when the model is done. The delegator's route
grading uses the solver found under --solver (default: --out/solver). --init
starts from a checkpoint's weights (with a fresh optimizer and schedule), for
a second phase of training. --otlp exports every grading run: each of the
solver's questions and each of the delegator's strategy runs. Every flag is
checked, and the checkpoints --init and --solver name are loaded, before
any corpus is built.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProgress(progress); err != nil {
				return fmt.Errorf("pretrain: %w", err)
			}
			_, cov, err := world.Named(worldName)
			if err != nil {
				return fmt.Errorf("pretrain --world: %w", err)
			}
			f.Coverage = cov
			closeOTLP, err := tracePretrain(otlp, getenv, log, &f)
			if err != nil {
				return fmt.Errorf("pretrain: %w", err)
			}
			defer closeOTLP()
			v := newProgressView(cmd.OutOrStdout(), progress)
			f.Progress = (&pretrainProgress{v: v}).step
			err = pretrain.Run(cmd.Context(), v.text(), f)
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
	fl.Float64SliceVar(&f.RouteMix, "route-mix", nil, "delegator: weights of the route transcripts' policies never, always and random (each step delegated with probability 1/2) (default 0.3,0.3,0.4)")
	fl.BoolVar(&f.WithPeers, "with-peers", false, "delegator: also train on lead's terse peer answers, so that it can be its own frozen peers under MLPO")
	fl.StringVar(&f.GradeSplit, "grade-split", "validation", "split the delegator is graded on, during training and after: validation, or test for a published table only (log the read in docs/test-reads.md)")
	fl.StringVar(&worldName, "world", "default", "solver: the named world whose solver coverage to train and grade (world.WorldNames: default; digits, products whose first factor is below 50; or band, from 30 to 69)")
	fl.StringVar(&progress, "progress", progressAuto, "progress display: auto (a bar on a terminal, a line every 10 s otherwise), bar, plain or none")
	fl.StringVar(&otlp, "otlp", "", otlpUsage)
	return cmd
}

// pretrainProgress feeds a pretraining run's steps to the progress view.
// Each model is a phase, with the loss, the learning rate and the last
// held-out score as its status. Each evaluation is a note. Its step
// is called on the training goroutine.
type pretrainProgress struct {
	v     *progressView
	model string // the model being trained
	first int    // the step before this run's first
	held  string // its last evaluation, "" before one
}

func (p *pretrainProgress) step(model string, pr pretrain.Progress) {
	if model != p.model {
		p.model, p.held = model, ""
		p.v.begin(model, "steps")
		p.first = pr.Step - 1 // a resumed run starts past 0
	}
	if pr.Evaluated {
		p.held = fmt.Sprintf("%.3f", pr.Score)
	}
	status := fmt.Sprintf("loss %.4f  lr %.2e", pr.Loss, pr.LR)
	if p.held != "" {
		status += "  held-out " + p.held
	}
	p.v.update(progressFigures{Done: pr.Step, Total: pr.Steps, Resumed: p.first, Elapsed: pr.Elapsed, Status: status})
	if pr.Evaluated {
		p.v.note("%s step %d/%d held-out %.3f (%s)", model, pr.Step, pr.Steps, pr.Score, pr.Detail)
	}
}
