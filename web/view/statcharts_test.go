package view

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/webtest"
)

func TestStatisticalChartsAreValidJSON(t *testing.T) {
	rows, k, trials := 20+rand.IntN(100), 1+rand.IntN(6), 50+rand.IntN(500)
	tol := engine.Tolerances{PValue: 1e-6}
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "spec", Tolerances: &tol}, {Name: "samples", External: true, Kind: "samples"}}
	c := NewChartData(rows, outs)
	reached0 := 0
	for r := 0; r < rows; r++ {
		pv := math.Pow(10, -12*rand.Float64())
		if rand.IntN(10) == 0 {
			pv = 0 // an underflow
		}
		spec := webtest.RandomSpecStats(k, trials)
		reached0 += spec.Positions[0].Reached
		addRow(c, session.RowUpdate{Output: 0, Report: engine.RowReport{Row: r, Pass: pv > tol.PValue, PValue: &pv, Spec: spec}})
		pv2 := rand.Float64()
		addRow(c, session.RowUpdate{Output: 1, Report: engine.RowReport{Row: r, Pass: true, PValue: &pv2}})
	}
	check := func(t *testing.T, charts []map[string]any) {
		t.Helper()
		b, err := json.Marshal(charts)
		if err != nil {
			t.Fatal(err)
		}
		var got []map[string]json.RawMessage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"pvalue", "accept", "emitted"}, {"pvalue"}}
		for o, kinds := range want {
			if len(got[o]) != len(kinds) {
				t.Errorf("output %d: charts %v, want %v", o, keys(got[o]), kinds)
			}
			for _, kind := range kinds {
				if got[o][kind] == nil {
					t.Errorf("output %d has no %s chart", o, kind)
				}
			}
		}
		var pv struct {
			Series []struct {
				Name string       `json:"name"`
				Data [][2]float64 `json:"data"`
			} `json:"series"`
		}
		if err := json.Unmarshal(got[0]["pvalue"], &pv); err != nil {
			t.Fatal(err)
		}
		n, line := 0, false
		for _, s := range pv.Series {
			if strings.HasPrefix(s.Name, "fails below p = ") {
				line = true
				continue
			}
			for _, d := range s.Data {
				if d[1] <= 0 || d[1] > 1 {
					t.Errorf("p-value point %v off the log axis", d)
				}
			}
			n += len(s.Data)
		}
		if n != rows || !line {
			t.Errorf("%d p-value points (want %d), threshold line %v", n, rows, line)
		}
	}
	t.Run("while streaming", func(t *testing.T) {
		charts := RunCharts(c, outs, nil, 100, nil)
		check(t, charts)
		// The pooled acceptance at position 0 counts every row's trials.
		b, _ := json.Marshal(charts[0]["accept"])
		if !strings.Contains(string(b), "Wilson") {
			t.Error("the acceptance chart has no interval series")
		}
		if got := c.outputs[0].Spec.stats().Positions[0].Reached; got != reached0 {
			t.Errorf("pooled position 0 reached %d, want %d", got, reached0)
		}
	})
	t.Run("final, pooled by the judge", func(t *testing.T) {
		pooled := []*engine.SpecStats{webtest.RandomSpecStats(k, trials*rows), nil}
		check(t, RunCharts(c, outs, nil, 100, pooled))
	})
}

// TestPValueChartFailingRowsBelowLine checks that no failing row is drawn
// above the threshold line: one that fails on another rule while its
// p-value passes sits below the line, its p-value kept for the tooltip.
func TestPValueChartFailingRowsBelowLine(t *testing.T) {
	const rows, thr = 12, 1e-6
	tol := engine.Tolerances{PValue: thr}
	outs := []engine.OutputInfo{{Name: "samples", External: true, Kind: "samples", Tolerances: &tol}}
	c := NewChartData(rows, outs)
	for r := range rows {
		pv := 0.05 + 0.9*rand.Float64()
		pass := r%3 != 0 // every third row fails on support with a passing fit
		if r == 4 {
			pv, pass = 1e-9, false
		}
		addRow(c, session.RowUpdate{Output: 0, Report: engine.RowReport{Row: r, Pass: pass, PValue: &pv}})
	}
	b, err := json.Marshal(RunCharts(c, outs, nil, 100, nil)[0]["pvalue"])
	if err != nil {
		t.Fatal(err)
	}
	var pv struct {
		Series []struct {
			Name string      `json:"name"`
			Data [][]float64 `json:"data"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &pv); err != nil {
		t.Fatal(err)
	}
	failing := 0
	for _, s := range pv.Series {
		if s.Name == "row passes" || strings.HasPrefix(s.Name, "fails below p = ") {
			continue
		}
		for _, d := range s.Data {
			failing++
			if d[1] >= thr {
				t.Errorf("series %q: failing row %v drawn at p = %g, above the threshold %g", s.Name, d[0], d[1], thr)
			}
			if s.Name == "row fails another rule (its fit passes)" && (len(d) != 3 || d[2] < thr) {
				t.Errorf("row %v: %v, want its own passing p-value third", d[0], d)
			}
		}
	}
	if failing != 5 {
		t.Errorf("%d failing rows drawn, want 5", failing)
	}
}
