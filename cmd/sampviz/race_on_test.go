//go:build race

package main

// raceEnabled says the race detector is on: it multiplies memory, so the
// tests that measure memory skip (make memory-test runs them without it).
const raceEnabled = true
