package infer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/nntest"
	"go.uber.org/goleak"
)

// engineConfig is DefaultEngineConfig changed by set.
func engineConfig(set func(c *EngineConfig)) EngineConfig {
	c := DefaultEngineConfig()
	set(&c)
	return c
}

// withBatch is DefaultEngineConfig decoding n sequences together.
func withBatch(n int) EngineConfig {
	return engineConfig(func(c *EngineConfig) { c.MaxBatch = n })
}

func TestEngineConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *EngineConfig)
		want string // "" for valid, else a part of the error
	}{
		{"default", func(c *EngineConfig) {}, ""},
		{"one by one", func(c *EngineConfig) { c.MaxBatch, c.PrefillChunk = 1, 1 }, ""},
		{"zero batch", func(c *EngineConfig) { c.MaxBatch = 0 }, "max batch"},
		{"negative batch", func(c *EngineConfig) { c.MaxBatch = -1 }, "max batch"},
		{"zero chunk", func(c *EngineConfig) { c.PrefillChunk = 0 }, "prefill chunk"},
		{"negative chunk", func(c *EngineConfig) { c.PrefillChunk = -4 }, "prefill chunk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := engineConfig(tt.set).Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Validate() = %q, want an error naming %q", got, tt.want)
			}
		})
	}
}

