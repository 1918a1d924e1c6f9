package train

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

func testConfig(steps int, lr float64) Config {
	return Config{
		AdamW:    AdamW{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.01},
		Schedule: Schedule{Warmup: 5, Total: steps, MaxLR: lr, MinLR: lr / 10},
		ClipNorm: 1,
	}
}

func newModel(t testing.TB, c nn.Config, seed uint64) *nn.Params {
	t.Helper()
	p, err := nn.Alloc(c)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(seed)
	return p
}

func TestOverfitOneBatch(t *testing.T) {
	c := nn.Config{Vocab: 16, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, Context: 16, RopeTheta: 10000, NormEps: 1e-5}
	p := newModel(t, c, 1)
	const steps = 50
	tr, err := NewTrainer(p, testConfig(steps, 1e-2))
	if err != nil {
		t.Fatal(err)
	}
	b := randomBatch(rand.New(rand.NewPCG(2, 3)), c, 2, 12, false)
	var first, last StepStats
	for i := 0; i < steps; i++ {
		st, err := tr.Step(context.Background(), []Batch{b})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = st
		}
		last = st
	}
	t.Logf("loss %.4f -> %.4f", first.Loss, last.Loss)
	if first.Loss < 2.5 || last.Loss > 0.05 {
		t.Errorf("loss went from %.4f to %.4f over %d steps, want from about ln 16 = 2.77 to below 0.05", first.Loss, last.Loss, steps)
	}
}

// countingBatch draws sequences of a simple counting grammar.
// Each counts from a random start with a random stride in {1, 2, 3} modulo
// the vocabulary. After two tokens the rest is determined, so a model that
// learns the grammar pays about (ln V + ln 3)/T per token.
func countingBatch(rng *rand.Rand, vocab, b, t int) Batch {
	bt := Batch{B: b, T: t, Inputs: make([]int, b*t), Targets: make([]int, b*t)}
	for s := 0; s < b; s++ {
		tok, stride := rng.IntN(vocab), 1+rng.IntN(3)
		for i := 0; i < t; i++ {
			bt.Inputs[s*t+i] = tok
			tok = (tok + stride) % vocab
			bt.Targets[s*t+i] = tok
		}
	}
	return bt
}

func TestLossFallsOnGeneratedCorpus(t *testing.T) {
	c := nn.Config{Vocab: 16, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, Context: 16, RopeTheta: 10000, NormEps: 1e-5, TiedOutput: true}
	p := newModel(t, c, 7)
	const steps = 40
	tr, err := NewTrainer(p, testConfig(steps, 2e-2))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	held := countingBatch(rand.New(rand.NewPCG(10, 11)), c.Vocab, 8, 16)
	eval := func() float64 {
		lp, err := tr.TokenLogprobs(context.Background(), held)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for _, v := range lp {
			s -= float64(v)
		}
		return s / float64(len(lp))
	}
	before := eval()
	for i := 0; i < steps; i++ {
		micro := []Batch{countingBatch(rng, c.Vocab, 4, 12), countingBatch(rng, c.Vocab, 4, 12)}
		if _, err := tr.Step(context.Background(), micro); err != nil {
			t.Fatal(err)
		}
	}
	after := eval()
	t.Logf("held-out loss %.3f -> %.3f", before, after)
	if before < 2.5 || after > 1.2 {
		t.Errorf("held-out loss went from %.3f to %.3f, want from about ln 16 = 2.77 to below 1.2", before, after)
	}
}

// TestTrainDeterministic: the same seed and batches give bitwise the same
// parameters, moments and statistics.
func TestTrainDeterministic(t *testing.T) {
	c := tinyConfig(true)
	run := func() (*Trainer, []StepStats) {
		p := newModel(t, c, 99)
		tr, err := NewTrainer(p, testConfig(10, 1e-2))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 5))
		var stats []StepStats
		for i := 0; i < 3; i++ {
			micro := []Batch{randomBatch(rng, c, 2, 8, true), randomBatch(rng, c, 3, 5, true)}
			st, err := tr.Step(context.Background(), micro)
			if err != nil {
				t.Fatal(err)
			}
			stats = append(stats, st)
		}
		return tr, stats
	}
	a, sa := run()
	b, sb := run()
	for i := range sa {
		if sa[i] != sb[i] {
			t.Errorf("step %d stats differ: %+v vs %+v", i, sa[i], sb[i])
		}
	}
	for _, pair := range [][2][]float32{{a.Params.Data, b.Params.Data}, {a.Opt.M.Data, b.Opt.M.Data}, {a.Opt.V.Data, b.Opt.V.Data}} {
		for i := range pair[0] {
			if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
				t.Fatalf("value %d differs between identical runs: %v vs %v", i, pair[0][i], pair[1][i])
			}
		}
	}
}

