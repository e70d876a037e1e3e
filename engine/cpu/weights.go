package cpu

import (
	"math"

	"github.com/sampviz/sampviz/engine/f32math"
)

// rowMax returns the largest value of x and whether the row has a
// distribution: no NaN, no +Inf, and not every value -Inf.
func rowMax(x []float32) (float32, bool) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v != v || v > math.MaxFloat32 {
			return 0, false
		}
		if v > m {
			m = v
		}
	}
	return m, m >= -math.MaxFloat32
}

// Weights writes the unnormalised softmax weights of logits x at temperature
// t into w (which must be as long as x): w_i = f32math.Exp((x_i - m) / t) with
// m the row's maximum, one float32 subtraction and one float32 division, so
// the maximum weighs exactly 1 and t = 1e-4 cannot overflow. At t = 0 the
// weights are one-hot at the first maximum. Weights reports whether the row
// has a distribution; when it has none (a NaN or +Inf logit, or every logit
// -Inf) it fills w with NaN and returns false. t must be 0 or positive and
// finite.
func Weights(x []float32, t float32, w []float32) (valid bool) {
	w = w[:len(x)]
	m, ok := rowMax(x)
	if !ok {
		nan := float32(math.NaN())
		for i := range w {
			w[i] = nan
		}
		return false
	}
	if t == 0 {
		top := Argmax(x)
		for i := range w {
			w[i] = 0
		}
		w[top] = 1
		return true
	}
	for i, v := range x {
		d := float32(v - m)
		w[i] = f32math.Exp(float32(d / t))
	}
	return true
}

// sumChunk is the number of elements one simulated thread block sums before
// the partial sums are combined pairwise.
const sumChunk = 256

// Sum returns the float32 sum of w formed the way a GPU block reduction forms
// it: chunks of 256 elements, each summed in 8 interleaved lanes (lane l adds
// elements l, l+8, ... in order) that are then added pairwise, and the chunk
// sums combined by a balanced pairwise tree. Its rounding error grows with
// the logarithm of len(w) rather than with len(w), which a float32 softmax
// over 128256 tokens needs.
func Sum(w []float32) float32 {
	n := len(w)
	if n <= sumChunk {
		return chunkSum(w)
	}
	chunks := (n + sumChunk - 1) / sumChunk
	half := (chunks / 2) * sumChunk
	return float32(Sum(w[:half]) + Sum(w[half:]))
}

// chunkSum sums at most sumChunk elements in 8 interleaved lanes.
func chunkSum(w []float32) float32 {
	var a [8]float32
	i := 0
	for ; i+8 <= len(w); i += 8 {
		a[0] += w[i]
		a[1] += w[i+1]
		a[2] += w[i+2]
		a[3] += w[i+3]
		a[4] += w[i+4]
		a[5] += w[i+5]
		a[6] += w[i+6]
		a[7] += w[i+7]
	}
	for l := 0; i < len(w); i, l = i+1, l+1 {
		a[l] += w[i]
	}
	return float32(float32(float32(a[0]+a[1])+float32(a[2]+a[3])) + float32(float32(a[4]+a[5])+float32(a[6]+a[7])))
}

// normalise divides p in place by its Sum.
func normalise(p []float32) {
	s := Sum(p)
	for i, v := range p {
		p[i] = v / s
	}
}

// fillNaN sets every element of p to NaN: the probabilities of a row without
// a distribution.
func fillNaN(p []float32) {
	nan := float32(math.NaN())
	for i := range p {
		p[i] = nan
	}
}
