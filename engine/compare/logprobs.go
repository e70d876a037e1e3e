package compare

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// The logprobs judge (docs/SEMANTICS.md "Logprobs") compares an engine's
// log probabilities, every token's [B, V] or a top-N [B, N] with its token
// ids, with the float64 log-softmax of the row: of the logits at
// temperature 1 for raw logprobs, of the distribution the sampler draws
// from (temperature, then the filters) for processed ones. The support
// rules are those of probabilities on the log scale: -inf exactly where
// the reference drops a token, finite where it keeps one, boundary tokens
// either way (the reference is then renormalised over the output's
// support). Values are compared on the log scale, in nats:
// |out - ref| <= atol + rtol·|ref| with the row's atol the table's plus
// logprobScale·s (LogprobTolerancesFor, ref.LogRow.Scale). A top-N must
// hold the reference's N most probable tokens (tokens within the tolerance
// of the N-th may stand in for each other), most probable first.

// logUnderflow is the log of the smallest normal float32: an output that
// takes the log of float32 probabilities (log(softmax) rather than
// log_softmax) holds -inf below it, which is noted, not failed.
var logUnderflow = math.Log(0x1p-126)

// lpRow is one row of a logprobs output: its values, and for a top-N the
// token each is of (ids nil: out[i] is token i's).
type lpRow struct {
	ids []int64
	out []float64
}

// token returns the token of entry k.
func (l *lpRow) token(k int) int {
	if l.ids == nil {
		return k
	}
	return int(l.ids[k])
}

// lpMeasure is one row of a logprobs output against one reference.
type lpMeasure struct {
	drift engine.Drift
	// worst is the entry with the greatest difference out of tolerance (-1:
	// none), at token worstTok.
	worst, worstTok   int
	worstAbs, worstRf float64
	// missing: -inf where the reference keeps a token; extra: finite where
	// it drops one; boundaryKept, boundaryDropped: boundary tokens decided
	// otherwise than the reference; underflow: -inf below logUnderflow.
	missing, extra, boundaryKept, boundaryDropped, underflow supportDiff
	underflowAt                                              float64
	firstNaN, firstInf                                       int
	renormalised                                             bool
	// fitted is set when a top-N left boundary tokens open and the
	// reference's normaliser was fitted within [fitLo, fitHi].
	fitted       bool
	fitLo, fitHi float64
	// rowSum is Σ exp(out) of a full row; rowSumLimit is how far from 1
	// the tolerance lets it be: Σ p_i (atol + rtol·|ref_i|).
	rowSum, rowSumLimit float64
	// topN holds the violations of the top-N rules (nil: none).
	topN []engine.Finding
	// n is the number of error bits stored in the row buffers.
	n int
}

// supportOK reports whether the row breaks no support rule.
func (m *lpMeasure) supportOK() bool { return m.missing.n == 0 && m.extra.n == 0 }

// ok reports whether the row passes against this reference.
func (m *lpMeasure) ok() bool {
	return m.drift.Mismatched == 0 && m.supportOK() && m.drift.NaN == 0 && m.drift.Inf == 0 && len(m.topN) == 0
}

// readLogprobs reads row r of plan i's logprobs (and ids).
func (w *worker) readLogprobs(i int, p *plan, r int) lpRow {
	o := p.out
	if p.topN == 0 {
		v := w.j.vocab
		out := w.row(i)
		o.Logprobs.Floats64(r*v, out)
		w.read[i] = readTokens
		return lpRow{out: out}
	}
	n := p.topN
	w.lpIDs = resizeInts(w.lpIDs, n)
	w.lpVals = resizeFloats(w.lpVals, n)
	o.Logprobs.Floats64(r*n, w.lpVals)
	for k := range n {
		w.lpIDs[k] = o.LogprobTokenIDs.Int(r*n + k)
	}
	return lpRow{ids: w.lpIDs, out: w.lpVals}
}

