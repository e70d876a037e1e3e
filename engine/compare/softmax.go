package compare

import "github.com/sampviz/sampviz/engine"

// judgeProbs judges row r of a float output against both references.
func (w *worker) judgeProbs(i int, p *plan, r int, rep *engine.RowReport) {
	s := w.dist(r, p.renorm, false, p.eps)
	if !s.Valid() {
		invalidRow(rep, r, s.Invalid, s.InvalidRule)
		return
	}
	v := w.j.vocab
	out := w.row(i)
	scan := decodeRow(p.out.Probs, r*v, out)
	w.decoded[i] = true
	h := &w.hists[i]

	used := compareRow(&w.strict, out, &scan, s, p.tol.Strict, p.underflow, w.bufs)
	ds := w.strict.drift
	ds.Reference = "strict"
	rep.Strict = &ds

	// At temperature 0 or 1 the native reference is the strict one (scaling
	// by 1 is exact): the errors are the same, only the tolerance differs.
	n := w.dist(r, p.renorm, true, p.eps)
	if n == s {
		retolerate(&w.native, &w.strict, out, used, p.tol.Native)
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
		compareRow(&w.native, out, &scan, n, p.tol.Native, p.underflow, w.bufs)
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
	probsFindings(rep, r, &w.strict, nat, v)
}
