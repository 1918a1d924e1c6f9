package infer

import (
	"fmt"
	"testing"

	"github.com/delegatelab/delegate/nn"

	"github.com/delegatelab/delegate/internal/host"
)

// BenchmarkDecodeStep compares the decoder's split across cores with splitting everything.
// It pushes one sequence of 256 positions through the decoder one token at
// a time, batch-1 decoding without sampling. "default" splits products and
// attention as the decoder chooses; "all" splits every one. The two compare
// side by side in one run:
//
//	GOMAXPROCS=2 go test ./nn/infer -run '^$' -bench DecodeStep -count 5
func BenchmarkDecodeStep(b *testing.B) {
	for _, bc := range sampleBenchConfigs {
		for _, split := range []string{"default", "all"} {
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
				if split == "all" {
					m.parMul, m.parWork = 1, 1
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
