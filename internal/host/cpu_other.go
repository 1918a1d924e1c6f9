//go:build !unix

package host

import "time"

// ProcessCPU is the CPU time this process has used; not known here.
func ProcessCPU() (time.Duration, bool) { return 0, false }