// judgeLogprobs judges row r of plan i's logprobs against the strict
// reference and, where the kind scales by a temperature other than 1, the
// native one; a failing row is also tried against the other kind's strict
// reference (plan.otherKind).
func (w *worker) judgeLogprobs(i int, p *plan, r int, rep *engine.RowReport) {
	run := w.j.run
	t := ref.LogprobsTemperature(run, r, p.lpKind)
	filtered := p.renorm && p.lpKind == engine.LogprobsProcessed
	s := w.distAt(r, t, filtered, false, p.eps)
	if !s.Valid() {
		invalidRow(rep, r, s.Invalid, s.InvalidRule)
		return
	}
	x := ref.RowLogits(run, r)
	if !w.lrStrict.Scaled(x, t, false) {
		invalidRow(rep, r, "input logits cannot be read", engine.RuleParameter)
		return
	}
	row := w.readLogprobs(i, p, r)
	h := &w.hists[i]
	w.measureLogprobs(&w.lmStrict, p, &row, s, &w.lrStrict, p.tol.Strict)
	w.lpPercentiles(&w.lmStrict, &h.strictAbs, &h.strictRel)
	ds := w.lmStrict.drift
	ds.Reference = "strict"
	rep.Strict = &ds

	var nat *lpMeasure
	if t != 1 {
		n := w.distAt(r, t, filtered, true, p.eps)
		switch {
		case n.Valid() && w.lrNative.Scaled(x, t, true):
			w.measureLogprobs(&w.lmNative, p, &row, n, &w.lrNative, p.tol.Native)
			w.lpPercentiles(&w.lmNative, &h.nativeAbs, &h.nativeRel)
			nat = &w.lmNative
			dn := nat.drift
			dn.Reference = "native"
			rep.Native = &dn
		case !n.Valid():
			rep.AddFinding(note(n.InvalidRule, -1, "row %d: no native reference (%s); judged against the strict reference alone", r, n.Invalid))
		}
	}
	logprobsFindings(rep, r, p, &row, &w.lmStrict, nat)
	if !rep.Pass && p.otherKind != nil {
		p.otherKind[r] = w.otherKindPasses(p, r, &row)
	}
}

// otherKindPasses reports whether row r of a logprobs output passes
// against the strict reference of the other kind (processed for raw, raw
// for processed): 1 when it does, -1 when it does not.
func (w *worker) otherKindPasses(p *plan, r int, row *lpRow) int8 {
	other := engine.LogprobsRaw
	if p.lpKind == engine.LogprobsRaw {
		other = engine.LogprobsProcessed
	}
	t := ref.LogprobsTemperature(w.j.run, r, other)
	d := w.distAt(r, t, p.renorm && other == engine.LogprobsProcessed, false, p.eps)
	if !d.Valid() || !w.lrOther.Scaled(ref.RowLogits(w.j.run, r), t, false) {
		return -1
	}
	w.measureLogprobs(&w.lmOther, p, row, d, &w.lrOther, p.tol.Strict)
	if w.lmOther.ok() {
		return 1
	}
	return -1
}

// measureLogprobs compares row with the reference distribution d (its
// classes decide the support) and its log-softmax lr at tolerance tol,
// filling m and the error bits of the row buffers (lpPercentiles turns
// them into percentiles). When the output differs from the reference's
// support only at boundary tokens, lr is renormalised over the output's
// support first.
func (w *worker) measureLogprobs(m *lpMeasure, p *plan, row *lpRow, d *ref.Dist, lr *ref.LogRow, tol engine.Tolerance) {
	*m = lpMeasure{worst: -1, worstTok: -1, firstNaN: -1, firstInf: -1, underflowAt: math.Inf(-1)}
	filtered := d.Filtered()
	lr.Normalise(func(i int) bool { return ref.KeepsRef(d, lr.Z, i) })
	w.logprobSupport(m, row, d, lr, filtered, p.underflow)
	at := w.outputDecisions(row)
	if m.supportOK() && filtered {
		w.renormalise(m, p, row, d, lr, at)
	}
	atol := tol.Atol + logprobScale*lr.Scale
	m.drift.Tolerance = engine.Tolerance{Atol: atol, Rtol: tol.Rtol}
	w.logprobErrors(m, row, lr, atol, tol.Rtol)
	if row.ids != nil {
		m.topN = topNFindings(row, lr, d, atol, tol.Rtol, at)
		if t := row.token(0); t >= 0 && t < len(lr.LogProbs) && lr.LogProbs[t] == maxOf(lr.LogProbs) {
			m.drift.ArgmaxAgree = 1
		}
	} else {
		w.fullRowStats(m, row, lr)
	}
}

