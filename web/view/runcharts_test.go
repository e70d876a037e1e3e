package view

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/webtest"
)

func TestChartsAreValidJSON(t *testing.T) {
	rows, vocab := 40+rand.IntN(200), 1000+rand.IntN(50000)
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "probs"}, {Name: "probs", External: true, Kind: "probs"}, {Name: "tokens", External: true, Kind: "tokens"}}
	c := NewChartData(rows, outs)
	for r := 0; r < rows; r++ {
		addRow(c, webtest.RandomUpdate(0, r, vocab))
		addRow(c, webtest.RandomUpdate(1, r, vocab))
		addRow(c, session.RowUpdate{Output: 2, Report: engine.RowReport{Row: r, Pass: rand.IntN(3) > 0}})
	}
	tol := &engine.Tolerances{Strict: engine.Tolerance{Atol: 1e-5, Rtol: 1.6e-2}}
	b, err := json.Marshal(RunCharts(c, outs, tol, vocab, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		out   int
		kinds []string
	}{
		{"ours", 0, []string{"worst", "hist", "heat"}},
		{"external probs", 1, []string{"worst", "hist", "heat"}},
		{"tokens", 2, []string{"worst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(got[tt.out]) != len(tt.kinds) {
				t.Errorf("charts %v, want %v", keys(got[tt.out]), tt.kinds)
			}
			for _, k := range tt.kinds {
				var opt struct {
					Series []struct {
						Name string `json:"name"`
						Data []any  `json:"data"`
					} `json:"series"`
				}
				if err := json.Unmarshal(got[tt.out][k], &opt); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				n := 0
				for _, s := range opt.Series {
					n += len(s.Data)
				}
				if n == 0 {
					t.Errorf("%s has no data", k)
				}
			}
		})
	}
	// Every judged row of ours is a point of the worst chart.
	var worst struct {
		Series []struct {
			Name string      `json:"name"`
			Data [][]float64 `json:"data"`
		} `json:"series"`
	}
	json.Unmarshal(got[0]["worst"], &worst)
	points := 0
	for _, s := range worst.Series {
		if s.Name != "allowed: atol + rtol·|reference|" {
			points += len(s.Data)
		}
	}
	if points != rows {
		t.Errorf("worst chart has %d points, want %d", points, rows)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// addRow adds a judged row to c as a topic does.
func addRow(c *ChartData, u session.RowUpdate) {
	c.Add(SummarizeRow(u), u.Errors, NewRowSpec(u.Report.Spec))
}
