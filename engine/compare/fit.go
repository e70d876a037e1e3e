package compare

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
)

// unseenEvidence is the expected number of draws, summed over the boundary
// tokens that the reference keeps and a sampler never drew, from which their
// absence is taken as the sampler's decision to drop them: a sampler that
// keeps them misses them all with probability e^-10 < 5e-5.
const unseenEvidence = 10

// supportChange says how the support a sampler revealed differs from the
// reference's decisions at boundary tokens (docs/SEMANTICS.md "Boundary
// tokens"): added are boundary tokens the reference drops and the sampler
// drew, removed those the reference keeps and the sampler, by the evidence,
// dropped. The masses are unfiltered reference probabilities.
type supportChange struct {
	added, removed         int
	addedMass, removedMass float64
	firstAdded, firstRem   int
}

// changed reports whether the support differs from the reference's.
func (c *supportChange) changed() bool { return c.added+c.removed > 0 }

// sentence describes the change for a note: "reaches 2 boundary tokens the
// reference drops (first at token 17, unfiltered reference mass 0.0012)".
func (c *supportChange) sentence(verb string) string {
	var parts []string
	if c.added > 0 {
		parts = append(parts, fmt.Sprintf("%s %s the reference drops (first at token %d, unfiltered reference mass %s)",
			verb, plural(c.added, "boundary token"), c.firstAdded, engine.FormatSig(c.addedMass, 2)))
	}
	if c.removed > 0 {
		parts = append(parts, fmt.Sprintf("never reach %s the reference keeps (first at token %d, unfiltered reference mass %s)",
			plural(c.removed, "boundary token"), c.firstRem, engine.FormatSig(c.removedMass, 2)))
	}
	if len(parts) == 2 {
		return parts[0] + " and " + parts[1]
	}
	return parts[0]
}

// revealedSupport decides the support of the distribution d that a sampler
// drew from, given its counts per token and the expected number of draws of
// each token under the reference's decisions (expected(t)): every Kept
// token; every Boundary token drawn at least once; and the Boundary tokens
// that d keeps and that were never drawn, unless together they expect at
// least unseenEvidence draws. When that differs from d's decisions, dst
// (length V) receives d.Base restricted to the support and renormalised (a
// renormalisation never changes ratios, so this is the reference of that
// support) and revealedSupport returns it; otherwise it returns nil.
func revealedSupport(d *ref.Dist, counts []int64, expected func(t int) float64, dst []float64) ([]float64, supportChange) {
	c := supportChange{firstAdded: -1, firstRem: -1}
	var unseen float64
	for t, cl := range d.Class {
		if cl != ref.Boundary {
			continue
		}
		kept := d.Probs[t] > 0
		switch {
		case !kept && counts[t] > 0:
			if c.added == 0 {
				c.firstAdded = t
			}
			c.added++
			c.addedMass += d.Base[t]
		case kept && counts[t] == 0:
			unseen += expected(t)
		}
	}
	if unseen >= unseenEvidence {
		for t, cl := range d.Class {
			if cl == ref.Boundary && d.Probs[t] > 0 && counts[t] == 0 {
				if c.removed == 0 {
					c.firstRem = t
				}
				c.removed++
				c.removedMass += d.Base[t]
			}
		}
	}
	if !c.changed() {
		return nil, c
	}
	dst = dst[:len(d.Probs)]
	var z float64
	for t, cl := range d.Class {
		dst[t] = 0
		keep := cl == ref.Kept && d.Probs[t] > 0
		if cl == ref.Boundary {
			keep = counts[t] > 0 || (d.Probs[t] > 0 && c.removed == 0)
		}
		if keep {
			dst[t] = d.Base[t]
			z += d.Base[t]
		}
	}
	if !(z > 0) {
		return nil, supportChange{}
	}
	for t := range dst {
		dst[t] /= z
	}
	return dst, c
}

