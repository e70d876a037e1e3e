package view

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sampviz/sampviz/engine"
)

// Numbers in words: probabilities, errors, times, bandwidths, sizes and
// parameters, each written the one way every page writes it.

// Sci writes a probability or an error short: 3 significant digits.
func Sci(f engine.Float) string {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e-3 && math.Abs(v) < 1e4:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'e', 2, 64)
}

// Duration writes d with a unit a person reads at a glance.
func Duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// Bandwidth writes bytes per second in GB/s or TB/s (decimal, as GPU
// datasheets do).
func Bandwidth(bps float64) string {
	if bps >= 1e12 {
		return fmt.Sprintf("%.2f TB/s", bps/1e12)
	}
	return fmt.Sprintf("%.1f GB/s", bps/1e9)
}

// ShortFloat writes a parameter read from a dump (often a float32 widened
// to float64) with 4 significant digits: 0.77, not 0.7704528570175171.
func ShortFloat(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// FormatBytes writes n in binary units: "4 GiB", "1.5 MiB".
func FormatBytes(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// ParamText writes a sampling parameter exactly and short: a value read
// from a dump as float32 (0.77, not 0.7704528570175171) as float32's
// shortest form, any other as float64's, so that it reads back the same.
func ParamText(v float64) string {
	if float64(float32(v)) == v {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return engine.FormatFloat(v)
}

// prob writes a probability for the teaching texts: 3 significant digits.
func prob(x engine.Float) string {
	v := float64(x)
	if v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e4) {
		return strconv.FormatFloat(v, 'e', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// percent writes a of n as a percentage with one decimal.
func percent(a, n int) string {
	if n == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*float64(a)/float64(n), 'f', 1, 64) + "%"
}

// maxInt and minInt are max and min for the chart code's ints.
func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// acceptProb returns min(1, p/q) as SEMANTICS.md defines it: 1 when q = 0 <
// p, 0 when p = 0.
func acceptProb(p, q float64) float64 {
	switch {
	case p <= 0 || math.IsNaN(p):
		return 0
	case q <= 0:
		return 1
	}
	return math.Min(1, p/q)
}
