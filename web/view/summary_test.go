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
