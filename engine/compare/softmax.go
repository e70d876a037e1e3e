package compare

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// judgeProbs judges row r of a float output against both references.
func (w *worker) judgeProbs(i int, p *plan, r int, rep *engine.RowReport) {
	s := w.dist(r, p.renorm, false, p.eps)
	if !s.Valid() {
		invalidRow(rep, r, s.Invalid, s.InvalidRule)
		return
	}
	n := w.dist(r, p.renorm, true, p.eps)
	row := w.readProbs(i, p, r, s, n)
	h := &w.hists[i]

	used := row.compare(&w.strict, s, p.tol.Strict, p.underflow, w.bufs, w.groupRef(s))
	ds := w.strict.drift
	ds.Reference = "strict"
	rep.Strict = &ds

	// At temperature 0 or 1 the native reference is the strict one (scaling
	// by 1 is exact): the errors are the same, only the tolerance differs.
	if n == s {
		retolerate(&w.native, &w.strict, row.out, used, p.tol.Native, row.g)
		h.nativeAbs.add(w.bufs.absHist, w.strict.loAbs, w.strict.topAbs, true)
		h.nativeRel.add(w.bufs.relHist, w.strict.loRel, w.strict.topRel, true)
	}
	h.strictAbs.add(w.bufs.absHist, w.strict.loAbs, w.strict.topAbs, false)
	h.strictRel.add(w.bufs.relHist, w.strict.loRel, w.strict.topRel, false)
	var nat *measurement
	switch {
	case n == s:
		nat = &w.native
	case n.Valid():
		row.compare(&w.native, n, p.tol.Native, p.underflow, w.bufs, w.groupRef(n))
		h.nativeAbs.add(w.bufs.absHist, w.native.loAbs, w.native.topAbs, false)
		h.nativeRel.add(w.bufs.relHist, w.native.loRel, w.native.topRel, false)
		nat = &w.native
	default:
		rep.AddFinding(note(n.InvalidRule, -1, "row %d: no native reference (%s); judged against the strict reference alone", r, n.Invalid))
	}
	if nat != nil {
		dn := nat.drift
		dn.Reference = "native"
		rep.Native = &dn
	}
	probsFindings(rep, r, &w.strict, nat, w.j.vocab)
}

// groupRows lets rows be read by group; the tests turn it off to compare
// both ways of measuring a row.
var groupRows = true

// giveUpGroups is the number of rows in a row an output may fail to be
// uniform per pattern before a worker stops reading it by group: a kernel
// whose values vary within a pattern (noise, another reduction order per
// token) does so on every row.
const giveUpGroups = 4

// probsRow is one output row ready to be measured: token by token (g nil,
// out holds the row) or by group of logit pattern (out holds one value per
// group of g).
type probsRow struct {
	g    *rowGroups
	out  []float64
	scan outputScan
}

// readProbs reads row r of plan i's probabilities: by group when the logits
// are 16-bit, every reference in ds that has a distribution is uniform per
// pattern, and so is the output; token by token otherwise.
func (w *worker) readProbs(i int, p *plan, r int, ds ...*ref.Dist) probsRow {
	v := w.j.vocab
	if groupRows && w.ungrouped[i] < giveUpGroups && byPattern(ds) {
		if g := w.groups(r); g != nil {
			vals, ok := g.readGroups(p.out.Probs, r, w.groupVals[i])
			w.groupVals[i] = vals
			if ok {
				w.read[i], w.ungrouped[i] = readGroups, 0
				return probsRow{g: g, out: vals, scan: g.scanGroups(vals)}
			}
			w.ungrouped[i]++
		}
	}
	out := w.row(i)
	w.read[i] = readTokens
	return probsRow{out: out, scan: decodeRow(p.out.Probs, r*v, out)}
}

// byPattern reports whether every reference of ds that has a distribution
// gives all tokens of one logit pattern the same values.
func byPattern(ds []*ref.Dist) bool {
	for _, d := range ds {
		if d.Valid() && !d.ByPattern {
			return false
		}
	}
	return true
}

// compare measures the row against d (compareRow, or compareGroups) and
// returns the reference it compared with, in the row's elements.
func (pr *probsRow) compare(m *measurement, d *ref.Dist, tol engine.Tolerance, underflow float64, b *rowBuffers, gr *groupRef) []float64 {
	if pr.g == nil {
		return compareRow(m, pr.out, &pr.scan, d, tol, underflow, b)
	}
	return compareGroups(m, pr.g, pr.out, &pr.scan, d, tol, underflow, b, gr)
}
