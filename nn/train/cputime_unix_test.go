//go:build unix

package train

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user plus system), or
// false where it cannot be read. On a shared machine it counts only the
// time our threads ran, so a rate computed from it is less disturbed by
// other processes than one computed from wall time.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
