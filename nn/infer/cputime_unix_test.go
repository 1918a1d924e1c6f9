//go:build unix

package infer

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user plus system), or
// false where it cannot be read: on a shared machine a rate over it is
// less disturbed by other processes than one over wall time.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
