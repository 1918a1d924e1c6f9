package rl

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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

// toyRole is the role of the toy environment's policy calls.
const toyRole = "policy"

// toyEnv is a one-call environment: the policy is asked for a letter and
// earns reward 1 when the first token it generates is the byte of a
// capital letter. A random model does that about 26 times in 272.
type toyEnv struct {
	policy delegate.Model
	calls  atomic.Int64
	// before, when set, runs at the start of every rollout (a test's hook
	// to cancel a run or fail a rollout).
	before func(ctx context.Context, item int) error
}

func capital(id int) bool {
	return tokenizer.IsByte(id) && id-tokenizer.ByteOffset >= 'A' && id-tokenizer.ByteOffset <= 'Z'
}

func (e *toyEnv) rollout(ctx context.Context, item int, seed uint64) (*delegate.Trace, Outcome, error) {
	e.calls.Add(1)
	if e.before != nil {
		if err := e.before(ctx, item); err != nil {
			return nil, Outcome{}, err
		}
	}
	prompt := fmt.Sprintf("%d?", item) // short: the test runs under -race
	rec := delegate.NewRecorder("toy", prompt, nil)
	s := int64(seed >> 1)
	resp, err := rec.Call(ctx, nil, "answer", delegate.Agent{Role: toyRole, Model: e.policy},
		&delegate.Request{Messages: []delegate.Message{delegate.User(prompt)}, Seed: &s})
	if err != nil {
		if ctx.Err() != nil {
			return nil, Outcome{}, ctx.Err()
		}
		return rec.Finish("", err.Error()), Outcome{}, nil
	}
	tr := rec.Finish(resp.Text(), "")
	lps := resp.Choices[0].Logprobs
	out := Outcome{
		Correct: len(lps) > 0 && capital(lps[0].TokenID),
		Metrics: map[string]float64{"tokens": float64(len(lps))},
	}
	return tr, out, nil
}

func toyReward(_ *delegate.Trace, o Outcome) float64 {
	if o.Correct {
		return 1
	}
	return 0
}

// toyConfig is a quick run of the toy environment in dir.
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

// newToy returns a trainer of a fresh tiny policy on the toy environment.
func newToy(t *testing.T, cfg Config, progress chan<- Progress) (*Trainer, *toyEnv, *nn.Params) {
	t.Helper()
	p := tinyParams(t, 64, 7)
	env := &toyEnv{policy: WrapPolicy(newLocal(t, p, "toy-policy"), cfg)}
	tr, err := New(cfg, p, Env{Items: 4, Rollout: env.rollout, Reward: toyReward}, progress)
	if err != nil {
		t.Fatal(err)
	}
	return tr, env, p
}
