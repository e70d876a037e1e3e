package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FormatFloat writes v the short way that reads back to the same float64:
// "0.7", "1e-05", "NaN", "+Inf".
func FormatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// FormatParam writes a parameter for a person: a value that is a float32
// (read from a dump, or given to kernels that take float32) in the shortest
// text that reads back to that float32 ("0.0001", not
// "9.999999747378752e-05"), any other value as FormatFloat does.
func FormatParam(v float64) string {
	if f := float32(v); float64(f) == v && !math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return FormatFloat(v)
}

// FormatDistinct writes vs for a sentence that compares them: each with
// the fewest significant digits (at least 2) that tell apart every two
// values that differ, so 12.375 against 12.25 reads "12.375 … 12.25" and
// not "12 … 12".
func FormatDistinct(vs ...float64) []string {
	out := make([]string, len(vs))
	for digits := 2; digits <= 17; digits++ {
		for i, v := range vs {
			out[i] = formatDigits(v, digits)
		}
		clash := false
		for i := range vs {
			for j := i + 1; j < len(vs); j++ {
				if vs[i] != vs[j] && out[i] == out[j] && !(vs[i] != vs[i] && vs[j] != vs[j]) {
					clash = true
				}
			}
		}
		if !clash {
			break
		}
	}
	return out
}

// formatDigits writes v with the given significant digits, in plain
// notation from 1e-3 to 1e6 ("12.38", "0.0042", "-1.5") and in exponent
// notation outside ("3.1e-07").
func formatDigits(v float64, digits int) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0"
	case a >= 1e-3 && a < 1e6:
		decimals := max(0, digits-1-int(math.Floor(math.Log10(a))))
		s := strconv.FormatFloat(v, 'f', decimals, 64)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s
	}
	return strconv.FormatFloat(v, 'e', digits-1, 64)
}

// FormatBytes writes n in binary units, as messages about memory and sizes
// say it: "4 GiB", "1.5 MiB", "512 bytes".
func FormatBytes(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
