package infer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	gguf "github.com/gpustack/gguf-parser-go"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// GGUF files of the llama and qwen2 architectures, loaded for inference.
// GGUF is llama.cpp's format: one file holding the hyperparameters, the
// tokenizer and the tensors in F32, F16, BF16 or Q8_0. The header and the
// metadata are read with gguf-parser-go. The tensor data is read here, with
// ReadAt, into the same layout LoadHF makes.
//
// Metadata keys read, ARCH being general.architecture:
//
//	ARCH.embedding_length                 Dim
//	ARCH.feed_forward_length              Hidden
//	ARCH.block_count                      Layers
//	ARCH.attention.head_count             Heads
//	ARCH.attention.head_count_kv          KVHeads; default Heads
//	ARCH.attention.key_length             HeadSize when not Dim/Heads
//	ARCH.attention.layer_norm_rms_epsilon NormEps
//	ARCH.context_length                   the longest context (capped as in LoadHF)
//	ARCH.rope.freq_base                   RopeTheta; default 10000
//	ARCH.rope.scaling.type, .factor       none or linear; others refused
//	ARCH.vocab_size                       Vocab; default the tokens' count
//	tokenizer.ggml.*                      GGUFTokenizer
//	tokenizer.chat_template               GGUFTokenizer.ChatTemplate
//
// llama.cpp's converter stores llama's query and key rows in adjacent-pair
// order already: it permutes Hugging Face's halves, as LoadHF does. It
// stores qwen2's as Hugging Face has them, so the loader permutes qwen2's
// only.

// GGUFInfo is what LoadGGUF read besides the weights.
type GGUFInfo struct {
	Arch      string       // general.architecture: llama or qwen2
	ModelType string       // the Hugging Face model_type of the architecture
	DType     kernel.DType // how the matrices are held in memory
	EOS       []int        // tokenizer.ggml.eos_token_id, when given
	Tensors   int
	Tokenizer GGUFTokenizer
}

// GGUFTokenizer is a GGUF file's embedded tokenizer, as stored.
type GGUFTokenizer struct {
	Model        string   // tokenizer.ggml.model: gpt2 for byte-level BPE
	Pre          string   // tokenizer.ggml.pre: the pre-tokenizer's name (qwen2, llama-bpe, ...)
	Tokens       []string // id → token text
	Merges       []string // "a b", by rank
	Types        []int32  // id → 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
	BOS, EOS     int      // -1 when absent
	ChatTemplate string   // tokenizer.chat_template, a Jinja template
}

// ggufArchs maps the architectures LoadGGUF reads to Hugging Face's
// model_type of the same model.
var ggufArchs = map[string]string{"llama": "llama", "qwen2": "qwen2"}

// ggufTypes are the tensor types LoadGGUF reads, with the names hfLoader
// gives them.
var ggufTypes = map[gguf.GGMLType]string{
	gguf.GGMLTypeF32:  "F32",
	gguf.GGMLTypeF16:  "F16",
	gguf.GGMLTypeBF16: "BF16",
	gguf.GGMLTypeQ8_0: "Q8_0",
}

// ggufNames maps GGUF tensor names (without the blk.N. prefix of a layer)
// to Hugging Face's, which hfLoader reads.
var ggufNames = map[string]string{
	"token_embd.weight":  "model.embed_tokens.weight",
	"output_norm.weight": "model.norm.weight",
	"output.weight":      "lm_head.weight",
	"attn_norm.weight":   "input_layernorm.weight",
	"attn_q.weight":      "self_attn.q_proj.weight",
	"attn_k.weight":      "self_attn.k_proj.weight",
	"attn_v.weight":      "self_attn.v_proj.weight",
	"attn_q.bias":        "self_attn.q_proj.bias",
	"attn_k.bias":        "self_attn.k_proj.bias",
	"attn_v.bias":        "self_attn.v_proj.bias",
	"attn_output.weight": "self_attn.o_proj.weight",
	"ffn_norm.weight":    "post_attention_layernorm.weight",
	"ffn_gate.weight":    "mlp.gate_proj.weight",
	"ffn_up.weight":      "mlp.up_proj.weight",
	"ffn_down.weight":    "mlp.down_proj.weight",
}

// hfName is the Hugging Face name of a GGUF tensor.
// A name it does not know stays as it is, so that load reports it as
// unexpected.
func hfName(name string) string {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			if n, ok := ggufNames[rest[i+1:]]; ok {
				return "model.layers." + rest[:i] + "." + n
			}
		}
		return name
	}
	if n, ok := ggufNames[name]; ok {
		return n
	}
	return name
}

