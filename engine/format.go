package engine

import (
	"fmt"
	"math"
	"strconv"
)

// FormatFloat writes v the short way that reads back to the same float64:
// "0.7", "1e-05", "NaN", "+Inf".
func FormatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
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
