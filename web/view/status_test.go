package view

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// The row table's probability cell shows the row's largest |error| beside
// the error at the token furthest over its tolerance: two tokens, often,
// and the table once showed only the second under the first's name.
func TestSummarizeRowCarriesLargestError(t *testing.T) {
	largest := engine.Float(0.01 + rand.Float64()*0.01)
	atWorst := largest / 2
	allowed := engine.Float(1e-5 + rand.Float64()*1e-6)
	u := session.RowUpdate{
		Report: engine.RowReport{Row: 3, Strict: &engine.Drift{Reference: "strict", Abs: engine.ErrorStats{Max: largest, Index: 7}}},
		Errors: &session.RowErrors{Token: 2, Worst: atWorst, Allowed: allowed},
	}
	s := SummarizeRow(u)
	if s.Max == nil || *s.Max != largest {
		t.Errorf("max = %v, want the largest |error| %v", s.Max, largest)
	}
	if s.Worst == nil || *s.Worst != atWorst || s.Allowed == nil || *s.Allowed != allowed {
		t.Errorf("worst, allowed = %v, %v; want %v, %v", s.Worst, s.Allowed, atWorst, allowed)
	}
}

// A row that fails on its input (NaN logits, a masked row) says so on the
// row page and in the run's verdict: the output is not what failed.
func TestInputRowsAreTheInputs(t *testing.T) {
	rep := &engine.Report{Rows: 3, Outputs: []engine.OutputReport{{Name: "cpu", Kind: "probs", FailedRows: 2, Rows: []engine.RowReport{
		{Row: 0, Pass: true},
		{Row: 1, InvalidInput: true, Violations: []string{"row 1: input logits contain NaN at 2 of 8 tokens, first at token 3"}},
		{Row: 2, Violations: []string{"row 2: 1 of 8 probabilities off"}},
	}}}}
	s := Summarize(rep)
	if got := OutputLine(s.Outputs[0]); !strings.Contains(got, "fails 2 of 3 rows, 1 of them on the input, not the output") {
		t.Errorf("verdict line %q", got)
	}
	if got := RowWord(&rep.Outputs[0].Rows[1]); !strings.Contains(got, "input") {
		t.Errorf("row word %q does not blame the input", got)
	}
}

// The summary carries the tolerances as the form fields write them, so the
// page script fills the fields with the server's text.
func TestSummaryToleranceFields(t *testing.T) {
	s := Summarize(&engine.Report{Tolerances: engine.Tolerances{Strict: engine.Tolerance{Atol: 1e-5, Rtol: 1.3e-6}, Native: engine.Tolerance{Atol: 1e-5}, PValue: 1e-6}})
	want := map[string]string{"satol": "1e-05", "srtol": "1.3e-06", "natol": "1e-05", "nrtol": "0", "pvalue": "1e-06"}
	for k, v := range want {
		if s.ToleranceFields[k] != v {
			t.Errorf("%s = %q, want %q", k, s.ToleranceFields[k], v)
		}
	}
}

// A p-value that underflowed reads "p < 1e-300" on the pages, as in the
// report's sentences, never "p = 0" or a number of ten thousand digits.
func TestPWords(t *testing.T) {
	for p, want := range map[engine.Float]string{0: "p < 1e-300", 0.0123: "p = 0.012", 3.1e-12: "p = 3.1e-12"} {
		if got := engine.StoredPText(float64(p)); got != want {
			t.Errorf("engine.StoredPText(float64(%v)) = %q, want %q", p, got, want)
		}
	}
}
