package ref

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// GateRow is one row of logits read for a logits_gate run: the values in
// float64 (exact for every float dtype), their distribution at T = 1 in
// log form, and their argmax. The golden row (the run's logits) is the
// reference; an engine's row (an output logits@MODE) is read the same way,
// so that the two compare on the same footing.
type GateRow struct {
	// Invalid says why the row has no distribution (NaN or +Inf, every
	// token masked); Logits are read even then.
	Invalid     string
	InvalidRule engine.Rule

	Logits []float64
	// Max is the greatest logit and LogZ is log Σ exp(x_i - Max): the log
	// probability of token i at T = 1 is x_i - Max - LogZ.
	Max, LogZ float64
	Argmax    ArgmaxRef
}

// ReadGate fills g with the row x, reusing g's memory.
func ReadGate(g *GateRow, x Logits) {
	g.Invalid, g.InvalidRule = "", ""
	g.Logits = resize(g.Logits, x.Len)
	if msg := x.check(); msg != "" {
		g.Invalid, g.InvalidRule = msg, RuleParameter
		return
	}
	x.Tensor.Floats64(x.Offset, g.Logits)
	g.Argmax = argmaxOfValues(x, g.Logits)
	if msg, rule := oddReason(x, g.Logits); msg != "" {
		g.Invalid, g.InvalidRule = msg, rule
		return
	}
	m := g.Argmax.Max // finite: the row holds no NaN or +Inf, and not only -inf
	var s exactSum
	for _, v := range g.Logits {
		s.add(math.Exp(v - m))
	}
	g.Max, g.LogZ = m, math.Log(s.value())
}

// Valid reports whether the row has a distribution.
func (g *GateRow) Valid() bool { return g.Invalid == "" }

// LogProb returns the log probability of token i at T = 1 (-Inf for a
// masked token).
func (g *GateRow) LogProb(i int) float64 { return g.Logits[i] - g.Max - g.LogZ }

// GateKL returns KL(p || q) = Σ p_i (log p_i - log q_i) in nats between the
// distributions at T = 1 of two valid rows of one vocabulary, from their log
// probabilities (exact where a probability underflows): +Inf when q masks a
// token p gives mass.
func GateKL(p, q *GateRow) float64 {
	var s exactSum
	for i := range p.Logits {
		lp := p.LogProb(i)
		if math.IsInf(lp, -1) {
			continue
		}
		lq := q.LogProb(i)
		if math.IsInf(lq, -1) {
			return math.Inf(1)
		}
		s.add(math.Exp(lp) * (lp - lq))
	}
	return max(s.value(), 0)
}
