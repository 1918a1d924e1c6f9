package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// tinyConfig is small enough for finite differences over every tensor.
func tinyConfig(tied bool) nn.Config {
	return nn.Config{Vocab: 11, Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 24, Context: 8,
		TiedOutput: tied, RopeTheta: 10000, NormEps: 1e-5}
}

// largeInit draws weights big enough (std 0.3, norm gains around 1)
// that every gradient is well above float32 rounding.
func largeInit(t *testing.T, c nn.Config, seed uint64) *nn.Params {
	t.Helper()
	p, err := nn.Alloc(c)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range p.Data {
		p.Data[i] = float32(rng.NormFloat64() * 0.3)
	}
	norms := [][]float32{p.FinalNorm}
	for _, l := range p.Layers {
		norms = append(norms, l.AttnNorm, l.FFNNorm)
	}
	for _, g := range norms {
		for i := range g {
			g[i] = 1 + float32(rng.NormFloat64()*0.2)
		}
	}
	return p
}

// randomBatch draws tokens and, when weighted, weights in
// {0, 1, -0.5, 2} with zeros included.
func randomBatch(rng *rand.Rand, c nn.Config, b, t int, weighted bool) Batch {
	n := b * t
	bt := Batch{B: b, T: t, Inputs: make([]int, n), Targets: make([]int, n)}
	for i := range n {
		bt.Inputs[i] = rng.IntN(c.Vocab)
		bt.Targets[i] = rng.IntN(c.Vocab)
	}
	if weighted {
		choices := []float32{0, 1, -0.5, 2}
		bt.Weights = make([]float32, n)
		for i := range bt.Weights {
			bt.Weights[i] = choices[i%len(choices)]
		}
	}
	return bt
}

// views names every tensor of p, the same order for p and its grads.
func views(p *nn.Params) (names []string, views [][]float32) {
	add := func(name string, v []float32) { names, views = append(names, name), append(views, v) }
	add("TokenEmb", p.TokenEmb)
	for i, l := range p.Layers {
		for _, nv := range []struct {
			n string
			v []float32
		}{{"AttnNorm", l.AttnNorm}, {"Wq", l.Wq}, {"Wk", l.Wk}, {"Wv", l.Wv}, {"Wo", l.Wo},
			{"FFNNorm", l.FFNNorm}, {"W1", l.W1}, {"W2", l.W2}, {"W3", l.W3}} {
			add(fmt.Sprintf("layer%d.%s", i, nv.n), nv.v)
		}
	}
	add("FinalNorm", p.FinalNorm)
	if !p.Config.TiedOutput {
		add("Output", p.Output)
	}
	return names, views
}

// TestModelGradient checks every tensor of the model's gradient by central differences.
// It runs in float32 with h = 3e-3 and tolerance
// |fd − analytic| ≤ 2e-4 + 2e-3·|g|, so a 1% error in any term fails. The
// float32 rounding of the loss and the curvature of the model bound h from
// both sides.
func TestModelGradient(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprint("tied=", tied), func(t *testing.T) {
			c := tinyConfig(tied)
			p := largeInit(t, c, 21)
			g, _ := nn.Alloc(c)
			ws, err := NewWorkspace(c)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(22, 23))
			b := randomBatch(rng, c, 2, 6, true)
			b.Inputs[3] = b.Inputs[9] // a repeated token accumulates into one embedding row
			ctx := context.Background()
			const norm = 5.0
			if _, err := ws.ForwardBackward(ctx, p, g, b, norm); err != nil {
				t.Fatal(err)
			}
			// the finite differences run forward only: Σ w·(−log p) / norm
			loss := func() float64 {
				lp, err := ws.TokenLogprobs(ctx, p, b)
				if err != nil {
					t.Fatal(err)
				}
				var l float64
				for i, v := range lp {
					l -= float64(b.Weights[i]) * float64(v)
				}
				return l / norm
			}
			names, pv := views(p)
			_, gv := views(g)
			samples := 24
			if raceEnabled {
				samples = 8 // every tensor still checked; the race detector makes each forward pass slow
			}
			for i := range names {
				checkGrad(t, names[i], pv[i], gv[i], sampleIndices(len(pv[i]), samples), loss, 3e-3, 2e-4, 2e-3)
			}
		})
	}
}

