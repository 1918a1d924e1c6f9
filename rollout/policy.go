package rollout

import (
	"context"
	"sync"

	"github.com/delegatelab/delegate"
)

// Sampling is how the policy's model samples in rollouts (Policy). The
// zero value changes nothing but asking for logprobs.
type Sampling struct {
	// Temperature, when set, replaces every request's temperature.
	Temperature *float64
	// MaxTokens, when positive, caps every request's max_tokens (and sets
	// it where the request has none).
	MaxTokens int
	// Seed, when set, seeds every request: the first gets *Seed, each
	// later one the next integer, in the order they arrive, so that a
	// rollout's sampling depends on its seed only, not on what else the
	// engine serves meanwhile. A seeded wrapper is for one rollout.
	Seed *int64
}

// Policy wraps the policy's model for rollouts: every request asks for the
// logprob (and, where the backend can, the token id) of each generated
// token, which strategies do not ask for and a training sequence needs,
// and is adjusted as s says. groups.jsonl and the trainer have tokens and
// logprobs only for calls whose backend returned prompt token ids and
// per-token ids (the local backend, vLLM with token ids on). The caller's
// request is not modified; the result is safe for concurrent use when m
// is. Process and the in-process trainer both reach the policy through it.
func Policy(m delegate.Model, s Sampling) delegate.Model {
	p := &policyModel{m: m, temp: s.Temperature, maxNew: s.MaxTokens}
	if s.Seed != nil {
		p.seeded, p.next = true, *s.Seed
	}
	return p
}

type policyModel struct {
	m      delegate.Model
	temp   *float64
	maxNew int

	seeded bool
	mu     sync.Mutex
	next   int64 // the next request's seed, when seeded
}

func (p *policyModel) Name() string { return p.m.Name() }

func (p *policyModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if req == nil {
		return p.m.Chat(ctx, req)
	}
	r := *req
	r.Logprobs = true
	if p.temp != nil {
		t := *p.temp
		r.Temperature = &t
	}
	if p.maxNew > 0 && (r.MaxTokens <= 0 || r.MaxTokens > p.maxNew) {
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
