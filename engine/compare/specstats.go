package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
)

// acceptSlack is the relative width δ of the band [a(1-δ), min(1, a(1+δ))]
// around each theoretical acceptance probability a inside which a kernel's
// own is taken to be right. Kernels decide float32(u·q) < p on float32
// probabilities: where p(x) and q(x) agree to float32 rounding (a draft
// model equal to the target), the float64 theory says a = 1 while the
// kernel rejects once in 10^6 or 10^7 trials. A band of 1e-5 absorbs that and
// moves no rate by a measurable amount (at 10^6 trials the standard error of
// a rate is 5e-4).
const acceptSlack = 1e-5

// residualNoise is the share of every position's law, at draft positions,
// given to the target p_i: where p and q agree to rounding, a kernel's
// residual max(p - q, 0) is rounding noise and may land on tokens whose
// float64 residual is 0. The share is far below anything a fit of 10^6
// trials could see, and keeps such draws from counting as impossible.
const residualNoise = 1e-5

// band returns the interval of acceptance probabilities a kernel may have
// where theory says a, at relative slack w (acceptSlack, widened where the
// target has boundary tokens: specLaws.slack).
func band(a, w float64) (lo, hi float64) {
	return a * (1 - w), math.Min(1, a*(1+w))
}

// clamp returns x limited to [lo, hi].
func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// acceptanceP returns the p-value of accepted out of reached against the
// band around a at slack w: the two-sided exact binomial test at the
// probability in the band closest to the observed rate (the largest p-value
// over the band, since the test is unimodal in the probability).
func acceptanceP(accepted, reached int, a, w float64) float64 {
	if reached == 0 {
		return 1
	}
	lo, hi := band(a, w)
	return stats.BinomialTest(accepted, reached, clamp(float64(accepted)/float64(reached), lo, hi))
}

// specLaws are the laws one row's trials are judged against: ref.SpecRef's,
// except at target positions where the trials reveal that the sampler
// decided boundary tokens otherwise than the reference (revealedSupport).
type specLaws struct {
	accept   []float64   // a_i, K entries
	residual [][]float64 // r_i, K entries
	target   [][]float64 // p_i, K+1 entries
	// slack[i] is the relative band around a_i (and around p_i(t) where the
	// residual's support is decided): acceptSlack plus the share of the
	// target's mass on boundary tokens, which a sampler may keep or drop
	// unseen, moving every probability of the position by up to that share.
	slack []float64
}

// acceptedRow is what one row contributes to the run-level check of
// spec_accepted: the counter, the number of positions it counts, and the
// sums over them of a_i and of its band.
type acceptedRow struct {
	ok              bool
	observed, tests int
	mean, lo, hi    float64
}

// trialCounts are the counts of one row's trials that every statistic
// starts from.
type trialCounts struct {
	// hist[e] counts the trials whose accepted prefix has length e;
	// reach[j] those that reach position j (accepted 0..j-1).
	hist  []int64
	reach []int
	// counts[j] counts the tokens at position j of the trials that reach it.
	counts [][]int64
}

// countTrials counts the trials (each K+1 tokens) of a row with the drafts
// of s over v tokens.
func countTrials(s *ref.SpecRef, trials [][]int32, v int) (*trialCounts, error) {
	k := len(s.Drafts)
	drafts := draftTokens(s)
	hist, err := stats.EmittedHistogram(trials, drafts)
	if err != nil {
		return nil, err
	}
	tc := &trialCounts{hist: hist, reach: make([]int, k+1), counts: make([][]int64, k+1)}
	for j := k; j >= 0; j-- {
		tc.reach[j] = int(hist[j])
		if j < k {
			tc.reach[j] += tc.reach[j+1]
		}
	}
	for j := range tc.counts {
		if tc.counts[j], _, err = stats.PositionCounts(trials, drafts, j, v); err != nil {
			return nil, err
		}
	}
	return tc, nil
}

// draftTokens returns the drafts of s as engine/stats takes them (they are
// inside [0, V), or s would be invalid).
func draftTokens(s *ref.SpecRef) []int32 {
	d := make([]int32, len(s.Drafts))
	for i, x := range s.Drafts {
		d[i] = int32(x)
	}
	return d
}

