// Command q8 measures what q8_0 weights buy at decoding time.
// It writes a seeded random Hugging Face checkpoint of a real model's shape in bfloat16.
// It loads it three times with infer.LoadHF: widened to float32, as stored, and quantised to q8_0.
// It times greedy batch-1 decoding of each at 1 and 2 threads, the three interleaved in each repetition.
// It prints the machine, weight bytes and the median tokens per second of each.
// Rates are per wall-clock second and per CPU second, which another process's load moves less.
// It also prints how many greedy tokens q8_0 shares with bfloat16.
// The target is q8_0 at least -target times bfloat16's wall-clock rate at 1 thread, PASS or MISS.
// -cpuprofile writes a CPU profile of the timed decoding, each sample labelled with its weights.
//
//	go run ./perf/q8                       # 0.1B Llama shape
//	go run ./perf/q8 -shape stories15m     # llama2.c's stories15M shape
//	go run ./perf/q8 -shape qwen0.5b       # Qwen2.5-0.5B's shape
//	go run ./perf/q8 -shape qwen0.5b -threads 1 -cpuprofile q8.prof
//	go tool pprof -tagfocus weights=q8_0 -top q8.prof
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/nn/kernel"
	"github.com/delegatelab/delegate/perf/internal/hfgen"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "q8:", err)
		os.Exit(1)
	}
}

// shape is a config.json's architecture fields.
type shape struct {
	dim, hidden, layers, heads, kv, vocab int
	tied                                  bool
	qwen                                  bool // qwen2 with q, k and v biases, Qwen2.5's rope base and epsilon
}

