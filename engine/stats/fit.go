package stats

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/sampviz/sampviz/engine"
)

// Test names a goodness-of-fit statistic.
type Test string

const (
	// GTest is the likelihood-ratio statistic G = 2 Σ O ln(O/E). It is the
	// default.
	GTest Test = "g"
	// Pearson is Pearson's X² = Σ (O - E)² / E.
	Pearson Test = "pearson"
)

// Defaults of FitOptions and of the verdict helpers.
const (
	// DefaultPValue is the p-value below which a statistical check fails a
	// row. At 1e-6, 512 correct rows give a false alarm about once in 2000
	// runs (see ChanceLine).
	DefaultPValue = 1e-6
	// DefaultMinExpected is the least expected count of a bin after pooling.
	DefaultMinExpected = 5
	// DefaultConfidence is the confidence of Fit.TVBound.
	DefaultConfidence = 0.99
)

// FitOptions tune GoodnessOfFit. The zero value gives the defaults.
type FitOptions struct {
	// Test is the statistic: GTest (when empty) or Pearson.
	Test Test
	// MinExpected is the least expected count of a bin after pooling
	// (DefaultMinExpected when 0).
	MinExpected float64
	// Confidence is the probability with which a correct sampler's total
	// variation stays below Fit.TVBound (DefaultConfidence when 0).
	Confidence float64
	// Label is what an index of counts is called in messages: "token" when
	// empty, "length" for emitted-length histograms.
	Label string
}

func (o FitOptions) withDefaults() (FitOptions, error) {
	switch o.Test {
	case "":
		o.Test = GTest
	case GTest, Pearson:
	default:
		return o, fmt.Errorf("unknown goodness-of-fit test %q (want %q or %q)", o.Test, GTest, Pearson)
	}
	if o.MinExpected == 0 {
		o.MinExpected = DefaultMinExpected
	}
	if !(o.MinExpected > 0) || math.IsInf(o.MinExpected, 0) {
		return o, fmt.Errorf("minimum expected count %v is not a positive number", o.MinExpected)
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		return o, fmt.Errorf("confidence %v is not in (0, 1)", o.Confidence)
	}
	if o.Label == "" {
		o.Label = "token"
	}
	return o, nil
}

// TokenCount is how many draws fell on one token.
type TokenCount struct {
	Token int   `json:"token"`
	Count int64 `json:"count"`
}

// Bin is one cell of the goodness-of-fit table after pooling.
type Bin struct {
	// Token is the bin's token when it holds one, or -1 for a pool.
	Token int `json:"token"`
	// Tokens is the number of tokens the bin holds.
	Tokens   int     `json:"tokens"`
	Observed int64   `json:"observed"`
	Expected float64 `json:"expected"`
}

// maxZeroMassListed bounds Fit.ZeroMassDraws; Fit.ZeroMassTokens counts them all.
const maxZeroMassListed = 64

