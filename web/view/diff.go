package view

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// The diff page: run B (after) against run A (before), as engine/diff
// compared them. Every verdict and change here is the comparison's; this
// file only puts it in the page's words and charts.

// DiffRun is one side of the diff page.
type DiffRun struct {
	Run  store.Run
	Info session.DumpInfo
	J    store.Judgement
}

// DiffPage is what the diff page shows.
type DiffPage struct {
	A, B DiffRun
	Diff *diff.Diff
	Tol  *engine.Tolerances
	// Query names the tolerances both runs were judged with ("" for their
	// own); Output is the index in Diff.Outputs the page looks at (?out=),
	// AllRows whether the row table lists every row (?rows=all).
	Query   url.Values
	Output  int
	AllRows bool
	Charts  map[string]any
}

// DiffURL links the diff of runs a and b with the page's state.
func DiffURL(a, b string, q url.Values) string {
	return WithQuery("/runs/"+a+"/diff/"+b, q)
}

// DiffQuery is the diff page's state in the URL, with one key changed
// (value "" removes it).
func DiffQuery(d *DiffPage, key, value string) url.Values {
	q := ToleranceValues(d.Tol)
	if q == nil {
		q = url.Values{}
	}
	if d.Output > 0 && d.Output < len(d.Diff.Outputs) {
		q.Set("out", d.Diff.Outputs[d.Output].Name)
	}
	if d.AllRows {
		q.Set("rows", "all")
	}
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	return q
}

// PickOutput returns the index of the output named name, else the first
// output that changed a row, else the first that fails in either run.
func PickOutput(d *diff.Diff, name string) int {
	for i, o := range d.Outputs {
		if name != "" && o.Name == name {
			return i
		}
	}
	for i, o := range d.Outputs {
		if len(o.Fixed)+len(o.Broken) > 0 {
			return i
		}
	}
	for i, o := range d.Outputs {
		if !o.PassA || !o.PassB {
			return i
		}
	}
	return 0
}

// Shown returns the output the page looks at, or nil.
func (d *DiffPage) Shown() *diff.Output {
	if d.Output < 0 || d.Output >= len(d.Diff.Outputs) {
		return nil
	}
	return &d.Diff.Outputs[d.Output]
}

// RunName names a side: run id and its file.
func RunName(r DiffRun) string { return "run " + r.Run.ID + " (" + r.Run.FileName + ")" }

// DiffClass is the diff's CSS class: fail when something got worse.
func DiffClass(d *diff.Diff) string {
	if d.Worse {
		return "fail"
	}
	return "pass"
}

// SideVerdict writes a run's verdict: "pass" or "FAIL (3 rows)".
func SideVerdict(pass bool, failed int) string {
	if pass {
		return "pass"
	}
	if failed == 0 {
		return "FAIL (over all rows together)"
	}
	return "FAIL (" + Plural(failed, "row") + ")"
}

// OutputName names an output of a diff, with its name in B when it differs.
func OutputName(o diff.Output) string {
	n := o.Name
	if o.NameB != "" && o.NameB != o.Name {
		n += " → " + o.NameB
	}
	if o.External {
		return n + " (from the dump)"
	}
	return n + " (ours)"
}

// OutputSide writes an output's verdict in one run, or that the run lacks it.
func OutputSide(in, pass bool, failed int) string {
	if !in {
		return "not in this run"
	}
	return SideVerdict(pass, failed)
}

// DriftText writes a drift, or "—".
func DriftCell(f *engine.Float) string {
	if f == nil {
		return "—"
	}
	return engine.FormatSig(float64(*f), 4)
}

// RowsList writes rows as "2, 5" (or "—").
func RowsList(rows []int) string {
	if len(rows) == 0 {
		return "—"
	}
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ", ")
}

// DiffRows returns the rows the row table lists: those that changed, or
// every row.
func DiffRows(o *diff.Output, all bool) []diff.Row {
	if o == nil {
		return nil
	}
	if all {
		return o.Rows
	}
	var rows []diff.Row
	for _, r := range o.Rows {
		if r.Change != "" {
			rows = append(rows, r)
		}
	}
	return rows
}

// ChangeWords says a row's change in a few words.
func ChangeWords(c string) string {
	switch c {
	case "fixed":
		return "fixed: fail → pass"
	case "broken":
		return "broken: pass → fail"
	case "worse":
		return "worse: drift past the strict tolerance"
	case "better":
		return "better: drift back within the strict tolerance"
	}
	return "unchanged"
}

