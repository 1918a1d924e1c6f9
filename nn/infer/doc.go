// Package infer is the inference engine of the nn model.
// Its Engine generates for many requests at once by continuous batching over
// a KV cache, with greedy, temperature, top-k and top-p sampling and
// logprobs. The forward pass reads its own copy of the weights, packed once
// for the matrix-vector kernels, and computes the per-row layers with
// package nn's functions, as training does. LoadHF reads Llama and Qwen
// checkpoints in Hugging Face's layout, and LoadGGUF llama and qwen2 GGUF
// files; either may quantise the matrices to q8_0. A sequence's tokens are
// bitwise the same alone or batched with others.
package infer
