package compare

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/stats"
)

// Reruns are one token per row from two more runs of our sampler on a
// sample run, for the seed rules: SameSeed ran with every row's seed and
// offset as in the judged run and must equal its Tokens; OtherSeed ran with
// other seeds and must not agree with them far more often than independent
// seeds would: everywhere, unless chance alone would, or on many more rows
// than chance gives (stats.DifferentSeedsDiffer).
// Each is a [B] integer tensor, like engine.Output.Tokens.
type Reruns struct {
	// Output is the index, in the outputs given to Judge, of the output
	// whose Tokens the reruns repeat.
	Output    int
	SameSeed  *engine.Tensor
	OtherSeed *engine.Tensor
}

// seedState is what the seed rules gather while rows are judged: the
// probability that two independent draws of each row agree. Each row's
// entry is written by the worker that judges the row.
type seedState struct {
	same, other *engine.Tensor
	collision   []float64
}

// newSeedState checks the reruns against plan p of a run of b rows, and
// returns the state of the seed rules, or a note saying why they cannot be
// judged.
func newSeedState(rr *Reruns, p *plan, b int) (*seedState, string) {
	switch {
	case p.problem != "":
		return nil, ""
	case !p.tokens || p.argmax:
		return nil, "the seed rules judge sampled tokens; this output holds none"
	case rr.SameSeed == nil || rr.OtherSeed == nil:
		return nil, "the seed rules need both reruns (same seeds, other seeds)"
	case !rr.SameSeed.DType.IsInt() || rr.SameSeed.NumElements() != b || !rr.OtherSeed.DType.IsInt() || rr.OtherSeed.NumElements() != b:
		return nil, fmt.Sprintf("the seed reruns hold %s and %s, want %d integer tokens each", rr.SameSeed.ShapeString(), rr.OtherSeed.ShapeString(), b)
	}
	c := make([]float64, b)
	for r := range c {
		c[r] = 1 // rows without a distribution: no evidence either way
	}
	return &seedState{same: rr.SameSeed, other: rr.OtherSeed, collision: c}, ""
}

// judgeSameSeed adds a violation to row r when the rerun with the same seed
// and offset drew another token, and records the row's collision
// probability (probs: the reference distribution; nil for a row without
// one) for the run-level rule on other seeds.
func (s *seedState) judgeSameSeed(r int, first int64, probs []float64, rep *engine.RowReport) {
	if probs != nil {
		s.collision[r] = stats.CollisionProbability(probs)
	}
	if again := s.same.Int(r); again != first {
		rep.AddFinding(violation(engine.RuleExact, int(again), "row %d: the same seed and offset drew token %d, then token %d", r, first, again))
	}
}

// judgeSeeds adds the run-level verdicts of the seed rules to or, whose
// Tokens are first: a note for the same seeds (each row that differs is a
// violation of its own), and a note or a run-level violation for the
// other seeds.
func (s *seedState) judgeSeeds(or *engine.OutputReport, first *engine.Tensor, threshold float64) {
	b := len(s.collision)
	a, same, other := make([]int32, b), make([]int32, b), make([]int32, b)
	for r := range b {
		a[r], same[r], other[r] = int32Token(first.Int(r)), int32Token(s.same.Int(r)), int32Token(s.other.Int(r))
	}
	or.Notes = append(or.Notes, "seeds: "+stats.SameSeedSame(a, same).Message)
	d := stats.DifferentSeedsDiffer(a, other, s.collision, threshold)
	if d.Pass {
		or.Notes = append(or.Notes, "seeds: "+d.Message)
		return
	}
	where := "" // identical everywhere
	if d.Agree < d.Compared {
		where = " on every row"
	}
	runViolation(or, "seeds: %s: the seed does not reach the sampler%s", d.Message, where)
}
