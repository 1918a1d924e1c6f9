package infer

import (
	"context"
	"testing"
	"time"

	"github.com/delegatelab/delegate/internal/host"
	"github.com/delegatelab/delegate/nn"
)

// BenchmarkGreedyBatch reports tokens per second of 32 greedy sequences decoded together.
// It is perf/sample's batch-32 measurement without llama2.c: each sequence
// is a prompt of two tokens and 254 greedy ones, 256 positions in all.
// "forward" times the decoder's steps alone, "engine" adds scheduling and
// sampling. An untimed pass first touches the whole KV cache, so that
// its page faults are not timed, as in perf/sample's later repetitions.
// Profile it with
//
//	GOMAXPROCS=1 go test ./nn/infer -run '^$' -bench GreedyBatch -cpuprofile b32.prof
func BenchmarkGreedyBatch(b *testing.B) {
	const batch = 32
	for _, bc := range sampleBenchConfigs[1:] { // the stories15M shapes
		c := bc.cfg.WithDefaults()
		p, err := nn.Alloc(c)
		if err != nil {
			b.Fatal(err)
		}
		p.Init(1)
		steps := min(256, c.Context)
		b.Run(bc.name+"/engine", func(b *testing.B) {
			e, err := NewEngine(p, withBatch(batch))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			reqs := make([]GenRequest, batch)
			for i := range reqs {
				reqs[i] = GenRequest{Prompt: []int{1, 3 + i}, MaxNew: steps - 2}
			}
			ctx := context.Background()
			if _, err := e.GenerateAll(ctx, reqs); err != nil {
				b.Fatal(err)
			}
			tokens := 0
			cpu0, cpuOK := host.ProcessCPU()
			for b.Loop() {
				res, err := e.GenerateAll(ctx, reqs)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					tokens += len(r.Tokens)
				}
			}
			reportRates(b, tokens, cpu0, cpuOK)
		})
		b.Run(bc.name+"/forward", func(b *testing.B) {
			cache, err := NewKVCache(c, batch)
			if err != nil {
				b.Fatal(err)
			}
			m := newDecoder(p, cache)
			defer m.close()
			rows := make([]tokenRow, batch)
			pass := func() {
				for pos := range steps {
					for i := range rows {
						rows[i] = tokenRow{slot: i, pos: pos, token: (pos*7 + i) % c.Vocab, logits: true}
					}
					m.forward(rows)
				}
			}
			pass()
			tokens := 0
			cpu0, cpuOK := host.ProcessCPU()
			for b.Loop() {
				pass()
				tokens += batch * steps
			}
			reportRates(b, tokens, cpu0, cpuOK)
		})
	}
}

// reportRates reports tokens per wall-clock second and per second of the process's CPU time.
func reportRates(b *testing.B, tokens int, cpu0 time.Duration, cpuOK bool) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	if cpu1, ok := host.ProcessCPU(); ok && cpuOK && cpu1 > cpu0 {
		b.ReportMetric(float64(tokens)/(cpu1-cpu0).Seconds(), "tok/cpu-s")
	}
}
