package compare

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
)

// drawProblem says what is wrong with a token drawn from row r's
// distribution d, or "" when it may be drawn (boundary tokens may).
func (w *worker) drawProblem(d *ref.Dist, r int, tok int64) (string, engine.Rule) {
	v := int64(len(d.Probs))
	switch {
	case tok < 0 || tok >= v:
		return fmt.Sprintf("token %d is outside [0, %d)", tok, v), engine.RuleTokenRange
	case d.Class[tok] != ref.Dropped:
		return "", ""
	case ref.Greedy(ref.Temperature(w.j.run, r)):
		return fmt.Sprintf("token %d is not an argmax of this greedy row (the maximum is at token %d)", tok, d.Argmax), engine.RuleToken
	}
	return fmt.Sprintf("token %d has zero reference mass (unfiltered reference probability %s)", tok, engine.FormatSig(d.Base[tok], 2)), engine.RuleSupport
}

// judgeSamples judges the N draws of row r: every one must be in range and
// on the support, and together they must follow the reference distribution
// (fitSamples). A row that fails either way is diagnosed (diagnoseSamples):
// the class of bug its draws fit leads its first violation's sentence.
func (w *worker) judgeSamples(p *plan, r int, rep *engine.RowReport) {
	d := w.dist(r, p.renorm, false, p.eps)
	if !d.Valid() {
		invalidRow(rep, r, d.Invalid, d.InvalidRule)
		return
	}
	t := p.out.Samples
	n := t.Dim(1)
	type bad struct {
		n, first int
		msg      string
		rule     engine.Rule
		tok      int64
	}
	var rng, off bad
	v := len(d.Probs)
	w.counts = resizeInts(w.counts, v)
	clear(w.counts)
	for k := range n {
		tok := t.Int(r*n + k)
		msg, rule := w.drawProblem(d, r, tok)
		if msg == "" {
			w.counts[tok]++
			continue
		}
		b := &off
		if rule == engine.RuleTokenRange {
			b = &rng
		} else if tok >= 0 && tok < int64(v) {
			w.counts[tok]++ // on the vocabulary, off the support: the fit sees it too
		}
		if b.n == 0 {
			b.first, b.msg, b.rule, b.tok = k, msg, rule, tok
		}
		b.n++
	}
	var fit *stats.Fit
	probs, fitFails := d.Probs, ""
	if !ref.Greedy(ref.Temperature(w.j.run, r)) { // greedy rows: nothing random to fit
		fit, probs, fitFails = w.fitSamples(p, d, r, rep)
	}
	var diag *diagnosis
	if (off.n > 0 || fitFails != "") && !ref.Greedy(ref.Temperature(w.j.run, r)) {
		if diag = w.diagnoseSamples(p, r, probs, fit, off.n); diag != nil && rep.Fit != nil {
			rep.Fit.Diagnosis = diag.class
		}
	}
	for _, b := range []bad{rng, off} {
		if b.n > 0 {
			msg := fmt.Sprintf("row %d: %d of %d draws are wrong; first, draw %d: %s", r, b.n, n, b.first, b.msg)
			if diag != nil && b.rule != engine.RuleTokenRange {
				msg += "; " + diag.sentence
			}
			rep.AddFinding(violation(b.rule, int(b.tok), "%s", msg))
		}
	}
	if fitFails != "" {
		if diag != nil && off.n == 0 { // else the support violation, read first, says it
			fitFails = diag.sentence + "; against the reference, " + fitFails
		}
		rep.AddFinding(violation(engine.RuleFit, fit.Worst.Token, "row %d: %s", r, fitFails))
	}
}

// judgeSampledToken judges row r's one sampled token: it must be on the
// support (boundary tokens may be drawn), and the same seed must draw it
// again (the seed rules).
func (w *worker) judgeSampledToken(p *plan, r int, rep *engine.RowReport) {
	tok := p.out.Tokens.Int(r)
	rep.Token = &tok
	d := w.dist(r, p.renorm, false, p.eps)
	if p.seeds != nil {
		var probs []float64
		if d.Valid() {
			probs = d.Probs
		}
		p.seeds.judgeSameSeed(r, tok, probs, rep)
	}
	if !d.Valid() {
		invalidRow(rep, r, d.Invalid, d.InvalidRule)
		return
	}
	want := int64(d.Argmax)
	rep.RefToken = &want
	if msg, rule := w.drawProblem(d, r, tok); msg != "" {
		rep.AddFinding(violation(rule, int(tok), "row %d: %s", r, msg))
	}
}
