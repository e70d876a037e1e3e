//go:build !unix

package compare

import "time"

// processCPU is not measured here; benchmarks report 0 CPU seconds.
func processCPU() time.Duration { return 0 }
