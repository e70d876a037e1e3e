package view

import (
	"fmt"
	"math"
	"time"
)

// Measurements with a unit: times and bandwidths. Every other number a page
// writes (errors, probabilities, p-values, percentages, parameters, sizes)
// goes through engine's formatter (engine.FormatSig, FormatP, FormatParam,
// FormatPercent, FormatBytes), as the CLI's do; the page's script mirrors
// it in web/static/numfmt.js.

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
