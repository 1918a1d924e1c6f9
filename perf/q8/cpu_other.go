//go:build !unix

package main

import "time"

// cpuTime is not measured here: the per-CPU-second column stays empty.
func cpuTime() time.Duration { return 0 }
