package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/delegatelab/delegate/internal/host"
)

// benchShapes are the m, k, n of the model's products and two square sizes.
// The model's are a 512-token batch through 256-wide layers, the 768-wide
// MLP up and down, a 384-token vocabulary head, and a 32-sequence and a
// 1-sequence sampling step. The square ones compare with other libraries.
// The last two are decode steps of larger models: stories110M's MLP up
// projection and stories15M's 32000-token head.
var benchShapes = [][3]int{
	{512, 256, 256}, {512, 256, 768}, {512, 768, 256}, {512, 256, 384},
	{32, 256, 256}, {1, 256, 768}, {512, 512, 512}, {1024, 1024, 1024},
	{1, 768, 2048}, {1, 288, 32000},
}

// BenchmarkMatMul reports GFLOPS, 2·m·k·n per product, for each op and shape.
// It runs the reference loop, the pure-Go kernel and the assembly kernel,
// each on one goroutine, "serial", and across GOMAXPROCS, "parallel".
// For NT it also runs MatMulPacked on weights packed once, "packed".
// Run serial benchmarks with GOMAXPROCS=1 for cpu-GFLOPS to mean one core.
// Select with -bench, e.g.
//
//	go test -run=^$ -bench='MatMul/NT/.*/avx2/serial' -benchtime=200ms ./nn/kernel
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, o := range []op{opNT, opNN, opTN} {
		for _, s := range benchShapes {
			m, k, n := s[0], s[1], s[2]
			na, nb := shapesOf(o, m, k, n)
			a, bm, dst := randMat(rng, na), randMat(rng, nb), make([]float32, m*n)
			flops := 2 * float64(m) * float64(k) * float64(n)
			name := fmt.Sprintf("%s/m%dk%dn%d", opName(o), m, k, n)
			// report gives GFLOPS over wall time and "cpu-GFLOPS" over the
			// process's CPU time, which other processes on a shared machine
			// disturb less. A parallel run's CPU time is all its threads'.
			report := func(b *testing.B, cpu0 time.Duration) {
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
				if cpu1, ok := host.ProcessCPU(); ok && cpu1 > cpu0 {
					b.ReportMetric(flops*float64(b.N)/(cpu1-cpu0).Seconds()/1e9, "cpu-GFLOPS")
				}
			}
			b.Run(name+"/ref/serial", func(b *testing.B) {
				cpu0, _ := host.ProcessCPU()
				for b.Loop() {
					switch o {
					case opNT:
						refNT(dst, a, bm, m, k, n)
					case opNN:
						refNN(dst, a, bm, m, k, n)
					case opTN:
						refTNAcc(dst, a, bm, m, k, n)
					}
				}
				report(b, cpu0)
			})
			for _, im := range impls() {
				for _, mode := range []string{"serial", "parallel"} {
					b.Run(name+"/"+im.name+"/"+mode, func(b *testing.B) {
						pr := problem{op: o, dst: dst, a: a, b: bm, m: m, k: k, n: n, acc: o == opTN, kern: im.kern, kern2: im.kern2, packT16: im.pack}
						cpu0, _ := host.ProcessCPU()
						for b.Loop() {
							if mode == "serial" {
								pr.split(1)
							} else {
								pr.do(defaultWorkers())
							}
						}
						report(b, cpu0)
					})
				}
			}
			if o == opNT {
				// The decoder's path: the weights packed once, as the engine
				// holds them, then products split across GOMAXPROCS.
				pw := Pack(k, bm)
				b.Run(name+"/packed", func(b *testing.B) {
					cpu0, _ := host.ProcessCPU()
					for b.Loop() {
						MatMulPacked(dst, a, m, pw)
					}
					report(b, cpu0)
				})
			}
		}
	}
}

// BenchmarkEntryPoints times the exported functions as the model calls them
// (the kernel Impl chose, GOMAXPROCS goroutines) on a 512-token batch.
func BenchmarkEntryPoints(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	m, k, n := 512, 256, 256
	x, w, dst := randMat(rng, m*k), randMat(rng, n*k), make([]float32, m*n)
	flops := 2 * float64(m) * float64(k) * float64(n)
	entries := []struct {
		name string
		call func()
	}{
		{"MatMulNT", func() { MatMulNT(dst, x, w, m, k, n) }},
		{"MatMulNN", func() { MatMulNN(dst, x, w, m, k, n) }},
		{"MatMulTNAcc", func() { MatMulTNAcc(dst, x, w, m, k, n) }},
	}
	for _, e := range entries {
		b.Run(fmt.Sprintf("%s/%s/m%dk%dn%d", e.name, Impl(), m, k, n), func(b *testing.B) {
			for b.Loop() {
				e.call()
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}

// BenchmarkPacked times products over packed weights, the decoding path.
// A one-row product, a token, and a 32-row one, a batch, run against
// MatMulNT on the same unpacked matrix. The shapes are the 15M model's MLP
// and its 32000-token vocabulary head. GB/s is weight bytes read per second.
//
//	go test -run=^$ -bench=Packed -benchtime=200ms ./nn/kernel
func BenchmarkPacked(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, s := range [][2]int{{288, 768}, {288, 32000}} {
		k, n := s[0], s[1]
		w := randMat(rng, n*k)
		pw := Pack(k, w)
		for _, m := range []int{1, 32} {
			a, dst := randMat(rng, m*k), make([]float32, m*n)
			// cpu-GFLOPS is over the process's CPU time: one core's rate
			// under GOMAXPROCS=1, even on a loaded machine.
			report := func(b *testing.B, cpu0 time.Duration) {
				sec := b.Elapsed().Seconds()
				flops := 2 * float64(m*k*n) * float64(b.N)
				b.ReportMetric(flops/sec/1e9, "GFLOPS")
				b.ReportMetric(4*float64(k*n)*float64(b.N)/sec/1e9, "GB/s")
				if cpu1, ok := host.ProcessCPU(); ok && cpu1 > cpu0 {
					b.ReportMetric(flops/(cpu1-cpu0).Seconds()/1e9, "cpu-GFLOPS")
				}
			}
			b.Run(fmt.Sprintf("m%dk%dn%d/packed", m, k, n), func(b *testing.B) {
				cpu0, _ := host.ProcessCPU()
				for b.Loop() {
					MatMulPacked(dst, a, m, pw)
				}
				report(b, cpu0)
			})
			b.Run(fmt.Sprintf("m%dk%dn%d/MatMulNT", m, k, n), func(b *testing.B) {
				cpu0, _ := host.ProcessCPU()
				for b.Loop() {
					MatMulNT(dst, a, w, m, k, n)
				}
				report(b, cpu0)
			})
		}
	}
}
