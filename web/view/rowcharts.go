package view

import (
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
)

// RowCharts builds the row page's charts from a row's detail: "probs" (the
// top tokens of every output and the reference), "cdf" (the cumulative
// reference mass with the filter cuts) and "error" (each output's signed
// error on the top tokens against the allowed band).
// Sample rows add "samples" (the draws per token against the expected
// counts); logprobs outputs add "logprobs-i" (output i of d.Logprobs
// against the reference log-softmax); rows with speculative statistics (spec, nil for none) add
// "accept" and "emitted" for the row's own trials.
//
// shown lists the probability outputs (indices in d.Probs) that "probs" and
// "error" draw (ShownProbs); nil draws every one.
func RowCharts(d *explain.RowDetail, spec *engine.SpecStats, logScale bool, shown []int) map[string]any {
	m := map[string]any{}
	if d == nil || d.Invalid != "" {
		return m
	}
	if shown == nil {
		shown = make([]int, len(d.Probs))
		for i := range shown {
			shown[i] = i
		}
	}
	if len(d.Tokens) > 0 {
		m["probs"] = probsChart(d, logScale, shown)
		m["cdf"] = cdfChart(d, shown)
		if len(d.Probs) > 0 {
			m["error"] = errorChart(d, shown)
		}
	}
	for i, l := range d.Logprobs {
		if l.Invalid == "" && len(l.Tokens) > 0 {
			m[fmt.Sprintf("logprobs-%d", i)] = logprobsChart(l, Tokens(d.Text))
		}
	}
	if d.Samples != nil && len(d.Samples.Outputs) > 0 {
		m["samples"] = sampleChart(d.Samples, Tokens(d.Text), logScale)
	}
	if spec != nil && len(spec.Positions) > 0 {
		sub := specSubtitle(spec, "this row")
		m["accept"] = acceptChart(spec, "Acceptance by position on this row", sub)
		m["emitted"] = emittedChart(spec, "Emitted length on this row", sub)
	}
	return m
}

// tokenLabels are the category labels of the top tokens' charts.
func tokenLabels(d *explain.RowDetail) []string {
	xs := make([]string, len(d.Tokens))
	for i, t := range d.Tokens {
		xs[i] = Tokens(d.Text).Axis(int64(t.Token))
	}
	return xs
}

// maxBarOutputs is how many outputs the probability chart draws as bars
// beside the reference; past it, each output is a line of markers over the
// reference's bars, which stays legible with 16.
const maxBarOutputs = 3

func probsChart(d *explain.RowDetail, logScale bool, shown []int) map[string]any {
	c := charts.NewBar()
	c.SetXAxis(tokenLabels(d))
	yt, yname := "value", "probability"
	var ymin any
	if logScale {
		yt, yname = "log", "probability (log scale)"
		ymin = 1e-12
	}
	c.SetGlobalOptions(append(frame(opts.Title{Title: fmt.Sprintf("Top %d tokens: outputs against the reference", len(d.Tokens))}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, most probable first", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: yt, Name: yname, NameLocation: "middle", NameGap: 55, Min: ymin}),
	)...)
	ref := make([]opts.BarData, len(d.Tokens))
	for i, t := range d.Tokens {
		ref[i] = opts.BarData{Value: finiteOr(float64(t.Ref), logScale)}
	}
	refOpts := []charts.SeriesOpts{charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef})}
	if d.Cuts.MinPProb > 0 {
		refOpts = append(refOpts,
			charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: "min-p", YAxis: d.Cuts.MinPProb}),
			charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
				LineStyle: &opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "min-p threshold", Position: "insideEndTop"}}))
	}
	c.AddSeries("reference (float64, after filters)", ref, refOpts...)
	asLines := len(shown) > maxBarOutputs
	marks := charts.NewLine()
	for _, j := range shown {
		o := d.Probs[j]
		color := outputColors[j%len(outputColors)]
		if asLines {
			vals := make([]opts.LineData, len(d.Tokens))
			for i, t := range d.Tokens {
				vals[i] = opts.LineData{Value: "-"}
				if j < len(t.Values) {
					vals[i] = opts.LineData{Value: finiteOr(float64(t.Values[j]), logScale)}
				}
			}
			marks.AddSeries(o.Label(), vals,
				charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: outputSymbols[j%len(outputSymbols)], SymbolSize: 8}),
				charts.WithItemStyleOpts(opts.ItemStyle{Color: color}),
				charts.WithLineStyleOpts(opts.LineStyle{Width: 1, Opacity: opts.Float(0.5)}))
			continue
		}
		vals := make([]opts.BarData, len(d.Tokens))
		for i, t := range d.Tokens {
			if j < len(t.Values) {
				vals[i] = opts.BarData{Value: finiteOr(float64(t.Values[j]), logScale)}
			} else {
				vals[i] = opts.BarData{Value: "-"}
			}
		}
		c.AddSeries(o.Label(), vals, charts.WithItemStyleOpts(opts.ItemStyle{Color: color}))
	}
	if asLines {
		c.Overlap(marks)
	}
	base := make([]opts.LineData, len(d.Tokens))
	for i, t := range d.Tokens {
		base[i] = opts.LineData{Value: finiteOr(float64(t.Base), logScale)}
	}
	l := charts.NewLine()
	l.AddSeries("softmax before filters", base,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 6}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Opacity: opts.Float(0)}))
	c.Overlap(l)
	c.Validate()
	return barsFromFloor(c.JSON())
}

