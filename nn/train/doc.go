// Package train is the training engine of the nn model.
// It runs a forward pass over a batch of B sequences of T tokens, saving
// activations, and the backward pass through them. It holds the
// token-weighted cross-entropy, AdamW and its schedule, the Trainer that
// accumulates micro-batches, clips and steps, and a run's versioned,
// resumable state. The per-row layers compute as package nn's, bit for bit,
// split here across cores by rows, RMSNorm four rows at a time, the
// rotation through kernel.Rotate with nn.Rope's angles; the matrix
// products and the vector loops are package kernel's. With AVX-512,
// attention reads its heads in place through kernel.MatMulStrided, with
// the bits of the gathering path. Every result is deterministic: the same
// batch and parameters give the same bits whatever GOMAXPROCS is.
package train