// renormalise normalises the reference lr over the output's support when
// the two differ only at boundary tokens (keeping or dropping them is
// allowed): over every token the reference keeps and the output does not
// drop, and every boundary token the output keeps. A top-N says nothing of
// the boundary tokens it does not hold (unless it holds -inf, which puts
// every token it does not hold below its last: dropped): the normaliser
// is then any between keeping none of them and keeping all, and the one
// that fits the output best is taken (lpMeasure.fitted).
func (w *worker) renormalise(m *lpMeasure, p *plan, row *lpRow, d *ref.Dist, lr *ref.LogRow, at []int32) {
	out := row.out
	dropsRest := false // a top-N holding -inf: the tokens it does not hold are below it
	for _, o := range out {
		dropsRest = dropsRest || math.IsInf(o, -1)
	}
	boundary := func(i int) bool {
		return d.Class[i] == ref.Boundary || d.Class[i] == ref.Dropped && d.Base[i] < p.underflow
	}
	// sure says whether token i is in the output's support as far as it
	// tells; open whether it is a boundary token a top-N leaves open.
	sure := func(i int) bool {
		if math.IsInf(lr.Z[i], -1) {
			return false
		}
		if boundary(i) {
			if k := at[i]; k > 0 {
				return !math.IsInf(out[k-1], -1)
			}
			if row.ids != nil {
				return false // open, or dropped
			}
		}
		return ref.KeepsRef(d, lr.Z, i)
	}
	open := func(i int) bool {
		return row.ids != nil && !dropsRest && at[i] == 0 && boundary(i) && !math.IsInf(lr.Z[i], -1)
	}
	undecided := false
	for i := range lr.Z {
		if open(i) {
			undecided = true
			break
		}
	}
	decided := m.boundaryKept.n > 0 || m.boundaryDropped.n > 0
	if !decided && !undecided {
		return
	}
	lo, hi := lr.LogSumExp(sure), math.Inf(-1)
	if undecided {
		hi = lr.LogSumExp(func(i int) bool { return sure(i) || open(i) })
	}
	if !(hi-lo > 1e-12) { // nothing open, or too little mass to matter
		if decided {
			lr.SetLogZ(lo, sure)
			m.renormalised = true
		}
		return
	}
	m.renormalised = decided
	// The normaliser that fits the output best within [lo, hi]: the middle
	// of the offsets z_i - out_i of the tokens it holds finite, clamped.
	dlo, dhi := math.Inf(1), math.Inf(-1)
	for k, o := range out {
		if tok := row.token(k); tok >= 0 && tok < len(lr.Z) && !math.IsInf(o, 0) && o == o && !math.IsInf(lr.Z[tok], -1) {
			dlo, dhi = min(dlo, lr.Z[tok]-o), max(dhi, lr.Z[tok]-o)
		}
	}
	logZ := lo
	if dlo <= dhi {
		logZ = min(max((dlo+dhi)/2, lo), hi)
	}
	lr.SetLogZ(logZ, func(i int) bool { return sure(i) || open(i) })
	// Said when the choice is wider than the tolerance, where it matters.
	m.fitted, m.fitLo, m.fitHi = hi-lo > p.tol.Strict.Atol, lo, hi
}

// outputDecisions returns, for each token, 1 + the entry of the row that
// holds it, or 0 for a token the row does not hold (a top-N's others).
// For a full row every token is entry token.
func (w *worker) outputDecisions(row *lpRow) []int32 {
	v := w.j.vocab
	if cap(w.lpAt) < v {
		w.lpAt = make([]int32, v)
	}
	at := w.lpAt[:v]
	if row.ids == nil {
		if w.lpAtFull {
			return at
		}
		for i := range at {
			at[i] = int32(i + 1)
		}
		w.lpAtFull = true
		return at
	}
	clear(at)
	w.lpAtFull = false
	for k, id := range row.ids {
		if id >= 0 && id < int64(v) && at[id] == 0 {
			at[id] = int32(k + 1)
		}
	}
	return at
}

