package infer

import (
	"context"
	"slices"
	"testing"
)

// evenOnly allows even tokens only, and counts what it was told.
type evenOnly struct{ accepted []int }

func (c *evenOnly) Allows(tok int) bool { return tok%2 == 0 }
func (c *evenOnly) Accept(tok int)      { c.accepted = append(c.accepted, tok) }

// none allows nothing.
type none struct{}

func (none) Allows(int) bool { return false }
func (none) Accept(int)      {}

func TestEngineAdjustedSampling(t *testing.T) {
	p := testParams(t, testConfig(false), 3)
	e := newTestEngine(t, p, withBatch(4))
	ctx := context.Background()
	for _, temp := range []float64{0, 1, 1.5} {
		for seed := range uint64(20) {
			base := GenRequest{Prompt: []int{1, 2, 3}, MaxNew: 12, Temperature: temp, Seed: seed}

			c := &evenOnly{}
			r := base
			r.Constraint = c
			res, err := e.Generate(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(res.Tokens, func(t int) bool { return t%2 != 0 }); i >= 0 {
				t.Fatalf("T=%v seed %d: token %d at %d is odd, refused by the constraint", temp, seed, res.Tokens[i], i)
			}
			if !slices.Equal(c.accepted, res.Tokens) {
				t.Errorf("accepted %v, want the generated %v", c.accepted, res.Tokens)
			}

			r = base
			r.LogitBias = []TokenBias{{Token: 5, Bias: -100}}
			if res, err = e.Generate(ctx, r); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(res.Tokens, 5) {
				t.Errorf("T=%v seed %d: token 5 biased by -100 was generated: %v", temp, seed, res.Tokens)
			}

			r = base
			r.LogitBias = []TokenBias{{Token: 7, Bias: 100}}
			if res, err = e.Generate(ctx, r); err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(res.Tokens, func(t int) bool { return t != 7 }) {
				t.Errorf("T=%v seed %d: not only token 7, biased by +100: %v", temp, seed, res.Tokens)
			}

			// A presence penalty far above any logit gap forbids every
			// repetition.
			r = base
			r.PresencePenalty = 1000
			if res, err = e.Generate(ctx, r); err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for _, tok := range res.Tokens {
				if seen[tok] {
					t.Errorf("T=%v seed %d: token %d repeated under a presence penalty: %v", temp, seed, tok, res.Tokens)
				}
				seen[tok] = true
			}
		}
	}
}

// The logprobs of an adjusted request stay the model's own.
// A token sequence forced by a constraint gets the logprobs it gets free.
func TestEngineAdjustedLogprobs(t *testing.T) {
	p := testParams(t, testConfig(false), 5)
	e := newTestEngine(t, p, withBatch(2))
	ctx := context.Background()
	biased, err := e.Generate(ctx, GenRequest{Prompt: []int{4, 5}, MaxNew: 8, LogitBias: []TokenBias{{Token: 0, Bias: -50}}, FrequencyPenalty: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// Recompute through a request constrained to the biased tokens.
	forced := &sequence{toks: biased.Tokens}
	again, err := e.Generate(ctx, GenRequest{Prompt: []int{4, 5}, MaxNew: 8, Constraint: forced})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Tokens, biased.Tokens) || !slices.Equal(again.Logprobs, biased.Logprobs) {
		t.Errorf("forced %v %v, want %v %v", again.Tokens, again.Logprobs, biased.Tokens, biased.Logprobs)
	}
}

// sequence allows exactly one sequence of tokens.
type sequence struct {
	toks []int
	at   int
}

func (s *sequence) Allows(tok int) bool { return s.at < len(s.toks) && s.toks[s.at] == tok }
func (s *sequence) Accept(int)          { s.at++ }

func TestEngineDeadConstraint(t *testing.T) {
	p := testParams(t, testConfig(false), 3)
	e := newTestEngine(t, p, withBatch(1))
	for _, temp := range []float64{0, 1} {
		res, err := e.Generate(context.Background(), GenRequest{Prompt: []int{1}, MaxNew: 5, Temperature: temp, StopTokens: []int{9}, Constraint: none{}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tokens, []int{9}) || res.Finish != FinishStop {
			t.Errorf("T=%v: %v %s, want the stop token alone", temp, res.Tokens, res.Finish)
		}
	}
}

// An unconstrained request batched with constrained ones gets exactly
// what it gets alone.
func TestEngineAdjustedRowsLeaveOthers(t *testing.T) {
	p := testParams(t, testConfig(false), 7)
	e := newTestEngine(t, p, withBatch(4))
	ctx := context.Background()
	plain := GenRequest{Prompt: []int{3, 1, 4}, MaxNew: 10, Temperature: 1, Seed: 42}
	alone, err := e.Generate(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []GenRequest{plain, plain, plain}
	reqs[1].Constraint, reqs[1].Seed = &evenOnly{}, 1
	reqs[2].LogitBias, reqs[2].PresencePenalty, reqs[2].Seed = []TokenBias{{Token: 2, Bias: 3}}, 1, 2
	all, err := e.GenerateAll(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all[0].Tokens, alone.Tokens) {
		t.Errorf("batched %v, alone %v", all[0].Tokens, alone.Tokens)
	}
}