// Fit is the goodness of fit of N draws against a reference distribution.
type Fit struct {
	Test  Test   `json:"test"`
	Label string `json:"label"`
	// Draws is N, every draw counted.
	Draws int64 `json:"draws"`
	// Support is the number of tokens with nonzero reference probability.
	Support int `json:"support"`
	// Bins is the number of bins after pooling; PooledTokens the number of
	// tokens that share a bin with others.
	Bins         int `json:"bins"`
	PooledTokens int `json:"pooled_tokens"`
	// Statistic is G or X² over the bins, on the draws that landed in the
	// support; DF = Bins - 1 is its nominal degrees of freedom.
	Statistic float64 `json:"statistic"`
	DF        int     `json:"df"`
	// NullMean and NullVariance are the mean and variance of Statistic for a
	// correct sampler at these expected counts. For X² they are exact
	// (Haldane 1937: DF, and 2 DF + Σ_b 1/E_b - (B² + 2B - 2)/N' for B bins).
	// For G they are summed over bins from the exact Poisson moments of each
	// bin's deviance, less one χ²₁ for the fixed total (the deviance of N
	// Poisson counts splits into the multinomial G plus the deviance of their
	// sum). Both exceed the nominal χ² when many bins expect few draws: 1500
	// bins that expect 5 draws each push G's mean 4.7% above DF and its
	// variance 13% above 2 DF, which at the nominal χ² turns a 1e-4 threshold
	// into a 4e-3 one.
	NullMean     float64 `json:"null_mean"`
	NullVariance float64 `json:"null_variance"`
	// PValue is the row's p-value: twice the smaller of two tests' p-values
	// (Bonferroni over the two), at most 1. OmnibusP tests the whole table
	// and sees diffuse biases (a temperature error, draws shifted by one
	// token); WorstP tests the most deviant bin and sees a bias on one or two
	// tokens (a token drawn twice as often as it should be), which the
	// omnibus test dilutes over thousands of bins: at N = 10^6 it catches
	// such biases 4 to 50 times smaller (package doc: power). PValue is 0
	// where it underflows, and LogPValue (its natural log) stays finite
	// there. With DF = 0 (fewer than two bins) it is 1.
	PValue    float64 `json:"p_value"`
	LogPValue float64 `json:"log_p_value"`
	// OmnibusP is the upper tail at Statistic of the scaled chi-square
	// a·χ²_d with the null's mean and variance (Satterthwaite: a = Var/(2
	// Mean), d = 2 Mean²/Var), which keeps the false-alarm rate of correct
	// samplers at the threshold where the nominal χ² with DF degrees of
	// freedom does not (package doc: calibration).
	OmnibusP float64 `json:"omnibus_p"`
	// WorstP is the exact two-sided binomial p-value of Worst's count among
	// the N' draws, times Bins (Bonferroni over the bins), at most 1.
	WorstP float64 `json:"worst_p"`
	// ZeroMassDraws lists draws of tokens whose reference probability is 0,
	// the most drawn first (at most 64 tokens); any is a hard failure
	// whatever the p-value. ZeroMassTokens and ZeroMassTotal count all of
	// them: tokens, and draws.
	ZeroMassDraws  []TokenCount `json:"zero_mass_draws,omitempty"`
	ZeroMassTokens int          `json:"zero_mass_tokens"`
	ZeroMassTotal  int64        `json:"zero_mass_total"`
	// Worst is the bin that contributes most to the statistic (for G, the
	// bin whose deviance 2(O ln(O/E) - (O - E)) is largest).
	Worst Bin `json:"worst"`
	// TV is the total variation between the frequencies and the reference,
	// ½ Σ |count/N - p| over every token. ExpectedTV is its mean for a correct
	// sampler at this N (not 0: a finite sample never matches exactly), and
	// TVBound the value a correct sampler stays below with probability
	// Confidence: ExpectedTV + sqrt(ln(1/(1-Confidence)) / (2N)), by
	// McDiarmid's inequality (one draw moves TV by at most 1/N). A TV above
	// TVBound is evidence of bias on its own; a TV near ExpectedTV is noise.
	TV         float64 `json:"tv"`
	ExpectedTV float64 `json:"expected_tv"`
	TVBound    float64 `json:"tv_bound"`
	Confidence float64 `json:"confidence"`
	// Cosine is the cosine similarity of the count vector to the probability
	// vector, the statistic FlashInfer's sampling tests threshold. It is
	// reported for comparison only: at small N it sits far below 1 for a
	// correct sampler with a wide distribution, and near 1 for a biased one
	// with a peaked distribution.
	Cosine float64 `json:"cosine"`
}

