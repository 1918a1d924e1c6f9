package infer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// Hugging Face checkpoints of the Llama and Qwen families, loaded for inference.
// Llama 2, 3 and 3.x, and Qwen 2, 2.5 and 3, are read. A checkpoint is a
// directory holding config.json and the weights as model.safetensors, or as
// shards listed by model.safetensors.index.json, in float32, bfloat16 or
// float16.
//
// The architecture comes from config.json:
//
//	model_type, architectures   llama / LlamaForCausalLM, qwen2 /
//	                            Qwen2ForCausalLM, qwen3 / Qwen3ForCausalLM
//	hidden_size                 Dim
//	intermediate_size           Hidden
//	num_hidden_layers           Layers
//	num_attention_heads         Heads
//	num_key_value_heads         KVHeads (grouped-query attention); default Heads
//	head_dim                    HeadSize when not hidden_size/heads;
//	                            Qwen3 without it: 128, its config's default
//	vocab_size                  Vocab
//	max_position_embeddings     the longest context (HFOptions.Context caps it)
//	rms_norm_eps, rope_theta    NormEps, RopeTheta
//	rope_scaling                linear or llama3 (nn.RopeScaling); others refused
//	rope_parameters             transformers v5's place for both: rope_theta,
//	                            rope_type and the scaling's keys
//	partial_rotary_factor       must be absent or 1
//	tie_word_embeddings         TiedOutput
//	hidden_act                  must be silu
//	attention_bias, mlp_bias    must be false; Qwen2 ignores attention_bias,
//	                            as transformers does: its q/k/v always have biases
//	use_sliding_window          must be false
//	num_experts, num_local_experts  must be absent (no mixture of experts)
//	eos_token_id                HFInfo.EOS
//
// Other keys are ignored. Qwen2 adds biases to the queries, keys and values;
// Qwen3 RMS-normalizes each head of the queries and keys.
//
// Hugging Face rotates the two halves of each head, x_i with x_{i+HeadDim/2},
// in "rotate_half". This package rotates adjacent pairs, x_{2i} with
// x_{2i+1}. The loader permutes the rows of the query and key projections
// within each head, with their biases and norm weights, so that our pair i
// holds Hugging Face's x_i and x_{i+HeadDim/2}. Attention scores are dot
// products over a whole head, unchanged by a permutation applied to both
// queries and keys, so the model computes the same function.

// HFOptions tune LoadHF.
type HFOptions struct {
	// Context caps the longest sequence (prompt and generation), which
	// sizes the engine's KV cache. Default: max_position_embeddings, at
	// most 2048.
	Context int
	// Float32 widens 16-bit weights to float32 at load (twice the memory
	// and the bytes read per token; for comparisons).
	Float32 bool
	// Quantize, when "q8_0", quantises every matrix to q8_0 at load
	// (kernel.QuantizeQ8_0, as llama.cpp does): about half the bytes of
	// bfloat16. "" keeps the checkpoint's type.
	Quantize string
}

// checkQuantize refuses a quantisation the engine does not have.
func checkQuantize(q string) error {
	if q != "" && q != "q8_0" {
		return fmt.Errorf("quantize %q is not supported (want q8_0, or none)", q)
	}
	return nil
}

// HFInfo is what LoadHF read besides the weights.
type HFInfo struct {
	ModelType string       // llama, qwen2 or qwen3
	DType     kernel.DType // how the matrices are held in memory
	EOS       []int        // eos_token_id: ids that end a generation
	Tensors   int          // tensors read
	Files     int          // safetensors files read
}

// Weights are a model's weights laid out for decoding, read-only.
// An Engine made by NewEngineWeights reads them in place, and several
// engines may share them.
type Weights struct {
	cfg nn.Config
	w   packedWeights
}

// Config returns the model's config (a copy: the weights' shapes cannot
// change; HFOptions sets the context).
func (w *Weights) Config() nn.Config { return w.cfg }

// Bytes is the memory the weights take.
func (w *Weights) Bytes() int64 { return w.w.bytes() }

