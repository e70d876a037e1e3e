package web

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

func TestParseTolerances(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    *engine.Tolerances
		wantErr string
	}{
		{"none", "", nil, ""},
		{"all", "satol=1e-5&srtol=0.016&natol=2e-5&nrtol=0.001&pvalue=0.01",
			&engine.Tolerances{Strict: engine.Tolerance{Atol: 1e-5, Rtol: 0.016}, Native: engine.Tolerance{Atol: 2e-5, Rtol: 0.001}, PValue: 0.01}, ""},
		{"some", "satol=1e-5", nil, "needs all of"},
		{"negative", "satol=-1&srtol=0&natol=0&nrtol=0&pvalue=0.1", nil, "satol must be a finite number"},
		{"NaN", "satol=NaN&srtol=0&natol=0&nrtol=0&pvalue=0.1", nil, "satol must be a finite number"},
		{"p-value out of range", "satol=0&srtol=0&natol=0&nrtol=0&pvalue=1", nil, "pvalue must be between 0 and 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, err := parseTolerances(q)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	// The key does not depend on the order the URL writes them in.
	a, _ := url.ParseQuery("satol=1e-5&srtol=0.016&natol=2e-5&nrtol=0.001&pvalue=0.01")
	b, _ := url.ParseQuery("pvalue=0.01&nrtol=0.001&natol=0.00002&srtol=0.016&satol=0.00001")
	ta, _ := parseTolerances(a)
	tb, _ := parseTolerances(b)
	if toleranceKey(*ta) != toleranceKey(*tb) {
		t.Error("the same tolerances written differently got different keys")
	}
}
