//go:build unix

package compare

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used, so
// that benchmarks can report CPU seconds per operation: on a shared machine
// they vary far less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
