//go:build race

package main

// raceEnabled: the tests run under the race detector, which makes
// compute-bound commands many times slower.
const raceEnabled = true
