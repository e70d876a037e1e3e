package view

import (
	"fmt"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
)

// The charts of speculative sampling step by step: the distributions at one
// position of a row's trace, and the teaching mode's histogram and running
// total variation.

// Series ids of a speculative position's chart; the page script pins the
// draft and the resampled token of each step onto the series "p".
const (
	seriesP        = "p"
	seriesQ        = "q"
	seriesResidual = "residual"
)

// positionChart draws p, q and the normalised residual max(p - q, 0) at one
// position of a spec_verify row, on the tokens the detail lists.
func positionChart(sd *explain.SpecDetail, pos explain.SpecPosition, names Tokens, logScale bool) map[string]any {
	xs := make([]string, len(pos.Tokens))
	p := make([]opts.BarData, len(pos.Tokens))
	q := make([]opts.BarData, len(pos.Tokens))
	res := make([]opts.BarData, len(pos.Tokens))
	for i, t := range pos.Tokens {
		xs[i] = names.Axis(int64(t.Token))
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
	return barsFromFloor(c.JSON())
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
			xs[i] = Tokens(st.Text).Axis(int64(b.Token))
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
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "q itself: " + engine.FormatSig(tv, 4), Position: "insideEndTop"}}))
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
