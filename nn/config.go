// Package nn is a Llama-style decoder-only transformer written in Go and
// trained in-process: parameters and their layout (params.go), training
// forward and backward, AdamW, batched sampling with a KV cache, and
// checkpoints. Everything is float32 and runs on the CPU; the hot matrix
// products live in package kernel.
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
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

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
	case c.Heads <= 0 || c.Dim%c.Heads != 0:
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
