package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
)

// envMaxBaselines is the most baseline answers delegate env keeps.
const envMaxBaselines = 4096

// envJudgeModels are the config keys of the judge of open questions and
// of the baseline it compares with: roles.judge and roles.baseline, each
// else roles.default.
func envJudgeModels(cfg *Config) (judgeName, baseName string, err error) {
	judgeName, baseName = cfg.Roles.Judge, cfg.Roles.Baseline
	if judgeName == "" {
		judgeName = cfg.Roles.Default
	}
	if baseName == "" {
		baseName = cfg.Roles.Default
	}
	switch {
	case judgeName == "":
		return "", "", errors.New("env: --dataset open needs a judge: set roles.judge (or roles.default) in the config")
	case baseName == "":
		return "", "", errors.New("env: --dataset open needs a baseline to judge against: set roles.baseline (or roles.default) in the config")
	}
	for _, n := range []string{judgeName, baseName} {
		if _, ok := cfg.Models[n]; !ok {
			return "", "", fmt.Errorf("env: --dataset open: model %q is not in the config's models", n)
		}
	}
	return judgeName, baseName, nil
}

// envJudge is the delegation environment's judge of open questions. It
// compares an answer with the task's baseline answer, which the config's
// baseline (single, as process runs it) produces once per task.
func envJudge(cfg *Config, models map[string]delegate.Model, judgeName string) (func(context.Context, delegate.Task, string, *reward.Outcome) error, error) {
	a, _ := cfg.agent(models, judge.Role, judgeName)
	j, err := judge.New(a, cfg.Judge)
	if err != nil {
		return nil, fmt.Errorf("env: judge: %w", err)
	}
	base, err := strategy.New(strategy.NameSingle, cfg.strategyRoles(models), cfg.Strategy)
	if err != nil {
		return nil, fmt.Errorf("env: baseline: %w", err)
	}
	b := &envBaselines{run: func(ctx context.Context, t delegate.Task) (string, error) {
		tr, err := base.Run(ctx, t.Prompt, nil)
		switch {
		case err != nil:
			return "", err
		case tr.Failure != "":
			return "", errors.New(tr.Failure)
		}
		return tr.Answer, nil
	}, max: envMaxBaselines}
	return func(ctx context.Context, t delegate.Task, answer string, o *reward.Outcome) error {
		baseline, err := b.answer(ctx, t)
		if err != nil {
			return fmt.Errorf("baseline of task %q: %w", t.ID, err)
		}
		v, err := j.Compare(ctx, nil, nil, t.Prompt, answer, baseline)
		if err != nil {
			return fmt.Errorf("judge task %q: %w", t.ID, err)
		}
		o.Verdict = &v
		return nil
	}, nil
}

// envBaselines produces each task's baseline answer once and keeps the
// last max of them. Episodes of one task wait for its one run. A failed
// run is not kept: the next episode runs it again. Safe for concurrent use.
type envBaselines struct {
	run func(ctx context.Context, t delegate.Task) (string, error)
	max int

	mu    sync.Mutex
	m     map[string]*envBaseline
	order []string // task ids, oldest first
}

// envBaseline is one task's baseline answer; ready closes once it is set.
type envBaseline struct {
	ready  chan struct{}
	answer string
	err    error
}

// answer is task t's baseline answer, run on first use.
func (b *envBaselines) answer(ctx context.Context, t delegate.Task) (string, error) {
	b.mu.Lock()
	if b.m == nil {
		b.m = map[string]*envBaseline{}
	}
	e, ok := b.m[t.ID]
	if ok {
		b.mu.Unlock()
		select {
		case <-e.ready:
			return e.answer, e.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	e = &envBaseline{ready: make(chan struct{})}
	b.m[t.ID] = e
	b.order = append(b.order, t.ID)
	for len(b.m) > b.max {
		delete(b.m, b.order[0])
		b.order = b.order[1:]
	}
	b.mu.Unlock()
	e.answer, e.err = b.run(ctx, t)
	if e.err != nil {
		b.mu.Lock()
		if b.m[t.ID] == e {
			delete(b.m, t.ID)
			if i := slices.Index(b.order, t.ID); i >= 0 {
				b.order = slices.Delete(b.order, i, i+1)
			}
		}
		b.mu.Unlock()
	}
	close(e.ready)
	return e.answer, e.err
}
