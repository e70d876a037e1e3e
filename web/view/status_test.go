package view

import (
	"math/rand/v2"
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
