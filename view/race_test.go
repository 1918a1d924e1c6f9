//go:build race

package view

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
