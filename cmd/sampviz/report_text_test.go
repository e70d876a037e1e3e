package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// The summary line names the row and token of the greatest error from the
// rows themselves: with a NaN row and a masked row (no drift), the run's
// flat index once printed row 8 of a 6-row dump.
func TestDriftSummaryNamesARealRow(t *testing.T) {
	const vocab = 1000
	tok := rand.IntN(vocab)
	drift := func(max float64, at int) *engine.Drift {
		return &engine.Drift{Reference: "strict", Abs: engine.ErrorStats{Max: engine.Float(max), Index: at}}
	}
	rows := []engine.RowReport{
		{Row: 0, Strict: drift(1e-7, 3)}, {Row: 1, Strict: drift(2e-7, 9)},
		{Row: 2}, // NaN in the input
		{Row: 3, Strict: drift(5e-6, tok)},
		{Row: 4}, // masked
		{Row: 5, Strict: drift(1e-6, 11)},
	}
	o := engine.OutputReport{Name: "cpu", Kind: "probs", Rows: rows,
		Strict: &engine.Drift{Reference: "strict", Abs: engine.ErrorStats{Max: 5e-6, Index: 8*vocab + tok}}}
	got := driftSummary(o, func(id int64) string { return fmt.Sprint(id) })
	if want := fmt.Sprintf("at row 3 token %d,", tok); !strings.Contains(got, want) {
		t.Errorf("drift summary %q, want %q", got, want)
	}
}
