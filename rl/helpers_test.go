package rl

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/tokenizer"
)

// tinyParams returns a small random model over the chat tokenizer.
func tinyParams(t *testing.T, context int, seed uint64) *nn.Params {
	t.Helper()
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 64, Context: context}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(seed)
	return p
}

// newLocal serves p as a delegate.Model, closed at the end of the test.
func newLocal(t *testing.T, p *nn.Params, name string) *local.Model {
	t.Helper()
	m, err := local.New(p, local.Config{Name: name, MaxNew: 8, MaxBatch: 32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// toyRole is the role of the toy source's policy calls.
const toyRole = "policy"

// samplerOf samples a policy as the trainer does.
// It asks for logprobs, uses cfg's temperature and token cap, and seeds from seed when not nil.
func samplerOf(cfg Config, seed *int64) *delegate.Sampler {
	t := cfg.Temperature
	return delegate.NewSampler(delegate.Sampling{Temperature: &t, MaxTokens: cfg.MaxNewTokens, Seed: seed, Logprobs: true})
}

// toySource is an in-process Source of one-call rollouts.
// The policy is asked for a letter.
// It earns reward 1 when the first token it generates is the byte of a capital letter.
// A random model does that about 26 times in 272.
// It draws the step's items and seeds with Items and RolloutSeed, as an in-process source must.
// It leaves the advantages to the trainer.
// It is a test fake: the real in-process source is rollout.Groups, wired by package train.
type toySource struct {
	cfg   Config
	model delegate.Model // unwrapped
	items *Items
	calls atomic.Int64
	// before, when set, runs at the start of every rollout.
	// A test hooks it to cancel a run or fail a rollout.
	before func(ctx context.Context, item int) error
}

func capital(id int) bool {
	return tokenizer.IsByte(id) && id-tokenizer.ByteOffset >= 'A' && id-tokenizer.ByteOffset <= 'Z'
}

// rollout runs one rollout of item; a failed call is an error.
func (s *toySource) rollout(ctx context.Context, item int, seed uint64) (*delegate.Trace, bool, error) {
	s.calls.Add(1)
	if s.before != nil {
		if err := s.before(ctx, item); err != nil {
			return nil, false, err
		}
	}
	prompt := fmt.Sprintf("%d?", item) // short: the test runs under -race
	rec := delegate.NewRecorder("toy", prompt, nil)
	sd := int64(seed >> 1)
	resp, err := rec.Call(ctx, nil, "answer", delegate.Agent{Role: toyRole, Model: s.model, Sampler: samplerOf(s.cfg, &sd)},
		&delegate.Request{Messages: []delegate.Message{delegate.User(prompt)}})
	if err != nil {
		return nil, false, err
	}
	lps := resp.Choices[0].Logprobs
	return rec.Finish(resp.Text(), delegate.Failure{}), len(lps) > 0 && capital(lps[0].TokenID), nil
}

func (s *toySource) Next(ctx context.Context, step int) ([]Group, error) {
	G := s.cfg.GroupSize
	items := s.items.Step(step)
	type slot struct {
		tr      *delegate.Trace
		correct bool
		err     error
	}
	slots := make([]slot, len(items)*G)
	var eg errgroup.Group
	eg.SetLimit(s.cfg.Concurrency)
	for k := range slots {
		eg.Go(func() error {
			sl := &slots[k]
			sl.tr, sl.correct, sl.err = s.rollout(ctx, items[k/G], RolloutSeed(s.cfg.Seed, step, k))
			return nil
		})
	}
	_ = eg.Wait() // every goroutine returns nil; failures are in the slots
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	groups := make([]Group, len(items))
	for k, sl := range slots {
		g := &groups[k/G]
		if sl.err != nil {
			if g.Failed == 0 {
				g.FirstFailure = sl.err.Error()
			}
			g.Failed++
			continue
		}
		eps, err := Episodes(sl.tr, toyRole, 64)
		if err != nil {
			return nil, err
		}
		r := 0.0
		if sl.correct {
			r = 1
		}
		g.Rollouts = append(g.Rollouts, ScoredRollout{Episodes: eps, Reward: r, Correct: sl.correct,
			Scalars: map[string]float64{"tokens": float64(eps[0].Generated())}})
	}
	return groups, nil
}

// toyConfig is a quick run of the toy source in dir.
func toyConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.GroupSize = 8
	cfg.ItemsPerStep = 2
	cfg.Steps = 24
	cfg.Schedule = train.Schedule{Warmup: 0, Total: 24, MaxLR: 3e-2, MinLR: 3e-2}
	cfg.MaxNewTokens = 2
	cfg.PolicyRole = toyRole
	cfg.OutDir = dir
	cfg.CheckpointEvery = 4
	cfg.Seed = 3
	return cfg
}

// newToy returns a trainer of a fresh tiny policy on the toy source of 4
// items.
func newToy(t *testing.T, cfg Config, progress chan<- Progress) (*Trainer, *toySource, *nn.Params) {
	t.Helper()
	p := tinyParams(t, 64, 7)
	src := &toySource{cfg: cfg, model: newLocal(t, p, "toy-policy"), items: NewItems(cfg.Seed, 4, cfg.ItemsPerStep)}
	tr, err := New(cfg, p, src, progress)
	if err != nil {
		t.Fatal(err)
	}
	return tr, src, p
}