// TestMaskedPositions checks that a position of weight 0 adds exactly nothing.
// Its target can change without changing one bit of the loss or gradient.
func TestMaskedPositions(t *testing.T) {
	c := tinyConfig(true)
	p := largeInit(t, c, 31)
	ws, _ := NewWorkspace(c)
	rng := rand.New(rand.NewPCG(32, 33))
	b := randomBatch(rng, c, 2, 8, true)
	run := func(b Batch) (float64, []float32) {
		g, _ := nn.Alloc(c)
		loss, err := ws.ForwardBackward(context.Background(), p, g, b, 4)
		if err != nil {
			t.Fatal(err)
		}
		return loss, g.Data
	}
	loss1, g1 := run(b)
	b2 := b
	b2.Targets = append([]int(nil), b.Targets...)
	changed := 0
	for i, w := range b.Weights {
		if w == 0 {
			b2.Targets[i] = (b.Targets[i] + 1 + i) % c.Vocab
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("batch has no masked position")
	}
	loss2, g2 := run(b2)
	if loss1 != loss2 {
		t.Errorf("loss changed from %v to %v with only masked targets changed", loss1, loss2)
	}
	for i := range g1 {
		if g1[i] != g2[i] {
			t.Fatalf("grad[%d] changed from %v to %v with only masked targets changed", i, g1[i], g2[i])
		}
	}
	// all weights zero: exactly zero gradient everywhere
	b3 := b
	b3.Weights = make([]float32, len(b.Weights))
	loss3, g3 := run(b3)
	if loss3 != 0 {
		t.Errorf("loss with every weight 0 = %v, want 0", loss3)
	}
	for i, v := range g3 {
		if v != 0 {
			t.Fatalf("grad[%d] = %v with every weight 0, want exactly 0", i, v)
		}
	}
}

// TestLossMatchesLogprobs: with unit weights the loss is minus the mean of
// TokenLogprobs, and nil weights mean unit weights.
func TestLossMatchesLogprobs(t *testing.T) {
	c := tinyConfig(false)
	p := largeInit(t, c, 41)
	ws, _ := NewWorkspace(c)
	rng := rand.New(rand.NewPCG(42, 43))
	b := randomBatch(rng, c, 3, 7, false)
	ctx := context.Background()
	lp, err := ws.TokenLogprobs(ctx, p, b)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	for _, v := range lp {
		if v > 0 || math.IsNaN(float64(v)) {
			t.Fatalf("logprob %v is not a log-probability", v)
		}
		want -= float64(v)
	}
	want /= float64(len(lp))
	g, _ := nn.Alloc(c)
	got, err := ws.ForwardBackward(ctx, p, g, b, float64(len(lp)))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("loss = %v, want −mean(logprobs) = %v", got, want)
	}
	// a shorter batch after a longer one reuses the buffers correctly
	short := randomBatch(rng, c, 1, 3, false)
	short.Inputs = b.Inputs[:3]
	short.Targets = b.Targets[:3]
	lp2, err := ws.TokenLogprobs(ctx, p, short)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lp2 {
		if math.Abs(float64(lp2[i]-lp[i])) > 1e-6 {
			t.Errorf("prefix logprob[%d] = %v, want %v as in the longer batch", i, lp2[i], lp[i])
		}
	}
}

func TestTrainBadInput(t *testing.T) {
	c := tinyConfig(false)
	p := largeInit(t, c, 51)
	g, _ := nn.Alloc(c)
	other, _ := nn.Alloc(tinyConfig(true))
	ws, _ := NewWorkspace(c)
	ok := func() Batch { return Batch{B: 1, T: 2, Inputs: []int{1, 2}, Targets: []int{2, 3}} }
	tests := []struct {
		name  string
		edit  func(b *Batch)
		grads *nn.Params
		norm  float64
		want  string
	}{
		{"input out of range", func(b *Batch) { b.Inputs[1] = 11 }, g, 1, "input token 11 at sequence 0 position 1"},
		{"negative target", func(b *Batch) { b.Targets[0] = -1 }, g, 1, "target token -1"},
		{"too long", func(b *Batch) {
			*b = Batch{B: 1, T: 9, Inputs: make([]int, 9), Targets: make([]int, 9)}
		}, g, 1, "length 9 exceeds the model's context 8"},
		{"inputs length", func(b *Batch) { b.Inputs = b.Inputs[:1] }, g, 1, "1 inputs for shape 1x2"},
		{"weights length", func(b *Batch) { b.Weights = []float32{1} }, g, 1, "1 weights"},
		{"nan weight", func(b *Batch) { b.Weights = []float32{1, float32(math.NaN())} }, g, 1, "not finite"},
		{"empty", func(b *Batch) { b.B = 0 }, g, 1, "must be positive"},
		{"zero norm", func(b *Batch) {}, g, 0, "norm must be positive"},
		{"nil grads", func(b *Batch) {}, nil, 1, "grads must be separate"},
		{"grads are params", func(b *Batch) {}, p, 1, "grads must be separate"},
		{"grads config", func(b *Batch) {}, other, 1, "differs from workspace config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := ok()
			tt.edit(&b)
			_, err := ws.ForwardBackward(context.Background(), p, tt.grads, b, tt.norm)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ws.TokenLogprobs(ctx, p, ok()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled TokenLogprobs error = %v, want context.Canceled", err)
	}
}

// TestConcurrentWorkspaces: workspaces sharing one nn.Params may run at once
// (run under -race) and give the same log-probs as one alone.
func TestConcurrentWorkspaces(t *testing.T) {
	c := tinyConfig(true)
	p := largeInit(t, c, 101)
	rng := rand.New(rand.NewPCG(102, 103))
	batches := []Batch{randomBatch(rng, c, 2, 8, false), randomBatch(rng, c, 3, 5, false), randomBatch(rng, c, 1, 7, false)}
	ws, _ := NewWorkspace(c)
	want := make([][]float32, len(batches))
	for i, b := range batches {
		lp, err := ws.TokenLogprobs(context.Background(), p, b)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = lp
	}
	got := make([][]float32, len(batches))
	errs := make([]error, len(batches))
	done := make(chan int)
	for i, b := range batches {
		go func() {
			w, err := NewWorkspace(c)
			if err == nil {
				got[i], err = w.TokenLogprobs(context.Background(), p, b)
			}
			errs[i] = err
			done <- i
		}()
	}
	for range batches {
		<-done
	}
	for i := range batches {
		if errs[i] != nil {
			t.Fatalf("batch %d: %v", i, errs[i])
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("batch %d position %d: concurrent log p %v, alone %v", i, j, got[i][j], want[i][j])
			}
		}
	}
}
