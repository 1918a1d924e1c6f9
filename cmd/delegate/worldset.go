package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
)

// datasetWorld is the synthetic arithmetic world of package world, the
// one the shipped local models were trained in: problems drawn by
// world.Generate at a level, checked by world.ParseAnswer.
const datasetWorld = world.Dataset

// worldFlags are the knobs of --dataset world.
type worldFlags struct {
	level       int
	distractors int // -1: the level's
}

func (w *worldFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&w.level, "level", world.DefaultLevel, "--dataset world: difficulty (1 one product, 2 a product and an amount, 3 two parts, 4 the longest, 5 the default world)")
	fl.IntVar(&w.distractors, "distractors", -1, "--dataset world: most distractor sentences a problem gets, uniformly 0..N (-1: the level's)")
}

// config returns the world config the flags pick.
func (w worldFlags) config() (world.Config, error) {
	cfg, ok := world.Levels()[w.level]
	if !ok {
		return world.Config{}, fmt.Errorf("--level %d: the world has levels 1 to %d", w.level, len(world.Levels()))
	}
	if w.distractors >= 0 {
		cfg.Distractors = w.distractors
	}
	if err := cfg.Validate(); err != nil {
		return world.Config{}, fmt.Errorf("--dataset world: %w", err)
	}
	return cfg, nil
}

// worldTasks draws n problems of the split ("train" or "test") with seed,
// as tasks whose reference is the integer answer, and describes them.
func worldTasks(w worldFlags, split string, seed uint64, n int) ([]delegate.Task, string, error) {
	cfg, err := w.config()
	if err != nil {
		return nil, "", err
	}
	sp, err := world.ParseSplit(split)
	if err != nil {
		return nil, "", fmt.Errorf("--split: %w", err)
	}
	if n <= 0 {
		return nil, "", errors.New("--n is required with --dataset world: the world draws problems without end")
	}
	problems, err := world.Generate(cfg, seed, sp, n)
	if err != nil {
		return nil, "", fmt.Errorf("--dataset world: %w", err)
	}
	tasks := make([]delegate.Task, len(problems))
	for i, p := range problems {
		tasks[i] = p.Task()
	}
	desc := fmt.Sprintf("world level %d (%s), %d %s problems drawn with seed %d", w.level, cfg.Summary(), n, split, seed)
	return tasks, desc, nil
}
