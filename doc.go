// Package delegate holds the vocabulary every part of the project shares:
// chat messages, model requests and responses, token usage and prices,
// tasks, and the trace of a delegation run. It also defines Model, the one
// small interface every model backend implements, whether it is a remote
// OpenAI-compatible endpoint or a transformer running in-process.
//
// The package imports only the standard library. Implementations live in
// subpackages and import this one, never each other, except where one
// composes others (see layout_test.go).
package delegate
