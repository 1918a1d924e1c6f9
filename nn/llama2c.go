package nn

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// ExportLlama2C writes p in the legacy checkpoint layout that llama2.c's run.c reads.
// That is version 0 of its model.bin, little-endian throughout:
//
//	7 int32      dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//	             seq_len; vocab_size is negated when the output head is untied
//	float32 ...  token_embedding_table (vocab, dim)
//	             rms_att_weight (layers, dim)
//	             wq (layers, dim, dim), wk (layers, kv_dim, dim),
//	             wv (layers, kv_dim, dim), wo (layers, dim, dim)
//	             rms_ffn_weight (layers, dim)
//	             w1 (layers, hidden, dim), w2 (layers, dim, hidden),
//	             w3 (layers, hidden, dim)
//	             rms_final_weight (dim)
//	             freq_cis_real, freq_cis_imag (seq_len, head_dim/2) each: the
//	             rotary cosines and sines the legacy format stored; run.c
//	             skips them and recomputes its own
//	             wcls (vocab, dim), only when untied
//
// Every matrix is (out, in), as in Params, so the data is copied as it is.
// run.c hard-codes a rotary base of 10000 and an RMSNorm epsilon of 1e-5,
// and rotates adjacent pairs (2i, 2i+1) of each head. A config with another
// base or epsilon is refused, since run.c would compute another model.
// ExportLlama2C only reads p.
func ExportLlama2C(w io.Writer, p *Params) error {
	c := p.Config
	if err := c.Validate(); err != nil {
		return fmt.Errorf("export llama2.c: %w", err)
	}
	if len(p.Data) != c.Size() {
		return fmt.Errorf("export llama2.c: params hold %d values, config needs %d", len(p.Data), c.Size())
	}
	if c.RopeTheta != 10000 {
		return fmt.Errorf("export llama2.c: rope_theta is %v, run.c hard-codes 10000", c.RopeTheta)
	}
	if float32(c.NormEps) != 1e-5 {
		return fmt.Errorf("export llama2.c: norm_eps is %v, run.c hard-codes 1e-5", c.NormEps)
	}
	for name, v := range map[string]int{"dim": c.Dim, "hidden": c.Hidden, "vocab": c.Vocab, "context": c.Context} {
		if v > math.MaxInt32 {
			return fmt.Errorf("export llama2.c: %s %d does not fit an int32", name, v)
		}
	}
	vocab := int32(c.Vocab)
	if !c.TiedOutput {
		vocab = -vocab
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	header := []int32{int32(c.Dim), int32(c.Hidden), int32(c.Layers), int32(c.Heads), int32(c.KVHeads), vocab, int32(c.Context)}
	if err := binary.Write(bw, binary.LittleEndian, header); err != nil {
		return fmt.Errorf("export llama2.c: %w", err)
	}
	perLayer := func(view func(l LayerParams) []float32) [][]float32 {
		out := make([][]float32, len(p.Layers))
		for i, l := range p.Layers {
			out[i] = view(l)
		}
		return out
	}
	hd := c.HeadDim()
	cosT := make([]float32, 0, c.Context*hd/2) // (seq_len, head_dim/2)
	sinT := make([]float32, 0, c.Context*hd/2)
	for pos := range c.Context {
		for i := 0; i < hd; i += 2 {
			freq := 1 / math.Pow(c.RopeTheta, float64(i)/float64(hd))
			a := float64(pos) * freq
			cosT = append(cosT, float32(math.Cos(a)))
			sinT = append(sinT, float32(math.Sin(a)))
		}
	}
	sections := [][][]float32{
		{p.TokenEmb},
		perLayer(func(l LayerParams) []float32 { return l.AttnNorm }),
		perLayer(func(l LayerParams) []float32 { return l.Wq }),
		perLayer(func(l LayerParams) []float32 { return l.Wk }),
		perLayer(func(l LayerParams) []float32 { return l.Wv }),
		perLayer(func(l LayerParams) []float32 { return l.Wo }),
		perLayer(func(l LayerParams) []float32 { return l.FFNNorm }),
		perLayer(func(l LayerParams) []float32 { return l.W1 }),
		perLayer(func(l LayerParams) []float32 { return l.W2 }),
		perLayer(func(l LayerParams) []float32 { return l.W3 }),
		{p.FinalNorm},
		{cosT},
		{sinT},
	}
	if !c.TiedOutput {
		sections = append(sections, [][]float32{p.Output})
	}
	for _, sec := range sections {
		for _, v := range sec {
			if err := ckptWriteFloats(bw, v); err != nil {
				return fmt.Errorf("export llama2.c: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export llama2.c: %w", err)
	}
	return nil
}