// logprobSupport finds where the row and the reference disagree about the
// support: -inf on one side only, NaN and +Inf.
func (w *worker) logprobSupport(m *lpMeasure, row *lpRow, d *ref.Dist, lr *ref.LogRow, filtered bool, underflow float64) {
	v := w.j.vocab
	for k, o := range row.out {
		tok := row.token(k)
		switch {
		case o != o:
			if m.drift.NaN == 0 {
				m.firstNaN = tok
			}
			m.drift.NaN++
			continue
		case math.IsInf(o, 1):
			if m.drift.Inf == 0 {
				m.firstInf = tok
			}
			m.drift.Inf++
			continue
		case tok < 0 || tok >= v:
			continue // a top-N's id outside the vocabulary: a top_n finding
		}
		l := lr.LogProbs[tok]
		outDrops, refDrops := math.IsInf(o, -1), math.IsInf(l, -1)
		switch {
		case outDrops == refDrops:
		case outDrops: // the reference keeps the token
			switch {
			case filtered && d.Class[tok] == ref.Boundary:
				m.boundaryDropped.add(tok, 1, d.Base[tok], 0)
			case l < logUnderflow:
				m.underflow.add(tok, 1, math.Exp(l), 0)
				if m.underflow.n == 1 {
					m.underflowAt = l
				}
			default:
				m.missing.add(tok, 1, math.Exp(l), 0)
			}
		default: // the output keeps a token the reference drops
			switch {
			case math.IsInf(lr.Z[tok], -1):
				m.extra.add(tok, 1, 0, math.Exp(o))
			case filtered && (d.Class[tok] == ref.Boundary || d.Class[tok] == ref.Dropped && d.Base[tok] < underflow):
				// Below the smallest normal float32 a kernel's weights tie
				// values float64 tells apart (SEMANTICS.md "subnormal
				// weights"): a boundary, as for probabilities.
				m.boundaryKept.add(tok, 1, d.Base[tok], math.Exp(o))
			default:
				m.extra.add(tok, 1, d.Base[tok], math.Exp(o))
			}
		}
	}
	m.drift.SupportMissing, m.drift.MissingMass = m.missing.n, engine.Float(m.missing.refMass)
	m.drift.SupportExtra, m.drift.ExtraMass = m.extra.n, engine.Float(m.extra.refMass)
}

// logprobErrors measures the entries both sides hold finite, and those
// that are NaN or +Inf: |out - ref| and its ratio to |ref|, the
// mismatches, the worst entry and the least passing tolerances, storing
// each error's bits for the percentiles. Entries -inf on both sides are
// equal (an error of 0); entries -inf on one side only are the support's.
func (w *worker) logprobErrors(m *lpMeasure, row *lpRow, lr *ref.LogRow, atol, rtol float64) {
	b := w.bufs
	v := w.j.vocab
	dr := &m.drift
	n := 0
	var sumAbs, sumRel, minAtol, minRtol float64
	maxAbs, maxRel, maxAbsAt, maxRelAt := -1.0, -1.0, 0, 0
	for k, o := range row.out {
		tok := row.token(k)
		var ad, rel float64
		switch {
		case o != o:
			ad, rel = math.NaN(), math.NaN()
		case math.IsInf(o, 1):
			ad, rel = math.Inf(1), math.Inf(1)
		case tok < 0 || tok >= v:
			continue
		default:
			l := lr.LogProbs[tok]
			li, oi := math.IsInf(l, -1), math.IsInf(o, -1)
			switch {
			case li && oi:
			case li || oi:
				continue
			default:
				ad = math.Abs(o - l)
				if ad > 0 {
					rel = ad / math.Abs(l) // +Inf where the reference is 0
				}
				allowed := atol + rtol*math.Abs(l)
				if !(ad <= allowed) {
					dr.Mismatched++
					if ad > m.worstAbs || m.worst < 0 {
						m.worst, m.worstTok, m.worstAbs, m.worstRf = k, tok, ad, l
					}
				}
				minAtol = max(minAtol, ad-rtol*math.Abs(l))
				if ad > atol {
					minRtol = max(minRtol, (ad-atol)/math.Abs(l))
				}
			}
		}
		if ad == ad {
			sumAbs += ad
			sumRel += rel
			if ad > maxAbs {
				maxAbs, maxAbsAt = ad, tok
			}
			if rel > maxRel {
				maxRel, maxRelAt = rel, tok
			}
		}
		b.absBits[n], b.relBits[n] = math.Float64bits(ad)&^signBit, math.Float64bits(rel)&^signBit
		n++
	}
	m.n = n
	maxAbs, maxRel = max(maxAbs, 0), max(maxRel, 0)
	if maxAbs == 0 {
		maxAbsAt = row.token(0)
	}
	if maxRel == 0 {
		maxRelAt = row.token(0)
	}
	dr.Elements = n
	dr.MismatchShare = engine.Float(float64(dr.Mismatched) / float64(max(n, 1)))
	dr.Abs = engine.ErrorStats{Max: engine.Float(maxAbs), Mean: engine.Float(sumAbs / float64(max(n, 1))), Index: maxAbsAt}
	dr.Rel = engine.ErrorStats{Max: engine.Float(maxRel), Mean: engine.Float(sumRel / float64(max(n, 1))), Index: maxRelAt}
	if dr.NaN > 0 || dr.Inf > 0 {
		minAtol, minRtol = math.Inf(1), math.Inf(1)
	}
	if dr.NaN > 0 {
		dr.Abs.Max, dr.Abs.Index = engine.Float(math.NaN()), m.firstNaN
		dr.Rel.Max, dr.Rel.Index = engine.Float(math.NaN()), m.firstNaN
	}
	dr.MinAtol, dr.MinRtol = engine.Float(minAtol), engine.Float(minRtol)
}

