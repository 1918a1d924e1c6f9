package infer

import (
	"fmt"

	"github.com/delegatelab/delegate/nn"
)

// KVCache holds the attention keys and values of a fixed number of sequence slots.
// Generating a token then costs one position's work instead of a pass over
// the whole sequence. Each slot is one sequence; position t of a slot holds
// the key and value computed for the token at position t.
//
// A KVCache is not safe for concurrent use; an Engine owns its cache and
// touches it only from its scheduler goroutine.
type KVCache struct {
	Slots   int
	Layers  int
	Context int
	KVDim   int
	// K and V hold one (Slots, Context, KVDim) array per layer.
	K, V [][]float32
}

// NewKVCache allocates a zeroed cache for slots sequences of model config c.
func NewKVCache(c nn.Config, slots int) (*KVCache, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kv cache: %w", err)
	}
	if slots <= 0 {
		return nil, fmt.Errorf("kv cache: slots must be positive, got %d", slots)
	}
	kc := &KVCache{Slots: slots, Layers: c.Layers, Context: c.Context, KVDim: c.KVDim()}
	per := slots * c.Context * kc.KVDim
	kc.K = make([][]float32, c.Layers)
	kc.V = make([][]float32, c.Layers)
	for l := range kc.K {
		kc.K[l] = make([]float32, per)
		kc.V[l] = make([]float32, per)
	}
	return kc, nil
}

// Keys returns layer's keys of slot for positions [0, n): an (n, KVDim)
// view into the cache.
func (kc *KVCache) Keys(layer, slot, n int) []float32 {
	off := slot * kc.Context * kc.KVDim
	return kc.K[layer][off : off+n*kc.KVDim]
}

// Values returns layer's values of slot for positions [0, n): an
// (n, KVDim) view into the cache.
func (kc *KVCache) Values(layer, slot, n int) []float32 {
	off := slot * kc.Context * kc.KVDim
	return kc.V[layer][off : off+n*kc.KVDim]
}

// store writes one position's key and value (each KVDim long).
func (kc *KVCache) store(layer, slot, pos int, k, v []float32) {
	off := (slot*kc.Context + pos) * kc.KVDim
	copy(kc.K[layer][off:off+kc.KVDim], k)
	copy(kc.V[layer][off:off+kc.KVDim], v)
}

// storeHead writes part of one position's key and value, from offset off of KVDim.
func (kc *KVCache) storeHead(layer, slot, pos, off int, k, v []float32) {
	o := (slot*kc.Context+pos)*kc.KVDim + off
	copy(kc.K[layer][o:o+len(k)], k)
	copy(kc.V[layer][o:o+len(v)], v)
}

// bytes is the memory the cache holds.
func (kc *KVCache) bytes() int64 {
	return 8 * int64(kc.Slots) * int64(kc.Context) * int64(kc.KVDim) * int64(kc.Layers)
}