// hfConfig is the part of config.json LoadHF reads.
type hfConfig struct {
	Architectures      []string        `json:"architectures"`
	ModelType          string          `json:"model_type"`
	HiddenSize         int             `json:"hidden_size"`
	IntermediateSize   int             `json:"intermediate_size"`
	Layers             int             `json:"num_hidden_layers"`
	Heads              int             `json:"num_attention_heads"`
	KVHeads            int             `json:"num_key_value_heads"`
	HeadDim            int             `json:"head_dim"`
	Vocab              int             `json:"vocab_size"`
	MaxPos             int             `json:"max_position_embeddings"`
	RMSNormEps         float64         `json:"rms_norm_eps"`
	RopeTheta          float64         `json:"rope_theta"`
	RopeScaling        json.RawMessage `json:"rope_scaling"`
	RopeParameters     json.RawMessage `json:"rope_parameters"`
	PartialRotary      *float64        `json:"partial_rotary_factor"`
	Tie                *bool           `json:"tie_word_embeddings"`
	HiddenAct          string          `json:"hidden_act"`
	AttentionBias      bool            `json:"attention_bias"`
	MLPBias            bool            `json:"mlp_bias"`
	UseSlidingWindow   bool            `json:"use_sliding_window"`
	NumExperts         *int            `json:"num_experts"`
	NumLocalExperts    *int            `json:"num_local_experts"`
	EOS                json.RawMessage `json:"eos_token_id"`
	QuantizationConfig json.RawMessage `json:"quantization_config"`
}

// hfFamilies maps model_type to the architecture class it must name.
var hfFamilies = map[string]string{
	"llama": "LlamaForCausalLM",
	"qwen2": "Qwen2ForCausalLM",
	"qwen3": "Qwen3ForCausalLM",
}

// parseHFConfig reads config.json into an nn.Config, refusing what the engine
// does not compute, with the field's name.
func parseHFConfig(b []byte, opt HFOptions) (nn.Config, HFInfo, error) {
	var h hfConfig
	if err := json.Unmarshal(b, &h); err != nil {
		return nn.Config{}, HFInfo{}, fmt.Errorf("parse: %w", err)
	}
	if err := checkHFSupported(&h, opt); err != nil {
		return nn.Config{}, HFInfo{}, err
	}
	c, err := hfModelConfig(&h, opt)
	if err != nil {
		return nn.Config{}, HFInfo{}, err
	}
	eos, err := parseHFEOS(h.EOS, c.Vocab)
	if err != nil {
		return nn.Config{}, HFInfo{}, err
	}
	return c, HFInfo{ModelType: h.ModelType, EOS: eos}, nil
}

// checkHFSupported refuses a model family, a layer feature or an option
// the engine does not compute, naming the field.
func checkHFSupported(h *hfConfig, opt HFOptions) error {
	arch, ok := hfFamilies[h.ModelType]
	switch {
	case !ok && strings.Contains(h.ModelType, "moe"):
		return fmt.Errorf("model_type %q: mixture-of-experts models are not supported (want llama, qwen2 or qwen3)", h.ModelType)
	case !ok:
		return fmt.Errorf("model_type %q is not supported (want llama, qwen2 or qwen3)", h.ModelType)
	case len(h.Architectures) > 0 && !slices.Equal(h.Architectures, []string{arch}):
		return fmt.Errorf("architectures %q: model_type %s needs [%q]", h.Architectures, h.ModelType, arch)
	case h.NumExperts != nil || h.NumLocalExperts != nil:
		return errors.New("num_experts: mixture-of-experts models are not supported")
	case h.HiddenAct != "" && h.HiddenAct != "silu":
		return fmt.Errorf("hidden_act %q is not supported (want silu)", h.HiddenAct)
	case h.AttentionBias && h.ModelType != "qwen2":
		// Qwen2's attention has q/k/v biases and no o bias whatever the
		// key says; transformers reads no attention_bias for it.
		return errors.New("attention_bias true is not supported (biases on every attention projection)")
	case h.MLPBias:
		return errors.New("mlp_bias true is not supported")
	case h.UseSlidingWindow:
		return errors.New("use_sliding_window true is not supported (full attention only)")
	case len(h.QuantizationConfig) > 0 && string(h.QuantizationConfig) != "null":
		return errors.New("quantization_config: quantized checkpoints are not supported (want float32, bfloat16 or float16)")
	case h.MaxPos <= 0:
		return fmt.Errorf("max_position_embeddings must be positive, got %d", h.MaxPos)
	case opt.Context < 0:
		return fmt.Errorf("context must not be negative, got %d", opt.Context)
	}
	return checkQuantize(opt.Quantize)
}

