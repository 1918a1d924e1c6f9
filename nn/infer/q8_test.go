package infer

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn/kernel"
)

// q8Prompts is the fixed prompt set of the q8_0 agreement tests: token ids
// of the fixtures' 272-token vocabulary.
var q8Prompts = [][]int{
	{5, 72, 101, 108, 108, 111, 33, 260},
	{1, 2, 3},
	{100, 200, 50, 25, 12},
	{260, 261, 84, 104, 101, 32},
}

// q8LogitTol bounds the largest logit difference between q8_0 and float32 fixtures.
// The q8_0 fixture is quantised at load. q8AgreeMin is the least share of
// greedy tokens on which they agree. The fixtures' logits span about ±30
// and their weights are random, with one or two blocks a row. q8_0 rounds
// each weight, and each activation that meets a q8_0 matrix, to within half
// a step of 1/254 of its block's largest magnitude. docs/engine.md has the
// differences measured.
const (
	q8LogitTol = 3.5
	q8AgreeMin = 0.9
)

// TestQ8Agreement compares each HF fixture quantised to q8_0 with it in float32.
// Over a fixed prompt set it checks the largest logit difference and greedy
// agreement. Agreement is counted teacher-forced: the float32 model's
// greedy continuation is fed to both and the argmax compared at every step.
// On random weights one different token sends the rest of a free-running
// continuation elsewhere.
func TestQ8Agreement(t *testing.T) {
	for _, fx := range hfFixtures {
		t.Run(fx.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "hf", fx.name)
			wide, _, err := LoadHF(dir, HFOptions{Float32: true})
			if err != nil {
				t.Fatal(err)
			}
			q8, info, err := LoadHF(dir, HFOptions{Quantize: "q8_0"})
			if fx.name == "llama3-scaled" { // its Hidden of 48 is no multiple of 32
				if err == nil || !strings.Contains(err.Error(), "multiple of 32") {
					t.Fatalf("load q8_0 = %v, want an error about rows of a multiple of 32", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.DType != kernel.Q8_0 {
				t.Errorf("dtype = %v, want q8_0", info.DType)
			}
			if qb, wb := q8.Bytes(), wide.Bytes(); qb > wb*4/10 {
				t.Errorf("q8_0 weights take %d bytes, float32 %d: want about a quarter", qb, wb)
			}
			worst, same, steps := q8Compare(t, wide, q8, q8Prompts, 16)
			t.Logf("largest logit difference %.3g; greedy agrees on %d of %d tokens", worst, same, steps)
			if worst > q8LogitTol {
				t.Errorf("largest logit difference %.3g, want at most %g", worst, q8LogitTol)
			}
			if float64(same) < q8AgreeMin*float64(steps) {
				t.Errorf("greedy agrees on %d of %d tokens, want at least %g of them", same, steps, q8AgreeMin)
			}
		})
	}
}

// q8Compare compares a and b teacher-forced on a's greedy continuations.
// It generates n tokens greedily from each prompt with a, then feeds prompt
// and continuation to both. It returns the largest difference of their
// logits, and of all steps those at which their argmax agrees.
func q8Compare(t *testing.T, a, b *Weights, prompts [][]int, n int) (worst float64, same, steps int) {
	t.Helper()
	e, err := NewEngineWeights(a, withBatch(len(prompts)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	v := a.Config().Vocab
	for _, p := range prompts {
		res, err := e.Generate(context.Background(), GenRequest{Prompt: p, MaxNew: n})
		if err != nil {
			t.Fatal(err)
		}
		seq := append(slices.Clone(p), res.Tokens...)
		la, lb := hfPromptLogits(t, a, seq), hfPromptLogits(t, b, seq)
		for i := range seq {
			ra, rb := la[i*v:(i+1)*v], lb[i*v:(i+1)*v]
			for j := range ra {
				worst = max(worst, math.Abs(float64(ra[j]-rb[j])))
			}
			if i >= len(p)-1 && i < len(seq)-1 {
				steps++
				if argmax(ra) == argmax(rb) {
					same++
				}
			}
		}
	}
	return worst, same, steps
}

// TestQ8SplitSameBits checks that a q8_0 model's products split across
// cores give the bits of unsplit ones. Split, the decoder quantises each
// product's activations once and hands the column ranges the result.
func TestQ8SplitSameBits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	w, _, err := LoadHF(filepath.Join("testdata", "hf", "qwen2-bias"), HFOptions{Quantize: "q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	c := w.Config()
	prompt := q8Prompts[0]
	logits := func(split bool) []float32 {
		m := newDecoderWeights(c, mustCache(t, c, 1), w.w)
		defer m.close()
		if split {
			m.parMul = 1
		} else {
			m.parMul = math.MaxInt
		}
		rows := make([]tokenRow, len(prompt))
		for i, tok := range prompt {
			rows[i] = tokenRow{slot: 0, pos: i, token: tok, logits: true}
		}
		var out []float32
		out = append(out, m.forward(rows)...)
		// Then one row, as a decoding step.
		out = append(out, m.forward([]tokenRow{{slot: 0, pos: len(prompt), token: 7, logits: true}})...)
		return out
	}
	want, got := logits(false), logits(true)
	if len(got) != len(want) {
		t.Fatalf("split: %d logits, unsplit %d", len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("logit %d: split %v, unsplit %v", i, got[i], want[i])
		}
	}
}
