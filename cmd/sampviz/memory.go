package main

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// maxMemoryCap caps the default memory budget: past it a person says what
// the machine may give.
const maxMemoryCap = 8 << 30

// defaultMaxMemory is the default of --max-memory: half the machine's
// memory, at most maxMemoryCap (maxMemoryCap where the machine's memory
// cannot be read).
func defaultMaxMemory() int64 {
	total := machineMemory()
	if total <= 0 {
		return maxMemoryCap
	}
	return min(total/2, maxMemoryCap)
}

// machineMemory returns MemTotal of /proc/meminfo in bytes, or 0.
func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// limitMemory makes the process's garbage collector keep its heap within
// limit (the session refuses jobs whose need is over it, engine/session
// budget.go), so that an accepted job's peak stays near its estimate.
func limitMemory(limit int64) {
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
}
