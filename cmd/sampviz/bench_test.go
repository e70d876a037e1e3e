package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cuda"
)

// TestBenchRow checks the table's derived columns: the ratio to the floor
// only where the floor is long enough to mean something, and the verdict.
func TestBenchRow(t *testing.T) {
	const bw = 3e12 // bytes per second
	tests := []struct {
		name       string
		rows       int
		median     time.Duration
		target     benchTarget
		wantXFloor string // as printed
		wantVerd   string
	}{
		{"B=512: a ratio", 512, 49 * time.Microsecond, benchTarget{MaxFloor: 1.3}, "1.12", "<= 1.3x floor met"},
		{"B=128: missed", 128, 19 * time.Microsecond, benchTarget{MaxFloor: 1.3}, "1.74", "<= 1.3x floor MISSED"},
		{"B=1: no ratio", 1, 7 * time.Microsecond, benchTarget{MaxTime: 15 * time.Microsecond}, "-", "< 15 us met"},
	}
	for _, tc := range tests {
		c := cuda.BenchCase{Op: engine.OpArgmax, DType: engine.BF16, Rows: tc.rows, Vocab: 128256}
		r := &cuda.BenchResult{Case: c, Median: tc.median, Bytes: int64(tc.rows) * 128256 * 2, CopyBandwidth: bw}
		rep := benchReport{Rows: []benchRow{newBenchRow("argmax", tc.target, r)}}
		var out bytes.Buffer
		printBench(&out, &rep)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		last := lines[len(lines)-1]
		fields := strings.Fields(last)
		// ... floor us, x floor, then the verdict's words.
		i := len(fields) - len(strings.Fields(tc.wantVerd))
		if got := fields[i-1]; got != tc.wantXFloor {
			t.Errorf("%s: x floor %q, want %q (line %q)", tc.name, got, tc.wantXFloor, last)
		}
		if got := strings.Join(fields[i:], " "); got != tc.wantVerd {
			t.Errorf("%s: verdict %q, want %q", tc.name, got, tc.wantVerd)
		}
	}
}
