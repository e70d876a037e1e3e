package compare

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// signBit clears the sign of a NaN's bits, so that every error sorts as a
// non-negative value.
const signBit = 1 << 63

// measurement is one row of one float output against one reference.
type measurement struct {
	drift engine.Drift
	// worst is the mismatched token with the greatest absolute difference
	// (-1 when no finite difference is out of tolerance), ref its reference.
	worst              int
	worstAbs, worstRef float64
	// missing: tokens the reference keeps and the output zeroes; extra: the
	// output keeps and the reference drops; boundaryKept and boundaryDropped:
	// boundary tokens the output decides otherwise than the reference.
	missing, extra, boundaryKept, boundaryDropped supportDiff
	firstNaN, firstInf                            int
	rowSum                                        float64
	// renormalised is set when the reference was renormalised over the
	// output's support (boundary differences only).
	renormalised bool
	// The row histograms are nonzero only at bucket 0 and within
	// [loAbs, topAbs] and [loRel, topRel].
	loAbs, topAbs, loRel, topRel int
	// measured is the number of error bits stored (the rest are zeros).
	measured int
}

// supportOK reports whether the row breaks no support rule.
func (m *measurement) supportOK() bool { return m.missing.n == 0 && m.extra.n == 0 }

// ok reports whether the row is within tolerance with no support violation.
func (m *measurement) ok() bool { return m.drift.Mismatched == 0 && m.supportOK() }

// rowBuffers is the scratch memory of measure.
type rowBuffers struct {
	absBits, relBits []uint64
	// absHist and relHist are histLanes histograms each (see countKeys);
	// after measure, the first holds the counts.
	absHist, relHist []uint32
	renorm           []float64
	logged, diffs    []int32
	// active, outC and refC hold a sparse row's compacted tokens.
	active     []int32
	outC, refC []float64
	sel        selector
}

// newRowBuffers returns the scratch memory for rows of v tokens.
func newRowBuffers(v int) *rowBuffers {
	return &rowBuffers{
		absBits: make([]uint64, v),
		relBits: make([]uint64, v),
		absHist: make([]uint32, histLanes*histBins),
		relHist: make([]uint32, histLanes*histBins),
		renorm:  make([]float64, v),
		logged:  make([]int32, v),
		diffs:   make([]int32, v),
		active:  make([]int32, 0, v),
		outC:    make([]float64, v),
		refC:    make([]float64, v),
	}
}

// outputScan is what one output row says on its own, whatever the
// reference: it is computed once per row and shared by both measurements.
type outputScan struct {
	rowSum             float64
	argmax             int // first index of the greatest value (-1: none)
	nan, inf           int
	firstNaN, firstInf int
}

// decodeRow reads elements [start, start+len(out)) of t into out and scans
// them (scanOutput), in one pass for float32 outputs.
func decodeRow(t *engine.Tensor, start int, out []float64) outputScan {
	if t.DType != engine.F32 {
		t.Floats64(start, out)
		return scanOutput(out)
	}
	data := t.Data[4*start : 4*(start+len(out))]
	var sum float64
	top, arg, odd := math.Inf(-1), -1, 0
	for i := range out {
		o := float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
		out[i] = o
		sum += o
		if o > top {
			top, arg = o, i
		}
		if !(math.Abs(o) <= math.MaxFloat64) {
			odd++
		}
	}
	if odd > 0 {
		return scanOutput(out) // NaN or Inf: count them the slow way
	}
	return outputScan{rowSum: sum, argmax: arg, firstNaN: -1, firstInf: -1}
}

// scanOutput sums the row, finds its first maximum, and counts its NaN and
// ±Inf values.
func scanOutput(out []float64) outputScan {
	s := outputScan{argmax: -1, firstNaN: -1, firstInf: -1}
	top := math.Inf(-1)
	for i, o := range out {
		s.rowSum += o
		if o > top {
			top, s.argmax = o, i
		}
		switch {
		case o != o:
			if s.nan == 0 {
				s.firstNaN = i
			}
			s.nan++
		case math.IsInf(o, 0):
			if s.inf == 0 {
				s.firstInf = i
			}
			s.inf++
		}
	}
	if s.argmax < 0 && s.nan < len(out) {
		s.argmax = slices.Index(out, top) // every value is -Inf or NaN
	}
	return s
}

