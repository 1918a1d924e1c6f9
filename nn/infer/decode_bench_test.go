package infer

import (
	"fmt"
	"math"
	"testing"

	"github.com/delegatelab/delegate/nn"

	"github.com/delegatelab/delegate/internal/host"
)

// BenchmarkDecodeStep compares ways of splitting batch-1 decoding across cores.
// It pushes one sequence of 256 positions through the decoder one token at
// a time, batch-1 decoding without sampling. "default" splits as the
// decoder chooses: one task a step on every core, for models above
// parallelStep. "products" hands each product and attention to the cores
// separately, above their own thresholds, as the decoder did before the
// one-row step. "all" hands off every product and attention separately.
// They compare side by side in one run:
//
//	GOMAXPROCS=2 go test ./nn/infer -run '^$' -bench DecodeStep -count 5
func BenchmarkDecodeStep(b *testing.B) {
	configs := append(sampleBenchConfigs, struct {
		name string
		cfg  nn.Config
	}{"stories42M", nn.Config{Vocab: 32000, Dim: 512, Layers: 8, Heads: 8, KVHeads: 8, Hidden: 1376, Context: 1024, TiedOutput: true}})
	for _, bc := range configs {
		for _, split := range []string{"default", "products", "all"} {
			b.Run(fmt.Sprintf("%s/split=%s", bc.name, split), func(b *testing.B) {
				c := bc.cfg.WithDefaults()
				p, err := nn.Alloc(c)
				if err != nil {
					b.Fatal(err)
				}
				p.Init(1)
				cache, err := NewKVCache(c, 1)
				if err != nil {
					b.Fatal(err)
				}
				m := newDecoder(p, cache)
				defer m.close()
				switch split {
				case "products":
					m.parStep = math.MaxInt
				case "all":
					m.parStep, m.parMul, m.parWork = math.MaxInt, 1, 1
				}
				steps := min(256, c.Context)
				rows := make([]tokenRow, 1)
				cpu0, cpuOK := host.ProcessCPU()
				tokens := 0
				for b.Loop() {
					for pos := range steps {
						rows[0] = tokenRow{pos: pos, token: (pos * 7) % c.Vocab, logits: true}
						m.forward(rows)
					}
					tokens += steps
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
				if cpu1, ok := host.ProcessCPU(); ok && cpuOK {
					b.ReportMetric(float64(tokens)/(cpu1-cpu0).Seconds(), "tok/cpu-s")
				}
			})
		}
	}
}
