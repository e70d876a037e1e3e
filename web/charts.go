package web

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
)

// Chart options are built here with go-echarts and reach the page as JSON
// (over the websocket for the run page, in a JSON script element for the row
// page), where the page script hands them to ECharts' setOption. Every number
// is finite by the time it is marshalled: log axes get floors and ceilings,
// and NaN becomes a point of its own series.

// Colours shared by every chart, so that "fails" is the same red everywhere.
const (
	colorPass    = "#2f9e44"
	colorFail    = "#e03131"
	colorRef     = "#495057"
	colorAllowed = "#f08c00"
	colorNote    = "#1c7ed6"
)

// outputColors colour the outputs of the row page (ours first).
var outputColors = []string{"#1c7ed6", "#ae3ec9", "#0ca678", "#f76707"}

// errFloor and errCeil bound errors drawn on log axes: exact matches sit on
// the floor, NaN and Inf on the ceiling.
const (
	errFloor = 1e-13
	errCeil  = 10
)

// runCharts builds the run page's charts for every output: "worst" (each
// row's worst error against what the tolerance allows there), "hist" (how
// many tokens have an error of each size) and "heat" (rows by vocabulary
// buckets). Outputs judged statistically get "pvalue" (each row's p-value
// against the threshold) instead of "worst"; speculative outputs with many
// trials add "accept" (acceptance by position against theory) and "emitted"
// (the emitted-length histogram against theory), pooled over the rows
// judged so far, or taken from pooled (by output; nil entries and a nil
// slice mean none) once the judgement is final. Outputs without elementwise
// errors or p-values get a pass/fail strip. tol is the judgement's
// tolerances when known; an output's own (engine.OutputInfo.Tolerances) come first.

// frame is the options every chart shares: no animation, the title centred,
// the legend at the bottom (or none), a tooltip on trigger ("axis" or
// "item") and the grid's margins.
func frame(title opts.Title, legend bool, trigger string, grid opts.Grid) []charts.GlobalOpts {
	title.Left = "center"
	l := opts.Legend{Show: opts.Bool(false)}
	if legend {
		l = opts.Legend{Show: opts.Bool(true), Bottom: "0"}
	}
	return []charts.GlobalOpts{
		charts.WithAnimation(false),
		charts.WithTitleOpts(title),
		charts.WithLegendOpts(l),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: trigger}),
		charts.WithGridOpts(grid),
	}
}
func runCharts(c *chartData, outs []engine.OutputInfo, tol *engine.Tolerances, vocab int, pooled []*engine.SpecStats) []map[string]any {
	res := make([]map[string]any, len(c.Outputs))
	for i := range c.Outputs {
		o := &c.Outputs[i]
		name := ""
		t := tol
		if i < len(outs) {
			name = outs[i].Label()
			if outs[i].Tolerances != nil {
				t = outs[i].Tolerances
			}
		}
		m := map[string]any{}
		if o.HasPValue {
			threshold := 0.0
			if t != nil {
				threshold = t.PValue
			}
			m["pvalue"] = pvalueChart(c.Rows, o, name, threshold)
		} else {
			m["worst"] = worstChart(c.Rows, o, name)
		}
		if o.HasHeat {
			m["hist"] = histChart(o, name, t)
			m["heat"] = heatChart(c, o, name, vocab)
		}
		var spec *engine.SpecStats
		switch {
		case i < len(pooled) && pooled[i] != nil:
			spec = pooled[i]
		case o.Spec != nil:
			spec = o.Spec.stats()
		}
		if spec != nil && len(spec.Positions) > 0 {
			m["accept"] = acceptChart(spec, "Acceptance by position", specSubtitle(spec, name))
			m["emitted"] = emittedChart(spec, "Emitted length", specSubtitle(spec, name))
		}
		res[i] = m
	}
	return res
}

