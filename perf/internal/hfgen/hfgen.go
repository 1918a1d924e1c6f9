// Package hfgen writes Hugging Face checkpoints of seeded random weights,
// for the performance programs that decode them.
package hfgen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Shape is a Llama- or Qwen2-style model's shape and the config values
// that go with it.
type Shape struct {
	ModelType                             string // llama or qwen2 (q, k and v biases)
	Dim, Hidden, Layers, Heads, KV, Vocab int
	Tied                                  bool
	Context                               int // max_position_embeddings
	NormEps, RopeTheta                    float64
}

// Write writes config.json and model.safetensors of a seeded random model of shape sh into dir.
// Its tensors are stored as dtype, BF16 or F16.
func Write(dir string, sh Shape, dtype string) error {
	hd := sh.Dim / sh.Heads
	arch := map[string]string{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[sh.ModelType]
	cfg := map[string]any{
		"architectures": []string{arch}, "model_type": sh.ModelType, "hidden_size": sh.Dim, "intermediate_size": sh.Hidden,
		"num_hidden_layers": sh.Layers, "num_attention_heads": sh.Heads, "num_key_value_heads": sh.KV, "vocab_size": sh.Vocab,
		"max_position_embeddings": sh.Context, "rms_norm_eps": sh.NormEps, "rope_theta": sh.RopeTheta, "tie_word_embeddings": sh.Tied,
		"hidden_act": "silu", "eos_token_id": 0,
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		return err
	}
	type tensor struct {
		name  string
		shape []int
		scale float64 // 0: a norm weight, ones
	}
	ts := []tensor{{"model.embed_tokens.weight", []int{sh.Vocab, sh.Dim}, 1}, {"model.norm.weight", []int{sh.Dim}, 0}}
	if !sh.Tied {
		ts = append(ts, tensor{"lm_head.weight", []int{sh.Vocab, sh.Dim}, 1 / math.Sqrt(float64(sh.Dim))})
	}
	for l := range sh.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		in, hid := 1/math.Sqrt(float64(sh.Dim)), 1/math.Sqrt(float64(sh.Hidden))
		ts = append(ts,
			tensor{p + "input_layernorm.weight", []int{sh.Dim}, 0},
			tensor{p + "post_attention_layernorm.weight", []int{sh.Dim}, 0},
			tensor{p + "self_attn.q_proj.weight", []int{sh.Heads * hd, sh.Dim}, in},
			tensor{p + "self_attn.k_proj.weight", []int{sh.KV * hd, sh.Dim}, in},
			tensor{p + "self_attn.v_proj.weight", []int{sh.KV * hd, sh.Dim}, in},
			tensor{p + "self_attn.o_proj.weight", []int{sh.Dim, sh.Heads * hd}, in},
			tensor{p + "mlp.gate_proj.weight", []int{sh.Hidden, sh.Dim}, in},
			tensor{p + "mlp.up_proj.weight", []int{sh.Hidden, sh.Dim}, in},
			tensor{p + "mlp.down_proj.weight", []int{sh.Dim, sh.Hidden}, hid})
		if sh.ModelType == "qwen2" {
			ts = append(ts,
				tensor{p + "self_attn.q_proj.bias", []int{sh.Heads * hd}, 0.1},
				tensor{p + "self_attn.k_proj.bias", []int{sh.KV * hd}, 0.1},
				tensor{p + "self_attn.v_proj.bias", []int{sh.KV * hd}, 0.1})
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	off := 0
	for _, t := range ts {
		n := 2
		for _, d := range t.shape {
			n *= d
		}
		header[t.name] = map[string]any{"dtype": dtype, "shape": t.shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return err
	}
	hb = append(hb, []byte(strings.Repeat(" ", (8-len(hb)%8)%8))...)
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	defer f.Close()
	var n8 [8]byte
	binary.LittleEndian.PutUint64(n8[:], uint64(len(hb)))
	if _, err := f.Write(append(n8[:], hb...)); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, 1<<20)
	for _, t := range ts {
		n := 1
		for _, d := range t.shape {
			n *= d
		}
		for range n {
			v := float32(1)
			if t.scale != 0 {
				v = float32(rng.NormFloat64() * t.scale)
			}
			buf = binary.LittleEndian.AppendUint16(buf, toHalf(v, dtype))
			if len(buf) == cap(buf) {
				if _, err := f.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := f.Write(buf); err != nil {
		return err
	}
	return f.Close()
}

// toHalf rounds v to bfloat16, nearest with ties to even, or to float16 by truncating the mantissa.
// Values here are far inside float16's normal range.
func toHalf(v float32, dtype string) uint16 {
	b := math.Float32bits(v)
	if dtype == "BF16" {
		return uint16((b + 0x7fff + (b>>16)&1) >> 16)
	}
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	switch {
	case exp <= 0:
		return sign
	case exp >= 31:
		return sign | 0x7bff
	}
	return sign | uint16(exp)<<10 | uint16(b>>13)&0x3ff
}