// specTrialStats computes the statistics of row r's trials (each K+1 tokens;
// one trial when the output holds only spec_tokens) against laws, fills
// rep.Spec and rep.PValue, and adds a violation for each test that fails.
// The row's tests (an acceptance test per position reached, the emitted
// lengths, and the tokens at each position reached) share the p-value
// threshold (Bonferroni): RowReport.PValue is the smallest p-value times the
// number of tests.
func (w *worker) specTrialStats(p *plan, s *ref.SpecRef, laws *specLaws, tc *trialCounts, trials [][]int32, r int, rep *engine.RowReport) {
	k, v := len(s.Drafts), w.j.vocab
	drafts := draftTokens(s)
	thr := p.tol.PValue
	var tests []rowTest

	// Acceptance by position, against the band around each a_i.
	rates, _ := stats.AcceptanceByPosition(trials, drafts)
	st := &engine.SpecStats{Trials: len(trials), Positions: make([]engine.PositionRate, k)}
	used := make([]float64, k) // the a_i the exact laws below are built from
	for i, pr := range rates {
		a := laws.accept[i]
		pv := acceptanceP(pr.Accepted, pr.Reached, a, laws.slack[i])
		st.Positions[i] = engine.PositionRate{Position: i, Reached: pr.Reached, Accepted: pr.Accepted,
			Rate: engine.Float(pr.Rate), Lo: engine.Float(pr.Lo), Hi: engine.Float(pr.Hi), Theory: engine.Float(a), PValue: engine.Float(pv)}
		used[i] = a
		if pr.Reached > 0 {
			lo, hi := band(a, laws.slack[i])
			used[i] = clamp(pr.Rate, lo, hi)
			tests = append(tests, rowTest{rule: engine.RuleAcceptance, p: pv, tok: int(drafts[i]), msg: func(float64) string {
				return fmt.Sprintf("position %d accepts %s of the %d trials that reached it (95%% CI %s–%s), theory %s (%s)",
					i, engine.FormatPercent(pr.Rate), pr.Reached, engine.FormatPercent(pr.Lo), engine.FormatPercent(pr.Hi), engine.FormatPercent(a), engine.StoredPText(pv))
			}})
		}
	}

	// Emitted lengths against their exact law.
	hist := tc.hist
	st.Emitted = make([]int, k+1)
	for j, h := range hist {
		st.Emitted[j] = int(h)
	}
	theory := stats.EmittedDistribution(laws.accept)
	st.EmittedTheory = floats(theory)
	st.MeanAcceptanceLength = engine.Float(stats.MeanAcceptanceLength(hist))
	st.TheoryMeanAcceptanceLength = engine.Float(stats.ExpectedAcceptanceLength(laws.accept))
	st.EmittedPValue = 1
	if ef, err := stats.GoodnessOfFit(hist, stats.EmittedDistribution(used), stats.FitOptions{Label: "length"}); err == nil {
		st.EmittedPValue = engine.Float(ef.PValue)
		t := rowTest{rule: engine.RuleAcceptance, p: ef.PValue, tok: -1, msg: func(threshold float64) string {
			return fmt.Sprintf("the emitted lengths of %d trials do not follow their exact law (G-test %s < %s): %s",
				len(trials), engine.PText(ef.PValue, ef.LogPValue), engine.FormatSig(threshold, 2), lengthTable(hist, theory))
		}}
		if ef.ZeroMassTotal > 0 {
			t.hard = fmt.Sprintf("%d of %d trials emitted a length that exact speculative sampling never gives (%s)",
				ef.ZeroMassTotal, len(trials), lengthTable(hist, theory))
		}
		tests = append(tests, t)
	}

	// The lossless check: the tokens at each position reached.
	st.Lossless = make([]engine.Fit, k+1)
	law := make([]float64, v)
	for j := range k + 1 {
		if tc.reach[j] == 0 {
			st.Lossless[j] = engine.Fit{PValue: 1}
			continue
		}
		if j < k {
			a, x, res, pt := used[j], int(drafts[j]), laws.residual[j], laws.target[j]
			for t := range law {
				law[t] = (1-residualNoise)*(1-a)*res[t] + residualNoise*pt[t]
			}
			law[x] += (1 - residualNoise) * a
		} else {
			copy(law, laws.target[k])
		}
		var t *rowTest
		st.Lossless[j], t = positionFit(rep, r, j, tc.counts[j], law, thr, "exact speculative sampling")
		if t != nil {
			tests = append(tests, *t)
		}
	}

	rep.Spec = st
	reportTests(rep, r, tests, thr)
}

// positionFit fits the tokens of the trials that reached position j of row
// r (counts) to law, their law under the rule named by under ("exact
// speculative sampling"): the position's fit and its test, or no test when
// no fit can be made (a note says why).
func positionFit(rep *engine.RowReport, r, j int, counts []int64, law []float64, thr float64, under string) (engine.Fit, *rowTest) {
	f, err := stats.GoodnessOfFit(counts, law, stats.FitOptions{})
	if err != nil {
		rep.AddFinding(note(engine.RuleFit, -1, "row %d: position %d: no goodness of fit: %v", r, j, err))
		return engine.Fit{PValue: 1}, nil
	}
	what := fmt.Sprintf("position %d: the %d tokens of the trials that reached it", j, f.Draws)
	t := rowTest{rule: engine.RuleFit, p: f.PValue, tok: f.Worst.Token, msg: func(threshold float64) string {
		return fitSentence(&f, what, under, threshold)
	}}
	if f.ZeroMassTotal > 0 {
		z := f.ZeroMassDraws[0]
		t.hard = fmt.Sprintf("position %d: %d of the %d tokens of the trials that reached it have zero mass under %s (first, token %d drawn %d times)",
			j, f.ZeroMassTotal, f.Draws, under, z.Token, z.Count)
		t.tok = z.Token
	}
	return engineFit(&f, thr), &t
}