// measure compares out (scanned into os) with the reference probabilities r
// (base: the unfiltered reference, cls: the classes, refArgmax: a most
// probable token) at tolerance tol, filling m, the error bits and the row
// histograms in b. It is the hot loop of every float judgement: one pass
// that never calls or allocates; the rare tokens that need more (a log for
// the KL term, a support difference) are listed and done after it.
//
// A sparse row (a filtered one, mostly zeros on both sides) is first
// compacted to the tokens that are nonzero on either side: the others add
// nothing but zeros, which are counted.
func measure(m *measurement, out []float64, os *outputScan, r, base []float64, cls []ref.Class, refArgmax int, sparse bool, tol engine.Tolerance, underflow float64, b *rowBuffers) {
	*m = measurement{worst: -1, firstNaN: os.firstNaN, firstInf: os.firstInf, rowSum: os.rowSum}
	full := len(out)
	r, base, cls = r[:full], base[:full], cls[:full]
	refFull := r
	var at []int32 // position of each measured token in the row (nil: itself)
	if sparse {
		at = b.active[:0]
		for i, o := range out {
			if o != 0 || r[i] != 0 {
				at = append(at, int32(i))
			}
		}
		b.active = at
		oc, rc := b.outC[:len(at)], b.refC[:len(at)]
		for k, i := range at {
			oc[k], rc[k] = out[i], r[i]
		}
		out, r = oc, rc
	}
	pos := func(k int) int {
		if at == nil {
			return k
		}
		return int(at[k])
	}
	n := len(out)
	m.measured = n
	atol, rtol := tol.Atol, tol.Rtol
	absBits, relBits := b.absBits[:n], b.relBits[:n]
	logged, nLogged := b.logged[:n], 0
	diffs, nDiffs := b.diffs[:n], 0
	var sumAbs, sumRel, kl, minAtol, minRtol float64
	maxAbs, maxRel := -1.0, -1.0
	maxAbsAt, maxRelAt := 0, 0
	mismatched := 0
	for i, o := range out {
		ri := r[i]
		d := o - ri
		ad := math.Abs(d)
		// The relative error divides by the reference plus the smallest
		// normal float64 (which leaves every reference above 1e-292 exact),
		// so that 0 against 0 is no error without a branch and no division
		// meets a subnormal (which costs a hundred cycles). An output that
		// is nonzero where the reference is 0 (an extra token) is set to an
		// infinite relative error after the loop.
		s := d / (ri + 0x1p-1022)
		rel := math.Abs(s)
		// KL: the term r log(r/o) - r + o is r (s - log1p(s)) = r s² (1/2 -
		// s/3 + s²/4 - ...). Two terms are within 1e-8 relative for
		// |s| < 1e-4 (an output rounded to f32); five within 1e-7 for
		// |s| < 0.05 (most outputs off by rounding to bf16); larger errors
		// (and extra tokens) go through a log after the loop. Between the
		// last two, both ways are taken and one kept without a branch: which
		// one is a coin toss for an output off by percents. The series is
		// evaluated by Estrin's scheme, a short chain of dependent operations.
		s2 := s * s
		if rel < 1e-4 {
			kl += ri * s2 * (1.0/2 - s*(1.0/3))
		} else {
			series := math.Float64bits(ri * s2 * ((1.0/2 - s*(1.0/3)) + s2*((1.0/4-s*(1.0/5))+s2*(1.0/6))))
			small := math.Float64bits(rel-0.05) >> 63 // 1 when rel < 0.05; 0 for NaN
			kl += math.Float64frombits(series & -small)
			logged[nLogged] = int32(i)
			nLogged += int(1 - small)
		}
		if (o == 0) != (ri == 0) {
			diffs[nDiffs] = int32(i)
			nDiffs++
		}
		rr := rtol * ri
		if !(ad <= atol+rr) {
			mismatched++
			if ad > m.worstAbs || m.worst < 0 {
				m.worstAbs, m.worst = ad, i
			}
		}
		if ex := ad - rr; ex > minAtol {
			minAtol = ex
		}
		if ad > atol {
			minRtol = max(minRtol, (ad-atol)/ri) // +Inf when ri is 0
		}
		sumAbs += ad
		sumRel += rel
		if ad > maxAbs {
			maxAbs, maxAbsAt = ad, i
		}
		if rel > maxRel {
			maxRel, maxRelAt = rel, i
		}
		absBits[i], relBits[i] = math.Float64bits(ad), math.Float64bits(rel)&^signBit
	}
	kl += klLogged(out, r, logged[:nLogged], nil, underflow)
	for _, k := range diffs[:nDiffs] {
		i := pos(int(k))
		m.supportDiff(i, 1, out[k], r[k], base[i], cls[i], underflow)
		if r[k] == 0 && out[k] == out[k] { // an extra token
			relBits[k] = math.Float64bits(math.Inf(1))
			sumRel = math.Inf(1)
			if !(maxRel == math.Inf(1) && maxRelAt < int(k)) {
				maxRel, maxRelAt = math.Inf(1), int(k)
			}
		}
	}
	if m.worst >= 0 {
		m.worstRef = r[m.worst]
		m.worst = pos(m.worst)
	}
	t := rowTotals{
		elements: full, mismatched: mismatched, sumAbs: sumAbs, sumRel: sumRel, kl: kl, minAtol: minAtol, minRtol: minRtol,
		maxAbs: maxAbs, maxRel: maxRel, maxAbsAt: pos(maxAbsAt), maxRelAt: pos(maxRelAt),
		argmaxAgree: os.argmax >= 0 && refFull[os.argmax] == refFull[refArgmax],
	}
	m.setTops(&t, os)
	m.loAbs, m.loRel = countKeys(absBits, relBits, b.absHist, b.relHist, m.topAbs, m.topRel, full-n)
	m.setDrift(&t, os, tol)
}

