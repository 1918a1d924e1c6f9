//go:build unix

package host

import (
	"syscall"
	"time"
)

// ProcessCPU is the user plus system CPU time this process has used so far.
// It reports false where that cannot be read. On a shared machine, a rate
// over CPU time is less disturbed by other processes than one over wall time.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
