// Package train is the training engine of the nn model: a forward pass over
// a batch of B sequences of T tokens that saves its activations
// (forward.go), the backward pass through them (backward.go) with causal
// attention's in attention.go, the token-weighted cross-entropy (loss.go),
// AdamW and its learning-rate schedule, and the Trainer that accumulates
// micro-batches, clips and steps; a run's resumable state, versioned on
// disk (state.go), is saved and loaded here. The per-row layers (RMSNorm, rotary
// embedding, SwiGLU, residual add) are package nn's, split here across
// cores by rows (rows.go); the matrix products are package kernel's.
//
// Every result is deterministic: the same batch and parameters give the
// same bits whatever GOMAXPROCS is.
package train
