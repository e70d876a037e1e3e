package stats

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// Multiple testing: a run judges hundreds of rows at one threshold, so some
// correct rows fail by chance. These say how many, so that nobody chases
// noise.

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

// ChanceLine returns the sentence a report prints under a statistical
// verdict over many rows: how many of rows failed at the threshold, and how
// many chance alone would fail, e.g. "3 of 512 rows fail at p < 1e-06;
// chance alone gives 0.00051 failing rows (a 0.05% chance that any row
// fails)".
func ChanceLine(rows, failed int, threshold float64) string {
	return fmt.Sprintf("%d of %d rows fail at p < %s; chance alone gives %s failing rows (a %s chance that any row fails)",
		failed, rows, engine.FormatFloat(threshold), engine.FormatSig(ExpectedFalseAlarms(rows, threshold), 2), engine.FormatPercent(AnyFalseAlarm(rows, threshold)))
}