var shapes = map[string]shape{
	// A 0.1B Llama-style shape (110M parameters, untied head).
	"small": {768, 2048, 12, 12, 4, 32000, false, false},
	// llama2.c's stories15M (tied head).
	"stories15m": {288, 768, 6, 6, 6, 32000, true, false},
	// Qwen2.5-0.5B (494M parameters, tied head, 151936-token vocabulary).
	"qwen0.5b": {896, 4864, 24, 14, 2, 151936, true, true},
	// A toy, for the program's own test.
	"tiny": {64, 128, 2, 4, 2, 512, true, false},
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("q8", flag.ContinueOnError)
	shapeName := fs.String("shape", "small", "model shape: small, stories15m, qwen0.5b or tiny")
	steps := fs.Int("n", 32, "tokens generated per measurement")
	reps := fs.Int("reps", 5, "repetitions; the median is reported")
	threads := fs.String("threads", "1,2", "GOMAXPROCS values to measure, comma-separated")
	target := fs.Float64("target", 1.6, "q8_0 tok/s over bf16 tok/s at 1 thread needed for PASS")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed decoding to this file, samples labelled weights=f32, bf16 or q8_0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sh, ok := shapes[*shapeName]
	if !ok {
		return fmt.Errorf("unknown shape %q (want small, stories15m, qwen0.5b or tiny)", *shapeName)
	}
	var procs []int
	for _, s := range strings.Split(*threads, ",") {
		var p int
		if _, err := fmt.Sscan(s, &p); err != nil || p < 1 {
			return fmt.Errorf("threads %q: want positive integers", *threads)
		}
		procs = append(procs, p)
	}
	dir, err := os.MkdirTemp("", "q8")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := writeCheckpoint(dir, sh); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	fmt.Fprintf(stdout, "q8: machine %s, %d cores, kernel %s, q8_0 kernel %s, %s/%s\n", cpuName(), runtime.NumCPU(), kernel.Impl(), kernel.Q8Impl(), runtime.GOOS, runtime.GOARCH)

	type side struct {
		name string
		w    *infer.Weights
		tps  map[int][]float64 // threads → tok/s of each repetition
		cps  map[int][]float64 // threads → tokens per CPU second
		toks []int
	}
	var sides []*side
	for _, opt := range []infer.HFOptions{{Float32: true}, {}, {Quantize: "q8_0"}} {
		opt.Context = *steps + 1
		w, info, err := infer.LoadHF(dir, opt)
		if err != nil {
			return err
		}
		sides = append(sides, &side{name: info.DType.String(), w: w, tps: map[int][]float64{}, cps: map[int][]float64{}})
	}
	stopProfile := func() error { return nil }
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close() // the start's error is the one to report
			return fmt.Errorf("cpu profile %s: %w", *cpuProfile, err)
		}
		stopProfile = sync.OnceValue(func() error {
			pprof.StopCPUProfile()
			return f.Close()
		})
		defer stopProfile() //nolint:errcheck // only on an error return, which reports that error instead
	}
	for _, p := range procs {
		prev := runtime.GOMAXPROCS(p)
		engines := make([]*infer.Engine, len(sides))
		for i, s := range sides {
			ec := infer.DefaultEngineConfig()
			ec.MaxBatch = 1
			// The engine's goroutines start here and inherit the label.
			var e *infer.Engine
			var err error
			pprof.Do(context.Background(), pprof.Labels("weights", s.name), func(context.Context) {
				e, err = infer.NewEngineWeights(s.w, ec)
			})
			if err != nil {
				return err
			}
			defer e.Close()
			engines[i] = e
		}
		for r := range *reps {
			for i, s := range sides {
				t0, c0 := time.Now(), cpuTime()
				res, err := engines[i].Generate(context.Background(), infer.GenRequest{Prompt: []int{1}, MaxNew: *steps})
				if err != nil {
					return err
				}
				el, cpu := time.Since(t0).Seconds(), (cpuTime() - c0).Seconds()
				if len(res.Tokens) != *steps {
					return fmt.Errorf("%s generated %d tokens, want %d", s.name, len(res.Tokens), *steps)
				}
				s.toks = res.Tokens
				s.tps[p] = append(s.tps[p], float64(*steps)/el)
				if cpu > 0 {
					s.cps[p] = append(s.cps[p], float64(*steps)/cpu)
				}
				fmt.Fprintf(stdout, "q8: %d threads rep %d %s %.2f tok/s, %.2f tok/CPU-s\n", p, r+1, s.name, float64(*steps)/el, float64(*steps)/cpu)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
	if err := stopProfile(); err != nil {
		return fmt.Errorf("cpu profile %s: %w", *cpuProfile, err)
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	head := "weights\tMB\t"
	for _, p := range procs {
		head += fmt.Sprintf("tok/s %dt\ttok/CPU-s %dt\t", p, p)
	}
	fmt.Fprintln(tw, head)
	for _, s := range sides {
		line := fmt.Sprintf("%s\t%.1f\t", s.name, float64(s.w.Bytes())/1e6)
		for _, p := range procs {
			line += fmt.Sprintf("%.2f\t%.2f\t", median(s.tps[p]), median(s.cps[p]))
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	same := 0
	for same < len(sides[2].toks) && sides[2].toks[same] == sides[1].toks[same] {
		same++
	}
	fmt.Fprintf(stdout, "q8: q8_0's greedy tokens match bf16's for the first %d of %d\n", same, *steps)
	p1 := procs[0]
	ratio := median(sides[2].tps[p1]) / median(sides[1].tps[p1])
	verdict := "MISS"
	if ratio >= *target {
		verdict = "PASS"
	}
	cratio := median(sides[2].cps[p1]) / median(sides[1].cps[p1])
	fmt.Fprintf(stdout, "q8_0/bf16 tok/s ratio %.2f at %d thread(s) (per CPU second %.2f; bytes %.2f of bf16's), target >= %.2f: %s; shape %s, %d tokens, median of %d\n",
		ratio, p1, cratio, float64(sides[2].w.Bytes())/float64(sides[1].w.Bytes()), *target, verdict, *shapeName, *steps, *reps)
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuName is the CPU's model name from /proc/cpuinfo, or "unknown".
func cpuName() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// writeCheckpoint writes a seeded random model of shape sh in bf16:
// Llama with llama2.c's config values, or Qwen2 with Qwen2.5's.
func writeCheckpoint(dir string, sh shape) error {
	hs := hfgen.Shape{ModelType: "llama", Dim: sh.dim, Hidden: sh.hidden, Layers: sh.layers, Heads: sh.heads,
		KV: sh.kv, Vocab: sh.vocab, Tied: sh.tied, Context: 2048, NormEps: 1e-5, RopeTheta: 10000}
	if sh.qwen {
		hs.ModelType, hs.NormEps, hs.RopeTheta = "qwen2", 1e-6, 1e6
	}
	return hfgen.Write(dir, hs, "BF16")
}
