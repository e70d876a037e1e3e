package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/stats"
)

// runViolation records a violation of or as a whole rather than of one row
// (a statistic over all rows together); it fails the output even when every
// row passes.
func runViolation(or *engine.OutputReport, format string, a ...any) {
	or.Violations = append(or.Violations, fmt.Sprintf(format, a...))
	or.Pass = false
}

// runStats adds the run-level statistics of plan p to its report or, once
// every row is judged and sorted: the pooled speculative statistics, the
// check of spec_accepted, the seed rules, and how many statistical failures
// chance alone would give.
func (j *judge) runStats(p *plan, or *engine.OutputReport) {
	thr := p.tol.PValue
	if p.spec || p.trials || p.tree || p.treeTrials {
		pooledSpec(or, p.slack, thr, p.tree || p.treeTrials)
	}
	if p.accepted != nil {
		acceptedCheck(or, p.accepted, thr)
	}
	if p.seeds != nil {
		p.seeds.judgeSeeds(or, p.out.Tokens, thr)
	}
	tested, failed := 0, 0
	for _, r := range or.Rows {
		if r.PValue != nil {
			tested++
			if *r.PValue < thr {
				failed++
			}
		}
	}
	if tested > 0 {
		what := "statistical checks: "
		switch {
		case p.spec || p.trials:
			what = "statistical checks (a row's tests of acceptance, emitted lengths and lossless positions share the threshold, Bonferroni): "
		case p.tree || p.treeTrials:
			what = "statistical checks (a row's tests of acceptance by depth, accepted tokens and lossless positions share the threshold, Bonferroni): "
		}
		or.Notes = append(or.Notes, what+stats.ChanceLine(tested, failed, thr))
	}
	if p.tree || p.treeTrials {
		treeSummary(or)
	}
	if p.samples {
		or.Power = outputPower(or)
	}
	if p.emittedIsAccepted {
		n := 0
		for _, r := range or.Rows {
			if slices.ContainsFunc(r.Findings, func(f engine.Finding) bool { return f.Rule == engine.RuleCounter }) {
				n++
			}
		}
		if n > 0 {
			or.Notes = append(or.Notes, fmt.Sprintf("spec_emitted reports the accepted counter: it equals spec_accepted on every row, and differs from the accepted prefix the tokens show on %s", plural(n, "row")))
		}
	}
}

// outputPower sums up the rows' DetectableTV: the weakest row's (every row
// catches a bias of at least that total variation 9 times in 10) and the
// strongest's. It returns nil when no row has one.
func outputPower(or *engine.OutputReport) *engine.Power {
	var pw *engine.Power
	for _, r := range or.Rows {
		if r.Fit == nil || math.IsNaN(float64(r.Fit.DetectableTV)) || r.Padding {
			continue
		}
		tv := r.Fit.DetectableTV
		if pw == nil {
			pw = &engine.Power{TV: tv, Row: r.Row, Best: tv, Probability: stats.DefaultPower, Draws: r.Fit.Draws}
			continue
		}
		if tv > pw.TV {
			pw.TV, pw.Row, pw.Draws = tv, r.Row, r.Fit.Draws
		}
		pw.Best = min(pw.Best, tv)
	}
	if pw != nil && pw.Draws > engine.DefaultDraws {
		pw.BaselineTV = engine.Float(min(1, float64(pw.TV)*math.Sqrt(float64(pw.Draws)/engine.DefaultDraws)))
	}
	return pw
}

