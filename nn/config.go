// Package nn is a Llama-style decoder-only transformer written in Go.
// It holds the model's config, its parameters in one contiguous []float32
// with named views, and its checkpoints: safetensors with config.json, and
// llama2.c's legacy format. It also holds the per-row layers of a block,
// forward and backward side by side: RMSNorm, rotary embedding, SwiGLU and
// the residual add. Both engines compute those layers with these functions:
// nn/train trains, nn/infer samples. Everything is float32 on the CPU; the
// matrix products and the vector exponential live in nn/kernel.
package nn

import (
	"fmt"
	"math"
)

// Config sets a model's size. The zero value is invalid; see Validate.
type Config struct {
	Vocab   int `json:"vocab"`    // vocabulary size
	Dim     int `json:"dim"`      // model width D
	Layers  int `json:"layers"`   // number of transformer blocks
	Heads   int `json:"heads"`    // query heads; Dim must be a multiple
	KVHeads int `json:"kv_heads"` // key/value heads (grouped-query attention); Heads must be a multiple
	Hidden  int `json:"hidden"`   // SwiGLU hidden width
	Context int `json:"context"`  // longest sequence, prompt and generation together
	// TiedOutput shares the token embedding with the output head.
	TiedOutput bool    `json:"tied_output"`
	RopeTheta  float64 `json:"rope_theta"` // rotary base, 10000 in Llama 2
	NormEps    float64 `json:"norm_eps"`   // RMSNorm epsilon, 1e-5 in Llama 2

	// The fields below describe checkpoints that infer.LoadHF imports.
	// They are supported for inference only: NewParams, and so training,
	// refuses a config that sets any of them.

	// HeadSize is the width of one head when it is not Dim/Heads (Qwen3);
	// 0 means Dim/Heads.
	HeadSize int `json:"head_dim,omitempty"`
	// QKVBias adds a bias to the queries, keys and values (Qwen2).
	QKVBias bool `json:"qkv_bias,omitempty"`
	// QKNorm RMS-normalizes every head of the queries and keys, with a
	// learned weight of HeadDim values, before the rotation (Qwen3).
	QKNorm bool `json:"qk_norm,omitempty"`
	// RopeScaling changes the rotary frequencies for long contexts; nil
	// leaves them as they are.
	RopeScaling *RopeScaling `json:"rope_scaling,omitempty"`
}

// RopeScaling is a rotary frequency scaling of Hugging Face's rope_scaling.
type RopeScaling struct {
	// Type is "linear" or "llama3".
	// "linear" divides every frequency by Factor, interpolating positions.
	// "llama3" is Llama 3.1's: low frequencies divided by Factor, high ones
	// kept, and a smooth blend between.
	Type   string  `json:"type"`
	Factor float64 `json:"factor"`
	// Llama 3 only.
	LowFreqFactor   float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor  float64 `json:"high_freq_factor,omitempty"`
	OriginalContext int     `json:"original_max_position_embeddings,omitempty"`
}

// Validate checks the fields Type needs.
func (r *RopeScaling) Validate() error {
	if !(r.Factor > 0) || math.IsInf(r.Factor, 0) {
		return fmt.Errorf("rope_scaling factor must be positive, got %v", r.Factor)
	}
	switch r.Type {
	case "linear":
	case "llama3":
		if !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) || r.OriginalContext <= 0 {
			return fmt.Errorf("rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and a positive original_max_position_embeddings, got %v, %v, %d",
				r.LowFreqFactor, r.HighFreqFactor, r.OriginalContext)
		}
	default:
		return fmt.Errorf("rope_scaling type %q is not supported (want linear or llama3)", r.Type)
	}
	return nil
}

// inferenceOnly names the first inference-only feature c sets, or "".
func (c Config) inferenceOnly() string {
	switch {
	case c.HeadSize != 0:
		return "head_dim"
	case c.QKVBias:
		return "qkv_bias"
	case c.QKNorm:
		return "qk_norm"
	case c.RopeScaling != nil:
		return "rope_scaling"
	}
	return ""
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int {
	if c.HeadSize > 0 {
		return c.HeadSize
	}
	return c.Dim / c.Heads
}

// QDim is the width of one position's queries and attention output: Heads·HeadDim.
// It is Dim unless HeadSize says otherwise.
func (c Config) QDim() int { return c.Heads * c.HeadDim() }

// ropeFreqs returns the rotary frequency of each pair i < HeadDim/2:
// RopeTheta^(−2i/HeadDim), scaled by RopeScaling.
func (c Config) ropeFreqs() []float64 {
	hd := c.HeadDim()
	f := make([]float64, hd/2)
	for i := range f {
		f[i] = math.Pow(c.RopeTheta, -float64(2*i)/float64(hd))
	}
	r := c.RopeScaling
	if r == nil {
		return f
	}
	for i, v := range f {
		switch r.Type {
		case "linear":
			f[i] = v / r.Factor
		case "llama3":
			old := float64(r.OriginalContext)
			wavelen := 2 * math.Pi / v
			switch {
			case wavelen < old/r.HighFreqFactor: // high frequency: kept
			case wavelen > old/r.LowFreqFactor: // low frequency: scaled
				f[i] = v / r.Factor
			default:
				smooth := (old/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
				f[i] = (1-smooth)*v/r.Factor + smooth*v
			}
		}
	}
	return f
}

// KVDim is the width of the keys (and of the values) of one position.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim() }

// Validate checks every field and the relations between them.
func (c Config) Validate() error {
	switch {
	case c.Vocab <= 0:
		return fmt.Errorf("model config: vocab must be positive, got %d", c.Vocab)
	case c.Dim <= 0:
		return fmt.Errorf("model config: dim must be positive, got %d", c.Dim)
	case c.Layers <= 0:
		return fmt.Errorf("model config: layers must be positive, got %d", c.Layers)
	case c.Heads <= 0:
		return fmt.Errorf("model config: heads must be positive, got %d", c.Heads)
	case c.HeadSize < 0:
		return fmt.Errorf("model config: head_dim must not be negative, got %d", c.HeadSize)
	case c.HeadSize == 0 && c.Dim%c.Heads != 0:
		return fmt.Errorf("model config: dim %d must be a positive multiple of heads %d", c.Dim, c.Heads)
	case c.HeadDim()%2 != 0:
		return fmt.Errorf("model config: head dim %d must be even for rotary embedding", c.HeadDim())
	case c.KVHeads <= 0 || c.Heads%c.KVHeads != 0:
		return fmt.Errorf("model config: heads %d must be a positive multiple of kv_heads %d", c.Heads, c.KVHeads)
	case c.Hidden <= 0:
		return fmt.Errorf("model config: hidden must be positive, got %d", c.Hidden)
	case c.Context <= 0:
		return fmt.Errorf("model config: context must be positive, got %d", c.Context)
	case c.RopeTheta <= 0 || math.IsNaN(c.RopeTheta):
		return fmt.Errorf("model config: rope_theta must be positive, got %v", c.RopeTheta)
	case c.NormEps <= 0 || math.IsNaN(c.NormEps):
		return fmt.Errorf("model config: norm_eps must be positive, got %v", c.NormEps)
	}
	if c.RopeScaling != nil {
		if err := c.RopeScaling.Validate(); err != nil {
			return fmt.Errorf("model config: %w", err)
		}
	}
	return nil
}

// WithDefaults fills RopeTheta, NormEps and KVHeads when they are zero.
func (c Config) WithDefaults() Config {
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	return c
}