// TestAccumulationMatchesOneBatch: two micro-batches give the gradient of
// their concatenation (same loss, same normalization).
func TestAccumulationMatchesOneBatch(t *testing.T) {
	c := tinyConfig(false)
	rng := rand.New(rand.NewPCG(61, 62))
	b1, b2 := randomBatch(rng, c, 2, 6, true), randomBatch(rng, c, 1, 6, true)
	whole := Batch{B: 3, T: 6, Inputs: append(append([]int(nil), b1.Inputs...), b2.Inputs...),
		Targets: append(append([]int(nil), b1.Targets...), b2.Targets...),
		Weights: append(append([]float32(nil), b1.Weights...), b2.Weights...)}
	cfg := testConfig(10, 1e-3)
	cfg.ClipNorm = 0
	trA, _ := NewTrainer(largeInit(t, c, 63), cfg)
	trB, _ := NewTrainer(largeInit(t, c, 63), cfg)
	sa, err := trA.Step(context.Background(), []Batch{b1, b2})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := trB.Step(context.Background(), []Batch{whole})
	if err != nil {
		t.Fatal(err)
	}
	if sa.Tokens != sb.Tokens || math.Abs(sa.Loss-sb.Loss) > 1e-5 || math.Abs(sa.GradNorm-sb.GradNorm) > 1e-4*sb.GradNorm {
		t.Errorf("micro-batches: %+v, one batch: %+v; want the same tokens, loss and norm", sa, sb)
	}
	for i := range trA.Grads.Data {
		if d := math.Abs(float64(trA.Grads.Data[i] - trB.Grads.Data[i])); d > 1e-5+1e-4*math.Abs(float64(trB.Grads.Data[i])) {
			t.Fatalf("grad[%d] = %v accumulated, %v in one batch", i, trA.Grads.Data[i], trB.Grads.Data[i])
		}
	}
}

func TestTrainClipping(t *testing.T) {
	c := tinyConfig(false)
	b := randomBatch(rand.New(rand.NewPCG(71, 72)), c, 2, 8, false)
	norm := func(s []float32) float64 {
		var ss float64
		for _, v := range s {
			ss += float64(v) * float64(v)
		}
		return math.Sqrt(ss)
	}
	tests := []struct {
		name        string
		clip        float64
		wantClipped bool
	}{
		{"clipped", 1e-3, true},
		{"not clipped", 1e6, false},
		{"disabled", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(10, 1e-3)
			cfg.ClipNorm = tt.clip
			tr, err := NewTrainer(largeInit(t, c, 73), cfg)
			if err != nil {
				t.Fatal(err)
			}
			st, err := tr.Step(context.Background(), []Batch{b})
			if err != nil {
				t.Fatal(err)
			}
			if st.Clipped != tt.wantClipped {
				t.Errorf("clipped = %v, want %v (grad norm %v, clip %v)", st.Clipped, tt.wantClipped, st.GradNorm, tt.clip)
			}
			got, want := norm(tr.Grads.Data), st.GradNorm
			if tt.wantClipped {
				want = tt.clip
			}
			if math.Abs(got-want) > 1e-4*want {
				t.Errorf("gradient norm after the step = %v, want %v (pre-clip %v)", got, want, st.GradNorm)
			}
		})
	}
}

func TestStepErrorsLeaveParams(t *testing.T) {
	c := tinyConfig(false)
	p := largeInit(t, c, 81)
	before := append([]float32(nil), p.Data...)
	tr, err := NewTrainer(p, testConfig(10, 1e-2))
	if err != nil {
		t.Fatal(err)
	}
	good := randomBatch(rand.New(rand.NewPCG(82, 83)), c, 1, 4, false)
	zero := good
	zero.Weights = make([]float32, 4)
	bad := good
	bad.Inputs = []int{0, 1, 2, 99}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Step(ctx, []Batch{good}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled step error = %v, want context.Canceled", err)
	}
	for _, micro := range [][]Batch{nil, {zero}, {good, bad}} {
		if _, err := tr.Step(context.Background(), micro); err == nil {
			t.Errorf("step on %d micro-batches succeeded, want an error", len(micro))
		}
	}
	for i := range before {
		if p.Data[i] != before[i] {
			t.Fatalf("param %d changed from %v to %v by failed steps", i, before[i], p.Data[i])
		}
	}
	if tr.Opt.Steps != 0 {
		t.Errorf("optimizer steps = %d after failed steps, want 0", tr.Opt.Steps)
	}
}