// cdfChart draws the reference's cumulative mass by rank with the filter
// cuts, and beside them where each shown probability output's own support
// ends (its cut): a top-p applied to the wrong mass is seen as two lines
// apart.
func cdfChart(d *explain.RowDetail, shown []int) map[string]any {
	pts := make([]opts.LineData, 0, len(d.CDF))
	for _, p := range d.CDF {
		pts = append(pts, opts.LineData{Value: [2]any{p.Rank, finiteOr(float64(p.Mass), false)}})
	}
	c := charts.NewLine()
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Cumulative reference mass, with the filter cuts"}, false, "axis", opts.Grid{Left: "70", Right: "40", Top: "50", Bottom: "50"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "tokens, most probable first (rank, log scale)", NameLocation: "middle", NameGap: 28, Min: 1, Max: maxInt(d.Vocab, 2)}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "cumulative probability", NameLocation: "middle", NameGap: 45, Min: 0, Max: 1}),
	)...)
	var xs []opts.MarkLineNameXAxisItem
	var ys []opts.MarkLineNameYAxisItem
	if d.Cuts.TopKRank > 0 {
		xs = append(xs, opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("top-k keeps %d", d.Cuts.TopKRank), XAxis: d.Cuts.TopKRank})
	}
	if d.Cuts.TopPMass > 0 {
		ys = append(ys, opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("top-p cut at mass %s", engine.FormatSig(d.Cuts.TopPMass, 4)), YAxis: d.Cuts.TopPMass})
		if d.Cuts.TopPRank > 0 {
			xs = append(xs, opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("top-p keeps %d", d.Cuts.TopPRank), XAxis: d.Cuts.TopPRank})
		}
	}
	if d.Cuts.MinPRank > 0 {
		xs = append(xs, opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("min-p keeps %d", d.Cuts.MinPRank), XAxis: d.Cuts.MinPRank})
	}
	so := []charts.SeriesOpts{
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), Step: "end"}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}),
		charts.WithAreaStyleOpts(opts.AreaStyle{Opacity: opts.Float(0.08)}),
	}
	if len(xs) > 0 {
		so = append(so, charts.WithMarkLineNameXAxisItemOpts(xs...))
	}
	if len(ys) > 0 {
		so = append(so, charts.WithMarkLineNameYAxisItemOpts(ys...))
	}
	if len(xs)+len(ys) > 0 {
		// Labels run along their lines, so lines close together stay legible.
		so = append(so, charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
			LineStyle: &opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2},
			Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Position: "insideEndTop"}}))
	}
	c.AddSeries("reference, before filters", pts, so...)
	for _, j := range shown {
		if j >= len(d.Cuts.Outputs) || j >= len(d.Probs) {
			continue
		}
		oc := d.Cuts.Outputs[j]
		if oc.Rank == 0 || oc.Kept == d.Vocab && d.Cuts.Kept == d.Vocab {
			continue // no cut on either side
		}
		name := fmt.Sprintf("%s keeps %d (its cut)", d.Probs[j].Label(), oc.Kept)
		line := []opts.LineData{{Value: [2]any{oc.Rank, 0}}, {Value: [2]any{oc.Rank, finiteOr(float64(oc.Mass), false)}}}
		c.AddSeries(name, line,
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "triangle", SymbolSize: 8}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: outputColors[j%len(outputColors)]}),
			charts.WithLineStyleOpts(opts.LineStyle{Type: "dotted", Width: 2}))
	}
	c.Validate()
	return c.JSON()
}

func errorChart(d *explain.RowDetail, shown []int) map[string]any {
	c := charts.NewBar()
	c.SetXAxis(tokenLabels(d))
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Error per token: output − reference"}, true, "axis", opts.Grid{Left: "80", Right: "20", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, most probable first", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "error (probability)", NameLocation: "middle", NameGap: 65}),
	)...)
	for _, j := range shown {
		o := d.Probs[j]
		vals := make([]opts.BarData, len(d.Tokens))
		for i, t := range d.Tokens {
			v := math.NaN()
			if j < len(t.Values) {
				v = float64(t.Values[j]) - float64(t.Ref)
			}
			vals[i] = opts.BarData{Value: finiteOr(v, false)}
		}
		c.AddSeries(o.Label(), vals, charts.WithItemStyleOpts(opts.ItemStyle{Color: outputColors[j%len(outputColors)]}))
	}
	up := make([]opts.LineData, len(d.Tokens))
	down := make([]opts.LineData, len(d.Tokens))
	for i, t := range d.Tokens {
		up[i] = opts.LineData{Value: finiteOr(float64(t.Allowed), false)}
		down[i] = opts.LineData{Value: finiteOr(-float64(t.Allowed), false)}
	}
	l := charts.NewLine()
	band := []charts.SeriesOpts{
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), Step: "middle"}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 1.5}),
	}
	l.AddSeries("allowed: ± (atol + rtol·|reference|)", up, band...)
	l.AddSeries("allowed: ± (atol + rtol·|reference|)", down, band...)
	c.Overlap(l)
	c.Validate()
	return c.JSON()
}

// sampleChart draws a sample row's histogram: each output's draws per token
// against what its number of draws expects under the reference, for the top
// tokens, every token drawn that the reference gives no mass (red; amber at
// a filter boundary, where drawing it is allowed) and the rest pooled.
func sampleChart(d *explain.SampleDetail, names Tokens, logScale bool) map[string]any {
	bins := append(append([]explain.SampleToken(nil), d.Tokens...), d.Other)
	xs := make([]string, len(bins))
	for i, b := range bins {
		if b.Token < 0 {
			xs[i] = "other tokens"
		} else {
			xs[i] = names.Axis(int64(b.Token))
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
	return barsFromFloor(c.JSON())
}