// hfModelConfig makes the nn.Config of a supported config.json, with
// transformers' defaults where a key is absent, and validates it.
func hfModelConfig(h *hfConfig, opt HFOptions) (nn.Config, error) {
	c := nn.Config{
		Vocab:      h.Vocab,
		Dim:        h.HiddenSize,
		Layers:     h.Layers,
		Heads:      h.Heads,
		KVHeads:    h.KVHeads,
		Hidden:     h.IntermediateSize,
		Context:    min(h.MaxPos, 2048),
		TiedOutput: h.Tie != nil && *h.Tie, // LlamaConfig's, Qwen2Config's and Qwen3Config's default is false
		NormEps:    h.RMSNormEps,
		QKVBias:    h.ModelType == "qwen2",
		QKNorm:     h.ModelType == "qwen3",
	}
	if opt.Context > 0 {
		c.Context = min(opt.Context, h.MaxPos)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	theta, rs, err := parseHFRope(*h)
	if err != nil {
		return nn.Config{}, err
	}
	c.RopeTheta, c.RopeScaling = theta, rs
	if c.NormEps == 0 {
		c.NormEps = 1e-6
	}
	headDim := h.HeadDim
	if headDim == 0 && h.ModelType == "qwen3" {
		headDim = 128 // Qwen3Config's default, not hidden_size/heads
	}
	if headDim != 0 && (h.Heads <= 0 || headDim*h.Heads != h.HiddenSize) {
		c.HeadSize = headDim
	}
	if err := c.Validate(); err != nil {
		return nn.Config{}, err
	}
	return c, nil
}

// parseHFEOS reads eos_token_id, an id or a list of ids, each within the
// vocabulary. Absent or null is no id.
func parseHFEOS(raw json.RawMessage, vocab int) ([]int, error) {
	var eos []int
	if len(raw) > 0 && string(raw) != "null" {
		var one int
		if err := json.Unmarshal(raw, &one); err == nil {
			eos = []int{one}
		} else if err := json.Unmarshal(raw, &eos); err != nil {
			return nil, fmt.Errorf("eos_token_id %s: want an id or a list of ids", raw)
		}
	}
	for _, id := range eos {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("eos_token_id %d is outside the vocabulary of %d", id, vocab)
		}
	}
	return eos, nil
}

// hfRope is a rope_scaling (transformers v4) or rope_parameters (v5)
// object: the type under "rope_type" (newer files) or "type".
type hfRope struct {
	RopeType        string   `json:"rope_type"`
	Type            string   `json:"type"`
	RopeTheta       *float64 `json:"rope_theta"`
	Factor          *float64 `json:"factor"`
	LowFreqFactor   float64  `json:"low_freq_factor"`
	HighFreqFactor  float64  `json:"high_freq_factor"`
	OriginalContext int      `json:"original_max_position_embeddings"`
	PartialRotary   *float64 `json:"partial_rotary_factor"`
}

// present reports whether a config.json value is given and not null.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// parseHFRope reads the rotary embedding's base and scaling from either
// layout: v4's rope_theta and rope_scaling, or v5's rope_parameters.
// Where both give a value they must agree; a missing base is 10000, the
// default of transformers' Llama and Qwen configs.
func parseHFRope(h hfConfig) (float64, *nn.RopeScaling, error) {
	if h.PartialRotary != nil && *h.PartialRotary != 1 {
		return 0, nil, fmt.Errorf("partial_rotary_factor %g is not supported (rotary on whole heads only)", *h.PartialRotary)
	}
	theta := h.RopeTheta
	var rs *nn.RopeScaling
	if present(h.RopeScaling) {
		var r hfRope
		if err := json.Unmarshal(h.RopeScaling, &r); err != nil {
			return 0, nil, fmt.Errorf("rope_scaling: %w", err)
		}
		var err error
		if rs, err = hfRopeScaling("rope_scaling", r, false); err != nil {
			return 0, nil, err
		}
	}
	if present(h.RopeParameters) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(h.RopeParameters, &fields); err != nil {
			return 0, nil, fmt.Errorf("rope_parameters: %w", err)
		}
		for k, v := range fields {
			if len(v) > 0 && v[0] == '{' {
				return 0, nil, fmt.Errorf("rope_parameters %q: rope parameters per layer type are not supported", k)
			}
		}
		var r hfRope
		if err := json.Unmarshal(h.RopeParameters, &r); err != nil {
			return 0, nil, fmt.Errorf("rope_parameters: %w", err)
		}
		if r.PartialRotary != nil && *r.PartialRotary != 1 {
			return 0, nil, fmt.Errorf("rope_parameters partial_rotary_factor %g is not supported (rotary on whole heads only)", *r.PartialRotary)
		}
		if r.RopeTheta != nil {
			if theta != 0 && theta != *r.RopeTheta {
				return 0, nil, fmt.Errorf("rope_theta %g and rope_parameters rope_theta %g disagree", theta, *r.RopeTheta)
			}
			theta = *r.RopeTheta
		}
		prs, err := hfRopeScaling("rope_parameters", r, true)
		if err != nil {
			return 0, nil, err
		}
		if present(h.RopeScaling) && !sameScaling(rs, prs) {
			return 0, nil, fmt.Errorf("rope_scaling %s and rope_parameters %s disagree", h.RopeScaling, h.RopeParameters)
		}
		rs = prs
	}
	if theta == 0 {
		theta = 10000
	}
	return theta, rs, nil
}

