package ref

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// ArgmaxRef is the reference of one argmax row: the set of tied maxima (any of
// them is right) and the margin to the runner-up, which tells how fragile the
// answer is.
type ArgmaxRef struct {
	// Invalid says why the row has no argmax (NaN, or every token masked);
	// +Inf is an ordinary maximum.
	Invalid     string
	InvalidRule engine.Rule

	// Tokens are the indices of the maximum, ascending.
	Tokens []int
	Max    float64
	// RunnerUp is the greatest logit below Max (-Inf when there is none) and
	// RunnerUpToken its lowest index (-1 when there is none).
	RunnerUp      float64
	RunnerUpToken int
}

// Has reports whether token is one of the tied maxima.
func (a *ArgmaxRef) Has(token int64) bool {
	for _, t := range a.Tokens {
		if int64(t) == token {
			return true
		}
	}
	return false
}

// Argmax returns the argmax reference of row r of run.Logits.
func Argmax(run *engine.Run, r int) ArgmaxRef { return ArgmaxOf(rowOf(run, r)) }

// ArgmaxOf returns the argmax reference of one row of logits.
func ArgmaxOf(x Logits) ArgmaxRef {
	a := ArgmaxRef{RunnerUpToken: -1}
	if msg := x.check(); msg != "" {
		a.Invalid, a.InvalidRule = msg, RuleParameter
		return a
	}
	xs := make([]float64, x.Len)
	x.Tensor.Floats64(x.Offset, xs)
	return argmaxOfValues(x, xs)
}

// argmaxOfValues returns the argmax reference of the row x, read into xs.
func argmaxOfValues(x Logits, xs []float64) ArgmaxRef {
	a := ArgmaxRef{RunnerUpToken: -1}
	nan, masked, first := 0, 0, -1
	m := math.Inf(-1)
	for i, v := range xs {
		switch {
		case math.IsNaN(v):
			nan++
			if first < 0 {
				first = i
			}
		case math.IsInf(v, -1):
			masked++
		default:
			m = max(m, v)
		}
	}
	// +Inf is an ordinary maximum here, so only NaN and all-masked count.
	if msg, rule := invalidReason(x, nan, 0, masked, first); msg != "" {
		a.Invalid, a.InvalidRule = msg, rule
		return a
	}
	a.Max, a.RunnerUp = m, math.Inf(-1)
	for i, v := range xs {
		switch {
		case v == m:
			a.Tokens = append(a.Tokens, i)
		case v > a.RunnerUp:
			a.RunnerUp, a.RunnerUpToken = v, i
		}
	}
	return a
}
