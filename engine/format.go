package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The product writes numbers for people through these functions only, on
// every face (CLI text, pages, sentences in reports); JSON carries numbers
// as numbers and never goes through them. web/static/numfmt.js mirrors
// FormatSig, FormatPercent and FormatP for what the page's script writes
// itself, and a test runs one table of cases through both.
//
//   - FormatFloat: the shortest text that reads back to the same float64
//     (tolerances, thresholds: one stable spelling, "1e-05", "0.0001").
//   - FormatParam: a parameter as the kernel sees it, the shortest text
//     that reads back to its float32 ("T = 0.0001").
//   - FormatSig: a measured number to a given count of significant digits
//     (errors, statistics, means).
//   - FormatPercent: a fraction as a percentage ("73.4%", "100%").
//   - FormatP: a p-value, "< 1e-300" past float64's range.
//   - FormatDistinct: numbers a sentence compares, with the digits that
//     tell them apart ("12.375 … 12.25").

// FormatFloat writes v the short way that reads back to the same float64:
// "0.7", "1e-05", "NaN", "+Inf". Tolerances and thresholds are written so,
// whatever their size, so that a field keeps one spelling.
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
// values that differ, so 12.375 against 12.25 reads "12.4 … 12.2" and
// not "12 … 12".
func FormatDistinct(vs ...float64) []string {
	out := make([]string, len(vs))
	for digits := 2; digits <= 17; digits++ {
		for i, v := range vs {
			out[i] = FormatSig(v, digits)
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

// FormatSig writes v with at most the given significant digits (at least
// 1), trailing zeros dropped: in plain notation from 1e-4 up to 1e6, the
// range where FormatFloat writes plain too ("12.38", "0.00042", "-1.5",
// "1234", never "1.2e+03"), in exponent notation outside ("3.1e-07",
// "1e-05", "2.5e+06"), and "NaN", "+Inf", "-Inf". It never writes "-0".
func FormatSig(v float64, digits int) string {
	digits = max(1, min(17, digits))
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
	}
	// Round to the digits asked for (ties to even, as strconv does), then
	// place the point: 0.000099996 to 2 digits is 0.0001, written plain,
	// and 9.96 is 10. A plain number keeps its whole part: 1234 to 2
	// digits is 1234, rounded again to its units.
	keep, exp := sigDigits(a, digits)
	if exp >= digits && exp < 6 {
		first := exp
		keep, exp = sigDigits(a, exp+1)
		if exp < first {
			// Rounded up a decade at the digits asked for but not at
			// exp+1 digits (99.7 to 2): round to the units of its own
			// decade (100), never keeping a fraction.
			keep, exp = sigDigits(a, exp+1)
		}
	}
	sign := ""
	if v < 0 {
		sign = "-"
	}
	if exp >= -4 && exp < 6 {
		var whole, frac string
		if exp >= 0 {
			for len(keep) < exp+1 {
				keep += "0"
			}
			whole, frac = keep[:exp+1], keep[exp+1:]
		} else {
			whole, frac = "0", strings.Repeat("0", -exp-1)+keep
		}
		if frac = strings.TrimRight(frac, "0"); frac != "" {
			return sign + whole + "." + frac
		}
		return sign + whole
	}
	if m := strings.TrimRight(keep[1:], "0"); m != "" {
		return fmt.Sprintf("%s%s.%se%+03d", sign, keep[:1], m, exp)
	}
	return fmt.Sprintf("%s%se%+03d", sign, keep[:1], exp)
}

// sigDigits rounds a > 0 to n significant digits: the digits, and the
// power of ten of the first ("1235", 3 for 1234.5 to 4 digits).
func sigDigits(a float64, n int) (string, int) {
	mant, exps, _ := strings.Cut(strconv.FormatFloat(a, 'e', n-1, 64), "e")
	exp, _ := strconv.Atoi(exps)
	return strings.Replace(mant, ".", "", 1), exp
}

// FormatPercent writes a fraction as a percentage with 3 significant
// digits, plain up to the integer: 0.7342 is "73.4%", 1 is "100%" (never
// "1e+02%"), 0.00012 is "0.012%". Only 1 reads "100%" and only 0 reads
// "0%": 0.9996 takes the digits that keep it below ("99.96%"), a fraction
// closer to 1 than 1e-6 reads "> 99.9999%", and one closer to 0 "<
// 0.0001%" (a rounding residue such as 5.6e-17 says nothing more).
func FormatPercent(frac float64) string {
	if frac > 0 && frac < 1e-6 {
		return "< 0.0001%"
	}
	s := FormatSig(100*frac, 3)
	for d := 4; s == "100" && frac < 1 && d <= 6; d++ {
		s = FormatSig(100*frac, d)
	}
	if s == "100" && frac < 1 {
		return "> 99.9999%"
	}
	return s + "%"
}

// FormatShare writes n of total as FormatPercent does, and "0%" for an
// empty total.
func FormatShare(n, total int) string {
	if total == 0 {
		return "0%"
	}
	return FormatPercent(float64(n) / float64(total))
}

// FormatP writes a p-value in two significant digits ("0.012",
// "3.1e-12"), and "< 1e-300" for one that underflowed float64 (p is 0 with
// a finite logP, or below 1e-300): past that, the digits of a tail
// probability say nothing a person can use, and the product writes every
// such p the one way, never "9.8e-10653" or "0".
func FormatP(p, logP float64) string {
	if p == 0 && !math.IsInf(logP, -1) && !math.IsNaN(logP) || p > 0 && p < 1e-300 {
		return "< 1e-300"
	}
	return FormatSig(p, 2)
}

// PText writes "p = 0.012", or "p < 1e-300" for a p-value that
// underflowed (FormatP).
func PText(p, logP float64) string {
	s := FormatP(p, logP)
	if strings.HasPrefix(s, "<") {
		return "p " + s
	}
	return "p = " + s
}

// FormatStoredP writes a p-value kept without its logarithm (a report's
// p_value): there 0 only ever means it underflowed, so it reads "< 1e-300"
// as FormatP writes that.
func FormatStoredP(p float64) string {
	if p == 0 {
		return FormatP(0, -1000*math.Ln10)
	}
	return FormatP(p, math.Log(p))
}

// StoredPText writes "p = 0.012", or "p < 1e-300" for a stored p-value
// that underflowed (FormatStoredP).
func StoredPText(p float64) string {
	if p == 0 {
		return PText(0, -1000*math.Ln10)
	}
	return PText(p, math.Log(p))
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
