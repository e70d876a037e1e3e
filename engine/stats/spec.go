package stats

import (
	"fmt"
	"math"
)

// Chain speculative sampling (docs/SEMANTICS.md, spec_verify): the exact laws
// of one row, and the statistics of repeated trials of it. A trial is one
// output row of K+1 tokens for K drafts: the accepted prefix (equal to the
// drafts), then one resampled or bonus token, then -1.

// Z95 is the standard normal quantile of a two-sided 95% interval.
const Z95 = 1.959963984540054

// Wilson returns the Wilson score interval for a success probability after
// successes of n trials, at normal quantile z (Z95 for 95%). Unlike the
// normal interval it stays inside [0, 1] and is honest at 0 and n
// successes. n <= 0 gives (0, 1); successes outside [0, n] give NaNs.
func Wilson(successes, n int, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	if successes < 0 || successes > n {
		return math.NaN(), math.NaN()
	}
	nf, x := float64(n), float64(successes)
	z2 := z * z
	center := (x + z2/2) / (nf + z2)
	half := z / (nf + z2) * math.Sqrt(x*(nf-x)/nf+z2/4)
	return math.Max(0, center-half), math.Min(1, center+half)
}

// PositionRate is the measured acceptance rate of one draft position.
type PositionRate struct {
	// Position is the draft position i, in [0, K).
	Position int `json:"position"`
	// Reached counts the trials that accepted drafts 0..i-1 (every trial
	// reaches position 0); Accepted those of them that accepted draft i.
	Reached  int `json:"reached"`
	Accepted int `json:"accepted"`
	// Rate is Accepted/Reached (0 when Reached is 0), the estimate of the
	// acceptance probability a_i; Lo and Hi its Wilson 95% interval.
	Rate float64 `json:"rate"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
}

// EmittedLength returns the number of leading tokens of trial that equal
// the drafts, at most len(drafts): the trial's accepted prefix. A rejected
// draft is never resampled as itself (the residual max(p - q, 0) is 0 where
// p < q, which is where rejections happen), so this is the emitted length
// of any trial that obeys the structural rules (engine/compare).
func EmittedLength(trial, drafts []int32) int {
	e := 0
	for e < len(drafts) && e < len(trial) && trial[e] == drafts[e] {
		e++
	}
	return e
}

// checkTrials returns an error unless every trial holds len(drafts)+1 tokens.
func checkTrials(trials [][]int32, drafts []int32) error {
	for t, trial := range trials {
		if len(trial) != len(drafts)+1 {
			return fmt.Errorf("trial %d holds %d tokens, want %d for %d drafts", t, len(trial), len(drafts)+1, len(drafts))
		}
	}
	return nil
}

// AcceptanceByPosition returns the acceptance rate of each of the K draft
// positions over trials ([T][K+1] output tokens of one row) with drafts (the
// row's K draft tokens). Position i counts only the trials that reached it
// (accepted 0..i-1), so its rate estimates the conditional acceptance
// probability a_i = min(1, p_i(x_i)/q_i(x_i)) of docs/SEMANTICS.md, the
// value to plot beside it. (vLLM's per-position rates divide by all drafts
// instead, and so estimate a_0·...·a_i.) It returns an error when a trial
// does not hold K+1 tokens.
func AcceptanceByPosition(trials [][]int32, drafts []int32) ([]PositionRate, error) {
	hist, err := EmittedHistogram(trials, drafts)
	if err != nil {
		return nil, err
	}
	rates := make([]PositionRate, len(drafts))
	// Trials with emitted length e reach positions 0..e and accept 0..e-1.
	reached := len(trials)
	for i := range rates {
		accepted := reached - int(hist[i])
		lo, hi := Wilson(accepted, reached, Z95)
		r := PositionRate{Position: i, Reached: reached, Accepted: accepted, Lo: lo, Hi: hi}
		if reached > 0 {
			r.Rate = float64(accepted) / float64(reached)
		}
		rates[i] = r
		reached = accepted
	}
	return rates, nil
}

// EmittedHistogram returns how many trials emitted each length 0..K (see
// EmittedLength), to judge against EmittedDistribution with GoodnessOfFit
// (Label "length"). It returns an error when a trial does not hold K+1
// tokens.
func EmittedHistogram(trials [][]int32, drafts []int32) ([]int64, error) {
	if err := checkTrials(trials, drafts); err != nil {
		return nil, err
	}
	hist := make([]int64, len(drafts)+1)
	for _, trial := range trials {
		hist[EmittedLength(trial, drafts)]++
	}
	return hist, nil
}

// EmittedDistribution returns the exact law of the emitted length E for
// acceptance probabilities accept (a_0..a_{K-1}): P(E = j) = a_0···a_{j-1}
// (1 - a_j) for j < K, and P(E = K) = a_0···a_{K-1}.
func EmittedDistribution(accept []float64) []float64 {
	d := make([]float64, len(accept)+1)
	reach := 1.0
	for j, a := range accept {
		d[j] = reach * (1 - a)
		reach *= a
	}
	d[len(accept)] = reach
	return d
}

// MeanAcceptanceLength returns the mean acceptance length as vLLM reports it,
// 1 + num_accepted_tokens / num_drafts, from a histogram of emitted lengths:
// num_drafts counts verification steps (here trials, one per histogram
// entry), num_accepted_tokens the draft tokens accepted in their prefixes
// (Σ_j j·hist[j], spec_emitted summed), and the 1 is the resampled or bonus
// token that every step emits. It lies in [1, K+1], and is 0 when hist is
// empty.
func MeanAcceptanceLength(hist []int64) float64 {
	var trials, accepted int64
	for j, h := range hist {
		trials += h
		accepted += int64(j) * h
	}
	if trials == 0 {
		return 0
	}
	return 1 + float64(accepted)/float64(trials)
}

// ExpectedAcceptanceLength returns the exact mean of MeanAcceptanceLength
// for acceptance probabilities accept: 1 + Σ_{j=1..K} a_0···a_{j-1}.
func ExpectedAcceptanceLength(accept []float64) float64 {
	m, reach := 1.0, 1.0
	for _, a := range accept {
		reach *= a
		m += reach
	}
	return m
}

// PositionCounts returns, for the lossless check of output position j (0..K),
// the counts per token (len vocab) of the tokens at position j among the
// trials that reached it (emitted length >= j). Those follow
// PositionDistribution for j < K and the target p_K for j = K; judge them
// with GoodnessOfFit. Tokens there that are -1 or outside [0, vocab) are not
// counted; missing says how many (the structural rules report them). It returns an
// error for a position outside [0, K], a vocab that is not positive, or a
// trial that does not hold K+1 tokens.
func PositionCounts(trials [][]int32, drafts []int32, j, vocab int) (counts []int64, missing int64, err error) {
	if j < 0 || j > len(drafts) {
		return nil, 0, fmt.Errorf("position %d outside [0, %d]", j, len(drafts))
	}
	if vocab <= 0 {
		return nil, 0, fmt.Errorf("vocabulary of %d tokens", vocab)
	}
	if err := checkTrials(trials, drafts); err != nil {
		return nil, 0, err
	}
	counts = make([]int64, vocab)
	for _, trial := range trials {
		if EmittedLength(trial, drafts) < j {
			continue
		}
		if tok := trial[j]; tok >= 0 && int(tok) < vocab {
			counts[tok]++
		} else {
			missing++
		}
	}
	return counts, missing, nil
}

// checkDraft validates the inputs of the exact-law helpers: p and q (nil for
// a one-hot draft) of one length, non-negative and finite, and draft inside.
func checkDraft(p, q []float64, draft int) error {
	if q != nil && len(q) != len(p) {
		return fmt.Errorf("draft distribution of %d tokens against a target of %d", len(q), len(p))
	}
	if draft < 0 || draft >= len(p) {
		return fmt.Errorf("draft token %d outside [0, %d)", draft, len(p))
	}
	for i, v := range p {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("target probability %v at token %d", v, i)
		}
	}
	for i, v := range q {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("draft probability %v at token %d", v, i)
		}
	}
	return nil
}

// AcceptanceProbability returns a = min(1, p(x)/q(x)), the probability that
// draft token x is accepted under target p and draft distribution q (nil for
// a one-hot draft, where a = p(x)); a = 1 when q(x) = 0 < p(x), and 0 when
// p(x) = 0. q is used as given, unnormalised, as the kernels use it.
func AcceptanceProbability(p, q []float64, draft int) (float64, error) {
	if err := checkDraft(p, q, draft); err != nil {
		return 0, err
	}
	px := p[draft]
	qx := 1.0
	if q != nil {
		qx = q[draft]
	}
	switch {
	case px == 0:
		return 0, nil
	case qx == 0 || px >= qx:
		return 1, nil
	}
	return px / qx, nil
}

// ResidualDistribution returns normalise(max(p - q, 0)), the law a rejected
// position resamples from (q nil: one-hot at draft, so the residual is p
// without the draft token); when that is zero everywhere, p normalised.
func ResidualDistribution(p, q []float64, draft int) ([]float64, error) {
	if err := checkDraft(p, q, draft); err != nil {
		return nil, err
	}
	r := make([]float64, len(p))
	var s float64
	for i, v := range p {
		qi := 0.0
		switch {
		case q != nil:
			qi = q[i]
		case i == draft:
			qi = 1
		}
		if d := v - qi; d > 0 {
			r[i] = d
			s += d
		}
	}
	if s == 0 {
		copy(r, p)
		for _, v := range p {
			s += v
		}
	}
	if s == 0 {
		return nil, fmt.Errorf("target distribution has no mass")
	}
	for i := range r {
		r[i] /= s
	}
	return r, nil
}
