// Command llama2c prepares one side of the check that llama2.c's run program and this module agree.
// It exports a model for run.c and prints exactly the greedy continuation run.c should print:
//
//	./run model.bin -z tokenizer.bin -t 0 -n N -i PROMPT
//
// compare.sh runs both and diffs them; README.md explains the check.
package main

import (
	"github.com/delegatelab/delegate/perf/internal/runc"

	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "llama2c:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llama2c", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory for model.bin, tokenizer.bin and (when created) the checkpoint ckpt/")
	ckpt := fs.String("ckpt", "", "checkpoint directory to load; empty creates a seeded model")
	prompt := fs.String("prompt", "Once upon a time", "prompt text")
	steps := fs.Int("n", 64, "positions to run, prompt included, as run.c's -n (0 or above context: the context)")
	seed := fs.Uint64("seed", 1, "seed of a created model")
	scale := fs.Float64("scale", 8, "multiplier on a created model's initial weights, so that its greedy choices are clear-cut")
	var c nn.Config
	fs.IntVar(&c.Vocab, "vocab", tokenizer.VocabSize, "created model: vocabulary size")
	fs.IntVar(&c.Dim, "dim", 64, "created model: width")
	fs.IntVar(&c.Layers, "layers", 2, "created model: layers")
	fs.IntVar(&c.Heads, "heads", 4, "created model: query heads")
	fs.IntVar(&c.KVHeads, "kv-heads", 2, "created model: key/value heads")
	fs.IntVar(&c.Hidden, "hidden", 172, "created model: SwiGLU width")
	fs.IntVar(&c.Context, "context", 128, "created model: context length")
	fs.BoolVar(&c.TiedOutput, "tied", false, "created model: tie the output head to the embedding")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	if strings.IndexByte(*prompt, 0) >= 0 {
		return errors.New("-prompt holds a NUL byte, which run.c's command line cannot carry")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}

	var p *nn.Params
	if *ckpt != "" {
		var err error
		if p, _, err = nn.Load(*ckpt); err != nil {
			return err
		}
	} else {
		var err error
		if p, err = runc.ScaledModel(c.WithDefaults(), *seed, float32(*scale)); err != nil {
			return err
		}
		dir := filepath.Join(*out, "ckpt")
		meta := map[string]string{"source": "perf/llama2c", "seed": fmt.Sprint(*seed), "scale": fmt.Sprint(*scale)}
		if err := nn.Save(dir, p, meta); err != nil {
			return err
		}
	}
	if p.Config.Vocab < tokenizer.VocabSize {
		return fmt.Errorf("model vocab %d is below the tokenizer's %d", p.Config.Vocab, tokenizer.VocabSize)
	}
	if err := runc.Export(*out, p); err != nil {
		return err
	}

	ids, margin := greedy(p, promptTokens(*prompt), *steps)
	fmt.Fprintf(stderr, "tokens: %v\nsmallest gap between the top two logits of a generated token: %g\n", ids, margin)
	_, err := io.WriteString(stdout, runc.Text(ids)+"\n")
	return err
}

// promptTokens is what run.c's encoder makes of prompt with our tokenizer.bin.
// That is BOS, the dummy prefix " " when the prompt is not empty, then one token per byte.
func promptTokens(prompt string) []int {
	ids := []int{tokenizer.BOS}
	if prompt != "" {
		ids = append(ids, tokenizer.ByteOffset+' ')
	}
	return append(ids, tokenizer.Encode(prompt)...)
}

// greedy runs run.c's generation loop over prompt for steps positions.
// It returns the whole sequence, prompt included,
// and the smallest gap between the best and second-best logit over the generated tokens.
// A gap near float32 rounding means the two programs may legitimately disagree there.
func greedy(p *nn.Params, prompt []int, steps int) ([]int, float32) {
	if steps <= 0 || steps > p.Config.Context {
		steps = p.Config.Context
	}
	ids := []int{prompt[0]}
	margin := float32(-1)
	for pos := 0; pos < steps; pos++ {
		var next int
		if pos < len(prompt)-1 {
			next = prompt[pos+1]
		} else {
			logits := lastLogits(p, ids)
			var gap float32
			next, gap = argmax(logits)
			if margin < 0 || gap < margin {
				margin = gap
			}
		}
		if next == tokenizer.BOS {
			break
		}
		ids = append(ids, next)
	}
	return ids, margin
}

// argmax returns the first index of the largest value, as run.c's
// sample_argmax does, and its lead over the runner-up.
func argmax(v []float32) (int, float32) {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	second := float32(-1e30)
	for i, x := range v {
		if i != best && x > second {
			second = x
		}
	}
	return best, v[best] - second
}
