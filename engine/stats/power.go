package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultPower is the probability with which DetectableTV's bias is caught.
const DefaultPower = 0.9

// DetectableTV returns the smallest total variation δ between a sampler's
// law and the reference that f's draws catch with probability power
// (DefaultPower when 0) at the p-value threshold (DefaultPValue when 0),
// whatever the bias's shape, as long as it moves probability between the
// fit's bins (a move between tokens that share a pool is invisible to any
// pooled test). It is NaN when the fit has fewer than two bins.
//
// The omnibus test alone is counted, at threshold/2 (the row's p-value is
// twice the smaller of two tests'). A law q at total variation δ from p has
// χ²(q‖p) = Σ (q - p)²/p >= (Σ |q - p|)² = 4δ² (Cauchy-Schwarz with Σ p = 1;
// equality when |q - p| is proportional to p: the most diffuse bias, the
// hardest to see). N draws of q move the statistic's mean from the null's
// M to M + λ with λ = N·χ²(q‖p) >= 4Nδ², and its variance from V to about
// V + 4λ (the noncentral chi-square's). The bias is caught with probability
// power once M + λ - z·sqrt(V + 4λ) reaches the critical value c of the
// scaled chi-square null at threshold/2 (z the normal quantile of power):
// λ = A + 2z² + z·sqrt(4A + 4z² + V) with A = c - M, and δ = sqrt(λ/(4N)).
func (f *Fit) DetectableTV(threshold, power float64) float64 {
	if threshold == 0 {
		threshold = DefaultPValue
	}
	if power == 0 {
		power = DefaultPower
	}
	if f.DF < 1 || f.Draws <= 0 || !(f.NullMean > 0 && f.NullVariance > 0) {
		return math.NaN()
	}
	n := float64(f.Draws - f.ZeroMassTotal)
	if n <= 0 {
		return math.NaN()
	}
	m, v := f.NullMean, f.NullVariance
	a, k := v/(2*m), 2*m*m/v
	c := a * distuv.ChiSquared{K: k}.Quantile(1-threshold/2)
	z := distuv.UnitNormal.Quantile(power)
	aa := math.Max(c-m, 0)
	lambda := aa + 2*z*z + z*math.Sqrt(4*aa+4*z*z+v)
	return math.Min(1, math.Sqrt(lambda/(4*n)))
}