// rowTotals are what one pass over a row's errors gathers (measure,
// measureGroups) before they become its drift.
type rowTotals struct {
	elements, mismatched int
	sumAbs, sumRel, kl   float64
	minAtol, minRtol     float64
	// maxAbs and maxRel are -1 when nothing was measured; maxAbsAt and
	// maxRelAt are tokens.
	maxAbs, maxRel     float64
	maxAbsAt, maxRelAt int
	argmaxAgree        bool
}

// setTops settles t's maxima (0 at token 0 when there is no error) and sets
// m's highest histogram buckets from them, or the NaN bucket when the output
// holds NaN.
func (m *measurement) setTops(t *rowTotals, os *outputScan) {
	if t.maxAbs < 0 { // nothing measured: every token is 0 on both sides
		t.maxAbs, t.maxRel = 0, 0
	}
	if t.maxAbs == 0 { // no error anywhere: the first token, as the full pass says
		t.maxAbsAt = 0
	}
	if t.maxRel == 0 {
		t.maxRelAt = 0
	}
	m.topAbs, m.topRel = errorKey(math.Float64bits(t.maxAbs)), errorKey(math.Float64bits(t.maxRel))
	if os.nan > 0 {
		m.topAbs, m.topRel = histBins/2-1, histBins/2-1
	}
}

// setDrift fills m's drift from a row's totals, its output scan and its
// support differences: NaN in the output makes the maxima NaN (at the first
// NaN), the KL NaN and no tolerance pass.
func (m *measurement) setDrift(t *rowTotals, os *outputScan, tol engine.Tolerance) {
	n := t.elements
	minAtol, minRtol := t.minAtol, t.minRtol
	dr := &m.drift
	dr.Tolerance = tol
	dr.Elements = n
	dr.Mismatched = t.mismatched
	dr.MismatchShare = engine.Float(float64(t.mismatched) / float64(max(n, 1)))
	dr.NaN, dr.Inf = os.nan, os.inf
	dr.RowSumError = engine.Float(math.Abs(os.rowSum - 1))
	dr.KL = engine.Float(max(t.kl, 0))
	dr.TV = engine.Float(t.sumAbs / 2)
	dr.Abs = engine.ErrorStats{Max: engine.Float(t.maxAbs), Mean: engine.Float(t.sumAbs / float64(n)), Index: t.maxAbsAt}
	dr.Rel = engine.ErrorStats{Max: engine.Float(t.maxRel), Mean: engine.Float(t.sumRel / float64(n)), Index: t.maxRelAt}
	if os.nan > 0 {
		dr.Abs.Max, dr.Abs.Index = engine.Float(math.NaN()), os.firstNaN
		dr.Rel.Max, dr.Rel.Index = engine.Float(math.NaN()), os.firstNaN
		minAtol, minRtol = math.Inf(1), math.Inf(1)
		dr.KL = engine.Float(math.NaN())
	}
	if t.argmaxAgree {
		dr.ArgmaxAgree = 1
	}
	dr.MinAtol, dr.MinRtol = engine.Float(minAtol), engine.Float(minRtol)
	dr.SupportMissing, dr.MissingMass = m.missing.n, engine.Float(m.missing.refMass)
	dr.SupportExtra, dr.ExtraMass = m.extra.n, engine.Float(m.extra.refMass)
}

