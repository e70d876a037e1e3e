package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
)

// The classes of sampler bug a failing row's draws may be diagnosed with
// (docs/SEMANTICS.md "Diagnoses"): TokenSpeed #280's review found each.
const (
	DiagnosisTieCollapse      = "tie_collapse"
	DiagnosisArgmaxFallback   = "argmax_fallback"
	DiagnosisTopPMass         = "top_p_mass"
	DiagnosisTemperatureTwice = "temperature_twice"
	DiagnosisTemperaturePlace = "temperature_place"
	DiagnosisMinPPool         = "min_p_pool"
	DiagnosisMinPClamp        = "min_p_clamp"
)

// diagnoseP is the least p-value at which the draws are taken to fit a
// class's law (beside the run's threshold, whichever is larger): the
// reference is rejected below 1e-6 by default, and a class is named only
// when its law is not rejected even at 1e-3.
const diagnoseP = 1e-3

// diagnosis is a class a row's draws fit, and the sentence that says so,
// without the "row N:" prefix.
type diagnosis struct {
	class, sentence string
}

// diagnoseSamples looks for the class of sampler bug that explains a failing
// row's draws (w.counts, n of them on the vocabulary): for each class in
// turn, the law a sampler with that bug draws from is computed from the
// row's logits and parameters, and the draws are fitted to it; the first
// class whose law they fit is the diagnosis. probs is the law the draws
// were judged against (the reference, over the support they reveal),
// refFit its fit (nil when none), outside the number of draws of tokens the
// reference drops. It returns nil when no class fits.
func (w *worker) diagnoseSamples(p *plan, r int, probs []float64, refFit *stats.Fit, outside int) *diagnosis {
	var n int64
	for _, c := range w.counts {
		n += c
	}
	if n == 0 {
		return nil
	}
	thr := math.Max(p.tol.PValue, diagnoseP)
	// refP says why the reference does not fit: its p-value, or the draws
	// it gives no mass.
	refP := ""
	if refFit != nil && refFit.PValue < p.tol.PValue {
		refP = engine.PText(refFit.PValue, refFit.LogPValue)
	}
	if outside > 0 {
		if refP != "" {
			refP += ", "
		}
		refP += fmt.Sprintf("%s outside it", plural(outside, "draw"))
	}
	for _, try := range []func() *diagnosis{
		func() *diagnosis { return w.tieCollapse(probs, n, thr) },
		func() *diagnosis { return w.topPMass(p, r, thr, refP) },
		func() *diagnosis { return w.temperatureTwice(p, r, thr, refP) },
		func() *diagnosis { return w.temperaturePlace(p, r, thr, refP) },
		func() *diagnosis { return w.minPPool(p, r, thr, refP) },
		func() *diagnosis { return w.minPClamp(p, r, probs, n, thr) },
		func() *diagnosis { return w.argmaxFallback(probs, n, thr) },
	} {
		if g := try(); g != nil {
			return g
		}
	}
	return nil
}

// fitsLaw fits the row's draws to law (summing to 1) and reports whether
// they follow it: no draw where it has no mass, and a p-value of at least
// thr.
func (w *worker) fitsLaw(law []float64, thr float64) (stats.Fit, bool) {
	f, err := stats.GoodnessOfFit(w.counts, law, stats.FitOptions{})
	if err != nil {
		return f, false
	}
	return f, f.ZeroMassTotal == 0 && f.PValue >= thr
}

// fitsAlt computes row r's reference at temperature t with filters f (a
// class's law), and fits the draws to it over the support they reveal at
// its boundary tokens. It also returns the tokens the law keeps.
func (w *worker) fitsAlt(r int, t float64, f ref.Filter, thr float64) (stats.Fit, int, bool) {
	w.diagWS.Compute(&w.diagDist, ref.RowLogits(w.j.run, r), t, f, false)
	d := &w.diagDist
	if !d.Valid() {
		return stats.Fit{}, 0, false
	}
	kept := refKept(d)
	var n int64
	for _, c := range w.counts {
		n += c
	}
	nf := float64(n)
	law := d.Probs
	w.diagLaw = resizeFloats(w.diagLaw, len(d.Probs))
	if adj, _ := revealedSupport(d, w.counts, func(t int) float64 { return nf * d.Probs[t] }, w.diagLaw); adj != nil {
		law = adj
	}
	fit, ok := w.fitsLaw(law, thr)
	return fit, kept, ok
}

