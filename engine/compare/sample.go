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
// the class of bug its draws fit leads its first violation's sentence. The
// draws come one by one (Samples) or counted per token (SampleCounts); both
// are judged from the counts, so the two forms of the same draws get the same
// verdict and p-value.
func (w *worker) judgeSamples(p *plan, r int, rep *engine.RowReport) {
	d := w.dist(r, p.renorm, false, p.eps)
	if !d.Valid() {
		invalidRow(rep, r, d.Invalid, d.InvalidRule)
		return
	}
	v := len(d.Probs)
	w.counts = resizeInts(w.counts, v)
	clear(w.counts)
	var rng, off badDraws
	var n int64
	if p.counts {
		n = w.countedDraws(p, d, r, &rng, &off)
	} else {
		n = w.drawnDraws(p, d, r, &rng, &off)
	}
	var fit *stats.Fit
	probs, fitFails := d.Probs, ""
	if !ref.Greedy(ref.Temperature(w.j.run, r)) { // greedy rows: nothing random to fit
		fit, probs, fitFails = w.fitSamples(p, d, r, rep)
	}
	var diag *diagnosis
	if (off.n > 0 || fitFails != "") && !ref.Greedy(ref.Temperature(w.j.run, r)) {
		if diag = w.diagnoseSamples(p, r, probs, fit, int(off.n)); diag != nil && rep.Fit != nil {
			rep.Fit.Diagnosis = diag.class
		}
	}
	for _, b := range []badDraws{rng, off} {
		if b.n > 0 {
			var msg string
			switch {
			case b.first >= 0:
				msg = fmt.Sprintf("row %d: %d of %d draws are wrong; first, draw %d: %s", r, b.n, n, b.first, b.msg)
			case b.tok < 0: // counted draws off the vocabulary: no token to name
				msg = fmt.Sprintf("row %d: %d of %d draws are wrong: %s", r, b.n, n, b.msg)
			default:
				msg = fmt.Sprintf("row %d: %d of %d draws are wrong; first, token %d (drawn %d times): %s", r, b.n, n, b.tok, b.times, b.msg)
			}
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

// badDraws gathers a row's draws that break one rule: how many, and the
// first one's draw (-1 when the draws were counted: then times is how
// often its token was drawn), sentence, rule and token.
type badDraws struct {
	n, times int64
	first    int
	msg      string
	rule     engine.Rule
	tok      int64
}

// add counts k draws of tok, the first of them draw at, as breaking the
// rule msg says.
func (b *badDraws) add(at int, k int64, tok int64, msg string, rule engine.Rule) {
	if b.n == 0 {
		b.first, b.times, b.msg, b.rule, b.tok = at, k, msg, rule, tok
	}
	b.n += k
}

// drawnDraws fills w.counts with row r's draws of Samples (every draw on
// the vocabulary, off the support too: the fit sees it) and gathers those
// out of range or off the support; it returns the number of draws.
func (w *worker) drawnDraws(p *plan, d *ref.Dist, r int, rng, off *badDraws) int64 {
	t := p.out.Samples
	n := t.Dim(1)
	v := int64(len(d.Probs))
	for k := range n {
		tok := t.Int(r*n + k)
		msg, rule := w.drawProblem(d, r, tok)
		if tok >= 0 && tok < v {
			w.counts[tok]++
		}
		switch {
		case msg == "":
		case rule == engine.RuleTokenRange:
			rng.add(k, 1, tok, msg, rule)
		default:
			off.add(k, 1, tok, msg, rule)
		}
	}
	return int64(n)
}

// countedDraws fills w.counts with row r of SampleCounts and gathers the
// tokens off the support; the draws a row made beyond its counts' sum
// (SampleDraws) fell outside [0, V). It returns the number of draws.
func (w *worker) countedDraws(p *plan, d *ref.Dist, r int, rng, off *badDraws) int64 {
	t := p.out.SampleCounts
	v := len(d.Probs)
	var sum int64
	for tok := range v {
		c := t.Int(r*v + tok)
		if c == 0 {
			continue
		}
		w.counts[tok] = c
		sum += c
		if msg, rule := w.drawProblem(d, r, int64(tok)); msg != "" {
			off.add(-1, c, int64(tok), msg, rule)
		}
	}
	n := sum
	if drawn := int64(p.out.SampleDraws); drawn > 0 {
		n = drawn
		if sum > drawn {
			rng.add(-1, sum-drawn, -1, fmt.Sprintf("the counts sum to %d, more than the %d draws made", sum, drawn), engine.RuleTokenRange)
		} else if sum < drawn {
			rng.add(-1, drawn-sum, -1, fmt.Sprintf("%d draws are counted on no token of [0, %d)", drawn-sum, v), engine.RuleTokenRange)
		}
	}
	return n
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
