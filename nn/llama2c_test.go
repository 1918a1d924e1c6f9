package nn

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"
)

// l2cFile is a version-0 llama2.c checkpoint read the way run.c maps it,
// written from the format's description, not from ExportLlama2C.
type l2cFile struct {
	dim, hidden, layers, heads, kvHeads, vocab, seqLen int
	shared                                             bool
	emb, rmsAtt, wq, wk, wv, wo, rmsFFN, w1, w2, w3    []float32
	rmsFinal, freqReal, freqImag, wcls                 []float32
}

func l2cRead(t *testing.T, b []byte) l2cFile {
	t.Helper()
	r := bytes.NewReader(b)
	var h [7]int32
	if err := binary.Read(r, binary.LittleEndian, &h); err != nil {
		t.Fatalf("read header: %v", err)
	}
	f := l2cFile{dim: int(h[0]), hidden: int(h[1]), layers: int(h[2]), heads: int(h[3]), kvHeads: int(h[4]), vocab: int(h[5]), seqLen: int(h[6])}
	f.shared = f.vocab > 0
	if f.vocab < 0 {
		f.vocab = -f.vocab
	}
	headSize := f.dim / f.heads
	kvDim := f.kvHeads * headSize
	next := func(n int) []float32 {
		v := make([]float32, n)
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			t.Fatalf("read %d floats at byte %d: %v", n, len(b)-r.Len(), err)
		}
		return v
	}
	L := f.layers
	f.emb = next(f.vocab * f.dim)
	f.rmsAtt = next(L * f.dim)
	f.wq = next(L * f.dim * f.dim)
	f.wk = next(L * kvDim * f.dim)
	f.wv = next(L * kvDim * f.dim)
	f.wo = next(L * f.dim * f.dim)
	f.rmsFFN = next(L * f.dim)
	f.w1 = next(L * f.hidden * f.dim)
	f.w2 = next(L * f.dim * f.hidden)
	f.w3 = next(L * f.hidden * f.dim)
	f.rmsFinal = next(f.dim)
	f.freqReal = next(f.seqLen * headSize / 2)
	f.freqImag = next(f.seqLen * headSize / 2)
	if f.shared {
		f.wcls = f.emb
	} else {
		f.wcls = next(f.vocab * f.dim)
	}
	if rest, _ := io.ReadAll(r); len(rest) != 0 {
		t.Fatalf("%d bytes after the last tensor", len(rest))
	}
	return f
}

func l2cSameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

func TestExportLlama2C(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"untied gqa", Config{Vocab: 11, Dim: 8, Layers: 3, Heads: 4, KVHeads: 2, Hidden: 12, Context: 10}},
		{"tied mha", Config{Vocab: 7, Dim: 6, Layers: 2, Heads: 3, KVHeads: 3, Hidden: 10, Context: 5, TiedOutput: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg.WithDefaults()
			p := ckptTestParams(t, c, 11)
			var buf bytes.Buffer
			if err := ExportLlama2C(&buf, p); err != nil {
				t.Fatal(err)
			}
			f := l2cRead(t, buf.Bytes())
			if f.dim != c.Dim || f.hidden != c.Hidden || f.layers != c.Layers || f.heads != c.Heads ||
				f.kvHeads != c.KVHeads || f.vocab != c.Vocab || f.seqLen != c.Context || f.shared != c.TiedOutput {
				t.Fatalf("header %+v does not match config %+v", f, c)
			}
			l2cSameBits(t, "token_embedding_table", f.emb, p.TokenEmb)
			layer := func(all []float32, i int) []float32 {
				n := len(all) / c.Layers
				return all[i*n : (i+1)*n]
			}
			for i, l := range p.Layers {
				l2cSameBits(t, "rms_att_weight", layer(f.rmsAtt, i), l.AttnNorm)
				l2cSameBits(t, "wq", layer(f.wq, i), l.Wq)
				l2cSameBits(t, "wk", layer(f.wk, i), l.Wk)
				l2cSameBits(t, "wv", layer(f.wv, i), l.Wv)
				l2cSameBits(t, "wo", layer(f.wo, i), l.Wo)
				l2cSameBits(t, "rms_ffn_weight", layer(f.rmsFFN, i), l.FFNNorm)
				l2cSameBits(t, "w1", layer(f.w1, i), l.W1)
				l2cSameBits(t, "w2", layer(f.w2, i), l.W2)
				l2cSameBits(t, "w3", layer(f.w3, i), l.W3)
			}
			l2cSameBits(t, "rms_final_weight", f.rmsFinal, p.FinalNorm)
			l2cSameBits(t, "wcls", f.wcls, p.Output)
			hs := c.HeadDim()
			for pos := range c.Context {
				for j := range hs / 2 {
					a := float64(pos) / math.Pow(10000, float64(2*j)/float64(hs))
					k := pos*hs/2 + j
					if math.Abs(float64(f.freqReal[k])-math.Cos(a)) > 1e-6 || math.Abs(float64(f.freqImag[k])-math.Sin(a)) > 1e-6 {
						t.Fatalf("freq_cis at pos %d pair %d = (%v, %v), want (cos, sin) of %v", pos, j, f.freqReal[k], f.freqImag[k], a)
					}
				}
			}
		})
	}
}

func TestExportLlama2CRejects(t *testing.T) {
	base := Config{Vocab: 7, Dim: 6, Layers: 1, Heads: 3, KVHeads: 3, Hidden: 10, Context: 5}.WithDefaults()
	theta, eps := base, base
	theta.RopeTheta = 500000
	eps.NormEps = 1e-6
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"rope theta", theta, "rope_theta is 500000, run.c hard-codes 10000"},
		{"norm eps", eps, "norm_eps is 1e-06, run.c hard-codes 1e-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ExportLlama2C(io.Discard, ckptTestParams(t, tt.cfg, 1))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
