package view

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// RunCharts builds the run page's charts for every output: "worst" (each
// row's worst error against what the tolerance allows there), "hist" (how
// many tokens have an error of each size) and "heat" (rows by vocabulary
// buckets). Outputs judged statistically get "pvalue" (each row's p-value
// against the threshold) instead of "worst"; speculative outputs with many
// trials add "accept" (acceptance by position against theory) and "emitted"
// (the emitted-length histogram against theory), pooled over the rows
// judged so far, or taken from pooled (by output; nil entries and a nil
// slice mean none) once the judgement is final. Outputs without elementwise
// errors or p-values get a pass/fail strip. tol is the judgement's
// tolerances when known; an output's own (engine.OutputInfo.Tolerances)
// come first.
func RunCharts(c *ChartData, outs []engine.OutputInfo, tol *engine.Tolerances, vocab int, pooled []*engine.SpecStats) []map[string]any {
	res := make([]map[string]any, len(c.outputs))
	for i := range c.outputs {
		o := &c.outputs[i]
		name, kind := "", ""
		t := tol
		if i < len(outs) {
			name, kind = outs[i].Label(), outs[i].Kind
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
			m["pvalue"] = pvalueChart(c.rows, o, name, threshold)
		} else {
			m["worst"] = worstChart(c.rows, o, name, kind)
		}
		if o.HasHeat {
			m["hist"] = histChart(o, name, kind, t)
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

// worstChart draws each judged row's worst |output - reference| as a point,
// green when the row passes and red when it fails, over the line of what the
// tolerance allows at that token; a point above the line breaks tolerance.
// A logits output's errors are |Δlogit| against the golden logits.
func worstChart(rows int, o *outputChartAcc, name, kind string) map[string]any {
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
	yname := "worst |output − reference| (probability)"
	switch kind {
	case "logits":
		yname = "worst |Δlogit| against the golden"
	case "logprobs":
		yname = "worst |Δlogprob| (nats)"
	}
	y := opts.YAxis{Type: "log", Name: yname, NameLocation: "middle", NameGap: 50, Min: errFloor, Max: errCeil}
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
		l[i] = engine.FormatSig(session.HistEdge(i), 1)
	}
	l[1] = "<" + engine.FormatSig(session.HistEdge(2), 1)
	l[session.HistBins-1] = "≥1, NaN"
	return l
}()

// histChart draws how many tokens have each size of error, on log-spaced
// bins and a log count axis, with the strict atol marked; a logprobs
// output's errors are in nats.
func histChart(o *outputChartAcc, name, kind string, tol *engine.Tolerances) map[string]any {
	data := make([]opts.BarData, session.HistBins)
	for i, n := range o.Hist {
		if n == 0 {
			data[i] = opts.BarData{Value: "-"} // log axes cannot draw 0
			continue
		}
		data[i] = opts.BarData{Value: n}
	}
	xname := "|output − reference| (probability), log scale"
	if kind == "logprobs" {
		xname = "|output − reference| (nats), log scale"
	}
	c := charts.NewBar()
	c.SetXAxis(histLabels)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "How large the errors are", Subtitle: name}, false, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "60"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: xname, NameLocation: "middle", NameGap: 35}),
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
func heatChart(c *ChartData, o *outputChartAcc, name string, vocab int) map[string]any {
	lines := len(o.Heat)
	xs := make([]string, session.HeatBuckets)
	span := float64(vocab) / session.HeatBuckets
	for b := range xs {
		xs[b] = fmt.Sprintf("tokens %d–%d", int(float64(b)*span), maxInt(int(float64(b+1)*span)-1, int(float64(b)*span)))
	}
	ys := make([]string, lines)
	judged := make([]bool, lines)
	for l := range ys {
		lo, hi := l*c.rowGroup, minInt((l+1)*c.rowGroup, c.rows)-1
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
