package view

import (
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
)

// The statistical charts: p-values per row, acceptance by position and
// emitted lengths, on the run page (pooled over rows) and the row page (one
// row's trials).

// pFloor is the least p-value the p-value chart draws; smaller ones (and 0,
// an underflow) sit on it as triangles.
func pFloor(threshold float64) float64 {
	f := 1e-12
	if threshold > 0 && threshold < 1 {
		f = math.Min(f, math.Pow(10, math.Floor(math.Log10(threshold))-6))
	}
	return f
}

// pvalueChart draws each judged row's p-value on a log axis, green when the
// row passes and red when it fails, with the threshold line below which a
// statistical test fails the row. A row that fails on another rule (a
// support or structure violation) while its p-value is at or above the
// threshold is never drawn above the line: it sits a decade below it, in a
// series of its own, so that every red point is under the line.
func pvalueChart(rows int, o *outputChartAcc, name string, threshold float64) map[string]any {
	floor := pFloor(threshold)
	var pass, fail, under, other []opts.ScatterData
	for r := 0; r < rows; r++ {
		p := o.PValue[r]
		if o.Pass[r] == 0 || math.IsNaN(p) {
			continue
		}
		pt := opts.ScatterData{Value: [2]float64{float64(r), math.Min(math.Max(p, floor), 1)}}
		switch {
		case p < floor:
			under = append(under, pt)
		case o.Pass[r] > 0:
			pass = append(pass, pt)
		case threshold > 0 && p >= threshold:
			pt.Value = [3]float64{float64(r), math.Max(threshold/10, floor), p} // the third is the p-value itself, for the tooltip
			other = append(other, pt)
		default:
			fail = append(fail, pt)
		}
	}
	c := charts.NewScatter()
	c.SetGlobalOptions(append(frame(opts.Title{Title: "p-value per row", Subtitle: name}, true, "item", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "row", NameLocation: "middle", NameGap: 25, Min: 0, Max: maxInt(rows-1, 1)}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "p-value (log scale)", NameLocation: "middle", NameGap: 50, Min: floor, Max: 1}),
	)...)
	c.AddSeries("row passes", pass, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorPass}),
		charts.WithScatterChartOpts(opts.ScatterChart{SymbolSize: 5}))
	c.AddSeries("row fails", fail, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
		charts.WithScatterChartOpts(opts.ScatterChart{SymbolSize: 7}))
	if len(other) > 0 {
		c.AddSeries("row fails another rule (its fit passes)", other, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
			charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "diamond", SymbolSize: 8}))
	}
	if len(under) > 0 {
		c.AddSeries(fmt.Sprintf("p below %s", engine.FormatSig(float64(floor), 4)), under, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
			charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "triangle", SymbolSize: 9}))
	}
	if threshold > 0 {
		// A line series rather than a mark line: the page draws scatters in
		// ECharts' large mode, which has no mark lines.
		y := math.Max(threshold, floor)
		l := charts.NewLine()
		l.AddSeries("fails below p = "+engine.FormatFloat(threshold), []opts.LineData{{Value: [2]float64{0, y}}, {Value: [2]float64{float64(maxInt(rows-1, 1)), y}}},
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
			charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Width: 2, Type: "dashed"}))
		c.Overlap(l)
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// acceptChart draws acceptance by draft position: the measured rate among
// the trials that reached each position as bars, its 95% Wilson interval as
// a box over each bar, and the theoretical rate as a line.
func acceptChart(s *engine.SpecStats, title, subtitle string) map[string]any {
	n := len(s.Positions)
	xs := make([]string, n)
	rate := make([]opts.BarData, n)
	band := make([]opts.BoxPlotData, n)
	theory := make([]opts.LineData, n)
	for i, p := range s.Positions {
		xs[i] = fmt.Sprintf("position %d", p.Position)
		rate[i] = opts.BarData{Value: finiteOr(float64(p.Rate), false)}
		lo, r, hi := float64(p.Lo), float64(p.Rate), float64(p.Hi)
		if finite(lo) && finite(hi) && finite(r) && p.Reached > 0 {
			band[i] = opts.BoxPlotData{Value: []float64{lo, lo, r, hi, hi}}
		} else {
			band[i] = opts.BoxPlotData{Value: []any{"-", "-", "-", "-", "-"}}
		}
		theory[i] = opts.LineData{Value: finiteOr(float64(p.Theory), false)}
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title, Subtitle: subtitle}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "draft position", NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "acceptance rate (trials that reached it)", NameLocation: "middle", NameGap: 45, Min: 0, Max: 1}),
	)...)
	c.AddSeries("measured rate", rate, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote, Opacity: opts.Float(0.75)}),
		charts.WithBarChartOpts(opts.BarChart{BarCategoryGap: "35%"}))
	b := charts.NewBoxPlot()
	b.AddSeries("95% interval (Wilson)", band, charts.WithItemStyleOpts(opts.ItemStyle{Color: "rgba(0,0,0,0)", BorderColor: "#1864ab", BorderWidth: 2}))
	l := charts.NewLine()
	l.AddSeries("theory: min(1, p/q), averaged", theory,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 10}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2}))
	c.Overlap(b, l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// emittedChart draws how many trials accepted each number of drafts (the
// emitted length) against the exact distribution's expected counts.
func emittedChart(s *engine.SpecStats, title, subtitle string) map[string]any {
	n := max(len(s.Emitted), len(s.EmittedTheory))
	xs := make([]string, n)
	got := make([]opts.BarData, n)
	want := make([]opts.LineData, n)
	total := 0
	for _, e := range s.Emitted {
		total += e
	}
	for j := range n {
		xs[j] = fmt.Sprint(j)
		got[j] = opts.BarData{Value: "-"}
		if j < len(s.Emitted) {
			got[j] = opts.BarData{Value: s.Emitted[j]}
		}
		want[j] = opts.LineData{Value: "-"}
		if j < len(s.EmittedTheory) {
			want[j] = opts.LineData{Value: finiteOr(float64(total)*float64(s.EmittedTheory[j]), false)}
		}
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title, Subtitle: subtitle}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "drafts accepted before the first rejection", NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "trials", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	c.AddSeries("trials", got, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}))
	l := charts.NewLine()
	l.AddSeries("expected: trials × P(E = j)", want,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 10}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2}))
	c.Overlap(l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// specSubtitle says what an acceptance chart pools and its mean acceptance
// length against theory.
func specSubtitle(s *engine.SpecStats, name string) string {
	sub := fmt.Sprintf("%s: %d trials", name, s.Trials)
	if finite(float64(s.MeanAcceptanceLength)) && s.MeanAcceptanceLength > 0 {
		sub += fmt.Sprintf("; mean acceptance length %s (theory %s)", engine.FormatSig(float64(s.MeanAcceptanceLength), 4), engine.FormatSig(float64(s.TheoryMeanAcceptanceLength), 4))
	}
	if p := float64(s.EmittedPValue); finite(p) && len(s.Emitted) > 0 {
		sub += "; emitted lengths " + engine.StoredPText(float64(s.EmittedPValue))
	}
	return sub
}
