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

// TestStatsLineSaysPowerGained checks that a run of more draws than the
// default says what they buy over the default, and one of the default
// draws says nothing of it.
func TestStatsLineSaysPowerGained(t *testing.T) {
	tests := []struct {
		name  string
		draws int
		power *engine.Power
		want  string
	}{
		{"10^7 draws", 10_000_000, &engine.Power{TV: 0.0011, Row: 0, Best: 0.001, Probability: 0.9, Draws: 10_000_000, BaselineTV: 0.011},
			"cuda kernel (ours): 10000000 draws per row; rows fail a statistical test below p = 1e-06; any bias of total variation 0.0011 or more is caught 90 times in 100 in every row (row 0 is the least sensitive); 10^7 draws a row catch a total-variation bias of 0.0011; 10^5 would catch 0.011."},
		{"10^5 draws", 100_000, &engine.Power{TV: 0.011, Row: 0, Best: 0.01, Probability: 0.9, Draws: 100_000},
			"cuda kernel (ours): 100000 draws per row; rows fail a statistical test below p = 1e-06; any bias of total variation 0.011 or more is caught 90 times in 100 in every row (row 0 is the least sensitive)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fit := &engine.Fit{Draws: tt.draws, DetectableTV: tt.power.TV}
			rep := &engine.Report{Rows: 1, Pass: true, Tolerances: engine.Tolerances{PValue: 1e-6}, Outputs: []engine.OutputReport{
				{Name: "cuda", Kind: "samples", Pass: true, Rows: []engine.RowReport{{Row: 0, Pass: true, Fit: fit}}, Power: tt.power},
			}}
			if got := Summarize(rep).Outputs[0].StatsLine; got != tt.want {
				t.Errorf("stats line\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
