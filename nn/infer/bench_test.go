package infer

import (
	"context"
	"fmt"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// Sizes of llama2.c's reference models, for comparing with its run program
// on the same exported weights (see perf/).
var sampleBenchConfigs = []struct {
	name string
	cfg  nn.Config
}{
	{"stories260K", nn.Config{Vocab: 512, Dim: 64, Layers: 5, Heads: 8, KVHeads: 4, Hidden: 172, Context: 512}},
	{"stories15M-v512", nn.Config{Vocab: 512, Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, Hidden: 768, Context: 256}},
	{"stories15M", nn.Config{Vocab: 32000, Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, Hidden: 768, Context: 256, TiedOutput: true}},
}

// BenchmarkSample reports generated tokens per second over batches of 1 and 32.
// Each sequence is 256 positions: one prompt token and 255 sampled at
// temperature 1, top-p 0.9, as llama2.c's run does by default with -n 256.
//
//	go test ./nn/infer -run '^$' -bench BenchmarkSample -benchtime 3x
func BenchmarkSample(b *testing.B) {
	for _, bc := range sampleBenchConfigs {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/batch=%d", bc.name, batch), func(b *testing.B) {
				c := bc.cfg.WithDefaults()
				p, err := nn.Alloc(c)
				if err != nil {
					b.Fatal(err)
				}
				p.Init(1)
				e, err := NewEngine(p, withBatch(batch))
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				steps := min(256, c.Context)
				reqs := make([]GenRequest, batch)
				for i := range reqs {
					reqs[i] = GenRequest{Prompt: []int{1}, MaxNew: steps - 1, Temperature: 1, TopP: 0.9, Seed: uint64(i)}
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				tokens := 0
				for b.Loop() {
					res, err := e.GenerateAll(ctx, reqs)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						tokens += len(r.Tokens)
					}
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkSamplePrefill reports prompt tokens per second for one 255-token prompt.
// It pushes the prompt through the model and samples one token: the
// matrix-product path a server's long prompts take.
//
//	go test ./nn/infer -run '^$' -bench BenchmarkSamplePrefill -benchtime 3x
func BenchmarkSamplePrefill(b *testing.B) {
	for _, bc := range sampleBenchConfigs {
		b.Run(bc.name, func(b *testing.B) {
			c := bc.cfg.WithDefaults()
			p, err := nn.Alloc(c)
			if err != nil {
				b.Fatal(err)
			}
			p.Init(1)
			e, err := NewEngine(p, withBatch(1))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			prompt := make([]int, min(255, c.Context-1))
			for i := range prompt {
				prompt[i] = (i * 7) % c.Vocab
			}
			req := GenRequest{Prompt: prompt, MaxNew: 1}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Generate(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(prompt)*b.N)/b.Elapsed().Seconds(), "prompt-tok/s")
		})
	}
}