// hfRopeScaling turns a rope object under key into a scaling.
// It gives nil for "default", and for no type at all under rope_parameters,
// where untyped means default. Any type not implemented is an error naming
// it.
func hfRopeScaling(key string, r hfRope, untypedDefault bool) (*nn.RopeScaling, error) {
	t := cmpOr(r.RopeType, r.Type)
	if t == "default" || (t == "" && untypedDefault) {
		return nil, nil
	}
	if t != "linear" && t != "llama3" {
		return nil, fmt.Errorf("%s type %q is not supported (want default, linear or llama3)", key, t)
	}
	if r.Factor == nil {
		return nil, fmt.Errorf("%s %s: factor is missing", key, t)
	}
	rs := &nn.RopeScaling{Type: t, Factor: *r.Factor}
	if t == "llama3" {
		rs.LowFreqFactor, rs.HighFreqFactor, rs.OriginalContext = r.LowFreqFactor, r.HighFreqFactor, r.OriginalContext
	}
	if err := rs.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return rs, nil
}

// sameScaling reports whether two scalings (nil: none) are equal.
func sameScaling(a, b *nn.RopeScaling) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hfTensor is one tensor of a checkpoint: where its bytes are.
type hfTensor struct {
	file  string // safetensors file, for errors
	ra    io.ReaderAt
	off   int64 // of the first byte in the file
	dtype string
	shape []int
	used  bool
}

// hfMaxHeader bounds a safetensors header, so a corrupt length cannot make the loader allocate without limit.
// Real headers are well under a megabyte.
const hfMaxHeader = 100 << 20

// hfDTypes are the tensor types LoadHF reads, with their sizes.
var hfDTypes = map[string]int{"F32": 4, "BF16": 2, "F16": 2}

// openSafetensors reads the header of one safetensors file, size bytes
// read through f, and adds its tensors to ts.
func openSafetensors(path string, f io.ReaderAt, size int64, ts map[string]*hfTensor) error {
	var n [8]byte
	if _, err := f.ReadAt(n[:], 0); err != nil {
		return fmt.Errorf("truncated: file is %d bytes, shorter than the 8-byte header length", size)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen > hfMaxHeader {
		return fmt.Errorf("header length %d exceeds the limit of %d bytes", hlen, hfMaxHeader)
	}
	if int64(hlen) > size-8 {
		return fmt.Errorf("truncated: header length %d exceeds the %d bytes after it", hlen, size-8)
	}
	header := make([]byte, hlen)
	if _, err := f.ReadAt(header, 8); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	header = bytes.TrimRight(header, " ") // the format allows padding with spaces
	entries, _, err := nn.ParseSafetensorsHeader(header)
	if err != nil {
		return err
	}
	dataStart := 8 + int64(hlen)
	dataLen := size - dataStart
	for name, e := range entries {
		es, ok := hfDTypes[e.DType]
		if !ok {
			return fmt.Errorf("tensor %s: dtype %s is not supported (want F32, BF16 or F16)", name, e.DType)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > math.MaxInt32*int64(1<<16)/int64(d)) {
				return fmt.Errorf("tensor %s: bad shape %v", name, e.Shape)
			}
			count *= int64(d)
		}
		o0, o1 := int64(e.DataOffsets[0]), int64(e.DataOffsets[1])
		switch {
		case o0 < 0 || o1 < o0:
			return fmt.Errorf("tensor %s: bad data_offsets %v", name, e.DataOffsets)
		case o1 > dataLen:
			return fmt.Errorf("truncated: tensor %s ends at byte %d of the data, which holds %d", name, o1, dataLen)
		case o1-o0 != count*int64(es):
			return fmt.Errorf("tensor %s: data_offsets %v hold %d bytes, shape %v of %s needs %d", name, e.DataOffsets, o1-o0, e.Shape, e.DType, count*int64(es))
		}
		if _, dup := ts[name]; dup {
			return fmt.Errorf("tensor %s is also in another file", name)
		}
		ts[name] = &hfTensor{file: path, ra: f, off: dataStart + o0, dtype: e.DType, shape: e.Shape}
	}
	return nil
}