func newTestEngine(t testing.TB, p *nn.Params, ec EngineConfig) *Engine {
	t.Helper()
	e, err := NewEngine(p, ec)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// testRequests is a varied set: different prompt lengths, sampling
// settings, seeds, stops and alternatives.
func testRequests(n int) []GenRequest {
	reqs := make([]GenRequest, n)
	for i := range reqs {
		prompt := make([]int, 1+(i*7)%11)
		for k := range prompt {
			prompt[k] = (i*13 + k*5) % 37
		}
		r := GenRequest{Prompt: prompt, MaxNew: 3 + (i*5)%15, Seed: uint64(1000 + i)}
		switch i % 5 {
		case 0: // greedy
		case 1:
			r.Temperature = 1
		case 2:
			r.Temperature, r.TopK = 0.8, 5
		case 3:
			r.Temperature, r.TopP = 1.3, 0.9
		case 4:
			r.Temperature, r.TopK, r.TopP, r.TopLogprobs = 0.7, 10, 0.95, 3
			r.StopTokens = []int{3, 17}
		}
		reqs[i] = r
	}
	return reqs
}

// Every generated token's logprob (and alternatives) must equal the
// log-softmax of the reference forward's logits over prompt+output.
func TestEngineLogprobsMatchReference(t *testing.T) {
	p := testParams(t, testConfig(false), 11)
	e := newTestEngine(t, p, withBatch(4))
	for _, req := range []GenRequest{
		{Prompt: []int{1, 2, 3}, MaxNew: 12, Temperature: 1, Seed: 5, TopLogprobs: 4},
		{Prompt: []int{30}, MaxNew: 10, Temperature: 0.6, TopK: 4, Seed: 6, TopLogprobs: 2},
		{Prompt: []int{9, 9, 8, 7, 6, 5, 4, 3, 2, 1}, MaxNew: 8, Seed: 7, TopLogprobs: 1},
	} {
		res, err := e.Generate(context.Background(), req)
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		seq := append(slices.Clone(req.Prompt), res.Tokens...)
		ref := nntest.Logits(p, seq)
		for i, tok := range res.Tokens {
			lg := ref[len(req.Prompt)-1+i]
			lp := nntest.LogSoftmax(lg)
			if want := lp[tok]; math.Abs(float64(res.Logprobs[i])-want) > 1e-4 {
				t.Errorf("prompt %v step %d: logprob of %d = %v, want %v", req.Prompt, i, tok, res.Logprobs[i], want)
			}
			if mx := slices.Max(lg); req.Temperature == 0 && lg[tok] < mx-1e-4 {
				t.Errorf("prompt %v step %d: greedy token %d has logit %v, below the maximum %v", req.Prompt, i, tok, lg[tok], mx)
			}
			if len(res.Top[i]) != req.TopLogprobs {
				t.Fatalf("step %d: %d alternatives, want %d", i, len(res.Top[i]), req.TopLogprobs)
			}
			order := make([]int, len(lg))
			for k := range order {
				order[k] = k
			}
			slices.SortStableFunc(order, func(a, b int) int { return -cmpFloat(lg[a], lg[b]) })
			for k, alt := range res.Top[i] {
				if alt.Token != order[k] || math.Abs(float64(alt.Logprob)-lp[order[k]]) > 1e-4 {
					t.Errorf("step %d alternative %d = %+v, want token %d logprob %v", i, k, alt, order[k], lp[order[k]])
				}
			}
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestEngineFinish(t *testing.T) {
	p := testParams(t, testConfig(false), 3)
	e := newTestEngine(t, p, withBatch(2))
	ctx := context.Background()
	prompt := []int{4, 8, 15, 16, 23}
	base, err := e.Generate(ctx, GenRequest{Prompt: prompt, MaxNew: 20, Temperature: 2.5, Seed: 77})
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if base.Finish != FinishLength || len(base.Tokens) != 20 || base.PromptTokens != len(prompt) {
		t.Fatalf("base run: finish %q with %d tokens, prompt %d; want length, 20, %d", base.Finish, len(base.Tokens), base.PromptTokens, len(prompt))
	}
	// A stop token that first appears at index k, and a stop pair that
	// first ends at index k2.
	k := firstNew(base.Tokens, 3)
	k2 := 0
	for i := 4; i < len(base.Tokens); i++ {
		if !containsSeq(base.Tokens[:i], base.Tokens[i-1:i+1]) {
			k2 = i
			break
		}
	}
	if k < 0 || k2 == 0 {
		t.Fatalf("base output %v has no fresh token to stop on", base.Tokens)
	}
	tests := []struct {
		name       string
		req        GenRequest
		wantTokens []int
		wantFinish string
		wantStop   int
	}{
		{"stop token", GenRequest{StopTokens: []int{base.Tokens[k]}}, base.Tokens[:k+1], FinishStop, 1},
		{"stop sequence", GenRequest{StopSeqs: [][]int{{36, 36, 36}, base.Tokens[k2-1 : k2+1]}}, base.Tokens[:k2+1], FinishStop, 2},
		{"max new", GenRequest{MaxNew: 6}, base.Tokens[:6], FinishLength, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Prompt, req.Temperature, req.Seed = prompt, 2.5, 77
			if req.MaxNew == 0 {
				req.MaxNew = 20
			}
			got, err := e.Generate(ctx, req)
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			if !slices.Equal(got.Tokens, tc.wantTokens) || got.Finish != tc.wantFinish || got.StopLen != tc.wantStop {
				t.Errorf("got %v finish %q stop len %d, want %v finish %q stop len %d", got.Tokens, got.Finish, got.StopLen, tc.wantTokens, tc.wantFinish, tc.wantStop)
			}
			if !slices.Equal(got.Logprobs, base.Logprobs[:len(got.Tokens)]) {
				t.Errorf("logprobs %v differ from the base run's prefix", got.Logprobs)
			}
		})
	}

	c := p.Config.Context
	t.Run("context end", func(t *testing.T) {
		long := make([]int, c-3)
		got, err := e.Generate(ctx, GenRequest{Prompt: long})
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		if len(got.Tokens) != 3 || got.Finish != FinishLength {
			t.Errorf("got %d tokens finish %q, want 3 tokens finish %q", len(got.Tokens), got.Finish, FinishLength)
		}
	})
	t.Run("full prompt", func(t *testing.T) {
		got, err := e.Generate(ctx, GenRequest{Prompt: make([]int, c), MaxNew: 5})
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		if len(got.Tokens) != 0 || got.Finish != FinishLength {
			t.Errorf("got %d tokens finish %q, want 0 tokens finish %q", len(got.Tokens), got.Finish, FinishLength)
		}
	})
}

func firstNew(toks []int, from int) int {
	for i := from; i < len(toks); i++ {
		if !slices.Contains(toks[:i], toks[i]) {
			return i
		}
	}
	return -1
}

func containsSeq(s, sub []int) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slices.Equal(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func TestEngineBadRequests(t *testing.T) {
	p := testParams(t, testConfig(false), 1)
	e := newTestEngine(t, p, withBatch(1))
	tests := []struct {
		name string
		req  GenRequest
		want string
	}{
		{"empty prompt", GenRequest{}, "empty prompt"},
		{"token too large", GenRequest{Prompt: []int{1, 37}}, "prompt token 37 at index 1 out of range [0, 37)"},
		{"negative token", GenRequest{Prompt: []int{-1}}, "prompt token -1 at index 0"},
		{"prompt too long", GenRequest{Prompt: make([]int, 33)}, "prompt of 33 tokens is longer than the context of 32"},
		{"negative max new", GenRequest{Prompt: []int{1}, MaxNew: -1}, "max new tokens"},
		{"negative temperature", GenRequest{Prompt: []int{1}, Temperature: -0.5}, "temperature"},
		{"NaN temperature", GenRequest{Prompt: []int{1}, Temperature: math.NaN()}, "temperature"},
		{"top_p above one", GenRequest{Prompt: []int{1}, TopP: 1.5}, "top_p must be in [0, 1], got 1.5"},
		{"negative top_k", GenRequest{Prompt: []int{1}, TopK: -2}, "top_k"},
		{"too many alternatives", GenRequest{Prompt: []int{1}, TopLogprobs: 38}, "top logprobs"},
		{"stop token out of range", GenRequest{Prompt: []int{1}, StopTokens: []int{99}}, "stop token 99"},
		{"empty stop sequence", GenRequest{Prompt: []int{1}, StopSeqs: [][]int{{1}, {}}}, "stop sequence 1 is empty"},
		{"stop sequence token", GenRequest{Prompt: []int{1}, StopSeqs: [][]int{{1, 40}}}, "stop sequence 0 token 40 at index 1"},
		{"logit bias token", GenRequest{Prompt: []int{1}, LogitBias: []TokenBias{{Token: 37, Bias: 1}}}, "logit bias token 37 at index 0"},
		{"NaN penalty", GenRequest{Prompt: []int{1}, PresencePenalty: math.NaN()}, "penalty NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Generate(context.Background(), tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := e.GenerateAll(context.Background(), []GenRequest{{Prompt: []int{1}}, {}})
	if err == nil || !strings.Contains(err.Error(), "request 1: empty prompt") {
		t.Errorf("GenerateAll error = %v, want one naming request 1", err)
	}
}

// A request's result must be bitwise identical alone or batched with others.
// That holds with prefills chunked and mixed into decode steps, and slots
// refilled.
func TestEngineBatchMatchesAlone(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := testParams(t, testConfig(false), 5)
	reqs := testRequests(23)
	alone := make([]GenResult, len(reqs))
	{
		e := newTestEngine(t, p, withBatch(1))
		for i, r := range reqs {
			res, err := e.Generate(context.Background(), r)
			if err != nil {
				t.Fatalf("alone %d: %v", i, err)
			}
			alone[i] = res
		}
		e.Close()
	}
	for _, ec := range []EngineConfig{{MaxBatch: 6, PrefillChunk: 256}, {MaxBatch: 32, PrefillChunk: 256, parallelWork: 1}, {MaxBatch: 5, PrefillChunk: 3}} {
		t.Run(fmt.Sprintf("batch %d chunk %d split %d", ec.MaxBatch, ec.PrefillChunk, ec.parallelWork), func(t *testing.T) {
			e := newTestEngine(t, p, ec)
			got, err := e.GenerateAll(context.Background(), reqs)
			if err != nil {
				t.Fatalf("generate all: %v", err)
			}
			for i := range reqs {
				if !reflect.DeepEqual(got[i], alone[i]) {
					t.Errorf("request %d batched:\n%+v\nalone:\n%+v", i, got[i], alone[i])
				}
			}
			st := e.Stats()
			if st.Completed != int64(len(reqs)) || st.Admitted != int64(len(reqs)) {
				t.Errorf("stats %+v: want %d admitted and completed", st, len(reqs))
			}
			if want := int64(max(0, len(reqs)-ec.MaxBatch)); st.Refills != want {
				t.Errorf("refills = %d, want %d", st.Refills, want)
			}
			if st.Queued != 0 {
				t.Errorf("queued = %d after all finished, want 0", st.Queued)
			}
			if st.MaxActive != min(ec.MaxBatch, len(reqs)) {
				t.Errorf("max active = %d, want %d", st.MaxActive, min(ec.MaxBatch, len(reqs)))
			}
			e.Close()
		})
	}
}

// Many goroutines calling Generate at different times are batched together
// and each gets exactly its alone result.
func TestEngineConcurrentGenerate(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := testParams(t, testConfig(true), 9)
	reqs := testRequests(24)
	e := newTestEngine(t, p, withBatch(8))
	want, err := e.GenerateAll(context.Background(), reqs)
	if err != nil {
		t.Fatalf("generate all: %v", err)
	}
	got := make([]GenResult, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			time.Sleep(time.Duration(i%4) * time.Millisecond)
			got[i], errs[i] = e.Generate(context.Background(), r)
		})
	}
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("request %d concurrent result differs from the batched one", i)
		}
	}
	if st := e.Stats(); st.Refills == 0 {
		t.Errorf("stats %+v: want refills with 2×24 requests on 8 slots", st)
	}
	e.Close()
}

// Cancelling one request frees its slot; the others finish unchanged and
// the engine keeps serving.
func TestEngineCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := testConfig(false)
	c.Context = 2048
	p := testParams(t, c, 2)
	e := newTestEngine(t, p, withBatch(2))
	other := GenRequest{Prompt: []int{5, 6, 7}, MaxNew: 30, Temperature: 1, Seed: 1}
	want, err := e.Generate(context.Background(), other)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	longErr := make(chan error, 1)
	go func() {
		_, err := e.Generate(ctx, GenRequest{Prompt: []int{1}, Temperature: 1, Seed: 2}) // would run to the end of a 2048 context
		longErr <- err
	}()
	for e.Stats().GeneratedTokens < 30+5 { // the long request is decoding
		time.Sleep(time.Millisecond)
	}
	got, err := e.Generate(context.Background(), other)
	if err != nil {
		t.Fatalf("generate beside the long request: %v", err)
	}
	cancel()
	if err := <-longErr; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request error = %v, want context.Canceled", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request beside a cancelled one = %v, want %v", got.Tokens, want.Tokens)
	}
	// The freed slot serves new work; stats count the cancellation.
	again, err := e.Generate(context.Background(), other)
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("after cancel: %v, %v; want %v", again.Tokens, err, want.Tokens)
	}
	for e.Stats().Canceled != 1 {
		time.Sleep(time.Millisecond) // the scheduler drops it at its next step
	}

	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := e.Generate(done, other); !errors.Is(err, context.Canceled) {
		t.Errorf("already cancelled context: error = %v, want context.Canceled", err)
	}
	e.Close()
}

func TestEngineClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := testConfig(false)
	c.Context = 2048
	p := testParams(t, c, 2)
	e, err := NewEngine(p, withBatch(1))
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	errs := make(chan error, 3)
	for i := range 3 { // one runs, two wait in the queue
		go func() {
			_, err := e.Generate(context.Background(), GenRequest{Prompt: []int{1}, Temperature: 1, Seed: uint64(i)})
			errs <- err
		}()
	}
	for e.Stats().GeneratedTokens == 0 {
		time.Sleep(time.Millisecond)
	}
	e.Close()
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrEngineClosed) {
			t.Errorf("in-flight request error = %v, want ErrEngineClosed", err)
		}
	}
	if _, err := e.Generate(context.Background(), GenRequest{Prompt: []int{1}}); !errors.Is(err, ErrEngineClosed) {
		t.Errorf("after close: error = %v, want ErrEngineClosed", err)
	}
	if _, err := e.GenerateAll(context.Background(), []GenRequest{{Prompt: []int{1}}}); !errors.Is(err, ErrEngineClosed) {
		t.Errorf("GenerateAll after close: error = %v, want ErrEngineClosed", err)
	}
	e.Close() // idempotent
}

func TestNewEngineErrors(t *testing.T) {
	p := testParams(t, testConfig(false), 1)
	for _, tc := range []struct {
		name string
		p    *nn.Params
		ec   EngineConfig
		want string
	}{
		{"nil params", nil, DefaultEngineConfig(), "nil params"},
		{"negative batch", p, withBatch(-1), "max batch"},
		{"negative chunk", p, engineConfig(func(c *EngineConfig) { c.PrefillChunk = -4 }), "prefill chunk"},
		{"short view", func() *nn.Params { q := unfused(p); q.Layers[1].Wk = q.Layers[1].Wk[:5]; return q }(), DefaultEngineConfig(), "params layer 1 wk has 5 values, config needs 128"},
		{"missing layer", func() *nn.Params { q := unfused(p); q.Layers = q.Layers[:1]; return q }(), DefaultEngineConfig(), "params have 1 layers, config needs 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine(tc.p, tc.ec)
			if err == nil {
				e.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The decode loop allocates nothing per token.
// A request for 60 tokens costs the same allocations as one for 2, since
// its result slices are sized once. Top alternatives, which are results,
// are left out.
func TestEngineNoAllocationPerToken(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	c := testConfig(false)
	c.Context = 128
	p := testParams(t, c, 4)
	e := newTestEngine(t, p, withBatch(1))
	ctx := context.Background()
	allocs := func(maxNew int) float64 {
		req := GenRequest{Prompt: []int{1, 2}, MaxNew: maxNew, Temperature: 0.9, TopP: 0.95, Seed: 1}
		if _, err := e.Generate(ctx, req); err != nil { // warm the buffers
			t.Fatalf("generate: %v", err)
		}
		return testing.AllocsPerRun(20, func() {
			if _, err := e.Generate(ctx, req); err != nil {
				t.Fatalf("generate: %v", err)
			}
		})
	}
	short, long := allocs(2), allocs(60)
	if long > short {
		t.Errorf("allocations for 60 tokens = %v, for 2 tokens = %v: want no growth with length", long, short)
	}
}

// A panic inside the scheduler becomes an error for the requests, not a crash.
// Here it comes from weights truncated under the engine's feet. The engine
// reports it afterwards.
func TestEngineSchedulerPanic(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := testParams(t, testConfig(false), 4)
	e := newTestEngine(t, p, withBatch(2))
	p.TokenEmb = nil
	_, err := e.Generate(context.Background(), GenRequest{Prompt: []int{5}, MaxNew: 3})
	if err == nil || !strings.Contains(err.Error(), "scheduler panic") {
		t.Fatalf("error = %v, want a scheduler panic", err)
	}
	_, err = e.Generate(context.Background(), GenRequest{Prompt: []int{5}, MaxNew: 3})
	if err == nil || !strings.Contains(err.Error(), "scheduler panic") {
		t.Errorf("after the panic: error = %v, want the scheduler panic again", err)
	}
	e.Close()
}

// Samples of one prompt share the keys and values of their common prefix.
// So do prompts with a common head. They still come out bitwise identical
// to running alone.
func TestEnginePrefixSharing(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := testParams(t, testConfig(false), 6)
	system := []int{2, 4, 6, 8, 10, 12}
	var reqs []GenRequest
	for g := range 3 {
		prompt := append(slices.Clone(system), 20+g, 21, 22+g, 5, 5, 9)
		for s := range 5 {
			reqs = append(reqs, GenRequest{Prompt: prompt, MaxNew: 6 + s, Temperature: 1.1, TopP: 0.95, Seed: uint64(100*g + s)})
		}
	}
	reqs = append(reqs, GenRequest{Prompt: []int{2, 4}, MaxNew: 4, Seed: 1}) // a prompt inside the shared head
	alone := make([]GenResult, len(reqs))
	one := newTestEngine(t, p, withBatch(1))
	for i, r := range reqs {
		res, err := one.Generate(context.Background(), r)
		if err != nil {
			t.Fatalf("alone %d: %v", i, err)
		}
		alone[i] = res
	}
	if st := one.Stats(); st.PrefixReused != 0 {
		t.Errorf("one slot: prefix reused = %d, want 0 (no concurrent sequence to share with)", st.PrefixReused)
	}
	one.Close()
	total := 0
	for _, r := range reqs {
		total += len(r.Prompt)
	}
	for _, ec := range []EngineConfig{{MaxBatch: 16, PrefillChunk: 256}, {MaxBatch: 7, PrefillChunk: 4, parallelWork: 1}} {
		t.Run(fmt.Sprintf("batch %d chunk %d", ec.MaxBatch, ec.PrefillChunk), func(t *testing.T) {
			e := newTestEngine(t, p, ec)
			got, err := e.GenerateAll(context.Background(), reqs)
			if err != nil {
				t.Fatalf("generate all: %v", err)
			}
			for i := range reqs {
				if !reflect.DeepEqual(got[i], alone[i]) {
					t.Errorf("request %d with sharing:\n%+v\nalone:\n%+v", i, got[i], alone[i])
				}
			}
			st := e.Stats()
			if st.PrefixReused == 0 || st.PromptTokens+st.PrefixReused != int64(total) {
				t.Errorf("prompt tokens computed %d + reused %d, want reuse > 0 and a sum of %d", st.PromptTokens, st.PrefixReused, total)
			}
			t.Logf("computed %d of %d prompt tokens", st.PromptTokens, total)
			e.Close()
		})
	}
}

// TestEngineSeesUpdatedParams checks that the next call samples from changed nn.Params.
// It changes them in place between calls, as the RL trainer does between
// batches of rollouts. The next call's tokens and logprobs must equal a
// fresh engine's over the new weights, never come from the packed copy of
// the old ones. It checks after finished calls, after a canceled call whose
// job the scheduler may still hold, and for a batch.
func TestEngineSeesUpdatedParams(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := testConfig(true)
	c.Context = 1024
	p := testParams(t, c, 21)
	e := newTestEngine(t, p, withBatch(4))
	req := GenRequest{Prompt: []int{3, 1, 4, 1, 5}, MaxNew: 20, TopLogprobs: 2}
	reqs := testRequests(6)
	fresh := func(p *nn.Params) (GenResult, []GenResult) {
		t.Helper()
		f := newTestEngine(t, p, withBatch(4))
		defer f.Close()
		one, err := f.Generate(context.Background(), req)
		if err != nil {
			t.Fatalf("fresh engine: %v", err)
		}
		all, err := f.GenerateAll(context.Background(), reqs)
		if err != nil {
			t.Fatalf("fresh engine: %v", err)
		}
		return one, all
	}
	check := func(what string, want GenResult, wantAll []GenResult) {
		t.Helper()
		got, err := e.Generate(context.Background(), req)
		if err != nil {
			t.Fatalf("%s: generate: %v", what, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: tokens %v logprobs %v, want %v %v as a fresh engine over the same weights gives", what, got.Tokens, got.Logprobs, want.Tokens, want.Logprobs)
		}
		all, err := e.GenerateAll(context.Background(), reqs)
		if err != nil {
			t.Fatalf("%s: generate all: %v", what, err)
		}
		if !reflect.DeepEqual(all, wantAll) {
			t.Errorf("%s: a batch differs from a fresh engine's over the same weights", what)
		}
	}
	want0, wantAll0 := fresh(p)
	check("original weights", want0, wantAll0)

	q := testParams(t, c, 22)
	want1, wantAll1 := fresh(q)
	copy(p.Data, q.Data) // in place, as an optimizer step does
	if reflect.DeepEqual(want1, want0) {
		t.Fatalf("the new weights give the same result; the test cannot tell them apart")
	}
	before := e.Stats().Refreshes
	check("after an update between calls", want1, wantAll1)
	if got := e.Stats().Refreshes; got <= before {
		t.Errorf("refreshes = %d after an update and a call, want more than %d", got, before)
	}

	// A canceled call returns at once, while its job may hold a slot until
	// the scheduler's next step. The weights may change right after, and the
	// next call may come while the scheduler still holds the job.
	q = testParams(t, c, 23)
	want2, wantAll2 := fresh(q)
	ctx, cancel := context.WithCancel(context.Background())
	longErr := make(chan error, 1)
	go func() {
		_, err := e.Generate(ctx, GenRequest{Prompt: []int{1}, Temperature: 1, Seed: 2}) // to the end of the context
		longErr <- err
	}()
	for e.Stats().Active == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-longErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call: error = %v, want context.Canceled", err)
	}
	copy(p.Data, q.Data)
	check("after a canceled call and an update", want2, wantAll2)
	e.Close()
}

// TestEngineMemory checks that the KV cache is sized from the context and the batch.
// The weights are held once whatever the batch.
func TestEngineMemory(t *testing.T) {
	c := testConfig(false)
	p := testParams(t, c, 1)
	var weights int64
	for _, batch := range []int{1, 7} {
		e := newTestEngine(t, p, withBatch(batch))
		got := e.Memory()
		if want := int64(8 * batch * c.Context * c.KVDim() * c.Layers); got.KVCache != want {
			t.Errorf("batch %d: KV cache %d bytes, want %d", batch, got.KVCache, want)
		}
		if got.Slots != batch || got.Context != c.Context {
			t.Errorf("batch %d: %d slots of %d positions, want %d of %d", batch, got.Slots, got.Context, batch, c.Context)
		}
		// At least the parameters (the packed copy pads rows to 16), at
		// most that plus the padding.
		if lo, hi := int64(4*c.Size()), int64(4*c.Size()+4*16*c.Dim*(4*c.Layers+2)+4*16*c.Hidden*c.Layers); got.Weights < lo || got.Weights > hi {
			t.Errorf("batch %d: weights %d bytes, want %d to %d", batch, got.Weights, lo, hi)
		}
		if weights != 0 && got.Weights != weights {
			t.Errorf("batch %d: weights %d bytes, want %d as with batch 1", batch, got.Weights, weights)
		}
		weights = got.Weights
		if s := got.String(); !strings.Contains(s, "KV cache") {
			t.Errorf("String() = %q", s)
		}
	}
}

// TestEngineRefreshesOncePerCall: the packed weights are copied from the
// nn.Params once per call, not once per decoded token or step.
func TestEngineRefreshesOncePerCall(t *testing.T) {
	c := testConfig(false)
	p := testParams(t, c, 1)
	e := newTestEngine(t, p, withBatch(4))
	tests := []struct {
		name string
		reqs []GenRequest
	}{
		{"one sequence", []GenRequest{{Prompt: []int{1, 2}, MaxNew: 12}}},
		{"four sequences", []GenRequest{
			{Prompt: []int{1}, MaxNew: 10},
			{Prompt: []int{2, 3}, MaxNew: 10},
			{Prompt: []int{4}, MaxNew: 10},
			{Prompt: []int{5, 6, 7}, MaxNew: 10},
		}},
	}
	for _, tt := range tests {
		before := e.Stats()
		out, err := e.GenerateAll(context.Background(), tt.reqs)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		after := e.Stats()
		tokens := 0
		for _, r := range out {
			tokens += len(r.Tokens)
		}
		if got, want := after.Refreshes-before.Refreshes, int64(1); got != want {
			t.Errorf("%s: %d refreshes over %d steps and %d tokens, want %d", tt.name, got, after.Steps-before.Steps, tokens, want)
		}
		if steps := after.Steps - before.Steps; steps < 5 {
			t.Errorf("%s: %d steps, want at least 5: the call decoded too little to tell", tt.name, steps)
		}
	}
}
