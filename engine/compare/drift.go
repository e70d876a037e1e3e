package compare

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// runDrift summarises the rows' drifts against one reference (pick selects
// it) into the output's: counts are summed, the worst values kept (with
// Index = row*V + token), the means weighted by elements, and the
// percentiles read from the merged histograms (see runHist). It returns nil
// when no row was compared with that reference.
func runDrift(name string, tol engine.Tolerance, rows []engine.RowReport, v int, pick func(*engine.RowReport) *engine.Drift, abs, rel *runHist) *engine.Drift {
	d := &engine.Drift{Reference: name, Tolerance: tol}
	var sumAbs, sumRel float64
	seen := false
	for i := range rows {
		rd := pick(&rows[i])
		if rd == nil {
			continue
		}
		row := rows[i].Row
		if !seen {
			d.Abs.Max, d.Rel.Max = -1, -1
			seen = true
		}
		d.Elements += rd.Elements
		d.Mismatched += rd.Mismatched
		d.ArgmaxAgree += rd.ArgmaxAgree
		d.NaN += rd.NaN
		d.Inf += rd.Inf
		d.SupportMissing += rd.SupportMissing
		d.SupportExtra += rd.SupportExtra
		for _, f := range [][2]*engine.Float{
			{&d.RowSumError, &rd.RowSumError}, {&d.KL, &rd.KL}, {&d.TV, &rd.TV},
			{&d.MissingMass, &rd.MissingMass}, {&d.ExtraMass, &rd.ExtraMass},
			{&d.MinAtol, &rd.MinAtol}, {&d.MinRtol, &rd.MinRtol},
		} {
			*f[0] = worse(*f[0], *f[1])
		}
		if exceeds(rd.Abs.Max, d.Abs.Max) {
			d.Abs.Max, d.Abs.Index = rd.Abs.Max, row*v+rd.Abs.Index
		}
		if exceeds(rd.Rel.Max, d.Rel.Max) {
			d.Rel.Max, d.Rel.Index = rd.Rel.Max, row*v+rd.Rel.Index
		}
		sumAbs += float64(rd.Abs.Mean) * float64(rd.Elements)
		sumRel += float64(rd.Rel.Mean) * float64(rd.Elements)
	}
	if !seen {
		return nil
	}
	n := float64(max(d.Elements, 1))
	d.MismatchShare = engine.Float(float64(d.Mismatched) / n)
	d.Abs.Mean, d.Rel.Mean = engine.Float(sumAbs/n), engine.Float(sumRel/n)
	abs.percentiles(&d.Abs)
	rel.percentiles(&d.Rel)
	return d
}

// worse returns the greater of a and b, NaN when either is.
func worse(a, b engine.Float) engine.Float {
	if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) {
		return engine.Float(math.NaN())
	}
	return max(a, b)
}

// exceeds reports whether a is a worse maximum than b: greater, or NaN where
// b is not (the first row holding the worst value keeps it).
func exceeds(a, b engine.Float) bool {
	an, bn := math.IsNaN(float64(a)), math.IsNaN(float64(b))
	return an && !bn || !an && !bn && a > b
}
