package delegate_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
)

// seen is a Model that keeps a copy of every request it gets. Safe for
// concurrent use.
type seen struct {
	mu   sync.Mutex
	reqs []delegate.Request
}

func (s *seen) Name() string { return "seen" }

func (s *seen) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, *req)
	s.mu.Unlock()
	return &delegate.Response{Choices: []delegate.Choice{{Message: delegate.Assistant("ok"), FinishReason: "stop"}}}, nil
}

// TestSamplerAdjust checks what a Sampler does to a run's requests.
// It replaces the temperature, caps max_tokens, counts seeds from the first and asks for logprobs.
// The caller's request stays untouched.
func TestSamplerAdjust(t *testing.T) {
	temp, seed, zero := 0.7, int64(40), 0.0
	type want struct {
		logprobs bool
		temp     *float64
		max      int
		seed     *int64
	}
	seeds := func(from int64) []*int64 {
		out := make([]*int64, 3)
		for i := range out {
			s := from + int64(i)
			out[i] = &s
		}
		return out
	}
	tests := []struct {
		name string
		s    delegate.Sampling
		want []want // one per request of reqs
	}{
		{"zero", delegate.Sampling{}, []want{{false, &zero, 100, nil}, {false, nil, 8, nil}, {false, nil, 0, nil}}},
		{"logprobs", delegate.Sampling{Logprobs: true}, []want{{true, &zero, 100, nil}, {true, nil, 8, nil}, {true, nil, 0, nil}}},
		{"all", delegate.Sampling{Temperature: &temp, MaxTokens: 16, Seed: &seed, Logprobs: true},
			[]want{{true, &temp, 16, seeds(40)[0]}, {true, &temp, 8, seeds(40)[1]}, {true, &temp, 16, seeds(40)[2]}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := []*delegate.Request{{MaxTokens: 100, Temperature: &zero}, {MaxTokens: 8}, {}}
			s := delegate.NewSampler(tt.s)
			for i, req := range reqs {
				got := s.Adjust(req)
				w := tt.want[i]
				if got.Logprobs != w.logprobs || !sameFloat(got.Temperature, w.temp) || got.MaxTokens != w.max || !sameInt(got.Seed, w.seed) {
					t.Errorf("request %d: got logprobs %v, temperature %v, max_tokens %d, seed %v; want %v, %v, %d, %v",
						i, got.Logprobs, deref(got.Temperature), got.MaxTokens, deref(got.Seed), w.logprobs, deref(w.temp), w.max, deref(w.seed))
				}
			}
			if r := reqs[0]; r.Logprobs || *r.Temperature != 0 || r.Seed != nil || r.MaxTokens != 100 {
				t.Errorf("the caller's request changed: %+v", *r)
			}
		})
	}
}

// TestRecorderCallSampler checks that Recorder.Call applies an agent's
// Sampler to what its model gets, and only that agent's.
func TestRecorderCallSampler(t *testing.T) {
	temp, seed := 1.0, int64(7)
	m := &seen{}
	sampled := delegate.Agent{Role: "policy", Model: m, Sampler: delegate.NewSampler(delegate.Sampling{Temperature: &temp, Seed: &seed, Logprobs: true})}
	plain := delegate.Agent{Role: "other", Model: m}
	rec := delegate.NewRecorder("test", "q", nil)
	for _, a := range []delegate.Agent{sampled, plain, sampled} {
		if _, err := rec.Call(context.Background(), nil, "call", a, &delegate.Request{Messages: []delegate.Message{delegate.User("q")}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	for _, r := range m.reqs {
		if r.Seed == nil {
			got = append(got, -1)
			continue
		}
		got = append(got, *r.Seed)
	}
	if want := []int64{7, -1, 8}; !slices.Equal(got, want) {
		t.Errorf("seeds: got %v, want %v (-1: none)", got, want)
	}
	if !m.reqs[0].Logprobs || m.reqs[1].Logprobs || m.reqs[1].Temperature != nil {
		t.Errorf("the plain agent's request was adjusted, or the sampled one's not: %+v, %+v", m.reqs[0], m.reqs[1])
	}
}

func sameFloat(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
func sameInt(a, b *int64) bool     { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