// retolerate sets m to src judged at another tolerance against the same
// reference r (the one src was measured against, renormalised or not): only
// the mismatches, the worst token and the least passing tolerances depend on
// the tolerance, so only they are recomputed. For a row read by groups
// (rowGroups), element i stands for g.count[i] tokens, the first at
// g.first[i] (g nil: the row's tokens).
func retolerate(m, src *measurement, out, r []float64, tol engine.Tolerance, g *rowGroups) {
	*m = *src
	m.worst, m.worstAbs, m.worstRef = -1, 0, 0
	r = r[:len(out)]
	atol, rtol := tol.Atol, tol.Rtol
	var minAtol, minRtol float64
	mismatched := 0
	worst := -1
	for i, o := range out {
		ri := r[i]
		ad := math.Abs(o - ri)
		if !(ad <= atol+rtol*ri) {
			if g != nil {
				mismatched += int(g.count[i])
			} else {
				mismatched++
			}
			if ad > m.worstAbs || worst < 0 {
				m.worstAbs, worst = ad, i
			}
		}
		if ex := ad - rtol*ri; ex > minAtol {
			minAtol = ex
		}
		if ad > atol {
			minRtol = max(minRtol, (ad-atol)/ri)
		}
	}
	dr := &m.drift
	dr.Tolerance = tol
	dr.Mismatched = mismatched
	dr.MismatchShare = engine.Float(float64(mismatched) / float64(max(dr.Elements, 1)))
	if dr.NaN > 0 {
		minAtol, minRtol = math.Inf(1), math.Inf(1)
	}
	dr.MinAtol, dr.MinRtol = engine.Float(minAtol), engine.Float(minRtol)
	if worst >= 0 {
		m.worst, m.worstRef = worst, r[worst]
		if g != nil {
			m.worst = int(g.first[worst])
		}
	}
}

// clearHists empties the row histograms that m filled.
func (m *measurement) clearHists(b *rowBuffers) {
	b.absHist[0], b.relHist[0] = 0, 0
	if m.loAbs <= m.topAbs {
		clear(b.absHist[m.loAbs : m.topAbs+1])
	}
	if m.loRel <= m.topRel {
		clear(b.relHist[m.loRel : m.topRel+1])
	}
}

// compareRow measures one output row against one reference distribution,
// renormalising the reference over the output's support when they differ
// only at boundary tokens, and computes the row's percentiles. It returns
// the reference it compared with. The row histograms are left filled for
// the caller to merge.
func compareRow(m *measurement, out []float64, os *outputScan, d *ref.Dist, tol engine.Tolerance, underflow float64, b *rowBuffers) []float64 {
	sparse := len(d.Base) > 0 && &d.Base[0] != &d.Probs[0] // filtered
	measure(m, out, os, d.Probs, d.Base, d.Class, d.Argmax, sparse, tol, underflow, b)
	if m.supportOK() && (m.boundaryKept.n > 0 || m.boundaryDropped.n > 0) {
		kept, dropped := m.boundaryKept, m.boundaryDropped
		m.clearHists(b)
		b.renorm = renormalisedRef(b.renorm[:cap(b.renorm)], out, d.Base, d.Class, nil)
		measure(m, out, os, b.renorm, d.Base, d.Class, d.Argmax, true, tol, underflow, b)
		m.boundaryKept, m.boundaryDropped = kept, dropped
		m.renormalised = true
	}
	b.sel.percentiles(b.absBits[:m.measured], len(out), b.absHist, m.loAbs, m.topAbs, &m.drift.Abs)
	b.sel.percentiles(b.relBits[:m.measured], len(out), b.relHist, m.loRel, m.topRel, &m.drift.Rel)
	if m.renormalised {
		return b.renorm
	}
	return d.Probs
}

