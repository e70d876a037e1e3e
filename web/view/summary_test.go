package view

import (
	"testing"

	"github.com/sampviz/sampviz/engine"
)

func TestVerdictSentence(t *testing.T) {
	rep := &engine.Report{Rows: 4, Pass: false, Outputs: []engine.OutputReport{
		{Name: "cpu", Kind: "probs", Pass: true, Rows: []engine.RowReport{{Row: 0, Pass: true}, {Row: 1, Pass: true}, {Row: 2, Pass: true}, {Row: 3, Pass: true}}},
		{Name: "probs", External: true, Kind: "probs", FailedRows: 2, Rows: []engine.RowReport{
			{Row: 0, Pass: true}, {Row: 1, Findings: []engine.Finding{{Rule: engine.RuleSupport, Severity: engine.Violation}}},
			{Row: 2, Findings: []engine.Finding{{Rule: engine.RuleTolerance, Severity: engine.Violation}, {Rule: engine.RuleSupport, Severity: engine.Violation}}},
			{Row: 3, Pass: true},
		}},
	}}
	got := Summarize(rep)
	want := "FAIL: probs (from the dump) fails 2 of 4 rows. Rules broken: tokens kept by one side and dropped by the other (2), values outside tolerance (1)."
	if got.Sentence != want {
		t.Errorf("sentence\n got %q\nwant %q", got.Sentence, want)
	}
	if got.FailedRows != 2 || got.Verdict.Pass {
		t.Errorf("verdict %+v", got.Verdict)
	}
}

// TestStatsLineSaysPower checks the run page's sentence on a samples
// output: its draws per row, the threshold, and the smallest bias every row
// catches.
func TestStatsLineSaysPower(t *testing.T) {
	fit := &engine.Fit{Draws: 20000, DetectableTV: 0.035}
	rep := &engine.Report{Rows: 2, Pass: true, Tolerances: engine.Tolerances{PValue: 1e-6}, Outputs: []engine.OutputReport{
		{Name: "samples", External: true, Kind: "samples", Pass: true,
			Rows:  []engine.RowReport{{Row: 0, Pass: true, Fit: fit}, {Row: 1, Pass: true, Fit: fit}},
			Power: &engine.Power{TV: 0.035, Row: 1, Best: 0.033, Probability: 0.9}},
	}}
	got := Summarize(rep).Outputs[0].StatsLine
	want := "samples (from the dump): 20000 draws per row; rows fail a statistical test below p = 1e-06; any bias of total variation 0.035 or more is caught 90 times in 100 in every row (row 1 is the least sensitive)."
	if got != want {
		t.Errorf("stats line\n got %q\nwant %q", got, want)
	}
}