// plainData rewrites every series' data as bare values ([x, y] rather than
// {"value": [x, y]}), which ECharts reads the same and which is half the
// size on the wire.
func plainData(series charts.MultiSeries) {
	for i := range series {
		switch d := series[i].Data.(type) {
		case []opts.ScatterData:
			v := make([]any, len(d))
			for j := range d {
				v[j] = d[j].Value
			}
			series[i].Data = v
		case []opts.LineData:
			v := make([]any, len(d))
			for j := range d {
				v[j] = d[j].Value
			}
			series[i].Data = v
		case []opts.BarData:
			v := make([]any, len(d))
			for j := range d {
				v[j] = d[j].Value
				if d[j].ItemStyle != nil {
					v[j] = d[j] // a bar of its own colour keeps its style
				}
			}
			series[i].Data = v
		case []opts.HeatMapData:
			v := make([]any, len(d))
			for j := range d {
				v[j] = d[j].Value
			}
			series[i].Data = v
		}
	}
}

func clampErr(v float64) float64 {
	switch {
	case math.IsNaN(v) || v > errCeil:
		return errCeil
	case v < errFloor:
		return errFloor
	}
	return v
}

// worstChart draws each judged row's worst |output - reference| as a point,
// green when the row passes and red when it fails, over the line of what the
// tolerance allows at that token; a point above the line breaks tolerance.
func worstChart(rows int, o *outputChartAcc, name string) map[string]any {
	var pass, fail, broken []opts.ScatterData
	var allowed []opts.LineData
	hasErr := false
	for r := 0; r < rows; r++ {
		if o.Pass[r] == 0 {
			continue
		}
		w := o.Worst[r] // NaN: no elementwise error for this output
		if !math.IsNaN(w) {
			hasErr = true
		}
		switch {
		case math.IsNaN(w) && o.Pass[r] > 0:
			pass = append(pass, opts.ScatterData{Value: [2]float64{float64(r), 1}})
		case math.IsNaN(w):
			fail = append(fail, opts.ScatterData{Value: [2]float64{float64(r), 1}})
		case math.IsInf(w, 0):
			broken = append(broken, opts.ScatterData{Value: [2]float64{float64(r), errCeil}})
		case o.Pass[r] > 0:
			pass = append(pass, opts.ScatterData{Value: [2]float64{float64(r), clampErr(w)}})
		default:
			fail = append(fail, opts.ScatterData{Value: [2]float64{float64(r), clampErr(w)}})
		}
		if a := o.Allowed[r]; !math.IsNaN(a) && !math.IsInf(a, 0) {
			allowed = append(allowed, opts.LineData{Value: [2]float64{float64(r), clampErr(a)}})
		}
	}
	c := charts.NewScatter()
	y := opts.YAxis{Type: "log", Name: "worst |output − reference| (probability)", NameLocation: "middle", NameGap: 50, Min: errFloor, Max: errCeil}
	title := "Worst error per row"
	if !hasErr {
		y = opts.YAxis{Type: "value", Name: "fails (1) or passes", Show: opts.Bool(false), Min: 0, Max: 1.5}
		title = "Rows that pass and fail"
	}
	c.SetGlobalOptions(append(frame(opts.Title{Title: title, Subtitle: name}, true, "item", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "row", NameLocation: "middle", NameGap: 25, Min: 0, Max: maxInt(rows-1, 1)}),
		charts.WithYAxisOpts(y),
	)...)
	c.AddSeries("row passes", pass, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorPass}),
		charts.WithScatterChartOpts(opts.ScatterChart{SymbolSize: 5}))
	c.AddSeries("row fails", fail, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
		charts.WithScatterChartOpts(opts.ScatterChart{SymbolSize: 7}))
	if len(broken) > 0 {
		c.AddSeries("NaN or Inf in the output", broken, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
			charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "triangle", SymbolSize: 9}))
	}
	if len(allowed) > 0 {
		l := charts.NewLine()
		l.AddSeries("allowed: atol + rtol·|reference|", allowed,
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), Step: "middle"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
			charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Width: 1.5, Type: "dashed"}))
		c.Overlap(l)
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// histLabels names the error histogram's bins.
var histLabels = func() []string {
	l := make([]string, session.HistBins)
	l[0] = "exact"
	for i := 1; i < session.HistBins; i++ {
		l[i] = fmt.Sprintf("%.0e", session.HistEdge(i))
	}
	l[1] = "<" + fmt.Sprintf("%.0e", session.HistEdge(2))
	l[session.HistBins-1] = "≥1, NaN"
	return l
}()