// probsFindings turns the strict (and, when valid, native) measurements of a
// row into its verdict and findings.
func probsFindings(rep *engine.RowReport, r int, s, nat *measurement, v int) {
	if s.drift.NaN > 0 {
		rep.AddFinding(violation(engine.RuleNaN, -1, "row %d: output holds NaN at %d of %d tokens, first at token %d", r, s.drift.NaN, v, s.firstNaN))
	}
	if s.drift.Inf > 0 {
		rep.AddFinding(violation(engine.RuleInf, -1, "row %d: output holds ±Inf at %d of %d tokens, first at token %d", r, s.drift.Inf, v, s.firstInf))
	}
	finite := s.drift.NaN == 0 && s.drift.Inf == 0
	switch {
	case finite && s.ok():
		rep.Matched = "strict"
	case finite && nat != nil && nat.ok():
		rep.Matched = "native"
	}
	matched := s
	if rep.Matched == "native" {
		matched = nat
	}
	if rep.Matched == "" {
		// The native reference's count goes on the first violation.
		nativeSays := ""
		if nat != nil {
			nativeSays = againstNative(nat.drift.Mismatched, nat.missing.n+nat.extra.n)
		}
		if s.drift.Mismatched > 0 {
			msg := fmt.Sprintf("row %d: %d of %d probabilities off (%s)", r, s.drift.Mismatched, v, engine.FormatShare(s.drift.Mismatched, v))
			if s.worst >= 0 {
				// The greatest difference among the tokens off.
				tol := s.drift.Tolerance
				msg += fmt.Sprintf("; greatest absolute difference %s at token %d (allowed %s + %s·|ref| = %s)",
					engine.FormatSig(s.worstAbs, 2), s.worst, engine.FormatSig(tol.Atol, 2), engine.FormatSig(tol.Rtol, 2), engine.FormatSig(tol.Atol+tol.Rtol*s.worstRef, 2))
			}
			rep.AddFinding(violation(engine.RuleTolerance, s.worst, "%s%s", msg, nativeSays))
			nativeSays = ""
		}
		if s.missing.n > 0 {
			rep.AddFinding(violation(engine.RuleSupport, s.missing.first, "row %d: the output drops %s the reference keeps, first at token %d; reference mass of dropped tokens %s%s",
				r, plural(s.missing.n, "token"), s.missing.first, engine.FormatSig(s.missing.refMass, 2), nativeSays))
			nativeSays = ""
		}
		if s.extra.n > 0 {
			rep.AddFinding(violation(engine.RuleSupport, s.extra.first, "row %d: the output keeps %s the reference drops, first at token %d (output mass %s, unfiltered reference mass %s)%s",
				r, plural(s.extra.n, "token"), s.extra.first, engine.FormatSig(s.extra.outMass, 2), engine.FormatSig(s.extra.refMass, 2), nativeSays))
		}
	}
	if matched.renormalised {
		var parts []string
		if k := matched.boundaryKept; k.n > 0 {
			parts = append(parts, fmt.Sprintf("keeps %s the reference drops (first at token %d, unfiltered reference mass %s)", plural(k.n, "boundary token"), k.first, engine.FormatSig(k.refMass, 2)))
		}
		if d := matched.boundaryDropped; d.n > 0 {
			parts = append(parts, fmt.Sprintf("drops %s the reference keeps (first at token %d, unfiltered reference mass %s)", plural(d.n, "boundary token"), d.first, engine.FormatSig(d.refMass, 2)))
		}
		msg := fmt.Sprintf("row %d: the output %s", r, parts[0])
		if len(parts) > 1 {
			msg += " and " + parts[1]
		}
		rep.AddFinding(note(engine.RuleBoundary, -1, "%s; the reference was renormalised over the output's support before comparing", msg))
	}
	sumTol := s.drift.Tolerance.Atol + s.drift.Tolerance.Rtol
	if nat != nil {
		sumTol = max(sumTol, nat.drift.Tolerance.Atol+nat.drift.Tolerance.Rtol)
	}
	if finite && math.Abs(s.rowSum-1) > sumTol {
		sign := "+"
		if s.rowSum < 1 {
			sign = "-"
		}
		rep.AddFinding(note(engine.RuleRowSum, -1, "row %d: probabilities sum to 1 %s %s (more than %s from 1)", r, sign, engine.FormatSig(math.Abs(s.rowSum-1), 2), engine.FormatSig(sumTol, 2)))
	}
}

// againstNative is what a row's first violation adds when the row fails
// the native reference too: its entries off and its support mismatches
// there.
func againstNative(off, support int) string {
	s := fmt.Sprintf(" (against the native reference: %d off", off)
	if support == 1 {
		s += ", 1 support mismatch"
	} else if support > 1 {
		s += fmt.Sprintf(", %d support mismatches", support)
	}
	return s + ")"
}