// fullRowStats sets what only a full row has: |Σ exp(out) - 1|, the
// generalised KL divergence Σ p(log p - out) - 1 + Σ exp(out) of the
// reference p from the output, the total variation, and whether the
// output's first maximum is a reference maximum.
func (w *worker) fullRowStats(m *lpMeasure, row *lpRow, lr *ref.LogRow) {
	dr := &m.drift
	var sum, kl, tv, entropy float64
	arg, top := -1, math.Inf(-1)
	for i, o := range row.out {
		l := lr.LogProbs[i]
		q := math.Exp(o) // 0 at -inf, NaN at NaN
		sum += q
		p := math.Exp(l)
		tv += math.Abs(q - p)
		switch {
		case math.IsInf(l, -1):
		case math.IsInf(o, -1) && l < logUnderflow:
			// log of float32 probabilities that underflowed (noted, not
			// failed): the token counts by the mass it loses, not as +Inf.
			kl += p
			entropy -= p * l
		default:
			kl += p * (l - o) // +Inf where the output drops a kept token
			entropy -= p * l
		}
		if o > top {
			top, arg = o, i
		}
	}
	m.rowSum = sum
	m.rowSumLimit = dr.Tolerance.Atol + dr.Tolerance.Rtol*entropy
	dr.RowSumError = engine.Float(math.Abs(sum - 1))
	dr.KL = engine.Float(max(kl-1+sum, 0))
	if kl != kl || sum != sum {
		dr.KL = engine.Float(math.NaN())
	}
	dr.TV = engine.Float(tv / 2)
	if arg >= 0 && lr.LogProbs[arg] == maxOf(lr.LogProbs) {
		dr.ArgmaxAgree = 1
	}
}

