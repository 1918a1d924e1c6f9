// Package infer is the inference engine of the nn model: an Engine that
// generates from many requests at once (continuous batching, engine.go)
// over a KV cache (kvcache.go), with greedy, temperature, top-k and top-p
// sampling and logprobs (sample.go). Its forward pass (decoder.go) reads
// its own copy of the weights, packed once for the matrix-vector kernels,
// and computes the per-row layers with package nn's functions, as the
// training engine does. LoadHF (hf.go) reads Llama and Qwen checkpoints in
// Hugging Face's layout into such a copy, and LoadGGUF (gguf.go) llama
// and qwen2 GGUF files; either may quantise the matrices to q8_0.
//
// A sequence's tokens are bitwise the same alone or batched with others.
package infer
