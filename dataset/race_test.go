//go:build race

package dataset_test

// raceEnabled thins the shared-data answer checks under -race, which runs
// them several times slower; the counts are still checked in full.
const raceEnabled = true
