package compare

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
)

// Drafts drawn anew for every trial (DUMPS.md: draft_tokens [T, B, K] beside
// spec_trials). With the drafts random too, exact speculative sampling
// makes the token at every position, among the trials that reach it, follow
// the target p_j itself, and accepts at position i with probability
// α_i = Σ_x min(p_i(x), q_i(x)) = 1 - TV(p_i, q_i) whatever came before
// (docs/SEMANTICS.md "Drafts drawn per trial"). The drafts themselves must
// follow the draft_probs the dump reports: a drafter that samples from one
// q and reports another (transformers #47932: drafts from the top-k
// processed q, the raw q reported) breaks that, and the losslessness with it.

// countRedrawn counts row r's trials against their own drafts: the emitted
// length of a trial is the tokens before its -1 fill, less one; a trial
// without that shape (the structural rules say why) is left out.
func countRedrawn(trials [][]int32, k, v int) *trialCounts {
	tc := &trialCounts{hist: make([]int64, k+1), reach: make([]int, k+1), counts: make([][]int64, k+1)}
	for j := range tc.counts {
		tc.counts[j] = make([]int64, v)
	}
	for _, tr := range trials {
		c := 0
		for c < len(tr) && tr[c] != -1 {
			c++
		}
		ok := c > 0
		for _, t := range tr[c:] {
			ok = ok && t == -1
		}
		for _, t := range tr[:c] {
			ok = ok && t >= 0 && int(t) < v
		}
		if !ok {
			continue
		}
		e := c - 1
		tc.hist[e]++
		for j := 0; j <= e; j++ {
			tc.reach[j]++
			tc.counts[j][tr[j]]++
		}
	}
	return tc
}

// judgeRedrawn judges row r's spec_trials against their per-trial drafts:
// each trial's structure (its accepted prefix is its own drafts, the token
// after it has mass under the residual or, after K, the target), the
// drafts' fit to draft_probs position by position, acceptance by position
// against α_i, the emitted lengths against their law, and every position's
// tokens against the target (lossless). It returns the laws it used, for
// the structural check of spec_tokens (the first trial's drafts).
func (w *worker) judgeRedrawn(p *plan, s *ref.SpecRef, r int, rep *engine.RowReport) {
	k, v := len(s.Drafts), w.j.vocab
	steps := k + 1
	trials := readTrials(p.out.SpecTrials, r, steps)
	drafts := readTrials(w.j.run.DraftTrials, r, w.j.run.DraftTrials.Dim(2))
	tc := countRedrawn(trials, k, v)

	// The laws: the target at every position, over the supports the
	// trials reveal; the residuals (which do not depend on the draft token
	// when the draft is a distribution).
	lossless := *s
	lossless.Position = make([][]float64, steps)
	for j := range steps {
		lossless.Position[j] = s.Target[j].Probs
	}
	laws, changes := revealedLaws(&lossless, tc)
	p.slack[r] = laws.slack
	for _, c := range changes {
		rep.AddFinding(note(engine.RuleBoundary, -1, "row %d: %s", r, c))
	}
	q := make([][]float64, k)
	alpha := make([]float64, k)
	for i := range k {
		q[i] = normalised(s.Draft[i])
		for t, pt := range laws.target[i] {
			alpha[i] += math.Min(pt, q[i][t])
		}
		alpha[i] = math.Min(alpha[i], 1)
	}

	// Structure, trial by trial.
	failed, first := 0, ""
	var firstRule engine.Rule
	firstTok := -1
	row := make([]int64, steps)
	for d, tr := range trials {
		for j, t := range tr {
			row[j] = int64(t)
		}
		if rule, msg, tok := redrawnProblem(s, &laws, row, drafts[d], v); msg != "" {
			if failed == 0 {
				first, firstRule, firstTok = fmt.Sprintf("trial %d: %s", d, msg), rule, tok
			}
			failed++
		}
	}
	if failed > 0 {
		rep.AddFinding(violation(firstRule, firstTok, "row %d: %d of %d trials break the rules; first, %s", r, failed, len(trials), first))
	}

	thr := p.tol.PValue
	var tests []rowTest
	st := &engine.SpecStats{Trials: len(trials), Positions: make([]engine.PositionRate, k)}

	// The drafts against draft_probs, position by position.
	st.Drafts = make([]engine.Fit, k)
	counts := make([]int64, v)
	for i := range k {
		clear(counts)
		for _, dr := range drafts {
			counts[dr[i]]++
		}
		f, err := stats.GoodnessOfFit(counts, q[i], stats.FitOptions{})
		if err != nil {
			st.Drafts[i] = engine.Fit{PValue: 1}
			rep.AddFinding(note(engine.RuleFit, -1, "row %d: position %d: no goodness of fit of the drafts: %v", r, i, err))
			continue
		}
		st.Drafts[i] = engineFit(&f, thr)
		what := fmt.Sprintf("position %d: the %d drafts", i, f.Draws)
		t := rowTest{rule: engine.RuleFit, p: f.PValue, tok: f.Worst.Token, msg: func(threshold float64) string {
			return fitSentence(&f, what, "draft_probs, the distribution the dump says they were drawn from", threshold) + ": the drafter draws from another q than it reports, and the chain is not lossless"
		}}
		if f.ZeroMassTotal > 0 {
			z := f.ZeroMassDraws[0]
			t.hard = fmt.Sprintf("position %d: %d of the %d drafts are tokens draft_probs gives no mass (first, token %d drawn %d times): the drafter draws from another q than it reports",
				i, f.ZeroMassTotal, f.Draws, z.Token, z.Count)
			t.tok = z.Token
		}
		tests = append(tests, t)
	}

	// Acceptance by position: among the trials that reach i, those that
	// accept i, against α_i.
	used := make([]float64, k)
	for i := range k {
		reached := tc.reach[i]
		accepted := 0
		if i+1 <= k {
			accepted = tc.reach[i+1]
		}
		a := alpha[i]
		rate, lo, hi := math.NaN(), math.NaN(), math.NaN()
		if reached > 0 {
			rate = float64(accepted) / float64(reached)
			lo, hi = stats.Wilson(accepted, reached, 1.959964)
		}
		pv := acceptanceP(accepted, reached, a, laws.slack[i])
		st.Positions[i] = engine.PositionRate{Position: i, Reached: reached, Accepted: accepted,
			Rate: engine.Float(rate), Lo: engine.Float(lo), Hi: engine.Float(hi), Theory: engine.Float(a), PValue: engine.Float(pv)}
		used[i] = a
		if reached > 0 {
			bl, bh := band(a, laws.slack[i])
			used[i] = clamp(rate, bl, bh)
			tests = append(tests, rowTest{rule: engine.RuleAcceptance, p: pv, tok: -1, msg: func(float64) string {
				return fmt.Sprintf("position %d accepts %s of the %d trials that reached it (95%% CI %s–%s), where drafts drawn from draft_probs are accepted with probability %s = 1 - TV(p, q) (%s)",
					i, engine.FormatPercent(rate), reached, engine.FormatPercent(lo), engine.FormatPercent(hi), engine.FormatPercent(a), engine.StoredPText(pv))
			}})
		}
	}

	// Emitted lengths against their law.
	st.Emitted = make([]int, k+1)
	for j, h := range tc.hist {
		st.Emitted[j] = int(h)
	}
	theory := stats.EmittedDistribution(alpha)
	st.EmittedTheory = floats(theory)
	st.MeanAcceptanceLength = engine.Float(stats.MeanAcceptanceLength(tc.hist))
	st.TheoryMeanAcceptanceLength = engine.Float(stats.ExpectedAcceptanceLength(alpha))
	st.EmittedPValue = 1
	if ef, err := stats.GoodnessOfFit(tc.hist, stats.EmittedDistribution(used), stats.FitOptions{Label: "length"}); err == nil {
		st.EmittedPValue = engine.Float(ef.PValue)
		n := ef.Draws
		tests = append(tests, rowTest{rule: engine.RuleAcceptance, p: ef.PValue, tok: -1, msg: func(threshold float64) string {
			return fmt.Sprintf("the emitted lengths of %d trials do not follow their exact law (G-test %s < %s): %s",
				n, engine.PText(ef.PValue, ef.LogPValue), engine.FormatSig(threshold, 2), lengthTable(tc.hist, theory))
		}})
	}

	// Lossless: the tokens at each position reached follow the target.
	st.Lossless = make([]engine.Fit, k+1)
	for j := range k + 1 {
		if tc.reach[j] == 0 {
			st.Lossless[j] = engine.Fit{PValue: 1}
			continue
		}
		var t *rowTest
		st.Lossless[j], t = positionFit(rep, r, j, tc.counts[j], laws.target[j], thr, "the target (drafts drawn per trial make every position's token follow it)")
		if t != nil {
			tests = append(tests, *t)
		}
	}
	rep.Spec = st
	reportTests(rep, r, tests, thr)
}

