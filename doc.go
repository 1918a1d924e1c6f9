// Package delegate holds the vocabulary every part of the project shares.
// That is chat messages, requests and responses, usage and prices, tasks and traces.
// It also defines Model, the one interface every backend implements, remote or in-process.
// It imports only the standard library.
// Implementations live in subpackages and import this one, never each other,
// except where one composes others; layout_test.go checks this.
package delegate