// maxOf returns the greatest of x (-Inf for none).
func maxOf(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// lpPercentiles computes m's row percentiles from the error bits its
// measurement stored, and merges the row histograms into the run's.
func (w *worker) lpPercentiles(m *lpMeasure, abs, rel *runHist) {
	b := w.bufs
	n := m.n
	topAbs, topRel := errorKey(math.Float64bits(float64(m.drift.Abs.Max))&^signBit), errorKey(math.Float64bits(float64(m.drift.Rel.Max))&^signBit)
	if m.drift.Inf > 0 {
		topAbs, topRel = errorKey(math.Float64bits(math.Inf(1))), errorKey(math.Float64bits(math.Inf(1)))
	}
	if m.drift.NaN > 0 {
		topAbs, topRel = histBins/2-1, histBins/2-1
	}
	loAbs, loRel := countKeys(b.absBits[:n], b.relBits[:n], b.absHist, b.relHist, topAbs, topRel, 0)
	b.sel.percentiles(b.absBits[:n], n, b.absHist, loAbs, topAbs, &m.drift.Abs)
	b.sel.percentiles(b.relBits[:n], n, b.relHist, loRel, topRel, &m.drift.Rel)
	abs.add(b.absHist, loAbs, topAbs, false)
	rel.add(b.relHist, loRel, topRel, false)
}

// topNFindings checks a top-N against the reference lr: its values sorted
// (most probable first), its ids inside the vocabulary and each once, each
// id among the reference's N most probable tokens, and none of those
// missing, where tokens within the tolerance of the N-th most probable may
// stand in for each other (ties and near-ties at the cut). at is
// outputDecisions of the row.
func topNFindings(row *lpRow, lr *ref.LogRow, d *ref.Dist, atol, rtol float64, at []int32) []engine.Finding {
	var fs []engine.Finding
	v, n := len(lr.LogProbs), len(row.ids)
	for k, id := range row.ids {
		if id < 0 || id >= int64(v) {
			return append(fs, violation(engine.RuleTokenRange, -1, "position %d holds token %d, outside the vocabulary [0, %d)", k, id, v))
		}
		if first := at[id] - 1; int(first) != k {
			return append(fs, violation(engine.RuleTopN, int(id), "token %d is at positions %d and %d, but a top-N names each token once", id, first, k))
		}
	}
	for k := 1; k < n; k++ {
		if a, b := row.out[k-1], row.out[k]; b > a {
			fs = append(fs, violation(engine.RuleTopN, int(row.ids[k]), "the values are not sorted, most probable first: position %d (token %d, %s) is above position %d (token %d, %s)",
				k, row.ids[k], engine.FormatSig(b, 2), k-1, row.ids[k-1], engine.FormatSig(a, 2)))
			break
		}
	}
	cut := nthLargest(lr.LogProbs, n)
	band := math.Inf(1)
	if !math.IsInf(cut, -1) {
		band = atol + rtol*math.Abs(cut)
	}
	for k, id := range row.ids {
		if l := lr.LogProbs[id]; l < cut-band {
			fs = append(fs, violation(engine.RuleTopN, int(id), "position %d holds token %d, which is not among the reference's %d most probable: its logprob %s is below the %s, %s",
				k, id, n, engine.FormatSig(l, 2), ordinal(n), engine.FormatSig(cut, 2)))
			break
		}
	}
	missing, first := 0, -1
	for i, l := range lr.LogProbs {
		above := l > cut+band || math.IsInf(cut, -1) && !math.IsInf(l, -1)
		if above && at[i] == 0 && !(d.Filtered() && d.Class[i] == ref.Boundary) {
			if first < 0 || l > lr.LogProbs[first] {
				first = i
			}
			missing++
		}
	}
	if missing > 0 {
		rank := 1
		for _, l := range lr.LogProbs {
			if l > lr.LogProbs[first] {
				rank++
			}
		}
		fs = append(fs, violation(engine.RuleTopN, first, "the top-%d misses %s of the reference's %d most probable, the first its %s, token %d (logprob %s)",
			n, plural(missing, "token"), n, ordinal(rank), first, engine.FormatSig(lr.LogProbs[first], 2)))
	}
	return fs
}

// nthLargest returns the n-th largest value of x (n >= 1; -Inf when x has
// fewer than n values above -Inf), keeping the n largest in a min-heap.
func nthLargest(x []float64, n int) float64 {
	if n <= 0 || n > len(x) {
		return math.Inf(-1)
	}
	h := make([]float64, 0, n)
	for _, v := range x {
		switch {
		case len(h) < n:
			h = append(h, v)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if h[p] <= h[c] {
					break
				}
				h[p], h[c] = h[c], h[p]
				c = p
			}
		case v > h[0]:
			h[0] = v
			for p := 0; ; {
				c := 2*p + 1
				if c >= n {
					break
				}
				if c+1 < n && h[c+1] < h[c] {
					c++
				}
				if h[p] <= h[c] {
					break
				}
				h[p], h[c] = h[c], h[p]
				p = c
			}
		}
	}
	return h[0]
}