// redrawnProblem checks one trial against its own drafts: tokens in range,
// the -1 fill, the accepted prefix equal to the trial's drafts (none of
// which the target gives no mass), then a token with mass under the
// residual, or after K drafts under the target. It returns the rule, a
// message without the row, and the token it is about.
func redrawnProblem(s *ref.SpecRef, laws *specLaws, toks []int64, drafts []int32, v int) (engine.Rule, string, int) {
	k := len(drafts)
	c, rule, msg, tok := chainLayout(toks, v)
	if rule != "" {
		return rule, msg, tok
	}
	e := c - 1
	for j := range e {
		x := int64(drafts[j])
		if toks[j] != x {
			return engine.RuleStructure, fmt.Sprintf("token %d at position %d is not the trial's draft %d, yet the chain goes on past it", toks[j], j, x), int(toks[j])
		}
		if !(laws.target[j][x] > 0) && s.Target[j].Class[x] != ref.Boundary {
			return engine.RuleAcceptance, fmt.Sprintf("the draft %d at position %d was accepted, but the target gives it no mass (acceptance probability 0)", x, j), int(x)
		}
	}
	t := toks[e]
	if e < k {
		if !(laws.residual[e][t] > 0 || s.Target[e].Class[t] == ref.Boundary || laws.nearResidual(s, e, int(t))) {
			return engine.RuleSupport, fmt.Sprintf("the resampled token %d at position %d has zero mass under the residual max(p - q, 0)", t, e), int(t)
		}
	} else if !(laws.target[k][t] > 0 || s.Target[k].Class[t] == ref.Boundary) {
		return engine.RuleSupport, fmt.Sprintf("the bonus token %d has zero mass under the target distribution", t), int(t)
	}
	return "", "", -1
}

// normalised returns q divided by its sum (draft_probs stored in float32 or
// less sum to 1 only within their rounding).
func normalised(q []float64) []float64 {
	var z float64
	for _, x := range q {
		if x > 0 {
			z += x
		}
	}
	out := make([]float64, len(q))
	if !(z > 0) {
		return out
	}
	for i, x := range q {
		if x > 0 {
			out[i] = x / z
		}
	}
	return out
}
