//go:build !unix

package kernel

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
