package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/world"
)

// datasetWorld is package world's synthetic arithmetic, where the shipped
// local models were trained. world.Generate draws problems at a level and
// world.ParseAnswer checks them.
const datasetWorld = world.Dataset

// worldFlags are the knobs of --dataset world.
type worldFlags struct {
	level       int
	distractors int // -1: the level's
}

func (w *worldFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&w.level, "level", world.DefaultLevel, "--dataset world: difficulty (1 one product, 2 a product and an amount, 3 two parts, the default world, 4 the longest, 5 one quantity of 1 to 3 steps)")
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

// worldTasks draws n problems of the split, "train" or "test", with seed.
// Each task's reference is the integer answer. It also describes them.
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

// trainOrder are the flags under which process draws the world's items as
// `delegate train` does (--train-pool). They give a pool of training
// problems drawn with --seed (train's --train-problems and --seed), each
// trainer step's --step-items of them in train's item order (rl.Items
// under --train-seed, train's rl seed), this environment taking its share
// of each step's items (--step-share i/n), and rollout k of a step's item
// j seeded as train seeds it (rl.RolloutSeed of --train-seed, the step and
// j×G+k). An environment of `train --processes` samples so, on-policy,
// the in-process run's groups.
type trainOrder struct {
	pool  int    // --train-pool: 0 draws -n problems with --seed instead
	items int    // --step-items
	share string // --step-share, "i/n"
	seed  uint64 // --train-seed
}

func (o *trainOrder) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&o.pool, "train-pool", 0, "--dataset world: draw the items as delegate train does: a pool of this many training problems (its --train-problems, drawn with --seed), --step-items of them a trainer step in train's order, rollouts seeded as train seeds them; -n counts this environment's items (0: -n problems drawn with --seed)")
	fl.IntVar(&o.items, "step-items", 0, "--train-pool: items a trainer step takes (train's --items)")
	fl.StringVar(&o.share, "step-share", "1/1", "--train-pool: i/n, the i-th of n environments' part of each step's items (the first steps' items mod n go one more to the first environments)")
	fl.Uint64Var(&o.seed, "train-seed", 1, "--train-pool: the seed of train's item order and rollout seeds (its RL seed, 1 whatever train's --seed)")
}

// stepItem is where a task of a trainOrder run sits in the trainer's run.
// It holds the step, from 1, and the position among the step's items.
type stepItem struct{ step, index int }

// seed is the sampling seed delegate train gives rollout k of the item,
// with group rollouts per item. Train seeds a rollout's policy calls from
// it, one after the other.
func (s stepItem) seed(base uint64, group, k int) int64 {
	return int64(rl.RolloutSeed(base, s.step, s.index*group+k) & (1<<62 - 1))
}

// shareOf returns the positions [lo, hi) of each step's k items that
// environment i of n takes, from 1. Each takes k/n; the first k mod n take
// one more.
func shareOf(k, i, n int) (lo, hi int) {
	for j := 1; j <= i; j++ {
		size := k / n
		if j <= k%n {
			size++
		}
		lo, hi = hi, hi+size
	}
	return lo, hi
}

// parseShare reads --step-share "i/n".
func parseShare(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		if i, err = strconv.Atoi(a); err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("--step-share %q: want i/n with 1 ≤ i ≤ n", s)
	}
	return i, n, nil
}

// tasks draws the first n items of the environment's share of the
// trainer's steps, and says where each sits. It uses delegate train's
// pool under seed and its item order under o.seed. split must be train,
// as train's pool is. A task's ID is its problem's with "@step".
func (o trainOrder) tasks(w worldFlags, split string, seed uint64, n int) ([]delegate.Task, []stepItem, string, error) {
	cfg, err := w.config()
	if err != nil {
		return nil, nil, "", err
	}
	i, envs, err := parseShare(o.share)
	switch {
	case err != nil:
		return nil, nil, "", err
	case split != world.Train.String():
		return nil, nil, "", fmt.Errorf("--train-pool draws from delegate train's training problems: --split %s does not apply", split)
	case o.items < 1 || o.items > o.pool:
		return nil, nil, "", fmt.Errorf("--step-items %d: want 1 to --train-pool (%d)", o.items, o.pool)
	case envs > o.items:
		return nil, nil, "", fmt.Errorf("--step-share %s: %d environments share a step's %d items: want at most %d", o.share, envs, o.items, o.items)
	case n <= 0:
		return nil, nil, "", errors.New("--n is required with --dataset world: the items of this environment")
	}
	problems, err := world.Generate(cfg, seed, world.Train, o.pool)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--dataset world: %w", err)
	}
	lo, hi := shareOf(o.items, i, envs)
	order := rl.NewItems(o.seed, len(problems), o.items)
	tasks := make([]delegate.Task, 0, n)
	at := make([]stepItem, 0, n)
	for step := 1; len(tasks) < n; step++ {
		items := order.Step(step)
		for j := lo; j < hi && len(tasks) < n; j++ {
			// Train draws a step's items afresh from the pool: a problem
			// comes back in later steps, each time a task of its own.
			task := problems[items[j]].Task()
			task.ID += "@" + strconv.Itoa(step)
			tasks = append(tasks, task)
			at = append(at, stepItem{step, j})
		}
	}
	desc := fmt.Sprintf("world level %d (%s), %d items as delegate train draws them (a pool of %d train problems drawn with seed %d, its item order under seed %d, %d a step, this environment's part %d of %d: items %d to %d of each step)",
		w.level, cfg.Summary(), n, o.pool, seed, o.seed, o.items, i, envs, lo+1, hi)
	return tasks, at, desc, nil
}