// scratch is reusable working memory of GoodnessOfFit, so that judging 512
// rows of 128256 tokens does not allocate 512 times.
type scratch struct {
	keys  []uint8
	order []int32
	bins  []Bin
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// octaves is the number of expected-count octaves that sparse tokens are
// sorted into before pooling; tokens more than 2^-62 below MinExpected share
// the lowest octave.
const octaves = 64

// notSparse marks, in scratch.keys, a token that is a bin of its own or has
// no reference mass.
const notSparse = 0xff

// GoodnessOfFit judges counts (draws per token, length V) against the
// reference probabilities probs (length V, summing to 1 within 1e-6; they are
// divided by their sum).
//
// Tokens with probability 0 are outside the test: a draw of one is listed in
// ZeroMassDraws and fails the row whatever the p-value, and the statistic is
// computed on the other draws (N' of them) so that it speaks of the shape
// inside the support.
//
// Pooling: a token whose expected count N'·p is at least MinExpected is a bin
// of its own. The others (the sparse tail) are sorted by expected count into
// octaves (expected counts within a factor of 2 of each other), smallest
// octave first and by token id within an octave, a counting sort that costs
// O(V); they are then pooled in that order, closing a bin as soon as its
// expected count reaches MinExpected. A remainder that never reaches it joins
// the last pool, or if there is none, the singleton bin with the smallest
// expected count. The pooling depends on the reference and the number of
// draws, never on where the draws fell. A 128256-token Zipf row keeps about
// 160 tokens as bins of their own and pools the other 128000 into 550 to 750
// bins at N = 10^4; at N = 10^6, 7500 to 11000 and 14000 to 21000.
//
// GoodnessOfFit returns an error for inputs no judgement can use: lengths
// that differ, a negative count, a probability that is negative, NaN or
// infinite, probabilities that do not sum to 1, no draws at all, or bad
// options. It costs O(V) time and, after the first call, no allocation but
// the result. It is safe for concurrent use, so rows can be judged in
// parallel.
func GoodnessOfFit(counts []int64, probs []float64, o FitOptions) (Fit, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Fit{}, err
	}
	if len(counts) != len(probs) {
		return Fit{}, fmt.Errorf("counts for %d %ss against %d probabilities", len(counts), o.Label, len(probs))
	}
	if len(probs) == 0 {
		return Fit{}, fmt.Errorf("empty distribution")
	}
	f := Fit{Test: o.Test, Label: o.Label, Confidence: o.Confidence}
	var n, inSupport int64
	var sum float64
	for i, p := range probs {
		c := counts[i]
		switch {
		case !(p >= 0) || math.IsInf(p, 1):
			return Fit{}, fmt.Errorf("probability %v at %s %d", p, o.Label, i)
		case c < 0:
			return Fit{}, fmt.Errorf("negative count %d at %s %d", c, o.Label, i)
		case p > 0:
			f.Support++
			inSupport += c
		case c > 0:
			f.ZeroMassTokens++
			f.ZeroMassTotal += c
			f.ZeroMassDraws = append(f.ZeroMassDraws, TokenCount{Token: i, Count: c})
		}
		sum += p
		n += c
	}
	if math.Abs(sum-1) > 1e-6 {
		return Fit{}, fmt.Errorf("probabilities sum to %v, not 1", sum)
	}
	if n <= 0 {
		return Fit{}, fmt.Errorf("no draws")
	}
	f.Draws = n
	if len(f.ZeroMassDraws) > 0 {
		slices.SortFunc(f.ZeroMassDraws, func(a, b TokenCount) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Token, b.Token))
		})
		if len(f.ZeroMassDraws) > maxZeroMassListed {
			f.ZeroMassDraws = slices.Clip(f.ZeroMassDraws[:maxZeroMassListed])
		}
	}

	nf := float64(n)
	f.TV, f.ExpectedTV, f.Cosine = distances(counts, probs, sum, nf)
	f.TVBound = f.ExpectedTV + math.Sqrt(-math.Log1p(-o.Confidence)/(2*nf))

	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	bins := s.pool(counts, probs, sum, float64(inSupport), o.MinExpected)
	for _, b := range bins {
		if b.Tokens > 1 {
			f.PooledTokens += b.Tokens
		}
	}
	f.Bins = len(bins)
	f.DF = len(bins) - 1
	switch {
	case f.DF > 0:
		f.Statistic, f.Worst = statistic(bins, o.Test)
		f.NullMean, f.NullVariance = nullMoments(bins, o.Test, float64(inSupport))
		omni, logOmni := scaledChiSquareTail(f.Statistic, f.NullMean, f.NullVariance)
		worst, logWorst := binTail(f.Worst, inSupport, len(bins))
		f.OmnibusP, f.WorstP = omni, worst
		f.PValue = math.Min(1, 2*math.Min(omni, worst))
		f.LogPValue = math.Min(0, math.Ln2+math.Min(logOmni, logWorst))
	case len(bins) == 1:
		f.Worst = bins[0]
		f.PValue, f.OmnibusP, f.WorstP = 1, 1, 1
	default:
		f.PValue, f.OmnibusP, f.WorstP = 1, 1, 1
	}
	return f, nil
}

