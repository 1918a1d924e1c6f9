//go:build !unix

package openenv

import "time"

// cpuTime is zero where the process's CPU time is not read: benchmarks
// then report no CPU figure.
func cpuTime() time.Duration { return 0 }
