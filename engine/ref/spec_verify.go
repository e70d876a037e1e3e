package ref

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// SpecRef holds the exact laws of chain speculative sampling on one row
// (SEMANTICS.md "spec_verify"): the drafts are fixed inputs, the randomness is
// the acceptance uniforms and the resampling.
type SpecRef struct {
	// Invalid says why the row cannot be judged: a target position without a
	// distribution, a draft token outside [0, V), or draft probs that are not
	// probabilities. The laws below are still filled for the valid positions.
	Invalid     string
	InvalidRule engine.Rule

	// Drafts are the K proposed tokens.
	Drafts []int64
	// Target are p_0..p_K: the renorm of the target logits at each position
	// (K+1 entries; the last is the bonus position).
	Target []Dist
	// Draft are q_0..q_{K-1}, or nil for one-hot drafts.
	Draft [][]float64
	// Accept are a_i = min(1, p_i(x_i)/q_i(x_i)) (K entries).
	Accept []float64
	// Residual are r_i = normalise(max(p_i - q_i, 0)), p_i when that is all
	// zero (K entries; nil at an invalid position).
	Residual [][]float64
	// Emitted is the law of the emitted length E: Emitted[j] = P(E = j) for
	// j = 0..K.
	Emitted []float64
	// Position[j] is the law of the token at position j given that the chain
	// reaches j: a_j δ(x_j) + (1 - a_j) r_j for j < K, and p_K (the same slice
	// as Target[K].Probs) at j = K. Nil at an invalid position.
	Position [][]float64
	// MeanAccepted is the mean of spec_accepted: the sum of the a_i.
	MeanAccepted float64
}

// SpecVerify returns the speculative-sampling laws of row r of a spec_verify
// run, with the row's temperature and filters applied to every target
// position; eps is the boundary band (BoundaryEps).
func SpecVerify(run *engine.Run, r int, eps float64) SpecRef {
	var s SpecRef
	k, v := run.DraftLen(), run.Vocab()
	tl, dt, dp := run.TargetLogits, run.DraftTokens, run.DraftProbs
	switch {
	case tl == nil || dt == nil:
		s.invalidate("the run lacks target_logits or draft_tokens", RuleParameter)
		return s
	case len(tl.Shape) != 3 || tl.Dim(1) != k+1 || len(dt.Shape) != 2 || dt.Dim(0) != tl.Dim(0):
		s.invalidate(fmt.Sprintf("target_logits %s and draft_tokens %s do not fit together (want [B, K+1, V] and [B, K])", tl.ShapeString(), dt.ShapeString()), RuleParameter)
		return s
	case dp != nil && (len(dp.Shape) != 3 || dp.Dim(0) != tl.Dim(0) || dp.Dim(1) != k || dp.Dim(2) != v):
		s.invalidate(fmt.Sprintf("draft_probs %s does not fit target_logits %s (want [B, K, V])", dp.ShapeString(), tl.ShapeString()), RuleParameter)
		return s
	case r < 0 || r >= tl.Dim(0):
		s.invalidate(fmt.Sprintf("row %d is outside the batch of %d", r, tl.Dim(0)), RuleParameter)
		return s
	}

	var ws Workspace
	t, f := Temperature(run, r), RowFilter(run, r, eps)
	s.Target = make([]Dist, k+1)
	for i := range s.Target {
		ws.Compute(&s.Target[i], TargetLogits(run, r, i), t, f, false)
		if d := &s.Target[i]; !d.Valid() {
			s.invalidate(d.Invalid, d.InvalidRule)
		}
	}
	s.Drafts = make([]int64, k)
	valid := make([]bool, k)
	for i := range k {
		s.Drafts[i] = dt.Int(r*k + i)
		valid[i] = s.Target[i].Valid()
		if x := s.Drafts[i]; x < 0 || x >= int64(v) {
			s.invalidate(fmt.Sprintf("draft token %d at position %d is outside [0, %d)", x, i, v), engine.RuleTokenRange)
			valid[i] = false
		}
	}
	if dp != nil {
		s.Draft = make([][]float64, k)
		for i := range k {
			q := make([]float64, v)
			dp.Floats64((r*k+i)*v, q)
			s.Draft[i] = q
			if msg := probsProblem(q); msg != "" {
				s.invalidate(fmt.Sprintf("draft probs at position %d %s", i, msg), engine.RuleNaN)
				valid[i] = false
			}
		}
	}

	s.Accept = make([]float64, k)
	s.Residual = make([][]float64, k)
	s.Position = make([][]float64, k+1)
	var sum exactSum
	for i := range k {
		if !valid[i] {
			continue
		}
		p, x := s.Target[i].Probs, int(s.Drafts[i])
		q := func(j int) float64 {
			if s.Draft != nil {
				return s.Draft[i][j]
			}
			if j == x {
				return 1
			}
			return 0
		}
		switch px, qx := p[x], q(x); {
		case px == 0:
			s.Accept[i] = 0
		case qx == 0:
			s.Accept[i] = 1
		default:
			s.Accept[i] = min(1, px/qx)
		}
		res := make([]float64, v)
		sum.reset()
		for j := range res {
			res[j] = max(p[j]-q(j), 0)
			sum.add(res[j])
		}
		if z := sum.value(); z > 0 {
			for j := range res {
				res[j] /= z
			}
		} else {
			copy(res, p)
		}
		s.Residual[i] = res
		a := s.Accept[i]
		pos := make([]float64, v)
		for j := range pos {
			pos[j] = (1 - a) * res[j]
		}
		pos[x] += a
		s.Position[i] = pos
	}
	if s.Target[k].Valid() {
		s.Position[k] = s.Target[k].Probs
	}

	s.Emitted = make([]float64, k+1)
	reach := 1.0
	for j := range k {
		s.Emitted[j] = reach * (1 - s.Accept[j])
		reach *= s.Accept[j]
		s.MeanAccepted += s.Accept[j]
	}
	s.Emitted[k] = reach
	return s
}

// invalidate records the first reason the row cannot be judged.
func (s *SpecRef) invalidate(msg string, rule engine.Rule) {
	if s.Invalid == "" {
		s.Invalid, s.InvalidRule = msg, rule
	}
}

// probsProblem says what keeps q from being a probability vector, or "".
func probsProblem(q []float64) string {
	for j, x := range q {
		switch {
		case math.IsNaN(x):
			return fmt.Sprintf("contain NaN at token %d", j)
		case math.IsInf(x, 0):
			return fmt.Sprintf("contain %v at token %d", x, j)
		case x < 0:
			return fmt.Sprintf("contain the negative value %s at token %d", engine.FormatFloat(x), j)
		}
	}
	return ""
}