// rowTest is one statistical test of a row's trials.
type rowTest struct {
	rule engine.Rule
	p    float64
	msg  func(threshold float64) string
	tok  int
	// hard, when set, is a failure whatever the p-value.
	hard string
}

// reportTests records row r's tests in rep: the tests share the p-value
// threshold thr (Bonferroni), so RowReport.PValue is the smallest p-value
// times their number, and each test under thr over that number, or with a
// hard failure, is a violation.
func reportTests(rep *engine.RowReport, r int, tests []rowTest, thr float64) {
	m := len(tests)
	if m == 0 {
		return
	}
	least := 1.0
	for _, t := range tests {
		least = math.Min(least, t.p)
	}
	pv := bonferroni(least, m)
	rep.PValue = &pv
	for _, t := range tests {
		if t.hard != "" {
			rep.AddFinding(violation(t.rule, t.tok, "row %d: %s", r, t.hard))
		}
		if t.p*float64(m) < thr {
			rep.AddFinding(violation(t.rule, t.tok, "row %d: %s", r, t.msg(thr/float64(m))))
		}
	}
}

// boundaryShare returns the share of d's kept mass (unfiltered) that its
// boundary tokens hold, which a sampler may keep or drop unseen: every
// probability of d may move by up to that share.
func boundaryShare(d *ref.Dist) float64 {
	var boundary, kept float64
	for t, c := range d.Class {
		if c == ref.Boundary {
			boundary += d.Base[t]
		}
		if d.Probs[t] > 0 {
			kept += d.Base[t]
		}
	}
	if !(kept > 0) {
		return 0
	}
	return boundary / kept
}

// revealedLaws returns the laws of s with the target supports the trials
// revealed (revealedSupport on tc's counts at each position), and a
// sentence for each position where they differ from the reference's
// decisions at boundary tokens. Where they differ, the acceptance
// probability and residual are recomputed from the revealed target with
// engine/stats' formulas (engine/ref's are for the reference's supports).
func revealedLaws(s *ref.SpecRef, tc *trialCounts) (specLaws, []string) {
	k := len(s.Drafts)
	laws := specLaws{accept: s.Accept, residual: s.Residual, target: make([][]float64, k+1), slack: make([]float64, k+1)}
	var notes []string
	copied := false
	for j := range k + 1 {
		d := &s.Target[j]
		laws.target[j] = d.Probs
		laws.slack[j] = acceptSlack
		if !slices.Contains(d.Class, ref.Boundary) {
			continue
		}
		laws.slack[j] += boundaryShare(d)
		pos := s.Position[j]
		n := float64(tc.reach[j])
		adj, c := revealedSupport(d, tc.counts[j], func(t int) float64 { return n * pos[t] }, make([]float64, len(d.Probs)))
		if adj == nil {
			continue
		}
		if j < k {
			var q []float64
			if s.Draft != nil {
				q = s.Draft[j]
			}
			a, err1 := stats.AcceptanceProbability(adj, q, int(s.Drafts[j]))
			res, err2 := stats.ResidualDistribution(adj, q, int(s.Drafts[j]))
			if err1 != nil || err2 != nil {
				continue // the reference's laws stand
			}
			if !copied {
				laws.accept = slices.Clone(s.Accept)
				laws.residual = slices.Clone(s.Residual)
				copied = true
			}
			laws.accept[j], laws.residual[j] = a, res
		}
		laws.target[j] = adj
		notes = append(notes, fmt.Sprintf("position %d: the trials %s; the target there was renormalised over the tokens the trials reveal before the structural, acceptance and lossless checks", j, c.sentence("reach")))
	}
	return laws, notes
}

// lengthTable lists observed and expected counts per emitted length:
// "0: 2390 (2400.3), 1: 1701 (1680.0), 2: 5909 (5919.7)".
func lengthTable(hist []int64, law []float64) string {
	var n int64
	for _, h := range hist {
		n += h
	}
	parts := make([]string, len(hist))
	for j, h := range hist {
		parts[j] = fmt.Sprintf("%d: %d (%.1f)", j, h, law[j]*float64(n))
	}
	return strings.Join(parts, ", ")
}

// floats converts float64 values to the report's Float.
func floats(x []float64) []engine.Float {
	out := make([]engine.Float, len(x))
	for i, v := range x {
		out[i] = engine.Float(v)
	}
	return out
}