// binTail returns the two-sided binomial p-value of bin b's count among n
// draws, times bins (Bonferroni over the bins that b was picked from), at
// most 1, and its natural log. Where the exact tail underflows, the log
// comes from the binomial deviance D of the count: the tail of a normal
// beyond sqrt(D), log 2Φ(-r) ≈ log 2 - r²/2 - log(r sqrt(2π)).
func binTail(b Bin, n int64, bins int) (p, logP float64) {
	p = BinomialTest(int(b.Observed), int(n), b.Expected/float64(n))
	logBins := math.Log(float64(bins))
	if p > smallestTrustedP {
		return math.Min(1, p*float64(bins)), math.Min(0, math.Log(p)+logBins)
	}
	return math.Min(1, p*float64(bins)), logBinomialTestFar(float64(b.Observed), b.Expected, float64(n)) + logBins
}

// logBinomialTestFar approximates the log of BinomialTest for a count o far
// from its mean e among n trials, where the exact tail underflows: with D the
// binomial deviance of o and r = sqrt(D), 2Φ(-r) ≈ 2φ(r)/r (Mills' ratio),
// so log p ≈ log 2 - r²/2 - log(r sqrt(2π)), within a few percent of the
// exact log where both can be computed.
func logBinomialTestFar(o, e, n float64) float64 {
	var d float64
	if o > 0 {
		d += o * math.Log(o/e)
	}
	if o < n {
		d += (n - o) * math.Log((n-o)/(n-e))
	}
	r := math.Sqrt(2 * d)
	return math.Ln2 - r*r/2 - math.Log(r*math.Sqrt(2*math.Pi))
}

// distances returns the total variation between the frequencies counts/n
// and probs/sum, its mean for a correct sampler, and the cosine similarity of
// counts to probs.
func distances(counts []int64, probs []float64, sum, n float64) (tv, expectedTV, cosine float64) {
	lgN1, _ := math.Lgamma(n + 1)
	invSum, invN := 1/sum, 1/n
	var dot, cc, pp float64
	for i, p := range probs {
		c := float64(counts[i])
		cc += c * c
		if p == 0 {
			tv += c * invN
			continue
		}
		p *= invSum
		tv += math.Abs(c*invN - p)
		expectedTV += meanAbsDev(n, lgN1, p)
		dot += c * p
		pp += p * p
	}
	if cc > 0 && pp > 0 {
		cosine = dot / (math.Sqrt(cc) * math.Sqrt(pp))
	}
	return tv / 2, expectedTV / (2 * n), cosine
}

