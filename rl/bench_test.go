package rl

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

// BenchmarkUpdate times one gradient phase of a step, with one epoch and KL on.
// The step has 32 sequences of 160 prompt and 40 generated tokens, on a 2-layer model of width 64.
func BenchmarkUpdate(b *testing.B) {
	mc := nn.Config{Vocab: tokenizer.VocabSize, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 176, Context: 256}.WithDefaults()
	p, err := nn.Alloc(mc)
	if err != nil {
		b.Fatal(err)
	}
	p.Init(1)
	cfg := DefaultConfig()
	cfg.PolicyRole, cfg.OutDir = "p", b.TempDir()
	cfg.KLBeta = 0.04
	cfg.MaxLogprobGap = 1e9 // the episodes are not sampled from p
	l, err := newLearner(cfg, p)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	seqs := make([]trainSeq, 32)
	for i := range seqs {
		e := Episode{Node: "n", Prompt: make([]int, 160), Completion: make([]int, 40), Behaviour: make([]float32, 40)}
		for j := range e.Prompt {
			e.Prompt[j] = rng.IntN(mc.Vocab)
		}
		for j := range e.Completion {
			e.Completion[j] = rng.IntN(mc.Vocab)
		}
		seqs[i] = trainSeq{Episode: e, Adv: rng.NormFloat64(), Coef: 1.0 / (40 * 32)}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := l.update(context.Background(), seqs, 1e-5, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*32*40)/b.Elapsed().Seconds(), "trained-tok/s")
}
