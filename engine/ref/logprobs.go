package ref

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// LogRow is the float64 reference log-softmax of one row (docs/SEMANTICS.md
// "Logprobs"), computed from the logits rather than from the probabilities,
// so that a token whose probability underflows keeps its finite log
// probability.
//
// Z holds the scaled logits shifted by their maximum: z_i = (x_i - max x)/t
// on the exact inputs (strict), or y_i - max y with y_i = round(float32(x_i)
// / float32(t)) in the input dtype (native); -Inf for a masked token. Scale
// is the greatest |x_i|/t (|y_i| native) over the finite tokens: the size of
// the scaled logits whose float32 rounding a kernel's log probabilities
// carry. LogProbs holds z_i - log Σ_{kept j} exp(z_j) for the tokens kept
// (Normalise), -Inf for the others.
type LogRow struct {
	Z        []float64
	Scale    float64
	LogProbs []float64
	// LogZ is log Σ_{kept} exp(z_j), the normaliser of LogProbs.
	LogZ float64

	sum exactSum
	x   []float64
}

// Scaled fills l.Z and l.Scale from the logits x at temperature t, strict
// or native. It reports false when x cannot be read, holds NaN or +Inf, is
// all masked, or (native) overflows its dtype once scaled: a row without a
// distribution, which Compute reports in words.
func (l *LogRow) Scaled(x Logits, t float64, native bool) bool {
	if x.check() != "" || !(t > 0) || math.IsInf(t, 0) {
		return false
	}
	l.x = resize(l.x, x.Len)
	x.Tensor.Floats64(x.Offset, l.x)
	if msg, _ := oddReason(x, l.x); msg != "" {
		return false
	}
	l.Z = resize(l.Z, x.Len)
	m := math.Inf(-1)
	for i, xi := range l.x {
		y := xi
		if native && t != 1 {
			y = nativeScale(xi, t, x.Tensor.DType)
			if overflows(xi, y) {
				return false
			}
		}
		l.Z[i] = y
		m = max(m, y)
	}
	div := t
	if native {
		div = 1 // the scaled logits are the softmax's input
	}
	l.Scale = 0
	for i, y := range l.Z {
		if math.IsInf(y, -1) {
			continue
		}
		l.Scale = max(l.Scale, math.Abs(y)/div)
		l.Z[i] = (y - m) / div
	}
	return true
}

// Normalise fills l.LogProbs with the log-softmax of l.Z over the tokens
// keep reports, -Inf for the others: z_i - log Σ_{keep j} exp(z_j), the sum
// exact. At least one kept token must have a finite z.
func (l *LogRow) Normalise(keep func(i int) bool) {
	l.SetLogZ(l.LogSumExp(keep), keep)
}

// LogSumExp returns log Σ exp(z_j) over the tokens keep reports (-Inf for
// none), the sum exact.
func (l *LogRow) LogSumExp(keep func(i int) bool) float64 {
	// The greatest kept z first, so that no exp overflows and the largest
	// term is 1 (z <= 0 everywhere, but the greatest kept may be below 0).
	top := math.Inf(-1)
	for i, z := range l.Z {
		if keep(i) {
			top = max(top, z)
		}
	}
	if math.IsInf(top, -1) {
		return top
	}
	l.sum.reset()
	for i, z := range l.Z {
		if keep(i) && !math.IsInf(z, -1) {
			l.sum.add(math.Exp(z - top))
		}
	}
	return top + math.Log(l.sum.value())
}

// SetLogZ fills l.LogProbs with z_i - logZ for the tokens keep reports, -Inf
// for the others, and sets l.LogZ.
func (l *LogRow) SetLogZ(logZ float64, keep func(i int) bool) {
	l.LogProbs = resize(l.LogProbs, len(l.Z))
	l.LogZ = logZ
	for i, z := range l.Z {
		l.LogProbs[i] = math.Inf(-1)
		if keep(i) && !math.IsInf(z, -1) {
			l.LogProbs[i] = z - logZ
		}
	}
}

// KeepsRef reports whether the reference d keeps token i for a log-softmax
// (LogRow.Normalise): the tokens d gives mass, and the tokens of a row
// without filters whose probability underflows float64 but whose logit is
// finite (z finite); boundary tokens as d decides them.
func KeepsRef(d *Dist, z []float64, i int) bool {
	if math.IsInf(z[i], -1) {
		return false
	}
	if !d.Filtered() {
		return true
	}
	return d.Class[i] == Kept || d.Probs[i] > 0
}

// Filtered reports whether the row's filters drop anything: then Probs and
// Base are different slices.
func (d *Dist) Filtered() bool {
	return len(d.Base) > 0 && len(d.Probs) > 0 && &d.Base[0] != &d.Probs[0]
}

// LogprobsTemperature returns the temperature a row's logprobs of kind k
// are taken at: 1 for raw ones; for processed ones the row's temperature,
// or 1 on a greedy row (vLLM divides a greedy row by 1: its processed
// logprobs are the log-softmax of its logits, after the row's filters).
func LogprobsTemperature(run *engine.Run, r int, k engine.LogprobsKind) float64 {
	t := Temperature(run, r)
	if k != engine.LogprobsProcessed || Greedy(t) {
		return 1
	}
	return t
}
