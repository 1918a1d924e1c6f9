//go:build race

package dataset_test

// raceEnabled thins the shared-data answer checks under -race.
// The race detector runs them several times slower. The counts are still
// checked in full.
const raceEnabled = true