// hfWeightFiles lists the safetensors files of dir: the shards named by
// model.safetensors.index.json, or model.safetensors.
func hfWeightFiles(dir string) ([]string, error) {
	idx := filepath.Join(dir, "model.safetensors.index.json")
	b, err := os.ReadFile(idx)
	if errors.Is(err, os.ErrNotExist) {
		return []string{filepath.Join(dir, "model.safetensors")}, nil
	}
	if err != nil {
		return nil, err
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, fmt.Errorf("%s: %w", idx, err)
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is empty", idx)
	}
	seen := map[string]bool{}
	var files []string
	for _, f := range index.WeightMap {
		if f == "" || filepath.Base(f) != f {
			return nil, fmt.Errorf("%s: shard %q is not a file name in the directory", idx, f)
		}
		if !seen[f] {
			seen[f] = true
			files = append(files, filepath.Join(dir, f))
		}
	}
	sort.Strings(files)
	return files, nil
}

// LoadHF loads the Hugging Face checkpoint in dir.
// The comment at the top of hf.go says what it supports. Matrices stay in
// the checkpoint's type unless opt.Float32; bfloat16 and float16 halve the
// memory and the bytes a decode step reads. Norms and biases are widened to
// float32. Anything it cannot compute exactly is an error naming the field
// or the tensor.
func LoadHF(dir string, opt HFOptions) (*Weights, HFInfo, error) {
	cfgPath := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, HFInfo{}, fmt.Errorf("load hf checkpoint: %w", err)
	}
	c, info, err := parseHFConfig(b, opt)
	if err != nil {
		return nil, HFInfo{}, fmt.Errorf("load hf checkpoint %s: %w", cfgPath, err)
	}
	files, err := hfWeightFiles(dir)
	if err != nil {
		return nil, HFInfo{}, fmt.Errorf("load hf checkpoint %s: %w", dir, err)
	}
	ts := map[string]*hfTensor{}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, HFInfo{}, fmt.Errorf("load hf checkpoint: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, HFInfo{}, fmt.Errorf("load hf checkpoint: %w", err)
		}
		if err := openSafetensors(path, f, st.Size(), ts); err != nil {
			return nil, HFInfo{}, fmt.Errorf("load hf checkpoint %s: %w", path, err)
		}
	}
	l := hfLoader{c: c, ts: ts, f32: opt.Float32, q8: opt.Quantize == "q8_0"}
	w, err := l.load()
	if err != nil {
		return nil, HFInfo{}, fmt.Errorf("load hf checkpoint %s: %w", dir, err)
	}
	info.DType, info.Tensors, info.Files = l.dtype, len(ts), len(files)
	return &Weights{cfg: c, w: w}, info, nil
}

// hfLoader reads the tensors of one checkpoint into packedWeights.
type hfLoader struct {
	c   nn.Config
	ts  map[string]*hfTensor
	f32 bool
	q8  bool // quantise every matrix to q8_0
	// paired: the query and key rows are already in our adjacent-pair
	// order (GGUF's llama), so load does not permute them.
	paired bool
	dtype  kernel.DType // of the matrices, set by the first one read
	set    bool
}

// matrix is a 2-D tensor as read: float32 values, 16-bit bits or q8_0
// blocks.
type hfMatrix struct {
	f []float32
	h []uint16
	q []byte
}

// tensor finds name and checks its shape.
func (l *hfLoader) tensor(name string, shape ...int) (*hfTensor, error) {
	t, ok := l.ts[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	if !slices.Equal(t.shape, shape) {
		return nil, fmt.Errorf("tensor %s has shape %v, config.json implies %v", name, t.shape, shape)
	}
	t.used = true
	return t, nil
}

// raw reads a tensor's bytes.
func (t *hfTensor) raw(name string) ([]byte, error) {
	n := hfDTypes[t.dtype]
	for _, d := range t.shape {
		n *= d
	}
	if t.dtype == "Q8_0" { // GGUF's, rows of whole blocks (checked by LoadGGUF)
		n = kernel.Q8RowBytes(t.shape[len(t.shape)-1])
		for _, d := range t.shape[:len(t.shape)-1] {
			n *= d
		}
	}
	buf := make([]byte, n)
	if n == 0 {
		return buf, nil
	}
	if _, err := t.ra.ReadAt(buf, t.off); err != nil {
		return nil, fmt.Errorf("tensor %s: read %s: %w", name, t.file, err)
	}
	return buf, nil
}

// vector reads a 1-D tensor of n values as float32.
func (l *hfLoader) vector(name string, n int) ([]float32, error) {
	t, err := l.tensor(name, n)
	if err != nil {
		return nil, err
	}
	if t.dtype == "Q8_0" {
		return nil, fmt.Errorf("tensor %s: a q8_0 vector is not supported (want F32, F16 or BF16)", name)
	}
	buf, err := t.raw(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i := range out {
		switch t.dtype {
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		case "BF16":
			out[i] = kernel.BF16ToFloat32(binary.LittleEndian.Uint16(buf[2*i:]))
		case "F16":
			out[i] = kernel.F16ToFloat32(binary.LittleEndian.Uint16(buf[2*i:]))
		}
	}
	return out, checkFinite(name, out)
}

// checkFinite fails on the first NaN or infinity of v (all exponent bits
// set), naming the tensor and the index.
func checkFinite(name string, v []float32) error {
	for i, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return fmt.Errorf("tensor %s: value %d is %v", name, i, x)
		}
	}
	return nil
}

