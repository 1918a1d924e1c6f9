package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"

	"github.com/delegatelab/delegate/internal/host"
)

// stepFLOPs counts the floating-point operations of one training step on a B×T batch.
// The matrix products take 2·N·(D·(D+2KV) + D·D + 3·D·Hidden + D·V) forward
// and twice that backward, for input and weight gradients: about
// 6·params·tokens. Causal attention takes 4·HeadDim per query-key pair per
// head forward, and twice that backward.
func stepFLOPs(c nn.Config, b, t int) float64 {
	n := float64(b * t)
	d, kv, hid, v := float64(c.Dim), float64(c.KVDim()), float64(c.Hidden), float64(c.Vocab)
	perLayer := 2 * n * (d*(d+2*kv) + d*d + 3*d*hid)
	mm := 3 * (float64(c.Layers)*perLayer + 2*n*d*v)
	pairs := float64(b) * float64(t*(t+1)/2) * float64(c.Heads)
	attn := 3 * float64(c.Layers) * pairs * 4 * float64(c.HeadDim())
	return mm + attn
}

// BenchmarkTrainStep reports training tok/s and GFLOPS against the kernel's own rate.
// The kernel's MatMulNT rate is measured in the same run on the model's MLP
// shape (N, D)·(Hidden, D)ᵀ, with the ratio between the two. The same three
// figures follow per second of the process's CPU time: cpu-GFLOPS,
// matmul-cpu-GFLOPS and %matmul-cpu. Other processes on a shared machine
// disturb those less. At GOMAXPROCS above 1, CPU time counts every thread,
// spinning and waiting included. The ratio is meant for the parallel fast
// kernels. With the single-threaded reference kernels it can pass 100%, as
// attention and the elementwise layers use every core. Run it with a small
// -benchtime:
//
//	go test -run '^$' -bench TrainStep -benchtime 3x ./nn/train/
func BenchmarkTrainStep(b *testing.B) {
	benches := []struct {
		name string
		c    nn.Config
		B, T int
	}{
		{"small", nn.Config{Vocab: 256, Dim: 64, Layers: 2, Heads: 4, KVHeads: 4, Hidden: 172, Context: 64, RopeTheta: 10000, NormEps: 1e-5, TiedOutput: true}, 4, 64},
		{"4M", nn.Config{Vocab: 512, Dim: 256, Layers: 5, Heads: 8, KVHeads: 4, Hidden: 688, Context: 128, RopeTheta: 10000, NormEps: 1e-5, TiedOutput: true}, 4, 128},
	}
	for _, bb := range benches {
		b.Run(fmt.Sprintf("%s-%dparams-%dx%d", bb.name, bb.c.Size(), bb.B, bb.T), func(b *testing.B) {
			p := newModel(b, bb.c, 1)
			tr, err := NewTrainer(p, Config{AdamW: DefaultAdamW(), Schedule: Schedule{Warmup: 10, Total: 1000, MaxLR: 1e-3}, ClipNorm: 1})
			if err != nil {
				b.Fatal(err)
			}
			batch := randomBatch(rand.New(rand.NewPCG(1, 2)), bb.c, bb.B, bb.T, false)
			ctx := context.Background()
			if _, err := tr.Step(ctx, []Batch{batch}); err != nil { // size the workspace
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0, cpuOK := host.ProcessCPU()
			for b.Loop() {
				if _, err := tr.Step(ctx, []Batch{batch}); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			cpu1, _ := host.ProcessCPU()
			cpuSec := (cpu1 - cpu0).Seconds() / float64(b.N)
			b.StopTimer()
			flops := stepFLOPs(bb.c, bb.B, bb.T)
			b.ReportMetric(float64(bb.B*bb.T)/sec, "tok/s")
			b.ReportMetric(flops/sec/1e9, "GFLOPS")

			// the kernel's rate on this model's largest per-layer product
			n, d, h := bb.B*bb.T, bb.c.Dim, bb.c.Hidden
			x, w, y := make([]float32, n*d), make([]float32, h*d), make([]float32, n*h)
			for i := range x {
				x[i] = float32(i%7) * 0.1
			}
			for i := range w {
				w[i] = float32(i%5) * 0.1
			}
			// Take the best of five windows of 100ms. The machine is shared,
			// and the best window is the closest to the kernel's own rate.
			var mm, mmCPU float64
			for range 5 {
				reps := 0
				start := time.Now()
				c0, _ := host.ProcessCPU()
				for time.Since(start) < 100*time.Millisecond || reps < 2 {
					kernel.MatMulNT(y, x, w, n, d, h)
					reps++
				}
				f := 2 * float64(n*d*h) * float64(reps)
				mm = max(mm, f/time.Since(start).Seconds()/1e9)
				if c1, _ := host.ProcessCPU(); c1 > c0 {
					mmCPU = max(mmCPU, f/(c1-c0).Seconds()/1e9)
				}
			}
			b.ReportMetric(mm, "matmul-GFLOPS")
			b.ReportMetric(100*flops/sec/1e9/mm, "%matmul")
			// The same rates per second of CPU time (the process's, all
			// threads): on a shared machine they move less with the load.
			if cpuOK && cpuSec > 0 && mmCPU > 0 {
				b.ReportMetric(flops/cpuSec/1e9, "cpu-GFLOPS")
				b.ReportMetric(mmCPU, "matmul-cpu-GFLOPS")
				b.ReportMetric(100*flops/cpuSec/1e9/mmCPU, "%matmul-cpu")
			}
		})
	}
}

// BenchmarkTrainAttention times causal attention forward and backward alone on
// the 4M model's shape, in GFLOPS by the count of stepFLOPs.
func BenchmarkTrainAttention(b *testing.B) {
	a := attention{B: 4, T: 128, Heads: 8, KVHeads: 4, HeadDim: 32}
	rng := rand.New(rand.NewPCG(1, 2))
	n, d := a.B*a.T, a.Heads*a.HeadDim
	qkv := randn(rng, n*a.stride(), 1)
	dout := randn(rng, n*d, 1)
	out, lse, dqkv := make([]float32, n*d), make([]float32, a.B*a.Heads*a.T), make([]float32, n*a.stride())
	for b.Loop() {
		a.forward(out, lse, qkv)
		a.backward(dqkv, dout, lse, qkv)
	}
	pairs := float64(a.B*a.Heads) * float64(a.T*(a.T+1)/2)
	b.ReportMetric(3*pairs*4*float64(a.HeadDim)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
}

// BenchmarkTrainAdamW times one optimizer update of the 4M model.
func BenchmarkTrainAdamW(b *testing.B) {
	c := nn.Config{Vocab: 512, Dim: 256, Layers: 5, Heads: 8, KVHeads: 4, Hidden: 688, Context: 128, RopeTheta: 10000, NormEps: 1e-5, TiedOutput: true}
	p := newModel(b, c, 1)
	g := newModel(b, c, 2)
	s, err := NewAdamState(c)
	if err != nil {
		b.Fatal(err)
	}
	a := DefaultAdamW()
	for b.Loop() {
		if err := a.Update(p, g, s, 1e-4); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(c.Size())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mparams/s")
}

// BenchmarkTrainSwiGLU times the MLP activation forward and backward on one
// layer of the 4M model at 512 tokens.
func BenchmarkTrainSwiGLU(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 512 * 688
	a, u, dh := randn(rng, n, 2), randn(rng, n, 1), randn(rng, n, 1)
	h, da, du := make([]float32, n), make([]float32, n), make([]float32, n)
	for b.Loop() {
		swiGLUForward(h, a, u)
		swiGLUBackward(da, du, dh, a, u)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
}
