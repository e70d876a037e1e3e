package view

import (
	"encoding/json"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// Chart options are built in this package with go-echarts and reach the
// page as JSON (over the websocket for the run page, in a JSON script
// element for the row and teaching pages), where the page script hands them
// to ECharts' setOption. Every number is finite by the time it is
// marshalled: log axes get floors and ceilings, and NaN becomes a point of
// its own series. This file holds what every chart shares: colours, the
// frame, and the rewriting of values for the wire.

// Colours shared by every chart, so that "fails" is the same red everywhere.
const (
	colorPass    = "#2f9e44"
	colorFail    = "#e03131"
	colorRef     = "#495057"
	colorAllowed = "#f08c00"
	colorNote    = "#1c7ed6"
	// The draft q and the residual.
	colorDraft    = "#ae3ec9"
	colorResidual = "#f76707"
)

// outputColors colour the outputs of the row page (ours first), and
// outputSymbols mark them when they are drawn as lines of markers.
var (
	outputColors  = []string{"#1c7ed6", "#ae3ec9", "#0ca678", "#f76707", "#e64980", "#5c940d", "#1098ad", "#7048e8"}
	outputSymbols = []string{"circle", "rect", "triangle", "diamond", "pin", "roundRect", "arrow", "emptyCircle"}
)

// errFloor and errCeil bound errors drawn on log axes: exact matches sit on
// the floor, NaN and Inf on the ceiling.
const (
	errFloor = 1e-13
	errCeil  = 10
)

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

// finiteOr returns v, or the ECharts "no value" mark when v is not finite or
// (on a log axis) not positive.
func finiteOr(v float64, logAxis bool) any {
	if math.IsNaN(v) || math.IsInf(v, 0) || logAxis && v <= 0 {
		return "-"
	}
	return v
}

// barsFromFloor makes the bars of a chart on a log value axis rise from
// the axis's floor (its min) rather than hang from 1, where ECharts starts
// them unless the axis names a startValue.
func barsFromFloor(opt map[string]any) map[string]any {
	axes, ok := opt["yAxis"].([]opts.YAxis)
	if !ok {
		return opt
	}
	out := make([]any, len(axes))
	for i, ax := range axes {
		out[i] = ax
		if ax.Type != "log" || ax.Min == nil {
			continue
		}
		b, err := json.Marshal(ax)
		if err != nil {
			continue
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		m["startValue"] = ax.Min
		out[i] = m
	}
	opt["yAxis"] = out
	return opt
}