// matrix reads a (rows, cols) tensor in the model's matrix type.
// The first matrix read sets the type, and every other must have it.
func (l *hfLoader) matrix(name string, rows, cols int) (hfMatrix, error) {
	t, err := l.tensor(name, rows, cols)
	if err != nil {
		return hfMatrix{}, err
	}
	if err := l.checkMatrixType(name, t.dtype, cols); err != nil {
		return hfMatrix{}, err
	}
	buf, err := t.raw(name)
	if err != nil {
		return hfMatrix{}, err
	}
	switch {
	case t.dtype == "Q8_0" && !l.f32:
		if err := checkQ8Finite(name, buf); err != nil {
			return hfMatrix{}, err
		}
		return hfMatrix{q: buf}, nil
	case l.q8 || t.dtype == "Q8_0":
		return l.throughFloat32(name, t.dtype, buf, rows, cols)
	case t.dtype == "F32":
		f := make([]float32, rows*cols)
		for i := range f {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		return hfMatrix{f: f}, checkFinite(name, f)
	}
	return l.halfMatrix(name, t.dtype, buf, rows*cols)
}

// checkMatrixType works out the type a matrix of dtype is held in. The
// first matrix sets the model's type, and every other must have it.
func (l *hfLoader) checkMatrixType(name, dtype string, cols int) error {
	dt := map[string]kernel.DType{"F32": kernel.Float32, "BF16": kernel.BFloat16, "F16": kernel.Float16, "Q8_0": kernel.Q8_0}[dtype]
	if l.f32 {
		dt = kernel.Float32
	}
	if l.q8 {
		if cols%kernel.Q8Block != 0 {
			return fmt.Errorf("tensor %s: q8_0 needs rows of a multiple of 32 values, has %d", name, cols)
		}
		dt = kernel.Q8_0
	}
	if !l.set {
		l.dtype, l.set = dt, true
	}
	if dt != l.dtype {
		return fmt.Errorf("tensor %s is %s, the model's other matrices %s: mixed types are not supported", name, dtype, l.dtype)
	}
	return nil
}

// throughFloat32 decodes a matrix to float32 and checks it. That is the
// way to quantise it to q8_0, or to widen a q8_0 one when float32 is
// asked for.
func (l *hfLoader) throughFloat32(name, dtype string, buf []byte, rows, cols int) (hfMatrix, error) {
	f := make([]float32, rows*cols)
	if dtype == "Q8_0" {
		kernel.DequantizeQ8_0(f, buf)
	}
	for i := range f {
		switch dtype {
		case "F32":
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		case "BF16":
			f[i] = kernel.BF16ToFloat32(binary.LittleEndian.Uint16(buf[2*i:]))
		case "F16":
			f[i] = kernel.F16ToFloat32(binary.LittleEndian.Uint16(buf[2*i:]))
		}
	}
	if err := checkFinite(name, f); err != nil {
		return hfMatrix{}, err
	}
	if l.f32 {
		return hfMatrix{f: f}, nil
	}
	return hfMatrix{q: quantizeRows(f, rows, cols)}, nil
}

// halfMatrix reads n bfloat16 or float16 values: kept as they are, or
// widened to float32 when asked. Either way none may be Inf or NaN.
func (l *hfLoader) halfMatrix(name, dtype string, buf []byte, n int) (hfMatrix, error) {
	h := make([]uint16, n)
	for i := range h {
		h[i] = binary.LittleEndian.Uint16(buf[2*i:])
	}
	if l.f32 {
		f := make([]float32, n)
		if dtype == "BF16" {
			for i, v := range h {
				f[i] = kernel.BF16ToFloat32(v)
			}
		} else {
			for i, v := range h {
				f[i] = kernel.F16ToFloat32(v)
			}
		}
		return hfMatrix{f: f}, checkFinite(name, f)
	}
	exp := uint16(0x7f80) // bfloat16's exponent bits: all set is Inf or NaN
	if dtype == "F16" {
		exp = 0x7c00
	}
	for i, v := range h {
		if v&exp == exp {
			return hfMatrix{}, fmt.Errorf("tensor %s: value %d is not finite", name, i)
		}
	}
	return hfMatrix{h: h}, nil
}

// permuteHeads reorders the rows of m from Hugging Face's halves to our adjacent pairs.
// m is heads blocks of hd rows of cols values each. New row 2i of a head is
// old row i, and new row 2i+1 is old row i+hd/2.
func permuteHeads[T float32 | uint16 | byte](m []T, heads, hd, cols int) []T {
	out := make([]T, len(m))
	half := hd / 2
	for h := range heads {
		for i := range half {
			base := h * hd
			copy(out[(base+2*i)*cols:(base+2*i+1)*cols], m[(base+i)*cols:(base+i+1)*cols])
			copy(out[(base+2*i+1)*cols:(base+2*i+2)*cols], m[(base+i+half)*cols:(base+i+half+1)*cols])
		}
	}
	return out
}

func (m hfMatrix) permuteHeads(heads, hd, cols int) hfMatrix {
	if m.q != nil {
		return hfMatrix{q: permuteHeads(m.q, heads, hd, kernel.Q8RowBytes(cols))}
	}
	if m.f != nil {
		return hfMatrix{f: permuteHeads(m.f, heads, hd, cols)}
	}
	return hfMatrix{h: permuteHeads(m.h, heads, hd, cols)}
}

// packed lays out parts (stacked rows of k values) in the model's type.
func (l *hfLoader) packed(k int, parts ...hfMatrix) *kernel.Packed {
	rows := make([]int, len(parts))
	for i, p := range parts {
		rows[i] = (len(p.f) + len(p.h)) / max(k, 1)
	}
	if l.dtype == kernel.Q8_0 {
		qs := make([][]byte, len(parts))
		for i, p := range parts {
			rows[i] = len(p.q) / kernel.Q8RowBytes(k)
			qs[i] = p.q
		}
		w := kernel.NewPackedQ8(k, rows...)
		w.RepackQ8(qs...)
		return w
	}
	var w *kernel.Packed
	if l.dtype == kernel.Float32 {
		w = kernel.NewPacked(k, rows...)
	} else {
		w = kernel.NewPackedHalf(l.dtype, k, rows...)
	}
	// Panels in pieces across the cores: a large matrix takes a while.
	const piece = 64
	workers := min(runtime.GOMAXPROCS(0), (w.Panels()+piece-1)/piece)
	var wg sync.WaitGroup
	for g := range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := g * piece; q < w.Panels(); q += max(workers, 1) * piece {
				q1 := min(q+piece, w.Panels())
				if l.dtype == kernel.Float32 {
					fs := make([][]float32, len(parts))
					for i, p := range parts {
						fs[i] = p.f
					}
					w.RepackPanels(q, q1, fs...)
				} else {
					hs := make([][]uint16, len(parts))
					for i, p := range parts {
						hs[i] = p.h
					}
					w.RepackHalfPanels(q, q1, hs...)
				}
			}
		}()
	}
	wg.Wait()
	return w
}

