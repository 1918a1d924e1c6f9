package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate/pretrain"
)

func newPretrainCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f pretrain.Options
	cmd := &cobra.Command{
		Use:   "pretrain [flags]",
		Short: "Train the world's solver and delegator from scratch on generated transcripts",
		Long: `Pretrain trains the two local models of package world from scratch with
supervised learning (package pretrain) on transcripts generated from training
problems (the loss is on the assistant's tokens only), and writes each as a
checkpoint under --out: solver/ and delegator/. Everything is seeded by
--seed; with --steps the run is deterministic, with --time the number of
steps is fitted to the machine's speed. It prints progress and the held-out
accuracy at intervals; after training it grades the solver per operation and
size, and the delegator alone, under route with the solver (its natural
delegation rate) and against always-delegate. An interrupted run resumes
from the state under --out/<model>.state, removed when the model is done.
The delegator's route grading uses the solver found under --solver (default:
--out/solver). --init starts from a checkpoint's weights (with a fresh
optimizer and schedule), for a second phase of training.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return pretrain.Run(cmd.Context(), cmd.OutOrStdout(), f)
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
	_ = getenv // pretrain reads no environment
	_ = log
	return cmd
}