// pool returns the bins of GoodnessOfFit for n draws in the support (see its
// doc comment), in s's memory: valid until s is used again.
func (s *scratch) pool(counts []int64, probs []float64, sum, n, minExpected float64) []Bin {
	if cap(s.keys) < len(probs) {
		s.keys = make([]uint8, len(probs))
		s.order = make([]int32, len(probs))
	}
	keys := s.keys[:len(probs)]
	bins := s.bins[:0]
	defer func() { s.bins = bins[:0] }()

	// The singleton bins, and the octave of every sparse token.
	var bucket [octaves]int32
	topExp := int(math.Float64bits(minExpected)>>52) & 0x7ff
	scale := n / sum
	sparse := 0
	for i, p := range probs {
		keys[i] = notSparse
		if p == 0 {
			continue
		}
		e := p * scale
		if e >= minExpected {
			bins = append(bins, Bin{Token: i, Tokens: 1, Observed: counts[i], Expected: e})
			continue
		}
		k := max(0, (int(math.Float64bits(e)>>52)&0x7ff)-(topExp-(octaves-1)))
		keys[i] = uint8(k)
		bucket[k]++
		sparse++
	}
	if sparse == 0 {
		return bins
	}

	// Counting sort of the sparse tokens by octave, stable in token id.
	var start [octaves]int32
	var at int32
	for k := range bucket {
		start[k] = at
		at += bucket[k]
	}
	order := s.order[:sparse]
	for i, k := range keys {
		if k != notSparse {
			order[start[k]] = int32(i)
			start[k]++
		}
	}

	singletons := len(bins)
	pool := Bin{Token: -1}
	for _, i := range order {
		pool.Tokens++
		pool.Observed += counts[i]
		pool.Expected += probs[i] * scale
		if pool.Expected >= minExpected {
			bins = append(bins, pool)
			pool = Bin{Token: -1}
		}
	}
	if pool.Tokens == 0 {
		return bins
	}
	switch {
	case len(bins) > singletons:
		merge(&bins[len(bins)-1], pool)
	case singletons > 0:
		smallest := 0
		for j := range bins {
			if bins[j].Expected < bins[smallest].Expected {
				smallest = j
			}
		}
		merge(&bins[smallest], pool)
	default:
		bins = append(bins, pool)
	}
	return bins
}

// merge adds pool's tokens to b, which becomes a pool.
func merge(b *Bin, pool Bin) {
	b.Token = -1
	b.Tokens += pool.Tokens
	b.Observed += pool.Observed
	b.Expected += pool.Expected
}

// statistic returns the test statistic over bins and the bin that
// contributes most. For G the contribution of a bin is its deviance
// 2(O ln(O/E) - (O - E)), which is never negative and sums to G because
// Σ O = Σ E.
func statistic(bins []Bin, t Test) (float64, Bin) {
	var stat, worst float64
	w := bins[0]
	for _, b := range bins {
		o, e := float64(b.Observed), b.Expected
		var c float64
		if t == Pearson {
			c = (o - e) * (o - e) / e
		} else {
			c = -2 * (o - e)
			if o > 0 {
				c += 2 * o * math.Log(o/e)
			}
		}
		stat += c
		if c > worst {
			worst, w = c, b
		}
	}
	return math.Max(stat, 0), w // a perfect fit can round below 0
}

// nullMoments returns the mean and variance of the statistic over bins for
// a correct sampler of n draws (Fit.NullMean).
func nullMoments(bins []Bin, t Test, n float64) (mean, variance float64) {
	k := float64(len(bins))
	if t == Pearson {
		var inv float64
		for _, b := range bins {
			inv += 1 / b.Expected
		}
		return k - 1, 2*(k-1) + inv - (k*k+2*k-2)/n
	}
	for _, b := range bins {
		m, v := poissonDevianceMoments(b.Expected)
		mean += m
		variance += v
	}
	return mean - 1, variance - 2
}

// exactMomentsBelow is the expected count under which poissonDevianceMoments
// sums the Poisson law; above it a series is as good.
const exactMomentsBelow = 50

// logInt[x] = ln x for the counts that the exact sums reach.
var logInt = func() [256]float64 {
	var t [256]float64
	for x := 1; x < len(t); x++ {
		t[x] = math.Log(float64(x))
	}
	return t
}()

