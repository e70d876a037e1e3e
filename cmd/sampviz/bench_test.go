package main

import (
	"bytes"
	"slices"
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

// TestBenchDraws checks a many-draws case's report: the shape names the
// draws, its floor is the draws' at the floor of a draw (not the bytes'),
// and a line says the draws per second beside that floor's.
func TestBenchDraws(t *testing.T) {
	tests := []struct {
		name       string
		draws      int
		median     time.Duration
		wantXFloor string
		wantLine   string
	}{
		{"10^7", 10_000_000, 50 * time.Millisecond, "2.18",
			"sample counts bf16 B=512 V=128256 draws=10^7: 5.12e+09 draws in 50.0 ms (the whole sample-with-counts launch): 1.02e+11 draws/s, 46% of the floor's 2.23e+11 draws/s"},
		{"10^5", 100_000, 800 * time.Microsecond, "3.48",
			"sample counts bf16 B=512 V=128256 draws=10^5: 5.12e+07 draws in 0.8 ms (the whole sample-with-counts launch): 6.4e+10 draws/s, 29% of the floor's 2.23e+11 draws/s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cuda.BenchCase{Op: engine.OpSample, DType: engine.BF16, Rows: 512, Vocab: 128256, Temperature: 1, Draws: tc.draws}
			r := &cuda.BenchResult{Case: c, Median: tc.median, Bytes: c.MinBytes(), CopyBandwidth: 3e12, SMs: 132,
				DrawsPerSecond: 512 * float64(tc.draws) / tc.median.Seconds()}
			rep := benchReport{Rows: []benchRow{newBenchRow("sample counts", benchTarget{}, r)}}
			var out bytes.Buffer
			printBench(&out, &rep)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if got := lines[len(lines)-1]; got != tc.wantLine {
				t.Errorf("draws line\n got %q\nwant %q", got, tc.wantLine)
			}
			if got := strings.Fields(lines[len(lines)-2]); !slices.Contains(got, tc.wantXFloor) {
				t.Errorf("table row %q: want x floor %s", lines[len(lines)-2], tc.wantXFloor)
			}
		})
	}
}