// refKept counts the tokens d keeps.
func refKept(d *ref.Dist) int {
	k := 0
	for _, x := range d.Probs {
		if x > 0 {
			k++
		}
	}
	return k
}

// tieCollapse: tokens of equal probability whose draws all go to the lowest
// id. The law moves each tied group's mass onto its lowest id; it is tried
// only where the other members of some group, never drawn, expect at least
// unseenEvidence draws together.
func (w *worker) tieCollapse(probs []float64, n int64, thr float64) *diagnosis {
	// Group the tokens by probability in one pass: a 16-bit row holds a
	// few thousand distinct values, so the map stays small.
	type group struct {
		lo, size int
		others   int64 // draws of the members other than the lowest id
	}
	var groups []group
	at := make(map[float64]int32, 1024)
	for t, x := range probs {
		if !(x > 0) {
			continue
		}
		g, ok := at[x]
		if !ok {
			at[x] = int32(len(groups))
			groups = append(groups, group{lo: t, size: 1})
			continue
		}
		groups[g].size++
		groups[g].others += w.counts[t] // tokens come in ascending id: t is not the lowest
	}
	nf := float64(n)
	evidence, tied := false, 0
	best := -1
	for i, g := range groups {
		if g.size < 2 {
			continue
		}
		tied++
		p := probs[g.lo]
		if g.others == 0 && nf*p*float64(g.size-1) >= unseenEvidence {
			evidence = true
			if best < 0 || p*float64(g.size) > probs[groups[best].lo]*float64(groups[best].size) {
				best = i
			}
		}
	}
	if !evidence {
		return nil
	}
	w.diagLaw = resizeFloats(w.diagLaw, len(probs))
	law := w.diagLaw
	copy(law, probs)
	for t, x := range probs {
		if !(x > 0) {
			continue
		}
		if g := groups[at[x]]; g.size > 1 && g.lo != t {
			law[g.lo] += x
			law[t] = 0
		}
	}
	f, ok := w.fitsLaw(law, thr)
	if !ok {
		return nil
	}
	g := groups[best]
	p, size := probs[g.lo], g.size
	more := ""
	if tied > 1 {
		more = fmt.Sprintf("; %s likewise", plural(tied-1, "more tied group"))
	}
	return &diagnosis{DiagnosisTieCollapse, fmt.Sprintf(
		"%d tokens tie at p = %s; the draws go to the lowest id, token %d (%d drawn where %s expected, about %sx its share), and never to the other %d (%s expected)%s: ties collapsed onto the lowest id (the draws fit that law, %s)",
		size, engine.FormatSig(p, 2), g.lo, w.counts[g.lo], engine.FormatSig(nf*p, 2), engine.FormatSig(float64(w.counts[g.lo])/(nf*p), 2),
		size-1, engine.FormatSig(nf*p*float64(size-1), 2), more, engine.PText(f.PValue, f.LogPValue))}
}

// topPMass: top-p applied to the wrong mass, the full softmax instead of
// the top-k-renormalised one (joint instead of top_k_first), or the other
// way round. Tried on rows with both top-k and top-p on.
func (w *worker) topPMass(p *plan, r int, thr float64, refP string) *diagnosis {
	if !p.renorm {
		return nil
	}
	run := w.j.run
	f := ref.RowFilter(run, r, p.eps)
	v := w.j.vocab
	if !(f.TopK > 0 && f.TopK < v && f.TopP < 1) {
		return nil
	}
	alt := f
	var says string
	switch f.Order {
	case engine.TopKFirst, "":
		alt.Order = engine.Joint
		says = "the output's cut matches top-p on the full softmax, not on the top-k-renormalised mass"
	case engine.Joint:
		alt.Order = engine.TopKFirst
		says = "the output's cut matches top-p on the top-k-renormalised mass, not on the full softmax"
	default:
		return nil
	}
	d := w.dist(r, p.renorm, false, p.eps)
	want := refKept(d)
	fit, kept, ok := w.fitsAlt(r, ref.Temperature(run, r), alt, thr)
	if !ok || kept == want {
		return nil
	}
	return &diagnosis{DiagnosisTopPMass, fmt.Sprintf("%s: the draws fit a cut that keeps %d tokens (%s), not the reference's %d (%s)",
		says, kept, engine.PText(fit.PValue, fit.LogPValue), want, refP)}
}

