package stats

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Multiple testing: a run judges hundreds of rows at one threshold, so some
// correct rows fail by chance. These say how many, so that nobody chases
// noise, and give the two standard ways to set a threshold for many rows.

// ExpectedFalseAlarms returns how many of rows correct rows fail at the
// p-value threshold by chance alone: rows × threshold.
func ExpectedFalseAlarms(rows int, threshold float64) float64 {
	return float64(max(rows, 0)) * threshold
}

// AnyFalseAlarm returns the probability that at least one of rows correct
// rows fails at the threshold by chance alone: 1 - (1 - threshold)^rows.
func AnyFalseAlarm(rows int, threshold float64) float64 {
	if rows <= 0 || threshold <= 0 {
		return 0
	}
	if threshold >= 1 {
		return 1
	}
	return -math.Expm1(float64(rows) * math.Log1p(-threshold))
}

// Bonferroni returns the per-row threshold that keeps the probability of any
// false alarm among rows correct rows at most alpha: alpha / rows.
func Bonferroni(alpha float64, rows int) float64 {
	if rows <= 1 {
		return alpha
	}
	return alpha / float64(rows)
}

// BH runs the Benjamini–Hochberg procedure at false discovery rate q: with
// the m p-values sorted, p(1) <= ... <= p(m), it finds the largest k with
// p(k) <= k·q/m and flags the k smallest. It returns, in the order of
// pvalues, whether each is flagged: among flagged rows, the expected share
// of correct ones is at most q. NaN p-values are never flagged and count
// toward m.
func BH(pvalues []float64, q float64) []bool {
	m := len(pvalues)
	flagged := make([]bool, m)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	key := func(i int) float64 {
		if math.IsNaN(pvalues[i]) {
			return math.Inf(1)
		}
		return pvalues[i]
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(key(a), key(b)) })
	k := 0
	for rank, i := range order {
		if key(i) <= float64(rank+1)*q/float64(m) {
			k = rank + 1
		}
	}
	for _, i := range order[:k] {
		flagged[i] = true
	}
	return flagged
}

// ChanceLine returns the sentence a report prints under a statistical
// verdict over many rows: how many of rows failed at the threshold, and how
// many chance alone would fail, e.g. "3 of 512 rows fail at p < 1e-06;
// chance alone gives 0.00051 failing rows (a 0.05% chance that any row
// fails)".
func ChanceLine(rows, failed int, threshold float64) string {
	return fmt.Sprintf("%d of %d rows fail at p < %g; chance alone gives %s failing rows (a %s%% chance that any row fails)",
		failed, rows, threshold, short(ExpectedFalseAlarms(rows, threshold)), short(100*AnyFalseAlarm(rows, threshold)))
}

// short writes x with two significant digits below 10 and as an integer
// from 10 ("0.00051", "5.1", "512").
func short(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.2g", x)
}
