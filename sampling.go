package delegate

import "sync"

// Sampling is how an agent's calls sample whatever its strategy asks: a
// policy's sampling in rollouts. The zero value changes nothing.
type Sampling struct {
	// Temperature, when set, replaces every request's temperature.
	Temperature *float64
	// MaxTokens, when positive, caps every request's max_tokens. It sets
	// max_tokens where the request has none.
	MaxTokens int
	// Seed, when set, seeds every request. The first gets *Seed, each
	// later one the next integer, in the order the calls start. So a
	// rollout's samples depend on its seed only, not on what else the
	// backend serves meanwhile.
	Seed *int64
	// Logprobs asks for the logprob and token id of every generated
	// token. A training sequence needs them; strategies do not ask.
	Logprobs bool
}

// Sampler applies a Sampling to the requests of one agent. Recorder.Call
// applies an Agent's Sampler before the model sees the request. A seeded
// Sampler is for one run. Safe for concurrent use.
type Sampler struct {
	s    Sampling
	mu   sync.Mutex
	next int64 // the next request's seed, when seeded
}

// NewSampler returns the Sampler of s.
func NewSampler(s Sampling) *Sampler {
	sm := &Sampler{s: s}
	if s.Seed != nil {
		sm.next = *s.Seed
	}
	return sm
}

// Adjust returns req as the Sampling asks it: its temperature, token cap
// and logprobs, and the next seed when seeded. req is not modified.
func (s *Sampler) Adjust(req *Request) Request {
	r := *req
	if s.s.Logprobs {
		r.Logprobs = true
	}
	if s.s.Temperature != nil {
		t := *s.s.Temperature
		r.Temperature = &t
	}
	if m := s.s.MaxTokens; m > 0 && (r.MaxTokens <= 0 || r.MaxTokens > m) {
		r.MaxTokens = m
	}
	if s.s.Seed != nil {
		s.mu.Lock()
		seed := s.next
		s.next++
		s.mu.Unlock()
		r.Seed = &seed
	}
	return r
}