// load reads the model's weights, laid out for decoding, and fails on a
// tensor it did not read.
func (l *hfLoader) load() (packedWeights, error) {
	c := l.c
	d := c.Dim
	var w packedWeights
	emb, err := l.matrix("model.embed_tokens.weight", c.Vocab, d)
	if err != nil {
		return w, err
	}
	w.emb = l.packed(d, emb)
	w.out = w.emb
	if !c.TiedOutput {
		out, err := l.matrix("lm_head.weight", c.Vocab, d)
		if err != nil {
			return w, err
		}
		w.out = l.packed(d, out)
	} else if t, ok := l.ts["lm_head.weight"]; ok {
		t.used = true // some tied checkpoints store the copy as well
	}
	if w.finalNorm, err = l.vector("model.norm.weight", d); err != nil {
		return w, err
	}
	for i := range c.Layers {
		if err := l.loadLayer(&w, i); err != nil {
			return w, err
		}
	}
	return w, l.checkAllUsed()
}

// loadLayer reads layer i's weights and appends them to w, laid out for
// decoding. Each head's rows are in our pair order.
func (l *hfLoader) loadLayer(w *packedWeights, i int) error {
	c := l.c
	d, qd, kv, hid, hd := c.Dim, c.QDim(), c.KVDim(), c.Hidden, c.HeadDim()
	pre := fmt.Sprintf("model.layers.%d.", i)
	var errs []error
	mat := func(name string, rows, cols int) hfMatrix {
		m, err := l.matrix(pre+name, rows, cols)
		errs = append(errs, err)
		return m
	}
	vec := func(name string, n int) []float32 {
		v, err := l.vector(pre+name, n)
		errs = append(errs, err)
		return v
	}
	an, fn := vec("input_layernorm.weight", d), vec("post_attention_layernorm.weight", d)
	q, k, v := mat("self_attn.q_proj.weight", qd, d), mat("self_attn.k_proj.weight", kv, d), mat("self_attn.v_proj.weight", kv, d)
	o := mat("self_attn.o_proj.weight", d, qd)
	gate, up, down := mat("mlp.gate_proj.weight", hid, d), mat("mlp.up_proj.weight", hid, d), mat("mlp.down_proj.weight", d, hid)
	var qb, kb, vb, qn, kn []float32
	if c.QKVBias {
		qb, kb, vb = vec("self_attn.q_proj.bias", qd), vec("self_attn.k_proj.bias", kv), vec("self_attn.v_proj.bias", kv)
	}
	if c.QKNorm {
		qn, kn = vec("self_attn.q_norm.weight", hd), vec("self_attn.k_norm.weight", hd)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !l.paired {
		q, k = q.permuteHeads(c.Heads, hd, d), k.permuteHeads(c.KVHeads, hd, d)
	}
	w.qkv = append(w.qkv, l.packed(d, q, k, v))
	w.wo = append(w.wo, l.packed(qd, o))
	w.w13 = append(w.w13, l.packed(d, gate, up))
	w.w2 = append(w.w2, l.packed(hid, down))
	w.attnNorm = append(w.attnNorm, an)
	w.ffnNorm = append(w.ffnNorm, fn)
	if c.QKVBias {
		if !l.paired {
			qb, kb = permuteHeads(qb, c.Heads, hd, 1), permuteHeads(kb, c.KVHeads, hd, 1)
		}
		bias := slices.Concat(qb, kb, vb)
		w.qkvBias = append(w.qkvBias, bias)
	}
	if c.QKNorm {
		if !l.paired {
			qn, kn = permuteHeads(qn, 1, hd, 1), permuteHeads(kn, 1, hd, 1)
		}
		w.qNorm = append(w.qNorm, qn)
		w.kNorm = append(w.kNorm, kn)
	}
	return nil
}

// checkAllUsed fails on a tensor the model did not read, naming the
// first in order. Rotary inverse frequencies are derived, so ignored.
func (l *hfLoader) checkAllUsed() error {
	var extra []string
	for name, t := range l.ts {
		if !t.used && !strings.HasSuffix(name, ".rotary_emb.inv_freq") {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("tensor %s is not part of a %d-layer model of this architecture (%d unexpected tensors)", extra[0], l.c.Layers, len(extra))
	}
	return nil
}

// IsHF reports whether dir holds a Hugging Face checkpoint, without reading the weights.
// Such a checkpoint has a config.json naming a model_type; one of nn's,
// written by Save, has not.
func IsHF(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return false, err
	}
	var probe struct {
		ModelType *string `json:"model_type"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return false, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	return probe.ModelType != nil, nil
}

// HFChatTemplate is the chat template of a model_type's instruct models, as tokenizer names it.
// qwen2, for Qwen2 and Qwen2.5, gives qwen2.5; qwen3 gives qwen3; llama, for
// Llama 3 and 3.x, gives llama3. Llama 2's template and its SentencePiece
// tokenizer are not supported.
func HFChatTemplate(modelType string) string {
	return map[string]string{"llama": "llama3", "qwen2": "qwen2.5", "qwen3": "qwen3"}[modelType]
}

// quantizeRows quantises f (rows, cols) to q8_0 row by row, the rows
// split across the cores.
func quantizeRows(f []float32, rows, cols int) []byte {
	rb := kernel.Q8RowBytes(cols)
	q := make([]byte, rows*rb)
	workers := max(1, min(runtime.GOMAXPROCS(0), rows/64))
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := g * rows / workers; j < (g+1)*rows/workers; j++ {
				kernel.QuantizeQ8_0(q[j*rb:(j+1)*rb], f[j*cols:(j+1)*cols])
			}
		}()
	}
	wg.Wait()
	return q
}

// checkQ8Finite fails on the first q8_0 block of buf whose float16 scale is not finite.
// The error names the tensor and the block.
func checkQ8Finite(name string, buf []byte) error {
	for b := 0; b+kernel.Q8BlockBytes <= len(buf); b += kernel.Q8BlockBytes {
		if binary.LittleEndian.Uint16(buf[b:])&0x7c00 == 0x7c00 {
			return fmt.Errorf("tensor %s: the scale of block %d is not finite", name, b/kernel.Q8BlockBytes)
		}
	}
	return nil
}