// ChangeClass is a row change's CSS class.
func ChangeClass(c string) string {
	switch c {
	case "fixed", "better":
		return "pass"
	case "broken", "worse":
		return "fail"
	}
	return ""
}

// RowSide writes one side of a diff row: its verdict and drift.
func RowSide(pass bool, drift *engine.Float, within *bool) string {
	s := "pass"
	if !pass {
		s = "FAIL"
	}
	if drift != nil {
		s += ", max |err| " + engine.FormatSig(float64(*drift), 4)
		if within != nil && !*within {
			s += " (past the strict tolerance)"
		}
	}
	return s
}

// PositionCell writes one side of a position's acceptance: the rate and its
// 95% interval.
func PositionCell(p engine.PositionRate) string {
	if p.Reached == 0 {
		return "not reached"
	}
	return fmt.Sprintf("%s [%s, %s] of %d (theory %s)", engine.FormatSig(float64(p.Rate), 4), engine.FormatSig(float64(p.Lo), 4), engine.FormatSig(float64(p.Hi), 4), p.Reached, engine.FormatSig(float64(p.Theory), 4))
}

// PositionsApart says whether a position's two intervals are disjoint: the
// acceptance moved by more than chance.
func PositionsApart(p diff.Position) bool {
	if p.A.Reached == 0 || p.B.Reached == 0 {
		return false
	}
	return p.B.Lo > p.A.Hi || p.A.Lo > p.B.Hi
}

// InputsText says whether both runs judged the same inputs.
func InputsText(d *diff.Diff) string {
	if d.Inputs.Same {
		return "Both runs judged the same inputs: their rows are compared one by one."
	}
	return Sentence("The inputs differ: "+d.Inputs.Why) + " Only the summaries are compared, not row by row."
}

// DiffCharts builds the diff page's charts for output o: "drift" (each
// row's greatest error before and after, float kinds on the same inputs)
// and "positions" (a speculative output's acceptance by position before and
// after, with both intervals).
func DiffCharts(o *diff.Output) map[string]any {
	m := map[string]any{}
	if o == nil {
		return m
	}
	has := false
	for _, r := range o.Rows {
		if r.DriftA != nil || r.DriftB != nil {
			has = true
			break
		}
	}
	if has {
		m["drift"] = driftDiffChart(o)
	}
	if len(o.Positions) > 0 {
		m["positions"] = positionsDiffChart(o)
	}
	return m
}