// ordinal writes n as "1st", "2nd", "3rd", "20th".
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// logprobsFindings turns the strict (and, when there is one, native)
// measurements of a row into its verdict and findings.
func logprobsFindings(rep *engine.RowReport, r int, p *plan, row *lpRow, s, nat *lpMeasure) {
	what := "logprobs"
	n := len(row.out)
	if s.drift.NaN > 0 {
		rep.AddFinding(violation(engine.RuleNaN, s.firstNaN, "row %d: %s hold NaN at %d of %d entries, first at token %d", r, what, s.drift.NaN, n, s.firstNaN))
	}
	if s.drift.Inf > 0 {
		rep.AddFinding(violation(engine.RuleInf, s.firstInf, "row %d: %s hold +Inf at %d of %d entries, first at token %d", r, what, s.drift.Inf, n, s.firstInf))
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
		nativeSays := ""
		if nat != nil {
			nativeSays = againstNative(nat.drift.Mismatched, nat.missing.n+nat.extra.n)
		}
		if s.drift.Mismatched > 0 {
			tol := s.drift.Tolerance
			msg := fmt.Sprintf("row %d: %d of %d %s off (%s)", r, s.drift.Mismatched, n, what, engine.FormatShare(s.drift.Mismatched, n))
			if s.worst >= 0 {
				msg += fmt.Sprintf("; greatest difference %s nats at token %d, %s where the reference says %s (allowed %s + %s·|ref| = %s)",
					engine.FormatSig(s.worstAbs, 2), s.worstTok, engine.FormatSig(row.out[s.worst], 2), engine.FormatSig(s.worstRf, 2), engine.FormatSig(tol.Atol, 2), engine.FormatSig(tol.Rtol, 2), engine.FormatSig(tol.Atol+tol.Rtol*math.Abs(s.worstRf), 2))
			}
			rep.AddFinding(violation(engine.RuleTolerance, s.worstTok, "%s%s", msg, nativeSays))
			nativeSays = ""
		}
		if s.missing.n > 0 {
			rep.AddFinding(violation(engine.RuleSupport, s.missing.first, "row %d: the output holds -inf at %s the reference keeps, first at token %d; reference mass of those tokens %s%s",
				r, plural(s.missing.n, "token"), s.missing.first, engine.FormatSig(s.missing.refMass, 2), nativeSays))
			nativeSays = ""
		}
		if s.extra.n > 0 {
			rep.AddFinding(violation(engine.RuleSupport, s.extra.first, "row %d: the output gives a finite logprob to %s the reference drops (-inf there), first at token %d (output mass %s, unfiltered reference mass %s)%s",
				r, plural(s.extra.n, "token"), s.extra.first, engine.FormatSig(s.extra.outMass, 2), engine.FormatSig(s.extra.refMass, 2), nativeSays))
			nativeSays = ""
		}
		for _, f := range s.topN {
			f.Message = fmt.Sprintf("row %d: %s%s", r, f.Message, nativeSays)
			nativeSays = ""
			rep.AddFinding(f)
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
		switch {
		case len(parts) > 0:
			msg := fmt.Sprintf("row %d: the output %s", r, parts[0])
			if len(parts) > 1 {
				msg += " and " + parts[1]
			}
			rep.AddFinding(note(engine.RuleBoundary, -1, "%s; the reference was renormalised over the output's support before comparing", msg))
		}
		if matched.fitted {
			rep.AddFinding(note(engine.RuleBoundary, -1, "row %d: the top-%d does not say which of the boundary tokens beyond it are kept; the reference's log normaliser was taken between keeping none and all of them (%s to %s), where it fits the output best",
				r, len(row.out), engine.FormatSig(matched.fitLo, 2), engine.FormatSig(matched.fitHi, 2)))
		}
	}
	if u := matched.underflow; u.n > 0 {
		rep.AddFinding(note(engine.RuleSupport, u.first, "row %d: the output holds -inf at %s whose reference logprob is below %s, where float32 probabilities underflow (first at token %d, %s): the log of softmax rather than log_softmax?",
			r, plural(u.n, "token"), engine.FormatSig(logUnderflow, 2), u.first, engine.FormatSig(matched.underflowAt, 2)))
	}
	if row.ids == nil && finite {
		if e, lim := float64(s.drift.RowSumError), s.rowSumLimit; e > lim {
			rep.AddFinding(note(engine.RuleRowSum, -1, "row %d: exp(logprobs) sum to %s (more than %s from 1): not normalised over the tokens they keep?", r, engine.FormatSig(s.rowSum, 2), engine.FormatSig(lim, 2)))
		}
	}
}

// kindNote adds to a failing logprobs output a note when every failing row
// passes against the other kind's reference: raw logprobs judged as
// processed, or processed ones as raw (plan.otherKind).
func kindNote(p *plan, or *engine.OutputReport) {
	if or.Pass || p.otherKind == nil {
		return
	}
	failed, other := 0, 0
	for _, r := range or.Rows {
		if r.Pass || r.Padding {
			continue
		}
		failed++
		if p.otherKind[r.Row] > 0 {
			other++
		}
	}
	if failed == 0 || other < failed {
		return
	}
	want := engine.LogprobsProcessed
	if p.lpKind == engine.LogprobsProcessed {
		want = engine.LogprobsRaw
	}
	key := "logprobs_kind"
	if _, mode := engine.SplitName(or.Name); mode != "" {
		key += " (or logprobs_kind@" + mode + ")"
	}
	or.Notes = append(or.Notes, fmt.Sprintf("%s were judged as %s logprobs and fail on %s, but every one of them passes as %s logprobs: are they %s? (set %s to %s)",
		or.Name, p.lpKind, plural(failed, "row"), want, want, key, want))
}