// poissonDevianceMoments returns the mean and variance of the deviance
// 2(X ln(X/λ) - (X - λ)) of X ~ Poisson(λ). Below exactMomentsBelow they
// come from sums over the law (poissonDevianceSums), interpolated linearly
// in a table of step 1/64 from λ = 4 (within 4e-7 of the sums; at N = 10^6
// a 128256-token row has 9000 bins in that range, and the table saves 4 ms
// per row). Above, from the series q + 1/(6λ²) + 19/(60λ³) and
// 2q² + 23/(18λ²) + 3.8/λ³ with q = 1 + 1/(6λ): the leading terms are
// Williams' correction, the others fitted to the sums, which they match to
// 2e-7 and 4e-6 at λ = 50 and far better above.
func poissonDevianceMoments(lam float64) (mean, variance float64) {
	switch {
	case lam >= exactMomentsBelow:
		q, l2, l3 := 1+1/(6*lam), lam*lam, lam*lam*lam
		return q + 1/(6*l2) + 19/(60*l3), 2*q*q + 23/(18*l2) + 3.8/l3
	case lam < momentTableFrom:
		return poissonDevianceSums(lam)
	}
	t := momentTable()
	x := (lam - momentTableFrom) * momentSteps
	i := int(x)
	f := x - float64(i)
	a, b := t[i], t[i+1]
	return a[0] + f*(b[0]-a[0]), a[1] + f*(b[1]-a[1])
}

// The moment table starts at λ = momentTableFrom (below, the law is summed
// each time: only bins of an unusually small FitOptions.MinExpected are
// there) with momentSteps entries per unit of λ.
const (
	momentTableFrom = 4
	momentSteps     = 64
)

// momentTable holds poissonDevianceSums at λ = momentTableFrom +
// i/momentSteps up to exactMomentsBelow, built on first use (2900 entries,
// about a millisecond).
var momentTable = sync.OnceValue(func() [][2]float64 {
	t := make([][2]float64, (exactMomentsBelow-momentTableFrom)*momentSteps+2)
	for i := range t {
		m, v := poissonDevianceSums(momentTableFrom + float64(i)/momentSteps)
		t[i] = [2]float64{m, v}
	}
	return t
})

// poissonDevianceSums returns the mean and variance of the Poisson deviance
// (poissonDevianceMoments) summed over the law, from the mode outwards, 12
// standard deviations and more each way, for λ up to about exactMomentsBelow.
func poissonDevianceSums(lam float64) (mean, variance float64) {
	sd := math.Sqrt(lam)
	lo := max(0, int(lam-12*sd-5))
	hi := min(len(logInt)-1, int(lam+12*sd+20))
	mode := int(lam)
	logLam := math.Log(lam)
	lg, _ := math.Lgamma(float64(mode + 1))
	peak := math.Exp(float64(mode)*logLam - lam - lg)
	var m1, m2 float64
	add := func(x int, pr float64) {
		d := 2 * (lam - float64(x))
		if x > 0 {
			d += 2 * float64(x) * (logInt[x] - logLam)
		}
		m1 += pr * d
		m2 += pr * d * d
	}
	pr := peak
	for x := mode; x <= hi; x++ {
		add(x, pr)
		pr *= lam / float64(x+1)
	}
	pr = peak
	for x := mode - 1; x >= lo; x-- {
		pr *= float64(x+1) / lam
		add(x, pr)
	}
	return m1, m2 - m1*m1
}

// meanAbsDev returns E|X - np| for X ~ Binomial(n, p), lgN1 = lgamma(n+1):
// de Moivre's formula 2 (m+1) C(n, m+1) p^(m+1) (1-p)^(n-m) with m =
// floor(np), in logs; once np(1-p) >= 50 the normal value sqrt(2np(1-p)/π),
// which is within 0.3% of it there and saves two lgamma calls per token.
func meanAbsDev(n, lgN1, p float64) float64 {
	if p <= 0 || p >= 1 {
		return 0
	}
	v := n * p * (1 - p)
	if v >= 50 {
		return math.Sqrt(2 * v / math.Pi)
	}
	m := math.Floor(n * p)
	if m == 0 {
		// Most tokens of a wide row: 2np(1-p)^n, with cheap logs and exps
		// where p is small (these two lines are most of GoodnessOfFit's time).
		var l float64 // ln(1 - p)
		if p < 1e-3 {
			l = -p * (1 + p*(1.0/2+p*(1.0/3+p/4)))
		} else {
			l = math.Log1p(-p)
		}
		return 2 * n * p * expNear0(n*l)
	}
	lm, _ := math.Lgamma(m + 1)
	lr, _ := math.Lgamma(n - m)
	return 2 * math.Exp(lgN1-lm-lr+(m+1)*math.Log(p)+(n-m)*math.Log1p(-p))
}

