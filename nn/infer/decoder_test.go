package infer

import (
	"math"
	"slices"
	"testing"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
	"github.com/delegatelab/delegate/nn/nntest"
)

// testConfig is a tiny model with grouped KV heads.
func testConfig(tied bool) nn.Config {
	return nn.Config{Vocab: 37, Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 24, Context: 32, TiedOutput: tied}.WithDefaults()
}

// testParams returns initialized weights with the attention and output projections scaled up.
// Attention is then peaked and logits spread over several units, so that
// differences between tokens and positions show.
func testParams(t testing.TB, c nn.Config, seed uint64) *nn.Params {
	t.Helper()
	p, err := nn.Alloc(c)
	if err != nil {
		t.Fatalf("alloc: %v", err)
	}
	p.Init(seed)
	scale := func(s []float32, f float32) {
		for i := range s {
			s[i] *= f
		}
	}
	for _, l := range p.Layers {
		scale(l.Wq, 10)
		scale(l.Wk, 10)
		scale(l.Wv, 5)
		scale(l.W1, 5)
		scale(l.W3, 5)
	}
	if c.TiedOutput {
		scale(p.Output, 10) // also the embedding: more would drown the blocks' output in the residual stream
	} else {
		scale(p.Output, 40)
	}
	return p
}

// unfused returns a copy of p whose Wq, Wk and Wv do not lie back to back.
// That forces the three-product path.
func unfused(p *nn.Params) *nn.Params {
	q := *p
	q.Layers = slices.Clone(p.Layers)
	for i := range q.Layers {
		q.Layers[i].Wq = slices.Clone(p.Layers[i].Wq)
		q.Layers[i].Wk = slices.Clone(p.Layers[i].Wk)
	}
	return &q
}

func maxAbsDiff(got []float32, want []float64) float64 {
	var m float64
	for i := range got {
		m = math.Max(m, math.Abs(float64(got[i])-want[i]))
	}
	return m
}

// The cached, batched forward must agree with the reference within 2e-5.
// The logits reach about 8 in magnitude, and the reference is float64.
const tol = 2e-5

func TestForwardMatchesReference(t *testing.T) {
	toks := []int{1, 5, 9, 2, 36, 0, 7, 7, 7, 13, 21, 3, 30, 4, 8, 11, 19, 22, 25, 1}
	for _, tc := range []struct {
		name     string
		cfg      nn.Config
		fused    bool
		parallel bool
	}{
		{"untied fused", testConfig(false), true, false},
		{"tied fused", testConfig(true), true, false},
		{"untied, views not back to back", testConfig(false), false, false},
		{"attention split across cores", testConfig(false), true, true},
		{"head dim 6, one kv head", nn.Config{Vocab: 37, Dim: 18, Layers: 1, Heads: 3, KVHeads: 1, Hidden: 20, Context: 32}.WithDefaults(), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams(t, tc.cfg, 7)
			if !tc.fused {
				p = unfused(p)
			}
			m := newDecoder(p, mustCache(t, p.Config, 3))
			defer m.close()
			if tc.parallel {
				m.parWork = 1
				m.parMul = 1
			}
			want := nntest.Logits(p, toks)
			v := p.Config.Vocab

			// Slot 0: the whole sequence as one prefill.
			rows := make([]tokenRow, len(toks))
			for i, tok := range toks {
				rows[i] = tokenRow{slot: 0, pos: i, token: tok, logits: true}
			}
			lg := m.forward(rows)
			for i := range toks {
				if d := maxAbsDiff(lg[i*v:(i+1)*v], want[i]); d > tol {
					t.Errorf("prefill position %d: max |logit - reference| = %g, want <= %g", i, d, tol)
				}
			}

			// Slot 2: one token per step, each step batched with a chunk of
			// a different sequence in slot 1.
			other := []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}
			for i, tok := range toks {
				lg := m.forward([]tokenRow{
					{slot: 1, pos: i, token: other[i]},
					{slot: 2, pos: i, token: tok, logits: true},
				})
				if d := maxAbsDiff(lg[:v], want[i]); d > tol {
					t.Errorf("decode position %d: max |logit - reference| = %g, want <= %g", i, d, tol)
				}
			}
		})
	}
}

func mustCache(t testing.TB, c nn.Config, slots int) *KVCache {
	t.Helper()
	kc, err := NewKVCache(c, slots)
	if err != nil {
		t.Fatalf("kv cache: %v", err)
	}
	return kc
}

// The batch-vs-alone guarantee rests on the kernel computing each output row
// the same way whatever the number of rows.
func TestKernelRowDeterminism(t *testing.T) {
	const k, n = 64, 172
	for _, m := range []int{2, 5, 32, 65} {
		a := make([]float32, m*k)
		b := make([]float32, n*k)
		for i := range a {
			a[i] = float32(math.Sin(float64(i) * 0.37))
		}
		for i := range b {
			b[i] = float32(math.Cos(float64(i) * 0.11))
		}
		all := make([]float32, m*n)
		kernel.MatMulNT(all, a, b, m, k, n)
		one := make([]float32, n)
		for i := 0; i < m; i++ {
			kernel.MatMulNT(one, a[i*k:(i+1)*k], b, 1, k, n)
			if !slices.Equal(one, all[i*n:(i+1)*n]) {
				t.Fatalf("m=%d: row %d computed alone differs bitwise from the batched row", m, i)
			}
		}
	}
}

// A row's heads must give the same bits computed together as one at a time.
// How heads are split across cores depends on the batch. Head dims 8 and 16
// take the vector kernels, 12 and 6 the portable code.
func TestAttendHeadsSplitSameBits(t *testing.T) {
	c := nn.Config{Vocab: 11, Dim: 48, Layers: 1, Heads: 4, KVHeads: 2, Hidden: 8, Context: 40}.WithDefaults() // head dim 12
	for _, hd := range []int{12, 6, 8, 16} {
		c.Dim = 4 * hd
		p := testParams(t, c, 1)
		m := newDecoder(p, mustCache(t, c, 1))
		for i := range m.cache.K[0] {
			m.cache.K[0][i] = float32(math.Sin(float64(i) * 0.7))
			m.cache.V[0][i] = float32(math.Cos(float64(i) * 0.3))
		}
		q := make([]float32, c.Dim)
		for i := range q {
			q[i] = float32(math.Sin(float64(i)*1.3)) * 3
		}
		for _, pos := range []int{33, 31} { // 32 positions: whole groups of 8
			paired, single := make([]float32, c.Dim), make([]float32, c.Dim)
			m.attend(paired, q, m.scores[0], 0, 0, pos, 0, c.Heads)
			for h := range c.Heads {
				m.attend(single, q, m.scores[0], 0, 0, pos, h, h+1)
			}
			if !slices.Equal(paired, single) {
				t.Errorf("head dim %d pos %d: heads together %v differ from heads one at a time %v", hd, pos, paired, single)
			}
		}
		m.close()
	}
}
