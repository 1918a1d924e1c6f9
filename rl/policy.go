package rl

import (
	"context"
	"sync"

	"github.com/delegatelab/delegate"
)

// WrapPolicy returns m with every request adjusted for training: logprobs
// with token ids requested (the strategies do not ask for them, and an
// episode needs them), the temperature set to cfg.Temperature, and
// max_tokens capped at cfg.MaxNewTokens. The caller's request is not
// modified. The result is safe for concurrent use when m is.
func WrapPolicy(m delegate.Model, cfg Config) delegate.Model {
	return &policyModel{m: m, temp: cfg.Temperature, maxNew: cfg.MaxNewTokens}
}

// WrapRollout is WrapPolicy for one rollout: it also seeds every request,
// seed plus the number of requests it has forwarded, so that the rollout's
// sampling depends on its seed only, not on what else the engine serves
// meanwhile. Concurrent calls get seeds in the order they arrive.
func WrapRollout(m delegate.Model, cfg Config, seed uint64) delegate.Model {
	return &policyModel{m: m, temp: cfg.Temperature, maxNew: cfg.MaxNewTokens, seeded: true, next: int64(seed & (1<<62 - 1))}
}

type policyModel struct {
	m      delegate.Model
	temp   float64
	maxNew int

	seeded bool
	mu     sync.Mutex
	next   int64 // the next request's seed, when seeded
}

func (p *policyModel) Name() string { return p.m.Name() }

func (p *policyModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	r := *req
	r.Logprobs = true
	t := p.temp
	r.Temperature = &t
	if r.MaxTokens <= 0 || r.MaxTokens > p.maxNew {
		r.MaxTokens = p.maxNew
	}
	if p.seeded {
		p.mu.Lock()
		seed := p.next
		p.next++
		p.mu.Unlock()
		r.Seed = &seed
	}
	return p.m.Chat(ctx, &r)
}