// driftDiffChart draws each row's greatest error before (grey) and after
// (blue, red where the row fails after) as points on a log axis, joined by
// a thin line per row so that a row's move reads at a glance.
func driftDiffChart(o *diff.Output) map[string]any {
	val := func(f *engine.Float) (float64, bool) {
		if f == nil {
			return 0, false
		}
		v := float64(*f)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errCeil, true
		}
		return clampErr(v), true
	}
	var before, afterPass, afterFail []opts.ScatterData
	var moves []opts.LineData
	for _, r := range o.Rows {
		x := float64(r.Row)
		va, okA := val(r.DriftA)
		vb, okB := val(r.DriftB)
		if okA {
			before = append(before, opts.ScatterData{Value: [2]float64{x, va}})
		}
		if okB && r.PassB {
			afterPass = append(afterPass, opts.ScatterData{Value: [2]float64{x, vb}})
		} else if okB {
			afterFail = append(afterFail, opts.ScatterData{Value: [2]float64{x, vb}})
		}
		if okA && okB {
			// A gap (null) between rows keeps each row's segment apart.
			moves = append(moves, opts.LineData{Value: [2]float64{x, va}}, opts.LineData{Value: [2]float64{x, vb}}, opts.LineData{Value: "-"})
		}
	}
	c := charts.NewScatter()
	yname := "max |output − reference|"
	if o.Kind == "logits" {
		yname = "max |Δlogit| against the golden"
	}
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Each row's greatest error, before and after", Subtitle: OutputName(*o)}, true, "item", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "row", NameLocation: "middle", NameGap: 25, Min: -0.5, Max: float64(len(o.Rows)) - 0.5}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: yname, NameLocation: "middle", NameGap: 50, Min: errFloor, Max: errCeil,
			AxisLine: &opts.AxisLine{OnZero: opts.Bool(false)}}),
	)...)
	c.AddSeries("before (A)", before, charts.WithItemStyleOpts(opts.ItemStyle{Color: "#868e96"}),
		charts.WithScatterChartOpts(opts.ScatterChart{SymbolSize: 9}))
	c.AddSeries("after (B), row passes", afterPass, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorPass}),
		charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "diamond", SymbolSize: 11}))
	c.AddSeries("after (B), row fails", afterFail, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
		charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "diamond", SymbolSize: 13}))
	l := charts.NewLine()
	l.AddSeries("change", moves, charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), ConnectNulls: opts.Bool(false)}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: "#adb5bd"}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: "#adb5bd", Width: 1}))
	c.Overlap(l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

func positionsDiffChart(o *diff.Output) map[string]any {
	n := len(o.Positions)
	xs := make([]string, n)
	rate := [2][]opts.BarData{make([]opts.BarData, n), make([]opts.BarData, n)}
	band := [2][]opts.BoxPlotData{make([]opts.BoxPlotData, n), make([]opts.BoxPlotData, n)}
	theory := [2][]opts.LineData{make([]opts.LineData, n), make([]opts.LineData, n)}
	sameTheory := true
	for i, p := range o.Positions {
		xs[i] = fmt.Sprintf("position %d", p.Position)
		for k, pr := range []engine.PositionRate{p.A, p.B} {
			rate[k][i] = opts.BarData{Value: finiteOr(float64(pr.Rate), false)}
			lo, r, hi := float64(pr.Lo), float64(pr.Rate), float64(pr.Hi)
			if finite(lo) && finite(hi) && finite(r) && pr.Reached > 0 {
				band[k][i] = opts.BoxPlotData{Value: []float64{lo, lo, r, hi, hi}}
			} else {
				band[k][i] = opts.BoxPlotData{Value: []any{"-", "-", "-", "-", "-"}}
				rate[k][i] = opts.BarData{Value: "-"}
			}
		}
		theory[0][i] = opts.LineData{Value: finiteOr(float64(p.A.Theory), false)}
		theory[1][i] = opts.LineData{Value: finiteOr(float64(p.B.Theory), false)}
		sameTheory = sameTheory && math.Abs(float64(p.A.Theory-p.B.Theory)) < 1e-9
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Acceptance by position, before and after", Subtitle: OutputName(*o) + "; boxes: 95% intervals"}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "draft position", NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "acceptance rate", NameLocation: "middle", NameGap: 45, Min: 0, Max: 1}),
	)...)
	c.AddSeries("before (A)", rate[0], charts.WithItemStyleOpts(opts.ItemStyle{Color: "#adb5bd"}), charts.WithBarChartOpts(opts.BarChart{BarGap: "10%"}))
	c.AddSeries("after (B)", rate[1], charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote, Opacity: opts.Float(0.8)}))
	ba := charts.NewBoxPlot()
	ba.AddSeries("95% interval before", band[0], charts.WithItemStyleOpts(opts.ItemStyle{Color: "rgba(0,0,0,0)", BorderColor: "#495057", BorderWidth: 2}))
	bb := charts.NewBoxPlot()
	bb.AddSeries("95% interval after", band[1], charts.WithItemStyleOpts(opts.ItemStyle{Color: "rgba(0,0,0,0)", BorderColor: "#1864ab", BorderWidth: 2}))
	l := charts.NewLine()
	name := "theory"
	if !sameTheory {
		name = "theory before (A)"
	}
	l.AddSeries(name, theory[0],
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 10}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2}))
	if !sameTheory {
		l.AddSeries("theory after (B)", theory[1],
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "triangle", SymbolSize: 10}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}),
			charts.WithLineStyleOpts(opts.LineStyle{Color: colorResidual, Type: "dotted", Width: 2}))
	}
	c.Overlap(ba, bb, l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// CompareCandidate is a run the run page offers to compare with.
type CompareCandidate struct {
	ID       string
	FileName string
	When     string
	Verdict  string
	// URL is the diff page of the two runs, the older one as A (before).
	URL string
}

// RunRowLinker links row r of run id with the tolerances of q.
func RunRowLinker(id string, q url.Values) func(int) string {
	return func(r int) string { return WithQuery(fmt.Sprintf("/runs/%s/rows/%d", id, r), q) }
}
