//go:build !race

package main

// raceEnabled says the race detector is on (race_on_test.go).
const raceEnabled = false