// pooledSpec fills or.Spec from the rows' speculative statistics:
// acceptance by position over all rows (measured Σ accepted / Σ reached,
// theory the mean of each row's rate weighted by the trials that reached
// the position), the emitted lengths summed (theory: the rows' laws weighted
// by their trials), the mean acceptance length. It tests the pooled counts
// (Bonferroni over the pooled tests) and records a run-level violation for
// each that fails: conditionally on the trials that reach a position, its
// acceptances are a sum of independent Bernoulli trials of the rows' rates,
// whose tails beyond one of the mean are no heavier than the binomial's at
// the mean rate (Hoeffding 1956), so the binomial test is conservative. For
// a draft tree (tree) the positions are depths and the emitted lengths the
// accepted tokens.
func pooledSpec(or *engine.OutputReport, slack [][]float64, thr float64, tree bool) {
	where, lengths := "position", "the emitted lengths"
	if tree {
		where, lengths = "depth", "the accepted tokens"
	}
	var rows []*engine.SpecStats
	var slacks [][]float64
	for i := range or.Rows {
		if s := or.Rows[i].Spec; s != nil && or.Rows[i].Row < len(slack) {
			rows = append(rows, s)
			slacks = append(slacks, slack[or.Rows[i].Row])
		}
	}
	if len(rows) == 0 {
		return
	}
	k := len(rows[0].Positions)
	pool := &engine.SpecStats{Positions: make([]engine.PositionRate, k), Emitted: make([]int, k+1)}
	weighted := make([]float64, k) // Σ reached·a, Σ reached·lo, Σ reached·hi
	los, his, plain := make([]float64, k), make([]float64, k), make([]float64, k)
	emitted := make([]float64, k+1)
	var theoryMean float64
	for ri, s := range rows {
		if len(s.Positions) != k || len(s.Emitted) != k+1 || len(s.EmittedTheory) != k+1 || len(slacks[ri]) < k {
			continue
		}
		pool.Trials += s.Trials
		for i, pr := range s.Positions {
			a := float64(pr.Theory)
			lo, hi := band(a, slacks[ri][i])
			n := float64(pr.Reached)
			pool.Positions[i].Reached += pr.Reached
			pool.Positions[i].Accepted += pr.Accepted
			weighted[i] += n * a
			los[i] += n * lo
			his[i] += n * hi
			plain[i] += a
		}
		for j, h := range s.Emitted {
			pool.Emitted[j] += h
			emitted[j] += float64(s.Trials) * float64(s.EmittedTheory[j])
		}
		theoryMean += float64(s.Trials) * float64(s.TheoryMeanAcceptanceLength)
	}
	if pool.Trials == 0 {
		return
	}
	type failure struct {
		p   float64
		msg string
	}
	var tests []failure
	for i := range pool.Positions {
		pr := &pool.Positions[i]
		pr.Position = i
		lo, hi := stats.Wilson(pr.Accepted, pr.Reached, stats.Z95)
		pr.Lo, pr.Hi, pr.PValue = engine.Float(lo), engine.Float(hi), 1
		pr.Theory = engine.Float(plain[i] / float64(len(rows)))
		if pr.Reached == 0 {
			continue
		}
		n := float64(pr.Reached)
		a, rate := weighted[i]/n, float64(pr.Accepted)/n
		p := stats.BinomialTest(pr.Accepted, pr.Reached, clamp(rate, los[i]/n, his[i]/n))
		pr.Rate, pr.Theory, pr.PValue = engine.Float(rate), engine.Float(a), engine.Float(p)
		tests = append(tests, failure{p, fmt.Sprintf("%s %d accepts %s of the %d trials that reached it over %d rows (95%% CI %s–%s), theory %s (%s)",
			where, i, engine.FormatPercent(rate), pr.Reached, len(rows), engine.FormatPercent(lo), engine.FormatPercent(hi), engine.FormatPercent(a), engine.StoredPText(p))})
	}
	hist := make([]int64, k+1)
	law := make([]float64, k+1)
	pool.EmittedTheory = make([]engine.Float, k+1)
	for j := range hist {
		hist[j] = int64(pool.Emitted[j])
		pool.EmittedTheory[j] = engine.Float(emitted[j] / float64(pool.Trials))
		// A share acceptSlack spread over the lengths keeps a kernel's
		// float32 rejection where theory accepts surely from being
		// impossible (acceptSlack).
		law[j] = (1-acceptSlack)*emitted[j]/float64(pool.Trials) + acceptSlack/float64(k+1)
	}
	pool.EmittedPValue = 1
	if f, err := stats.GoodnessOfFit(hist, law, stats.FitOptions{Label: "length"}); err == nil {
		pool.EmittedPValue = engine.Float(f.PValue)
		tests = append(tests, failure{f.PValue, fmt.Sprintf("%s of %d trials over %d rows do not follow their exact law (G-test %s): %s",
			lengths, pool.Trials, len(rows), engine.PText(f.PValue, f.LogPValue), lengthTable(hist, law))})
	}
	pool.MeanAcceptanceLength = engine.Float(stats.MeanAcceptanceLength(hist))
	pool.TheoryMeanAcceptanceLength = engine.Float(theoryMean / float64(pool.Trials))
	or.Spec = pool
	for _, t := range tests {
		if t.p*float64(len(tests)) < thr {
			runViolation(or, "%s", t.msg)
		}
	}
}

// acceptedCheck tests the spec_accepted counters of the rows against the
// acceptance probabilities: each counts an independent acceptance test at
// every one of the K positions, so their sum over rows is a sum of
// independent Bernoulli trials with mean Σ a_i, tested (conservatively, as
// in pooledSpec) with a binomial at the mean rate.
func acceptedCheck(or *engine.OutputReport, acc []acceptedRow, thr float64) {
	var observed, tests, rows int
	var mean, lo, hi float64
	for _, a := range acc {
		if !a.ok {
			continue
		}
		rows++
		observed += a.observed
		tests += a.tests
		mean += a.mean
		lo += a.lo
		hi += a.hi
	}
	if tests == 0 {
		return
	}
	n := float64(tests)
	p := stats.BinomialTest(observed, tests, clamp(float64(observed)/n, lo/n, hi/n))
	msg := fmt.Sprintf("spec_accepted sums to %d over %d rows where the acceptance tests at their %d positions give %s on average (%s)",
		observed, rows, tests, engine.FormatSig(mean, 2), engine.StoredPText(p))
	if p < thr {
		runViolation(or, "%s: spec_accepted counts an acceptance test at every position, after the first rejection too", msg)
		return
	}
	or.Notes = append(or.Notes, msg)
}