// engineFit converts a goodness of fit of engine/stats into the report's,
// with the bias it catches at the p-value threshold.
func engineFit(f *stats.Fit, threshold float64) engine.Fit {
	test := "G"
	if f.Test == stats.Pearson {
		test = "chi-square"
	}
	return engine.Fit{
		Draws:         int(f.Draws),
		Test:          test,
		Statistic:     engine.Float(f.Statistic),
		DF:            f.DF,
		Bins:          f.Bins,
		PValue:        engine.Float(f.PValue),
		TV:            engine.Float(f.TV),
		TVBound:       engine.Float(f.TVBound),
		Cosine:        engine.Float(f.Cosine),
		ZeroMassDraws: int(f.ZeroMassTotal),
		DetectableTV:  engine.Float(f.DetectableTV(threshold, 0)),
	}
}

// fitSentence says why draws fail a goodness of fit, without the "row N:"
// prefix: "the 100000 draws do not follow the reference (G-test p = 3.1e-12
// < 1e-6; TV 0.0042, a correct sampler stays under 0.0011); most deviant,
// token 17: 1204 drawn where 1100 expected". what names the draws and
// against names the law they were fitted to.
func fitSentence(f *stats.Fit, what, against string, threshold float64) string {
	test := "G-test"
	if f.Test == stats.Pearson {
		test = "chi-square test"
	}
	w := f.Worst
	where := fmt.Sprintf("%s %d", f.Label, w.Token)
	if w.Token < 0 {
		where = fmt.Sprintf("a pool of %d %ss", w.Tokens, f.Label)
	}
	return fmt.Sprintf("%s do not follow %s (%s %s < %s; TV %s, a correct sampler stays under %s); most deviant, %s: %d drawn where %s expected",
		what, against, test, engine.PText(f.PValue, f.LogPValue), engine.FormatSig(threshold, 2), engine.FormatSig(f.TV, 2), engine.FormatSig(f.TVBound, 2), where, w.Observed, engine.FormatSig(w.Expected, 2))
}

// fitSamples fits row r's draws (w.counts, every draw on the vocabulary)
// to the reference d, records the fit in rep, and returns it with the law
// it was fitted to (d.Probs, or d renormalised over the support the draws
// reveal) and the sentence of its failure ("" when it passes), without the
// "row N:" prefix. Draws of dropped tokens are violations of their own
// (judgeSamples), so the fit's zero-mass rule is not repeated here. It
// returns a nil fit when there is none.
func (w *worker) fitSamples(p *plan, d *ref.Dist, r int, rep *engine.RowReport) (*stats.Fit, []float64, string) {
	var n int64
	for _, c := range w.counts {
		n += c
	}
	if n == 0 {
		return nil, d.Probs, ""
	}
	probs := d.Probs
	w.fitRef = resizeFloats(w.fitRef, len(d.Probs))
	nf := float64(n)
	if adj, c := revealedSupport(d, w.counts, func(t int) float64 { return nf * d.Probs[t] }, w.fitRef); adj != nil {
		probs = adj
		rep.AddFinding(note(engine.RuleBoundary, -1, "row %d: the draws %s; the reference was renormalised over the tokens drawn before the goodness of fit", r, c.sentence("reach")))
	}
	f, err := stats.GoodnessOfFit(w.counts, probs, stats.FitOptions{})
	if err != nil {
		rep.AddFinding(note(engine.RuleFit, -1, "row %d: no goodness of fit: %v", r, err))
		return nil, probs, ""
	}
	ef := engineFit(&f, p.tol.PValue)
	rep.Fit = &ef
	pv := f.PValue
	rep.PValue = &pv
	if f.PValue < p.tol.PValue {
		return &f, probs, fitSentence(&f, fmt.Sprintf("the %d draws", f.Draws), "the reference", p.tol.PValue)
	}
	return &f, probs, ""
}

// bonferroni returns min(1, m·p): the p-value of the smallest of m tests.
func bonferroni(p float64, m int) float64 {
	return math.Min(1, p*float64(max(m, 1)))
}
