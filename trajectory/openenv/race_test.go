//go:build race

package openenv

// raceEnabled: the tests run under the race detector, which slows the
// load tests many times over.
const raceEnabled = true