// IsGGUF reports whether path is a file starting with GGUF's magic bytes.
func IsGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

// LoadGGUF loads the GGUF file at path (see the comment at the top of
// this file). Matrices stay in the file's type unless opt asks for float32
// or q8_0; norms and biases are widened to float32. An architecture,
// tensor type or hyperparameter it does not compute is an error naming it.
func LoadGGUF(path string, opt HFOptions) (*Weights, GGUFInfo, error) {
	w, info, err := loadGGUF(path, opt)
	if err != nil {
		return nil, GGUFInfo{}, fmt.Errorf("load gguf %s: %w", path, err)
	}
	return w, info, nil
}

func loadGGUF(path string, opt HFOptions) (*Weights, GGUFInfo, error) {
	if err := checkQuantize(opt.Quantize); err != nil {
		return nil, GGUFInfo{}, err
	}
	if opt.Context < 0 {
		return nil, GGUFInfo{}, fmt.Errorf("context must not be negative, got %d", opt.Context)
	}
	gf, arch, tok, err := parseGGUF(path)
	if err != nil {
		return nil, GGUFInfo{}, err
	}
	c, err := ggufMeta{gf.Header.MetadataKV}.config(arch, len(tok.Tokens), opt)
	if err != nil {
		return nil, GGUFInfo{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, GGUFInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, GGUFInfo{}, err
	}
	ts := map[string]*hfTensor{}
	tied := true
	for _, ti := range gf.TensorInfos {
		dt, ok := ggufTypes[ti.Type]
		if !ok {
			return nil, GGUFInfo{}, fmt.Errorf("tensor %s: type %s is not supported (want F32, F16, BF16 or Q8_0)", ti.Name, ti.Type)
		}
		shape := make([]int, len(ti.Dimensions))
		for i, d := range ti.Dimensions { // GGUF lists the innermost dimension first
			if d > 1<<31 {
				return nil, GGUFInfo{}, fmt.Errorf("tensor %s: bad shape %v", ti.Name, ti.Dimensions)
			}
			shape[len(shape)-1-i] = int(d)
		}
		if dt == "Q8_0" && (len(shape) == 0 || shape[len(shape)-1]%kernel.Q8Block != 0) {
			return nil, GGUFInfo{}, fmt.Errorf("tensor %s: q8_0 rows of %v values are not whole blocks", ti.Name, shape)
		}
		t := &hfTensor{file: path, ra: f, off: gf.TensorDataStartOffset + int64(ti.Offset), dtype: dt, shape: shape}
		if end := t.off + int64(ti.Bytes()); end > st.Size() {
			return nil, GGUFInfo{}, fmt.Errorf("truncated: tensor %s ends at byte %d, the file has %d", ti.Name, end, st.Size())
		}
		name := hfName(ti.Name)
		if name == "lm_head.weight" {
			tied = false
		}
		if _, dup := ts[name]; dup {
			return nil, GGUFInfo{}, fmt.Errorf("tensor %s appears twice", ti.Name)
		}
		ts[name] = t
	}
	c.TiedOutput = tied
	if err := c.Validate(); err != nil {
		return nil, GGUFInfo{}, err
	}
	l := hfLoader{c: c, ts: ts, f32: opt.Float32, q8: opt.Quantize == "q8_0", paired: arch == "llama"}
	pw, err := l.load()
	if err != nil {
		return nil, GGUFInfo{}, err
	}
	info := GGUFInfo{Arch: arch, ModelType: ggufArchs[arch], DType: l.dtype, Tensors: len(ts), Tokenizer: tok}
	if tok.EOS >= 0 {
		if tok.EOS >= c.Vocab {
			return nil, GGUFInfo{}, fmt.Errorf("tokenizer.ggml.eos_token_id %d is outside the vocabulary of %d", tok.EOS, c.Vocab)
		}
		info.EOS = []int{tok.EOS}
	}
	return &Weights{cfg: c, w: pw}, info, nil
}

// parseGGUF reads the header, the metadata and the tensor infos of a GGUF
// file, and checks its architecture.
func parseGGUF(path string) (*gguf.GGUFFile, string, GGUFTokenizer, error) {
	gf, err := gguf.ParseGGUFFile(path)
	if err != nil {
		return nil, "", GGUFTokenizer{}, err
	}
	if len(gf.SplitTensorDataStartOffsets) > 1 {
		return nil, "", GGUFTokenizer{}, fmt.Errorf("a model split over %d files is not supported", len(gf.SplitTensorDataStartOffsets))
	}
	md := ggufMeta{gf.Header.MetadataKV}
	arch, err := md.str("general.architecture")
	if err != nil {
		return nil, "", GGUFTokenizer{}, err
	}
	if _, ok := ggufArchs[arch]; !ok {
		return nil, "", GGUFTokenizer{}, fmt.Errorf("architecture %q is not supported (want llama or qwen2)", arch)
	}
	tok, err := md.tokenizer()
	if err != nil {
		return nil, "", GGUFTokenizer{}, err
	}
	return gf, arch, tok, nil
}

// ReadGGUFTokenizer reads the tokenizer a GGUF file embeds without
// reading its tensors.
func ReadGGUFTokenizer(path string) (GGUFTokenizer, error) {
	_, _, tok, err := parseGGUF(path)
	if err != nil {
		return GGUFTokenizer{}, fmt.Errorf("read gguf tokenizer %s: %w", path, err)
	}
	return tok, nil
}

// ggufMeta reads typed values from a GGUF file's metadata, with errors naming the key.
// gguf-parser-go's accessors would panic on a value of another type.
type ggufMeta struct{ kvs gguf.GGUFMetadataKVs }

func (m ggufMeta) str(key string) (string, error) {
	kv, ok := m.kvs.Get(key)
	if !ok {
		return "", fmt.Errorf("metadata %s is missing", key)
	}
	if kv.ValueType != gguf.GGUFMetadataValueTypeString {
		return "", fmt.Errorf("metadata %s is a %v, want a string", key, kv.ValueType)
	}
	return kv.ValueString(), nil
}

// optStr is str with "" for a missing key.
func (m ggufMeta) optStr(key string) (string, error) {
	if _, ok := m.kvs.Get(key); !ok {
		return "", nil
	}
	return m.str(key)
}

// num reads a number; def is returned for a missing key when ok is false.
func (m ggufMeta) num(key string, required bool, def float64) (float64, error) {
	kv, ok := m.kvs.Get(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("metadata %s is missing", key)
		}
		return def, nil
	}
	if !kv.ValueType.IsNumeric() {
		return 0, fmt.Errorf("metadata %s is a %v, want a number", key, kv.ValueType)
	}
	if kv.ValueType == gguf.GGUFMetadataValueTypeFloat32 {
		// The shortest decimal of the float32: 1e-05, not 9.99999974e-06,
		// as the config.json it was converted from says.
		v, err := strconv.ParseFloat(strconv.FormatFloat(float64(kv.ValueFloat32()), 'g', -1, 32), 64)
		if err != nil {
			return 0, fmt.Errorf("metadata %s: %w", key, err)
		}
		return v, nil
	}
	return gguf.ValueNumeric[float64](kv), nil
}

