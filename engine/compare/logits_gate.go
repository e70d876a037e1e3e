package compare

import (
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// The logits_gate judge compares an engine's logits (logits@MODE) with the
// golden logits of the same rows (docs/SEMANTICS.md "Golden logits"). A
// logit is a dot product whose rounding error scales with its terms, not
// with its value, so the tolerance is relative to the row's greatest
// golden magnitude: |Δ| <= atol + rtol·max|golden|, with the tolerance of
// the less precise of the two dtypes.

// gateRef returns the golden row r (the run's logits).
func (w *worker) gateRef(r int) *ref.GateRow {
	if w.gateRow != r {
		ref.ReadGate(&w.gate, ref.RowLogits(w.j.run, r))
		w.gateRow = r
	}
	return &w.gate
}

// gateAllowed returns what the tolerance allows every logit of golden row
// g.
func gateAllowed(g *ref.GateRow, tol engine.Tolerance) float64 {
	var scale float64
	for _, x := range g.Logits {
		if a := math.Abs(x); a > scale && !math.IsInf(a, 0) {
			scale = a
		}
	}
	return tol.Atol + tol.Rtol*scale
}

// judgeLogits judges row r of output plan i against the golden logits:
// every logit within the tolerance, the same tokens masked, no NaN or +Inf,
// and the golden's top-1 token on top. A top-1 flip within the tolerance is
// fragile (a note); a wider one is real (a violation).
func (w *worker) judgeLogits(i int, p *plan, r int, rep *engine.RowReport) {
	g := w.gateRef(r)
	if !g.Valid() {
		invalidRow(rep, r, g.Invalid, g.InvalidRule)
		return
	}
	v := w.j.vocab
	e := &w.gateOut
	e.Logits = w.row(i)
	ref.ReadGate(e, ref.Logits{Tensor: p.out.Logits, Offset: r * v, Len: v, Name: p.out.Name})
	w.read[i] = readTokens
	tol := p.tol.Strict
	allowed := gateAllowed(g, tol)
	scale := (allowed - tol.Atol) / max(tol.Rtol, math.SmallestNonzeroFloat64)
	d, worst := w.measureLogits(i, g, e, tol, allowed, scale)
	rep.Strict = d
	name := p.out.Name
	if d.NaN > 0 {
		rep.AddFinding(violation(engine.RuleNaN, -1, "row %d: %s hold NaN at %d of %d tokens", r, name, d.NaN, v))
	}
	if d.Inf > 0 {
		rep.AddFinding(violation(engine.RuleInf, -1, "row %d: %s hold +Inf at %d of %d tokens", r, name, d.Inf, v))
	}
	if d.SupportMissing > 0 {
		rep.AddFinding(violation(engine.RuleSupport, -1, "row %d: %s mask %s the golden logits keep", r, name, plural(d.SupportMissing, "token")))
	}
	if d.SupportExtra > 0 {
		rep.AddFinding(violation(engine.RuleSupport, -1, "row %d: %s keep %s the golden logits mask", r, name, plural(d.SupportExtra, "token")))
	}
	if d.Mismatched > 0 && worst >= 0 {
		rep.AddFinding(violation(engine.RuleTolerance, worst, "row %d: %d of %d logits off (%s); greatest |Δlogit| %s at token %d (allowed %s + %s·max|golden| = %s)",
			r, d.Mismatched, v, engine.FormatShare(d.Mismatched, v), engine.FormatSig(math.Abs(e.Logits[worst]-g.Logits[worst]), 2), worst, engine.FormatSig(tol.Atol, 2), engine.FormatSig(tol.Rtol, 2), engine.FormatSig(allowed, 2)))
	}
	want := int64(g.Argmax.Tokens[0])
	rep.RefToken = &want
	if !e.Valid() || e.Argmax.Invalid != "" {
		return
	}
	d.KL = engine.Float(ref.GateKL(g, e))
	top := e.Argmax.Tokens[0]
	tok := int64(top)
	rep.Token = &tok
	if g.Argmax.Has(tok) {
		d.ArgmaxAgree = 1
		return
	}
	margin := g.Max - g.Logits[top]
	f := &engine.Flip{Row: r, Token: top, RefToken: int(want), Margin: engine.Float(margin), Fragile: margin <= allowed}
	rep.Flip = f
	if f.Fragile {
		rep.AddFinding(note(engine.RuleFragile, top, "row %d: fragile top-1 flip: %s put token %d first, the golden logits token %d, only %s above it (within the %s allowed)",
			r, name, top, want, engine.FormatSig(margin, 2), engine.FormatSig(allowed, 2)))
		return
	}
	rep.AddFinding(violation(engine.RuleToken, top, "row %d: top-1 flip: %s put token %d first, the golden logits token %d, %s above it (more than the %s allowed)",
		r, name, top, want, engine.FormatSig(margin, 2), engine.FormatSig(allowed, 2)))
}

// measureLogits compares the engine's row e with the golden row g: the
// drift of every logit both hold finite (Abs: |Δ|, Rel: |Δ|/|golden|),
// with exact row percentiles and plan i's run histograms; tokens masked on
// one side only are counted as support differences, NaN and +Inf as such.
// It returns the drift and the token with the greatest error out of
// tolerance (-1 when none is).
func (w *worker) measureLogits(i int, g, e *ref.GateRow, tol engine.Tolerance, allowed, scale float64) (*engine.Drift, int) {
	b := w.bufs
	d := &engine.Drift{Reference: "golden", Tolerance: tol}
	n := 0
	var sumAbs, sumRel, minAtol, minRtol float64
	maxAbs, maxRel, maxAbsAt, maxRelAt := -1.0, -1.0, 0, 0
	worst, worstAbs := -1, 0.0
	for k, gv := range g.Logits {
		ev := e.Logits[k]
		gMasked, eMasked := math.IsInf(gv, -1), math.IsInf(ev, -1)
		switch {
		case ev != ev:
			d.NaN++
			continue
		case math.IsInf(ev, 1):
			d.Inf++
			continue
		case gMasked && eMasked:
		case gMasked:
			d.SupportExtra++
			continue
		case eMasked:
			d.SupportMissing++
			continue
		}
		ad := 0.0
		if !gMasked {
			ad = math.Abs(ev - gv)
		}
		rel := 0.0
		if ad > 0 {
			rel = ad / math.Abs(gv) // +Inf where the golden logit is 0
		}
		if ad > allowed {
			d.Mismatched++
			if ad > worstAbs || worst < 0 {
				worst, worstAbs = k, ad
			}
		}
		minAtol = max(minAtol, ad-(allowed-tol.Atol))
		if ad > tol.Atol && scale > 0 {
			minRtol = max(minRtol, (ad-tol.Atol)/scale)
		}
		if ad > maxAbs {
			maxAbs, maxAbsAt = ad, k
		}
		if rel > maxRel {
			maxRel, maxRelAt = rel, k
		}
		sumAbs += ad
		sumRel += rel
		b.absBits[n], b.relBits[n] = math.Float64bits(ad), math.Float64bits(rel)
		n++
	}
	maxAbs, maxRel = max(maxAbs, 0), max(maxRel, 0)
	d.Elements = n
	d.MismatchShare = engine.Float(float64(d.Mismatched) / float64(max(n, 1)))
	d.Abs = engine.ErrorStats{Max: engine.Float(maxAbs), Mean: engine.Float(sumAbs / float64(max(n, 1))), Index: maxAbsAt}
	d.Rel = engine.ErrorStats{Max: engine.Float(maxRel), Mean: engine.Float(sumRel / float64(max(n, 1))), Index: maxRelAt}
	d.MinAtol, d.MinRtol = engine.Float(minAtol), engine.Float(minRtol)
	topAbs, topRel := errorKey(math.Float64bits(maxAbs)), errorKey(math.Float64bits(maxRel))
	loAbs, loRel := countKeys(b.absBits[:n], b.relBits[:n], b.absHist, b.relHist, topAbs, topRel, 0)
	b.sel.percentiles(b.absBits[:n], n, b.absHist, loAbs, topAbs, &d.Abs)
	b.sel.percentiles(b.relBits[:n], n, b.relHist, loRel, topRel, &d.Rel)
	h := &w.hists[i]
	h.strictAbs.add(b.absHist, loAbs, topAbs, false)
	h.strictRel.add(b.relHist, loRel, topRel, false)
	return d, worst
}

// gateStats sums up the rows of a logits_gate output: the KL divergences
// and every top-1 flip.
func gateStats(or *engine.OutputReport) *engine.GateStats {
	gs := &engine.GateStats{Flips: []engine.Flip{}, MaxKLRow: -1}
	var sum float64
	n := 0
	for _, r := range or.Rows {
		if r.Strict != nil && r.Token != nil {
			kl := float64(r.Strict.KL)
			sum += kl
			n++
			if gs.MaxKLRow < 0 || exceeds(engine.Float(kl), gs.MaxKL) {
				gs.MaxKL, gs.MaxKLRow = engine.Float(kl), r.Row
			}
		}
		if r.Flip != nil {
			gs.Flips = append(gs.Flips, *r.Flip)
			if r.Flip.Fragile {
				gs.Fragile++
			} else {
				gs.Real++
			}
		}
	}
	if n > 0 {
		gs.MeanKL = engine.Float(sum / float64(n))
	}
	return gs
}
