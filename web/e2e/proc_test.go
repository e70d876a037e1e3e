package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// treeCPU returns the CPU time (user and system) that process pid and all
// its descendants have used so far, read from /proc; zero where /proc is
// missing. The browser's renderer, GPU and utility processes are children
// of the process chromedp starts.
func treeCPU(pid int) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		// The command name, in parentheses, may hold spaces.
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		id, _ := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, '(')]))
		f := strings.Fields(s[i+2:])
		if len(f) < 13 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stt, _ := strconv.ParseInt(f[12], 10, 64)
		parent[id] = pp
		ticks[id] = ut + stt
	}
	var sum int64
	for id, n := range ticks {
		for a := id; a > 1; a = parent[a] {
			if a == pid {
				sum += n
				break
			}
		}
	}
	// Linux counts in USER_HZ, 100 a second.
	return time.Duration(sum) * 10 * time.Millisecond
}

// selfCPU returns the CPU time this process (the server and the judge) has
// used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
