//go:build race

package train

// raceEnabled: the tests run under the race detector, which makes the
// shipped models' training many times slower.
const raceEnabled = true
