package stats

import (
	"math"

	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// smallestTrustedP is where the survival function is trusted as is; below it
// (subnormals, and the exact zeros of underflow) the log p-value comes from
// logChiSquareSurvival instead.
const smallestTrustedP = 1e-280

// scaledChiSquareTail returns the upper tail at stat of a·χ²_d, the scaled
// chi-square with the given mean and variance (a = variance/(2 mean),
// d = 2 mean²/variance), and its natural log. A mean or variance that is not
// positive gives 1.
func scaledChiSquareTail(stat, mean, variance float64) (p, logP float64) {
	if !(mean > 0 && variance > 0) {
		return 1, 0
	}
	a := variance / (2 * mean)
	return chiSquareTail(stat/a, 2*mean*mean/variance)
}

// chiSquareTail returns the upper tail probability of a chi-square variable
// with df degrees of freedom at stat, and its natural log. The log stays
// finite where the probability underflows to 0 (G statistics of badly biased
// samplers at 10^6 draws reach 10^5 and more). df <= 0 or stat <= 0 give 1.
func chiSquareTail(stat, df float64) (p, logP float64) {
	if !(df > 0) || !(stat > 0) {
		return 1, 0
	}
	if math.IsInf(stat, 1) {
		return 0, math.Inf(-1)
	}
	p = distuv.ChiSquared{K: df}.Survival(stat)
	if p > smallestTrustedP {
		return p, math.Log(p)
	}
	return p, logChiSquareSurvival(stat, df)
}

// logChiSquareSurvival returns log Q(df/2, stat/2), the log of the regularised
// upper incomplete gamma function, from its continued fraction (DLMF 8.9.2,
// evaluated by the modified Lentz method as in Numerical Recipes' gcf) with
// the prefactor x^a e^-x / Γ(a) kept in logs. It is accurate where x > a + 1,
// which holds wherever the tail underflows; elsewhere it falls back to the log
// of gonum's survival function.
func logChiSquareSurvival(stat, df float64) float64 {
	a, x := df/2, stat/2
	if x <= a+1 {
		return math.Log(distuv.ChiSquared{K: df}.Survival(stat))
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	lg, _ := math.Lgamma(a)
	return -x + a*math.Log(x) - lg + math.Log(h)
}

// binomialUpper returns P(X >= k) for X ~ Binomial(n, p).
func binomialUpper(k, n int, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n:
		return 0
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	return mathext.RegIncBeta(float64(k), float64(n-k+1), p)
}

// binomialLower returns P(X <= k) for X ~ Binomial(n, p), computed directly
// (not as 1 - upper) so that tiny lower tails keep their precision.
func binomialLower(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	case p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	return mathext.RegIncBeta(float64(n-k), float64(k+1), 1-p)
}

// BinomialTest returns the two-sided p-value of k successes in n trials when
// each succeeds with probability p: twice the smaller tail, at most 1. It is
// how an acceptance count is judged against its theoretical rate. n <= 0
// gives 1; k outside [0, n] or p outside [0, 1] give 0 (impossible data).
func BinomialTest(k, n int, p float64) float64 {
	if n <= 0 {
		return 1
	}
	if k < 0 || k > n || !(p >= 0 && p <= 1) {
		return 0
	}
	lo := binomialLower(k, n, p)
	hi := binomialUpper(k, n, p)
	return math.Min(1, 2*math.Min(lo, hi))
}