// int reads a non-negative integer that fits an int32.
func (m ggufMeta) int(key string, required bool, def int) (int, error) {
	v, err := m.num(key, required, float64(def))
	if err != nil {
		return 0, err
	}
	if v < 0 || v > 1<<31-1 || v != float64(int(v)) {
		return 0, fmt.Errorf("metadata %s is %v, want a non-negative integer", key, v)
	}
	return int(v), nil
}

// array returns the array under key, checking its element type; nil for
// a missing key.
func (m ggufMeta) array(key string, want ...gguf.GGUFMetadataValueType) (*gguf.GGUFMetadataKVArrayValue, error) {
	kv, ok := m.kvs.Get(key)
	if !ok {
		return nil, nil
	}
	if kv.ValueType != gguf.GGUFMetadataValueTypeArray {
		return nil, fmt.Errorf("metadata %s is a %v, want an array", key, kv.ValueType)
	}
	av := kv.ValueArray()
	for _, t := range want {
		if av.Type == t {
			return &av, nil
		}
	}
	return nil, fmt.Errorf("metadata %s is an array of %v, want %v", key, av.Type, want)
}

// config reads the model's hyperparameters.
func (m ggufMeta) config(arch string, tokens int, opt HFOptions) (nn.Config, error) {
	var errs []error
	geti := func(key string, required bool, def int) int {
		v, err := m.int(arch+"."+key, required, def)
		errs = append(errs, err)
		return v
	}
	getf := func(key string, def float64) float64 {
		v, err := m.num(arch+"."+key, false, def)
		errs = append(errs, err)
		return v
	}
	c := nn.Config{
		Dim:       geti("embedding_length", true, 0),
		Hidden:    geti("feed_forward_length", true, 0),
		Layers:    geti("block_count", true, 0),
		Heads:     geti("attention.head_count", true, 0),
		KVHeads:   geti("attention.head_count_kv", false, 0),
		Vocab:     geti("vocab_size", false, tokens),
		NormEps:   getf("attention.layer_norm_rms_epsilon", 1e-6),
		RopeTheta: getf("rope.freq_base", 10000),
		QKVBias:   arch == "qwen2",
	}
	maxPos := geti("context_length", true, 0)
	keyLen := geti("attention.key_length", false, 0)
	scaling, err := m.optStr(arch + ".rope.scaling.type")
	errs = append(errs, err)
	factor := getf("rope.scaling.factor", 0)
	if err := errors.Join(errs...); err != nil {
		return nn.Config{}, err
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if maxPos <= 0 {
		return nn.Config{}, fmt.Errorf("metadata %s.context_length must be positive, got %d", arch, maxPos)
	}
	c.Context = min(maxPos, 2048)
	if opt.Context > 0 {
		c.Context = min(opt.Context, maxPos)
	}
	if keyLen != 0 && (c.Heads <= 0 || keyLen*c.Heads != c.Dim) {
		c.HeadSize = keyLen
	}
	switch scaling {
	case "", "none":
	case "linear":
		c.RopeScaling = &nn.RopeScaling{Type: "linear", Factor: factor}
		if err := c.RopeScaling.Validate(); err != nil {
			return nn.Config{}, fmt.Errorf("metadata %s.rope.scaling: %w", arch, err)
		}
	default:
		return nn.Config{}, fmt.Errorf("metadata %s.rope.scaling.type %q is not supported (want none or linear)", arch, scaling)
	}
	return c, nil
}

// tokenizer reads the embedded tokenizer.
func (m ggufMeta) tokenizer() (GGUFTokenizer, error) {
	t := GGUFTokenizer{BOS: -1, EOS: -1}
	var err error
	if t.Model, err = m.str("tokenizer.ggml.model"); err != nil {
		return t, err
	}
	if t.Pre, err = m.optStr("tokenizer.ggml.pre"); err != nil {
		return t, err
	}
	if t.ChatTemplate, err = m.optStr("tokenizer.chat_template"); err != nil {
		return t, err
	}
	tokens, err := m.array("tokenizer.ggml.tokens", gguf.GGUFMetadataValueTypeString)
	if err != nil {
		return t, err
	}
	if tokens == nil {
		return t, errors.New("metadata tokenizer.ggml.tokens is missing")
	}
	t.Tokens = tokens.ValuesString()
	merges, err := m.array("tokenizer.ggml.merges", gguf.GGUFMetadataValueTypeString)
	if err != nil {
		return t, err
	}
	if merges != nil {
		t.Merges = merges.ValuesString()
	}
	ints := []gguf.GGUFMetadataValueType{gguf.GGUFMetadataValueTypeInt32, gguf.GGUFMetadataValueTypeUint32,
		gguf.GGUFMetadataValueTypeInt8, gguf.GGUFMetadataValueTypeUint8, gguf.GGUFMetadataValueTypeInt16,
		gguf.GGUFMetadataValueTypeUint16, gguf.GGUFMetadataValueTypeInt64, gguf.GGUFMetadataValueTypeUint64}
	types, err := m.array("tokenizer.ggml.token_type", ints...)
	if err != nil {
		return t, err
	}
	if types != nil {
		t.Types = gguf.ValuesNumeric[int32](*types)
		if len(t.Types) != len(t.Tokens) {
			return t, fmt.Errorf("metadata tokenizer.ggml.token_type has %d entries, tokenizer.ggml.tokens %d", len(t.Types), len(t.Tokens))
		}
	}
	for _, k := range []struct {
		key string
		dst *int
	}{{"tokenizer.ggml.bos_token_id", &t.BOS}, {"tokenizer.ggml.eos_token_id", &t.EOS}} {
		if _, ok := m.kvs.Get(k.key); !ok {
			continue
		}
		v, err := m.int(k.key, true, 0)
		if err != nil {
			return t, err
		}
		*k.dst = v
	}
	return t, nil
}