// temperatureTwice: the logits divided by the temperature twice (T²).
func (w *worker) temperatureTwice(p *plan, r int, thr float64, refP string) *diagnosis {
	run := w.j.run
	t := ref.Temperature(run, r)
	if ref.Greedy(t) || t == 1 || !(t > 0) {
		return nil
	}
	f := ref.NoFilter()
	if p.renorm {
		f = ref.RowFilter(run, r, p.eps)
	}
	fit, _, ok := w.fitsAlt(r, t*t, f, thr)
	if !ok {
		return nil
	}
	return &diagnosis{DiagnosisTemperatureTwice, fmt.Sprintf("the draws fit T² = %s (%s) and not T = %s (%s): the temperature applied twice?",
		engine.FormatSig(t*t, 2), engine.PText(fit.PValue, fit.LogPValue), engine.FormatSig(t, 2), refP)}
}

// temperaturePlace: the filters decided on the other side of the
// temperature (temperature_order first against last). Tried on filtered
// rows at a temperature other than 1 where the two keep other tokens.
func (w *worker) temperaturePlace(p *plan, r int, thr float64, refP string) *diagnosis {
	if !p.renorm {
		return nil
	}
	run := w.j.run
	t := ref.Temperature(run, r)
	f := ref.RowFilter(run, r, p.eps)
	if ref.Greedy(t) || t == 1 || !f.Active(w.j.vocab) || f.TopK > 0 && !(f.TopP < 1) && !(f.MinP > 0) {
		return nil // top-k alone keeps the same tokens at any temperature
	}
	alt := f
	var fits, not string
	if f.Temperature == engine.TemperatureLast {
		alt.Temperature = engine.TemperatureFirst
		fits, not = "the filters decided after the temperature", "before it"
	} else {
		alt.Temperature = engine.TemperatureLast
		fits, not = "the filters decided at T = 1 and the temperature applied to what they keep", "the temperature applied first"
	}
	d := w.dist(r, p.renorm, false, p.eps)
	want := refKept(d)
	fit, kept, ok := w.fitsAlt(r, t, alt, thr)
	if !ok || kept == want {
		return nil
	}
	return &diagnosis{DiagnosisTemperaturePlace, fmt.Sprintf("the draws fit %s (%d tokens kept, %s) and not %s (%d kept; %s): the temperature applied at the wrong place?",
		fits, kept, engine.PText(fit.PValue, fit.LogPValue), not, want, refP)}
}

// minPPool: a row without min-p filtered by a min-p another row of the
// batch asks for (a batch's min-p tensor passed for every row).
func (w *worker) minPPool(p *plan, r int, thr float64, refP string) *diagnosis {
	if !p.renorm {
		return nil
	}
	run := w.j.run
	f := ref.RowFilter(run, r, p.eps)
	if f.MinP > 0 {
		return nil
	}
	d := w.dist(r, p.renorm, false, p.eps)
	want := refKept(d)
	var tried []float64
	for o, m := range run.Params.MinP {
		if o == r || !(m > 0) || slices.Contains(tried, m) || run.Padding(o) {
			continue
		}
		tried = append(tried, m)
		alt := f
		alt.MinP = m
		fit, kept, ok := w.fitsAlt(r, ref.Temperature(run, r), alt, thr)
		if !ok || kept == want {
			continue
		}
		return &diagnosis{DiagnosisMinPPool, fmt.Sprintf("min_p is off on this row, but the draws fit min_p = %s, the value row %d asks for (%d tokens kept, %s), and not the reference's %d tokens (%s): the batch's min-p pool applied to a row without min-p?",
			engine.FormatSig(m, 2), o, kept, engine.PText(fit.PValue, fit.LogPValue), want, refP)}
	}
	return nil
}

