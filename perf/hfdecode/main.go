// Command hfdecode measures what keeping a Hugging Face checkpoint's 16-bit weights in 16 bits buys at decoding.
// It writes a seeded random checkpoint of a real model's shape in bfloat16 or float16 safetensors.
// The default shape is Qwen2.5-0.5B.
// It loads the checkpoint twice with infer.LoadHF: as stored, and widened to float32 by HFOptions.Float32.
// It times greedy batch-1 decoding of both, interleaved, best of -reps.
// Both copies compute bitwise the same logits, as nn's TestLoadHFFloat32SameBits checks,
// so the one difference is the bytes a step reads.
// It prints weight bytes, bytes read per token, tokens per second and the ratio.
// The target is 16-bit decoding at least -target times float32's rate.
//
//	go run ./perf/hfdecode                      # Qwen2.5-0.5B shape, bf16
//	go run ./perf/hfdecode -shape small -reps 5 # a 0.1B Llama shape
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/perf/internal/hfgen"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hfdecode:", err)
		os.Exit(1)
	}
}

// shape is a config.json's architecture fields.
type shape struct {
	modelType                             string
	dim, hidden, layers, heads, kv, vocab int
	tied                                  bool
}

var shapes = map[string]shape{
	// Qwen2.5-0.5B: 494M parameters, tied head, q/k/v biases.
	"qwen2.5-0.5b": {"qwen2", 896, 4864, 24, 14, 2, 151936, true},
	// A 0.1B Llama-style shape (110M parameters, untied head).
	"small": {"llama", 768, 2048, 12, 12, 4, 32000, false},
	// A toy, for the program's own test.
	"tiny": {"qwen2", 64, 128, 2, 4, 2, 512, true},
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hfdecode", flag.ContinueOnError)
	shapeName := fs.String("shape", "qwen2.5-0.5b", "model shape: qwen2.5-0.5b, small or tiny")
	dtype := fs.String("dtype", "BF16", "stored type: BF16 or F16")
	steps := fs.Int("n", 64, "tokens generated per measurement")
	reps := fs.Int("reps", 3, "repetitions; the best is reported")
	procs := fs.Int("procs", runtime.GOMAXPROCS(0), "GOMAXPROCS")
	target := fs.Float64("target", 1.3, "16-bit tok/s over float32 tok/s needed for PASS")
	work := fs.String("work", "", "directory for the checkpoint (default a temporary one, removed after)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sh, ok := shapes[*shapeName]
	if !ok {
		return fmt.Errorf("unknown shape %q (want qwen2.5-0.5b, small or tiny)", *shapeName)
	}
	if *dtype != "BF16" && *dtype != "F16" {
		return fmt.Errorf("dtype %q: want BF16 or F16", *dtype)
	}
	runtime.GOMAXPROCS(*procs)
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "hfdecode")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	start := time.Now()
	if err := writeCheckpoint(dir, sh, *dtype); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	fmt.Fprintf(stdout, "hfdecode: wrote %s (%s, %s) in %v\n", dir, *shapeName, *dtype, time.Since(start).Round(time.Millisecond))

	type side struct {
		name string
		w    *infer.Weights
		e    *infer.Engine
		best float64
	}
	var sides []*side
	for _, f32 := range []bool{false, true} {
		start := time.Now()
		w, info, err := infer.LoadHF(dir, infer.HFOptions{Context: *steps + 1, Float32: f32})
		if err != nil {
			return err
		}
		ec := infer.DefaultEngineConfig()
		ec.MaxBatch = 1
		e, err := infer.NewEngineWeights(w, ec)
		if err != nil {
			return err
		}
		defer e.Close()
		fmt.Fprintf(stdout, "hfdecode: loaded as %s in %v: %s\n", info.DType, time.Since(start).Round(time.Millisecond), e.Memory())
		sides = append(sides, &side{name: info.DType.String(), w: w, e: e})
	}
	var first []int
	for r := range *reps {
		for _, s := range sides {
			t0 := time.Now()
			res, err := s.e.Generate(context.Background(), infer.GenRequest{Prompt: []int{1}, MaxNew: *steps})
			if err != nil {
				return err
			}
			el := time.Since(t0).Seconds()
			if len(res.Tokens) != *steps {
				return fmt.Errorf("%s generated %d tokens, want %d", s.name, len(res.Tokens), *steps)
			}
			if first == nil {
				first = res.Tokens
			} else if fmt.Sprint(first) != fmt.Sprint(res.Tokens) {
				return fmt.Errorf("%s's greedy tokens differ from %s's: the copies are not the same model", s.name, sides[0].name)
			}
			s.best = max(s.best, float64(*steps)/el)
			fmt.Fprintf(stdout, "hfdecode: rep %d %s %.2f tok/s\n", r+1, s.name, float64(*steps)/el)
		}
	}
	// Bytes a decode step reads: every matrix except an untied embedding,
	// of which it reads one row.
	readPerToken := func(w *infer.Weights) float64 {
		b := float64(w.Bytes())
		if !sh.tied {
			b -= b * float64(sh.vocab*sh.dim) / float64(params(sh))
		}
		return b
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "weights\tMB\tMB read/token\ttok/s\tGB/s\t")
	for _, s := range sides {
		rb := readPerToken(s.w)
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f\t%.1f\t\n", s.name, float64(s.w.Bytes())/1e6, rb/1e6, s.best, rb*s.best/1e9)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ratio := sides[0].best / sides[1].best
	verdict := "MISS"
	if ratio >= *target {
		verdict = "PASS"
	}
	fmt.Fprintf(stdout, "%s/f32 tok/s ratio %.2f (bytes per token %.2f of f32's), target >= %.2f: %s; GOMAXPROCS %d, %d tokens, best of %d\n",
		sides[0].name, ratio, readPerToken(sides[0].w)/readPerToken(sides[1].w), *target, verdict, *procs, *steps, *reps)
	return nil
}

func params(sh shape) int {
	hd := sh.dim / sh.heads
	layer := 2*sh.dim + sh.dim*sh.dim*2 + 2*sh.kv*hd*sh.dim + 3*sh.dim*sh.hidden
	n := sh.vocab*sh.dim + sh.layers*layer + sh.dim
	if !sh.tied {
		n += sh.vocab * sh.dim
	}
	return n
}

// writeCheckpoint writes a seeded random model of shape sh, stored as
// dtype, with Qwen2.5's config values.
func writeCheckpoint(dir string, sh shape, dtype string) error {
	return hfgen.Write(dir, hfgen.Shape{ModelType: sh.modelType, Dim: sh.dim, Hidden: sh.hidden, Layers: sh.layers, Heads: sh.heads,
		KV: sh.kv, Vocab: sh.vocab, Tied: sh.tied, Context: 32768, NormEps: 1e-6, RopeTheta: 1000000}, dtype)
}