// histChart draws how many tokens have each size of error, on log-spaced
// bins and a log count axis, with the strict atol marked.
func histChart(o *outputChartAcc, name string, tol *engine.Tolerances) map[string]any {
	data := make([]opts.BarData, session.HistBins)
	for i, n := range o.Hist {
		if n == 0 {
			data[i] = opts.BarData{Value: "-"} // log axes cannot draw 0
			continue
		}
		data[i] = opts.BarData{Value: n}
	}
	c := charts.NewBar()
	c.SetXAxis(histLabels)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "How large the errors are", Subtitle: name}, false, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "60"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "|output − reference| (probability), log scale", NameLocation: "middle", NameGap: 35}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "tokens (log scale)", NameLocation: "middle", NameGap: 50, Min: 1}),
	)...)
	var marks []charts.SeriesOpts
	marks = append(marks, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}), charts.WithBarChartOpts(opts.BarChart{BarCategoryGap: "10%"}))
	if tol != nil && tol.Strict.Atol > 0 {
		marks = append(marks,
			charts.WithMarkLineNameXAxisItemOpts(opts.MarkLineNameXAxisItem{Name: "atol", XAxis: session.HistBin(tol.Strict.Atol)}),
			charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
				LineStyle: &opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "atol " + engine.FormatFloat(tol.Strict.Atol)}}))
	}
	c.AddSeries("tokens", data, marks...)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// heatChart draws rows (grouped when there are many) by vocabulary buckets,
