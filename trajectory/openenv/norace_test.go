//go:build !race

package openenv

const raceEnabled = false