// minPClamp: min_p = 0 clamped up to a cutoff, so that the tail below some
// ratio to the most probable token is never drawn. Tried on rows with every
// filter off (with top-k or top-p on, a cut short of theirs is another
// bug): the cutoff is the smallest ratio drawn, and the law is the row's
// restricted to the tokens at or above it; the tokens below must expect at
// least unseenEvidence draws.
func (w *worker) minPClamp(p *plan, r int, probs []float64, n int64, thr float64) *diagnosis {
	run := w.j.run
	if p.renorm && ref.RowFilter(run, r, p.eps).Active(w.j.vocab) {
		return nil
	}
	top := slices.Max(probs)
	if !(top > 0) {
		return nil
	}
	cut := math.Inf(1)
	for t, c := range w.counts {
		if c > 0 && probs[t] > 0 {
			cut = math.Min(cut, probs[t]/top)
		}
	}
	var below float64
	dropped := 0
	w.diagLaw = resizeFloats(w.diagLaw, len(probs))
	law := w.diagLaw
	var z float64
	for t, x := range probs {
		law[t] = 0
		switch {
		case x <= 0:
		case x/top < cut:
			below += x
			dropped++
		default:
			law[t] = x
			z += x
		}
	}
	nf := float64(n)
	if dropped == 0 || nf*below < unseenEvidence || !(z > 0) {
		return nil
	}
	for t := range law {
		law[t] /= z
	}
	fit, ok := w.fitsLaw(law, thr)
	if !ok {
		return nil
	}
	return &diagnosis{DiagnosisMinPClamp, fmt.Sprintf("min_p is 0 (off) on this row, but no token below %s·max p was drawn: the %s under that cut hold mass %s (%s draws expected, none came), and the rest follow the distribution (%s): min_p = 0 clamped to a cutoff?",
		engine.FormatSig(cut, 2), plural(dropped, "token"), engine.FormatSig(below, 2), engine.FormatSig(nf*below, 2), engine.PText(fit.PValue, fit.LogPValue))}
}

// argmaxFallback: a sampler that returns the argmax for a share ε of its
// draws (a retry cap that falls back to argmax) draws from (1-ε)·p + ε·δ_a.
// ε is estimated from the argmax's count; the class fits when the argmax is
// drawn more often than chance allows and the rest follow the law.
func (w *worker) argmaxFallback(probs []float64, n int64, thr float64) *diagnosis {
	a := 0
	for t, x := range probs {
		if x > probs[a] {
			a = t
		}
	}
	pa := probs[a]
	nf := float64(n)
	fa := float64(w.counts[a]) / nf
	if !(pa > 0 && pa < 1) || fa <= pa || stats.BinomialTest(int(w.counts[a]), int(n), pa) >= thr {
		return nil
	}
	eps := (fa - pa) / (1 - pa)
	w.diagLaw = resizeFloats(w.diagLaw, len(probs))
	law := w.diagLaw
	for t, x := range probs {
		law[t] = (1 - eps) * x
	}
	law[a] += eps
	fit, ok := w.fitsLaw(law, thr)
	if !ok {
		return nil
	}
	return &diagnosis{DiagnosisArgmaxFallback, fmt.Sprintf("the argmax, token %d, is drawn %s times as often as expected (%d where %s expected), and the rest follow the distribution (%s): a retry cap that falls back to argmax (in about %s of the draws)?",
		a, engine.FormatSig(fa/pa, 2), w.counts[a], engine.FormatSig(nf*pa, 2), engine.PText(fit.PValue, fit.LogPValue), engine.FormatPercent(eps))}
}
