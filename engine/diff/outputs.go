package diff

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// output compares one output in A (oa) and B (ob), either nil, and records
// in d what got worse and what got better: on the same inputs row by row,
// on different inputs as a whole.
func (d *Diff) output(oa, ob *engine.OutputReport) Output {
	var o Output
	switch {
	case oa == nil:
		o = Output{Name: ob.Name, External: ob.External, Kind: ob.Kind, InB: true, PassB: ob.Pass, FailedB: ob.FailedRows, DriftB: drift(ob)}
		return o
	case ob == nil:
		o = Output{Name: oa.Name, External: oa.External, Kind: oa.Kind, InA: true, PassA: oa.Pass, FailedA: oa.FailedRows, DriftA: drift(oa)}
		return o
	}
	o = Output{
		Name: oa.Name, External: oa.External, Kind: oa.Kind, InA: true, InB: true,
		PassA: oa.Pass, PassB: ob.Pass, FailedA: oa.FailedRows, FailedB: ob.FailedRows,
		DriftA: drift(oa), DriftB: drift(ob), Fixed: []int{}, Broken: []int{},
	}
	if ob.Name != oa.Name {
		o.NameB = ob.Name
	}
	if d.Inputs.Same {
		d.rows(&o, oa, ob)
	}
	switch {
	case oa.Pass && !ob.Pass && len(o.Broken) == 0:
		why := "its rows together"
		if len(ob.Violations) > 0 {
			why = ob.Violations[0]
		}
		d.Why = append(d.Why, fmt.Sprintf("%s passed in A and fails in B: %s", o.Name, why))
	case !oa.Pass && ob.Pass:
		d.Better = append(d.Better, fmt.Sprintf("%s failed in A and passes in B", o.Name))
	case !d.Inputs.Same && within(oa.Strict) && !within(ob.Strict):
		d.Why = append(d.Why, fmt.Sprintf("%s: the greatest error grew past the tolerance, from %s to %s", o.Name, fmtNum(o.DriftA), fmtNum(o.DriftB)))
	}
	if oa.Spec != nil && ob.Spec != nil {
		for i := range min(len(oa.Spec.Positions), len(ob.Spec.Positions)) {
			o.Positions = append(o.Positions, Position{Position: i, A: oa.Spec.Positions[i], B: ob.Spec.Positions[i]})
		}
	}
	return o
}

// rows compares the rows of an output in two runs on the same inputs.
func (d *Diff) rows(o *Output, oa, ob *engine.OutputReport) {
	for k := range min(len(oa.Rows), len(ob.Rows)) {
		ra, rb := &oa.Rows[k], &ob.Rows[k]
		row := Row{Row: ra.Row, PassA: ra.Pass, PassB: rb.Pass, DriftA: rowDrift(ra), DriftB: rowDrift(rb), WithinA: rowWithin(ra), WithinB: rowWithin(rb)}
		if !rb.Pass {
			row.ViolationsB = rb.Violations
		}
		switch {
		case ra.Pass && !rb.Pass:
			row.Change = "broken"
			o.Broken = append(o.Broken, ra.Row)
			why := "a violation"
			if len(rb.Violations) > 0 {
				why = rb.Violations[0]
			} else if len(ob.Violations) > 0 {
				why = ob.Violations[0]
			}
			d.Why = append(d.Why, fmt.Sprintf("row %d of %s went from pass to fail: %s", ra.Row, o.Name, why))
		case !ra.Pass && rb.Pass:
			row.Change = "fixed"
			o.Fixed = append(o.Fixed, ra.Row)
			d.Better = append(d.Better, fmt.Sprintf("row %d of %s went from fail to pass", ra.Row, o.Name))
		case rb.Pass && row.WithinA != nil && row.WithinB != nil && *row.WithinA && !*row.WithinB:
			row.Change = "worse"
			d.Why = append(d.Why, fmt.Sprintf("row %d of %s: the drift grew past the strict tolerance, from %s to %s (it passes on the native reference alone)", ra.Row, o.Name, fmtNum(row.DriftA), fmtNum(row.DriftB)))
		case ra.Pass && row.WithinA != nil && row.WithinB != nil && !*row.WithinA && *row.WithinB:
			row.Change = "better"
		}
		o.Rows = append(o.Rows, row)
	}
}

// drift returns an output's greatest error over the run, or nil.
func drift(o *engine.OutputReport) *engine.Float {
	if o.Strict == nil {
		return nil
	}
	v := o.Strict.Abs.Max
	return &v
}

// rowDrift returns a row's greatest error against the strict reference (or
// the golden logits), or nil.
func rowDrift(r *engine.RowReport) *engine.Float {
	if r.Strict == nil {
		return nil
	}
	v := r.Strict.Abs.Max
	return &v
}

// rowWithin says whether every error of a row is within its strict
// tolerance, or nil when the row has no drift.
func rowWithin(r *engine.RowReport) *bool {
	if r.Strict == nil {
		return nil
	}
	ok := within(r.Strict)
	return &ok
}

// within reports whether a drift is within its tolerance: the least atol
// that passes is no more than the tolerance's (NaN is not within).
func within(d *engine.Drift) bool {
	return d != nil && d.MinAtol <= engine.Float(d.Tolerance.Atol)
}

// fmtNum writes an optional number in two significant digits.
func fmtNum(v *engine.Float) string {
	if v == nil {
		return "none"
	}
	return engine.FormatSig(float64(*v), 2)
}
