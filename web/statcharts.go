package web

import (
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
)

// The statistical and speculative charts: p-values per row, acceptance by
// position, emitted lengths, the sample histogram, the distributions at one
// speculative position, and the teaching mode's histogram and running total
// variation. Like charts.go, every number is finite by the time it is
// marshalled.

// More colours: the draft q and the residual, the same on every chart.
const (
	colorDraft    = "#ae3ec9"
	colorResidual = "#f76707"
)

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
// statistical test fails the row.
func pvalueChart(rows int, o *outputChartAcc, name string, threshold float64) map[string]any {
	floor := pFloor(threshold)
	var pass, fail, under []opts.ScatterData
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
	if len(under) > 0 {
		c.AddSeries(fmt.Sprintf("p below %s", sci(engine.Float(floor))), under, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
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
		sub += fmt.Sprintf("; mean acceptance length %s (theory %s)", shortFloat(float64(s.MeanAcceptanceLength)), shortFloat(float64(s.TheoryMeanAcceptanceLength)))
	}
	if p := float64(s.EmittedPValue); finite(p) && len(s.Emitted) > 0 {
		sub += "; emitted lengths p = " + sci(s.EmittedPValue)
	}
	return sub
}

// sampleChart draws a sample row's histogram: each output's draws per token
// against what its number of draws expects under the reference, for the top
// tokens, every token drawn that the reference gives no mass (red; amber at
// a filter boundary, where drawing it is allowed) and the rest pooled.
func sampleChart(d *explain.SampleDetail, logScale bool) map[string]any {
	bins := append(append([]explain.SampleToken(nil), d.Tokens...), d.Other)
	xs := make([]string, len(bins))
	for i, b := range bins {
		if b.Token < 0 {
			xs[i] = "other tokens"
		} else {
			xs[i] = fmt.Sprintf("#%d", b.Token)
		}
	}
	sameN := true
	for _, n := range d.Draws {
		sameN = sameN && n == d.Draws[0]
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	yt, yname := "value", "draws"
	var ymin any
	if logScale {
		yt, yname, ymin = "log", "draws (log scale)", 0.5
	}
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Draws per token against the expected counts", Subtitle: "red: drawn, yet the reference gives it no mass"}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, most expected first", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: yt, Name: yname, NameLocation: "middle", NameGap: 55, Min: ymin}),
	)...)
	for j, o := range d.Outputs {
		if j > 0 && sameN {
			break
		}
		name := "expected: draws × reference probability"
		if !sameN {
			name = fmt.Sprintf("expected for %s (%d draws)", o.Label(), d.Draws[j])
		}
		exp := make([]opts.BarData, len(bins))
		for i, b := range bins {
			exp[i] = opts.BarData{Value: finiteOr(float64(d.Draws[j])*float64(b.Ref), logScale)}
		}
		c.AddSeries(name, exp, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
	}
	for j, o := range d.Outputs {
		color := outputColors[j%len(outputColors)]
		obs := make([]opts.BarData, len(bins))
		for i, b := range bins {
			v := 0.0
			if j < len(b.Observed) {
				v = float64(b.Observed[j])
			}
			obs[i] = opts.BarData{Value: finiteOr(v, logScale)}
			if b.Token >= 0 && b.Ref == 0 && v > 0 {
				bad := colorFail
				if b.Class == "boundary" {
					bad = colorAllowed
				}
				obs[i].ItemStyle = &opts.ItemStyle{Color: bad}
			}
		}
		c.AddSeries(fmt.Sprintf("%s (%d draws)", o.Label(), d.Draws[j]), obs, charts.WithItemStyleOpts(opts.ItemStyle{Color: color}))
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// Series ids of a speculative position's chart; the page script pins the
// draft and the resampled token of each step onto the series "p".
const (
	seriesP        = "p"
	seriesQ        = "q"
	seriesResidual = "residual"
)

// positionChart draws p, q and the normalised residual max(p - q, 0) at one
// position of a spec_verify row, on the tokens the detail lists.
func positionChart(sd *explain.SpecDetail, pos explain.SpecPosition, logScale bool) map[string]any {
	xs := make([]string, len(pos.Tokens))
	p := make([]opts.BarData, len(pos.Tokens))
	q := make([]opts.BarData, len(pos.Tokens))
	res := make([]opts.BarData, len(pos.Tokens))
	for i, t := range pos.Tokens {
		xs[i] = fmt.Sprintf("#%d", t.Token)
		p[i] = opts.BarData{Value: finiteOr(float64(t.P), logScale)}
		q[i] = opts.BarData{Value: finiteOr(float64(t.Q), logScale)}
		res[i] = opts.BarData{Value: finiteOr(float64(t.Residual), logScale)}
	}
	bonus := pos.Position >= sd.K
	title := fmt.Sprintf("Position %d: target p, draft q and the residual", pos.Position)
	if bonus {
		title = fmt.Sprintf("Position %d (bonus): the target p the bonus token is drawn from", pos.Position)
	}
	yt, yname := "value", "probability"
	var ymin any
	if logScale {
		yt, yname, ymin = "log", "probability (log scale)", 1e-8
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, most probable under p first", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: yt, Name: yname, NameLocation: "middle", NameGap: 55, Min: ymin}),
	)...)
	c.AddSeries("p: target", p, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
	if !bonus {
		qname := "q: draft"
		if sd.OneHot {
			qname = "q: draft (one-hot)"
		}
		c.AddSeries(qname, q, charts.WithSeriesId(seriesQ), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorDraft}))
		c.AddSeries("residual: max(p − q, 0), normalised", res, charts.WithSeriesId(seriesResidual), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}))
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// teachHistChart draws a lesson's emitted tokens as shares of the steps so
// far, split into accepted drafts and draws from the residual, against the
// target p (and the draft q the steps proposed from).
func teachHistChart(st *lesson.State) map[string]any {
	bins := append(append([]lesson.Token(nil), st.Tokens...), st.Other)
	xs := make([]string, len(bins))
	acc := make([]opts.BarData, len(bins))
	res := make([]opts.BarData, len(bins))
	p := make([]opts.LineData, len(bins))
	q := make([]opts.LineData, len(bins))
	n := float64(max(st.Steps, 1))
	for i, b := range bins {
		if b.Token < 0 {
			xs[i] = "other tokens"
		} else {
			xs[i] = fmt.Sprintf("#%d", b.Token)
		}
		acc[i] = opts.BarData{Value: float64(b.Accepted) / n}
		res[i] = opts.BarData{Value: float64(b.Resampled) / n}
		p[i] = opts.LineData{Value: finiteOr(float64(b.P), false)}
		q[i] = opts.LineData{Value: finiteOr(float64(b.Q), false)}
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: fmt.Sprintf("Emitted tokens after %d steps, against the target p", st.Steps)}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, most probable under p first", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "share of the steps", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	c.AddSeries("accepted drafts", acc, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}), charts.WithBarChartOpts(opts.BarChart{Stack: "emitted"}))
	c.AddSeries("drawn from the residual", res, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}), charts.WithBarChartOpts(opts.BarChart{Stack: "emitted"}))
	l := charts.NewLine()
	l.AddSeries("target p", p,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "rect", SymbolSize: 14}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}),
		charts.WithLineStyleOpts(opts.LineStyle{Opacity: opts.Float(0)}))
	l.AddSeries("draft q", q,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 9}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorDraft}),
		charts.WithLineStyleOpts(opts.LineStyle{Opacity: opts.Float(0)}))
	c.Overlap(l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// teachTVChart draws the running total variation from p of the emitted
// tokens and of the drafts, on log axes, with the line TV(p, q) the drafts
// settle on.
func teachTVChart(st *lesson.State) map[string]any {
	em := make([]opts.LineData, 0, len(st.Running))
	dr := make([]opts.LineData, 0, len(st.Running))
	for _, pt := range st.Running {
		em = append(em, opts.LineData{Value: [2]any{pt.Steps, finiteOr(float64(pt.Emitted), true)}})
		dr = append(dr, opts.LineData{Value: [2]any{pt.Steps, finiteOr(float64(pt.Drafts), true)}})
	}
	c := charts.NewLine()
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Total variation from p as the steps add up", Subtitle: "over the histogram's bars"}, true, "axis", opts.Grid{Left: "70", Right: "30", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "steps (log scale)", NameLocation: "middle", NameGap: 28, Min: 1, Max: max(st.Steps, 10)}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "total variation (log scale)", NameLocation: "middle", NameGap: 50, Min: 1e-3, Max: 1}),
	)...)
	emOpts := []charts.SeriesOpts{
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}),
		charts.WithLineStyleOpts(opts.LineStyle{Width: 2.5}),
	}
	if tv := float64(st.TVBars); tv > 1e-3 {
		emOpts = append(emOpts,
			charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: "TV(p, q)", YAxis: tv}),
			charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
				LineStyle: &opts.LineStyle{Color: colorDraft, Type: "dashed", Width: 1.5},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "q itself: " + shortFloat(tv), Position: "insideEndTop"}}))
	}
	c.AddSeries("emitted tokens (verified)", em, emOpts...)
	c.AddSeries("the drafts, had every one been emitted", dr,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorDraft}),
		charts.WithLineStyleOpts(opts.LineStyle{Width: 1.5, Type: "dotted"}))
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
