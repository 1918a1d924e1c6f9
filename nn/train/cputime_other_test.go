//go:build !unix

package train

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