// coloured by log10 of the worst error over what the tolerance allows: above
// 0 breaks the tolerance.
func heatChart(c *chartData, o *outputChartAcc, name string, vocab int) map[string]any {
	lines := len(o.Heat)
	xs := make([]string, session.HeatBuckets)
	span := float64(vocab) / session.HeatBuckets
	for b := range xs {
		xs[b] = fmt.Sprintf("tokens %d–%d", int(float64(b)*span), maxInt(int(float64(b+1)*span)-1, int(float64(b)*span)))
	}
	ys := make([]string, lines)
	judged := make([]bool, lines)
	for l := range ys {
		lo, hi := l*c.RowGroup, minInt((l+1)*c.RowGroup, c.Rows)-1
		if lo == hi {
			ys[l] = fmt.Sprintf("row %d", lo)
		} else {
			ys[l] = fmt.Sprintf("rows %d–%d", lo, hi)
		}
		for r := lo; r <= hi; r++ {
			if o.Pass[r] != 0 {
				judged[l] = true
			}
		}
	}
	var data []opts.HeatMapData
	for l, line := range o.Heat {
		if !judged[l] {
			continue
		}
		for b := 0; b < session.HeatBuckets; b++ {
			v := line[b]
			var x float64
			switch {
			case math.IsInf(v, 1) || math.IsNaN(v):
				x = heatMax
			case v <= 0:
				x = heatMin
			default:
				x = math.Max(heatMin, math.Min(heatMax, math.Log10(v)))
			}
			data = append(data, opts.HeatMapData{Value: [3]float64{float64(b), float64(l), math.Round(x*100) / 100}})
		}
	}
	h := charts.NewHeatMap()
	h.SetGlobalOptions(append(frame(opts.Title{Title: "Where the errors are", Subtitle: name}, false, "item",
		opts.Grid{Left: "90", Right: "20", Top: "60", Bottom: "95"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: xs, Name: "vocabulary, in buckets of token ids", NameLocation: "middle", NameGap: 25, AxisLabel: &opts.AxisLabel{Show: opts.Bool(false)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category", Data: ys, Inverse: opts.Bool(true),
			AxisLabel: &opts.AxisLabel{Show: opts.Bool(true), Interval: strconv.Itoa(maxInt(lines/8-1, 0))}}),
		charts.WithVisualMapOpts(opts.VisualMap{
			Type: "continuous", Min: heatMin, Max: heatMax, Calculable: opts.Bool(false),
			Orient: "horizontal", Left: "center", Bottom: "0",
			Text: []string{"100× what the tolerance allows", "10⁻⁶ of it"},
			// One colour per decade: blues within tolerance, orange at the
			// tolerance, reds over it.
			InRange: &opts.VisualMapInRange{Color: []string{"#e7f5ff", "#d0ebff", "#a5d8ff", "#74c0fc", "#4dabf7", "#1c7ed6", "#f76707", "#e03131", "#a61e1e"}},
		}),
	)...)
	h.AddSeries("worst error ÷ allowed (log10)", data)
	plainData(h.MultiSeries)
	h.Validate()
	return h.JSON()
}

// heatMin and heatMax bound the heatmap's log10(error/allowed).
const (
	heatMin = -6
	heatMax = 2
)

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// rowCharts builds the row page's charts from a row's detail: "probs" (the
// top tokens of every output and the reference), "cdf" (the cumulative
// reference mass with the filter cuts) and "error" (each output's signed
// error on the top tokens against the allowed band).
// Sample rows add "samples" (the draws per token against the expected
// counts); rows with speculative statistics (spec, nil for none) add
// "accept" and "emitted" for the row's own trials.
func rowCharts(d *explain.RowDetail, spec *engine.SpecStats, logScale bool) map[string]any {
	m := map[string]any{}
	if d == nil || d.Invalid != "" {
		return m
	}
	if len(d.Tokens) > 0 {
		m["probs"] = probsChart(d, logScale)
		m["cdf"] = cdfChart(d)
		if len(d.Probs) > 0 {
			m["error"] = errorChart(d)
		}
	}
	if d.Samples != nil && len(d.Samples.Outputs) > 0 {
		m["samples"] = sampleChart(d.Samples, logScale)
	}
	if spec != nil && len(spec.Positions) > 0 {
		sub := specSubtitle(spec, "this row")
		m["accept"] = acceptChart(spec, "Acceptance by position on this row", sub)
		m["emitted"] = emittedChart(spec, "Emitted length on this row", sub)
	}
	return m
}

func tokenLabels(d *explain.RowDetail) []string {
	xs := make([]string, len(d.Tokens))
	for i, t := range d.Tokens {
		xs[i] = fmt.Sprintf("#%d", t.Token)
	}
	return xs
}

// finiteOr returns v, or the ECharts "no value" mark when v is not finite or
// (on a log axis) not positive.
func finiteOr(v float64, logAxis bool) any {
	if math.IsNaN(v) || math.IsInf(v, 0) || logAxis && v <= 0 {
		return "-"
	}
	return v
}

func probsChart(d *explain.RowDetail, logScale bool) map[string]any {
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
	for j, o := range d.Probs {
		vals := make([]opts.BarData, len(d.Tokens))
		for i, t := range d.Tokens {
			if j < len(t.Values) {
				vals[i] = opts.BarData{Value: finiteOr(float64(t.Values[j]), logScale)}
			} else {
				vals[i] = opts.BarData{Value: "-"}
			}
		}
		c.AddSeries(o.Label(), vals, charts.WithItemStyleOpts(opts.ItemStyle{Color: outputColors[j%len(outputColors)]}))
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
	return c.JSON()
}

func cdfChart(d *explain.RowDetail) map[string]any {
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
		ys = append(ys, opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("top-p cut at mass %s", shortFloat(d.Cuts.TopPMass)), YAxis: d.Cuts.TopPMass})
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
	c.Validate()
	return c.JSON()
}

func errorChart(d *explain.RowDetail) map[string]any {
	c := charts.NewBar()
	c.SetXAxis(tokenLabels(d))
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Error per token: output − reference"}, true, "axis", opts.Grid{Left: "80", Right: "20", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, most probable first", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "error (probability)", NameLocation: "middle", NameGap: 65}),
	)...)
	for j, o := range d.Probs {
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
