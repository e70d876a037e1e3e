package view

import (
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// What the run page's charts draw, accumulated row by row as the topic of a
// judgement receives them (web/live), and cloned for each build.

// ChartData accumulates what the run page's charts draw, per output.
type ChartData struct {
	// rows is the batch size, rowGroup the rows per heatmap line.
	rows     int
	rowGroup int
	outputs  []outputChartAcc
}

// outputChartAcc is what one output's charts draw.
type outputChartAcc struct {
	// Worst and Allowed are indexed by row; NaN until the row is judged and
	// for outputs without elementwise errors, +Inf for NaN or Inf errors.
	Worst   []float64
	Allowed []float64
	Pass    []int8 // 0 unjudged, 1 pass, -1 fail
	Hist    [session.HistBins]int
	// Heat holds the worst error/allowed ratio per heatmap line and bucket.
	Heat    [][session.HeatBuckets]float64
	HasHeat bool
	// PValue is indexed by row: the row's smallest p-value, NaN until the
	// row is judged and for rows not judged statistically.
	PValue    []float64
	HasPValue bool
	// Spec pools the speculative counts of the rows judged so far.
	Spec *specPool
}

// NewChartData returns empty chart data for rows rows of each output.
func NewChartData(rows int, outs []engine.OutputInfo) *ChartData {
	group := (rows + maxHeatLines - 1) / maxHeatLines
	if group < 1 {
		group = 1
	}
	c := &ChartData{rows: rows, rowGroup: group, outputs: make([]outputChartAcc, len(outs))}
	for i := range c.outputs {
		o := &c.outputs[i]
		o.Worst = nanSlice(rows)
		o.Allowed = nanSlice(rows)
		o.Pass = make([]int8, rows)
		o.Heat = make([][session.HeatBuckets]float64, (rows+group-1)/group)
		o.PValue = nanSlice(rows)
	}
	return c
}

// Clone returns a copy that later rows do not change.
func (c *ChartData) Clone() *ChartData {
	if c == nil {
		return nil
	}
	d := &ChartData{rows: c.rows, rowGroup: c.rowGroup, outputs: make([]outputChartAcc, len(c.outputs))}
	for i, o := range c.outputs {
		d.outputs[i] = outputChartAcc{
			Worst: append([]float64(nil), o.Worst...), Allowed: append([]float64(nil), o.Allowed...),
			Pass: append([]int8(nil), o.Pass...), Hist: o.Hist,
			Heat: append([][session.HeatBuckets]float64(nil), o.Heat...), HasHeat: o.HasHeat,
			PValue: append([]float64(nil), o.PValue...), HasPValue: o.HasPValue,
		}
		if o.Spec != nil {
			sp := *o.Spec
			sp.Reached, sp.Accepted, sp.TheoryW = slices.Clone(sp.Reached), slices.Clone(sp.Accepted), slices.Clone(sp.TheoryW)
			sp.Emitted, sp.EmittedTheory = slices.Clone(sp.Emitted), slices.Clone(sp.EmittedTheory)
			d.outputs[i].Spec = &sp
		}
	}
	return d
}

// maxHeatLines bounds the heatmap's lines; more rows share a line.
const maxHeatLines = 48

// nanSlice returns n NaNs: values not judged yet.
func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Add records one judged row: its table line, its errors (nil for none) and
// its speculative counts (nil for none).
func (c *ChartData) Add(sum RowSummary, errs *session.RowErrors, spec *RowSpec) {
	// A padded lane is no answer to anyone: the table shows it greyed, the
	// charts leave it out.
	if sum.Padding || sum.Output < 0 || sum.Output >= len(c.outputs) || sum.Row < 0 || sum.Row >= c.rows {
		return
	}
	o := &c.outputs[sum.Output]
	r := sum.Row
	if sum.PValue != nil {
		o.PValue[r] = float64(*sum.PValue)
		o.HasPValue = true
	}
	if spec != nil {
		if o.Spec == nil {
			o.Spec = &specPool{}
		}
		o.Spec.add(spec)
	}
	o.Pass[r] = 1
	if !sum.Pass {
		o.Pass[r] = -1
	}
	if sum.Worst != nil {
		w := float64(*sum.Worst)
		if math.IsNaN(w) {
			w = math.Inf(1) // a NaN output: drawn with the infinite errors
		}
		o.Worst[r] = w
	}
	if sum.Allowed != nil {
		o.Allowed[r] = float64(*sum.Allowed)
	}
	if e := errs; e != nil {
		for i, n := range e.Hist {
			o.Hist[i] += n
		}
		line := &o.Heat[r/c.rowGroup]
		for b, v := range e.Buckets {
			x := float64(v)
			if math.IsNaN(x) {
				x = math.Inf(1)
			}
			if b < session.HeatBuckets && x > line[b] {
				line[b] = x
			}
		}
		o.HasHeat = true
	}
}