// expNear0 returns e^y, by its Taylor series to degree 14 for y in [-1, 0]
// (relative error below 3e-12) and math.Exp elsewhere. The polynomial is evaluated
// by Estrin's scheme: four levels of independent products instead of
// Horner's chain of fourteen, which is what made it slower than math.Exp.
func expNear0(y float64) float64 {
	if y < -1 || y > 0 {
		return math.Exp(y)
	}
	// The coefficients 1/k! are constants, not a table: under the race
	// detector every table read is a call.
	y2 := y * y
	y4 := y2 * y2
	y8 := y4 * y4
	q0 := (1 + y) + (1.0/2+y/6)*y2
	q1 := (1.0/24 + y/120) + (1.0/720+y/5040)*y2
	q2 := (1.0/40320 + y/362880) + (1.0/3628800+y/39916800)*y2
	q3 := (1.0/479001600 + y/6227020800) + y2/87178291200
	return (q0 + q1*y4) + (q2+q3*y4)*y8
}

// Pass reports whether the draws pass at the p-value threshold
// (DefaultPValue when threshold is 0): no draw of a zero-mass token, and
// PValue >= threshold.
func (f *Fit) Pass(threshold float64) bool {
	if threshold == 0 {
		threshold = DefaultPValue
	}
	return f.ZeroMassTotal == 0 && f.PValue >= threshold
}

// Violations returns one sentence per reason the draws fail at threshold
// (DefaultPValue when 0), without a "row N:" prefix; none when they pass.
func (f *Fit) Violations(threshold float64) []string {
	if threshold == 0 {
		threshold = DefaultPValue
	}
	var out []string
	if f.ZeroMassTotal > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%d of %d draws hit %s with zero reference mass (", f.ZeroMassTotal, f.Draws, plural(f.ZeroMassTokens, f.Label))
		for i, tc := range f.ZeroMassDraws {
			if i == 5 {
				fmt.Fprintf(&b, ", ...")
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %d: %d", f.Label, tc.Token, tc.Count)
		}
		b.WriteString(")")
		out = append(out, b.String())
	}
	if f.PValue < threshold {
		name := "G"
		if f.Test == Pearson {
			name = "X²"
		}
		w := f.Worst
		where := fmt.Sprintf("%s %d", f.Label, w.Token)
		if w.Token < 0 {
			where = fmt.Sprintf("a pool of %d %ss", w.Tokens, f.Label)
		}
		out = append(out, fmt.Sprintf("%d draws do not follow the reference (%s < %s): %s = %s over %d bins where a correct sampler gives %s ± %s (%s); most deviant, %s: %d drawn where %s expected (%s over %d bins)",
			f.Draws-f.ZeroMassTotal, engine.PText(f.PValue, f.LogPValue), engine.FormatFloat(threshold),
			name, engine.FormatSig(f.Statistic, 4), f.Bins, engine.FormatSig(f.NullMean, 4), engine.FormatSig(math.Sqrt(f.NullVariance), 2), engine.StoredPText(f.OmnibusP),
			where, w.Observed, engine.FormatSig(w.Expected, 4), engine.StoredPText(f.WorstP), f.Bins))
	}
	return out
}

// probWords writes a probability inside a sentence: "3.1e-12", or "below
// 1e-300" for one that underflowed.
func probWords(p, logP float64) string {
	s := engine.FormatP(p, logP)
	if strings.HasPrefix(s, "<") {
		return "below 1e-300"
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
