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
// and is adjusted as s says (Sampler.Adjust). groups.jsonl and the trainer
// have tokens and logprobs only for calls whose backend returned prompt
// token ids and per-token ids (the local backend, vLLM with token ids on).
// The caller's request is not modified; the result is safe for concurrent
// use when m is.
func Policy(m delegate.Model, s Sampling) delegate.Model {
	return &policyModel{m: m, s: NewSampler(s)}
}

type policyModel struct {
	m delegate.Model
	s *Sampler
}

func (p *policyModel) Name() string { return p.m.Name() }

func (p *policyModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if req == nil {
		return p.m.Chat(ctx, req)
	}
	r := p.s.Adjust(req)
	return p.m.Chat(ctx, &r)
}

// Sampler makes Policy's adjustments to requests, for a caller whose own
// wrapper of the policy's model applies them (the trainer's, which also
// prices cached prefixes), so that one wrapper sits on the call path. A
// seeded Sampler is for one rollout. Safe for concurrent use.
type Sampler struct {
	temp   *float64
	maxNew int

	seeded bool
	mu     sync.Mutex
	next   int64 // the next request's seed, when seeded
}

// NewSampler returns the Sampler of s.
func NewSampler(s Sampling) *Sampler {
	sm := &Sampler{temp: s.Temperature, maxNew: s.MaxTokens}
	if s.Seed != nil {
		sm.seeded, sm.next = true, *s.Seed
	}
	return sm
}

// Adjust returns req as the policy is asked it: logprobs on, the
// temperature and token cap of the Sampling, and the next seed when
// seeded. req is not modified.
func (s *Sampler) Adjust(req *delegate.Request) delegate.Request {
	r := *req
	r.Logprobs = true
	if s.temp != nil {
		t := *s.temp
		r.Temperature = &t
	}
	if s.maxNew > 0 && (r.MaxTokens <= 0 || r.MaxTokens > s.maxNew) {
		r.MaxTokens = s.maxNew
	}
	if s.seeded {
		s.mu.Lock()
		seed := s.next
		s.next++
		s.mu.Unlock()
		r.Seed = &seed
	}
	return r
}
