package infer

import (
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// TestForwardOneSameBits checks that a one-row step on every core has the bits of forward's other path.
// It decodes one token at a time after a short prefill, on shapes that
// take each branch of the step: SwiGLU in the pieces or after them,
// grouped and single key-value heads, a tied head, biases, query and key
// norms, 16-bit and q8_0 matrices. Some rows want no logits. The pool has
// four workers, more than a two-core machine has cores, so helpers often
// arrive late or not at all. The logits and the cache must match bitwise.
func TestForwardOneSameBits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	type model struct {
		name   string
		cfg    nn.Config
		newDec func() *decoder
	}
	var models []model
	for _, tc := range []struct {
		name string
		cfg  nn.Config
	}{
		{"grouped heads, SwiGLU after the units", testConfig(false)},
		{"tied, SwiGLU in the units", nn.Config{Vocab: 300, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, Context: 40, TiedOutput: true}.WithDefaults()},
		{"head dim 6, one kv head", nn.Config{Vocab: 37, Dim: 18, Layers: 1, Heads: 3, KVHeads: 1, Hidden: 20, Context: 32}.WithDefaults()},
	} {
		p := testParams(t, tc.cfg, 3)
		models = append(models, model{tc.name, tc.cfg, func() *decoder { return newDecoder(p, mustCache(t, tc.cfg, 2)) }})
	}
	for _, fx := range hfFixtures {
		for _, q := range []string{"", "q8_0"} {
			if q != "" && fx.name == "llama3-scaled" {
				continue // its Hidden of 48 is no multiple of 32
			}
			w, _, err := LoadHF(filepath.Join("testdata", "hf", fx.name), HFOptions{Quantize: q})
			if err != nil {
				t.Fatal(err)
			}
			c := w.Config()
			models = append(models, model{strings.TrimSpace(fx.name + " " + q), c, func() *decoder { return newDecoderWeights(c, mustCache(t, c, 2), w.w) }})
		}
	}
	for _, md := range models {
		t.Run(md.name, func(t *testing.T) {
			c := md.cfg
			run := func(split bool) (logits []float32, keys, vals []float32) {
				m := md.newDec()
				defer m.close()
				m.parStep, m.backoff = math.MaxInt, 0 // every one-row step on every core
				if split {
					m.parStep = 1
				}
				toks := make([]int, min(24, c.Context))
				for i := range toks {
					toks[i] = (i*7 + 3) % c.Vocab
				}
				// Prefill three rows at once: forward's other path in both.
				var rows []tokenRow
				for i := range 3 {
					rows = append(rows, tokenRow{slot: 1, pos: i, token: toks[i], logits: i == 2})
				}
				logits = append(logits, m.forward(rows)...)
				for i := 3; i < len(toks); i++ {
					logits = append(logits, m.forward([]tokenRow{{slot: 1, pos: i, token: toks[i], logits: i%5 != 0}})...)
				}
				n := len(toks)
				for l := range c.Layers {
					keys = append(keys, m.cache.Keys(l, 1, n)...)
					vals = append(vals, m.cache.Values(l, 1, n)...)
				}
				return logits, keys, vals
			}
			wantL, wantK, wantV := run(false)
			gotL, gotK, gotV := run(true)
			for _, cmp := range []struct {
				what      string
				got, want []float32
			}{{"logits", gotL, wantL}, {"keys", gotK, wantK}, {"values", gotV, wantV}} {
				if len(cmp.got) != len(cmp.want) {
					t.Fatalf("%s: %d values on every core, %d on one", cmp.what, len(cmp.got), len(cmp.want))
				}
				if i := firstBitDiff(cmp.got, cmp.want); i >= 0 {
					t.Errorf("%s %d: %v on every core, %v on one", cmp.what, i, cmp.got[i], cmp.want[i])
				}
			}
		})
	}
}

// firstBitDiff is the first index where a and b differ bitwise, or -1.
func firstBitDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}
