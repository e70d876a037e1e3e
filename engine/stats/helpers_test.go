package stats

import (
	"math"
	"math/rand/v2"
)

// Distributions and samplers for the tests. Every distribution is fresh random
// data from a seeded generator, so the tests are deterministic but never
// judge hand-picked numbers.

// newRand returns a generator for one named use, so that tests do not share
// streams.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5ca1ab1e)) }

// zipfDist returns an LLM-like distribution over v tokens: Zipf with an
// exponent drawn in [1.0, 1.2], on randomly permuted token ids (real
// vocabularies do not sort tokens by probability).
func zipfDist(rng *rand.Rand, v int) []float64 {
	s := 1 + 0.2*rng.Float64()
	p := make([]float64, v)
	perm := rng.Perm(v)
	for rank, tok := range perm {
		p[tok] = math.Pow(float64(rank+1), -s)
	}
	return normalise(p)
}

// peakedDist returns a distribution over v tokens whose top token holds
// roughly 0.6 to 0.9 of the mass, from normal logits with one boosted.
func peakedDist(rng *rand.Rand, v int) []float64 {
	x := make([]float64, v)
	for i := range x {
		x[i] = 2 * rng.NormFloat64()
	}
	top := rng.IntN(v)
	x[top] = 0
	m := math.Inf(-1)
	for _, xi := range x {
		m = math.Max(m, xi)
	}
	p := make([]float64, v)
	var rest float64
	for i := range x {
		if i != top {
			p[i] = math.Exp(x[i] - m)
			rest += p[i]
		}
	}
	topMass := 0.6 + 0.3*rng.Float64()
	for i := range p {
		p[i] *= (1 - topMass) / rest
	}
	p[top] = topMass
	return p
}

// flatDist returns a nearly uniform distribution over v tokens.
func flatDist(rng *rand.Rand, v int) []float64 {
	p := make([]float64, v)
	for i := range p {
		p[i] = 1 + 0.1*rng.Float64()
	}
	return normalise(p)
}

// softmaxAt returns p^(1/t) renormalised: the distribution p would have been
// at temperature t relative to its own.
func softmaxAt(p []float64, t float64) []float64 {
	q := make([]float64, len(p))
	for i, pi := range p {
		if pi > 0 {
			q[i] = math.Exp(math.Log(pi) / t)
		}
	}
	return normalise(q)
}

func normalise(p []float64) []float64 {
	var s float64
	for _, v := range p {
		s += v
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// cdfOf returns the inclusive prefix sums of p.
func cdfOf(p []float64) []float64 {
	c := make([]float64, len(p))
	var s float64
	for i, v := range p {
		s += v
		c[i] = s
	}
	return c
}

// drawCounts returns the counts of n independent draws from the distribution
// with inclusive prefix sums cdf: n sorted uniforms from exponential spacings
// walked against the CDF, O(n + V), the same law as n inverse-CDF draws.
func drawCounts(rng *rand.Rand, cdf []float64, n int) []int64 {
	counts := make([]int64, len(cdf))
	gaps := make([]float64, n+1)
	var total float64
	for i := range gaps {
		gaps[i] = rng.ExpFloat64()
		total += gaps[i]
	}
	scale := total / cdf[len(cdf)-1]
	j := 0
	var at float64
	for _, g := range gaps[:n] {
		at += g
		for j < len(cdf)-1 && cdf[j]*scale <= at {
			j++
		}
		counts[j]++
	}
	return counts
}

// drawOne returns one inverse-CDF draw: the first token whose inclusive prefix
// sum exceeds a uniform on [0, total).
func drawOne(rng *rand.Rand, cdf []float64) int32 {
	u := rng.Float64() * cdf[len(cdf)-1]
	lo, hi := 0, len(cdf)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if cdf[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return int32(lo)
}

// PositionDistribution returns the law of the token at a draft position given
// that the chain reaches it: a·δ(x) + (1 - a)·r, with a the
// AcceptanceProbability and r the ResidualDistribution. With a one-hot draft
// (q nil) it is p itself: speculative sampling is lossless.
func PositionDistribution(p, q []float64, draft int) ([]float64, error) {
	a, err := AcceptanceProbability(p, q, draft)
	if err != nil {
		return nil, err
	}
	r, err := ResidualDistribution(p, q, draft)
	if err != nil {
		return nil, err
	}
	for i := range r {
		r[i] *= 1 - a
	}
	r[draft] += a
	return r, nil
}
