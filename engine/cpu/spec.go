package cpu

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/philox"
)

// SpecChain is one row of chain speculative sampling: the K draft tokens,
// the K+1 target distributions (renorm of the target logits, float32; a
// position without a distribution holds NaN) and the K draft distributions
// (nil for one-hot drafts). Verify runs one trial on it; the residual and
// bonus CDFs are built on first use and kept for the next trials, so a
// SpecChain is not safe for concurrent use.
type SpecChain struct {
	drafts []int32
	p      [][]float32
	q      [][]float32
	valid  []bool
	cdf    []*CDF
	fixed  []uint64
}

// NewSpecChain returns the chain of one row. p holds K+1 target
// distributions, drafts K tokens in [0, len(p[i])), q K draft distributions
// or nil for one-hot drafts. valid[i] says whether target position i has a
// distribution (nil: every position has one). The chain keeps the slices and
// never writes to them.
func NewSpecChain(drafts []int32, p, q [][]float32, valid []bool) *SpecChain {
	if valid == nil {
		valid = make([]bool, len(p))
		for i := range valid {
			valid[i] = true
		}
	}
	return &SpecChain{drafts: drafts, p: p, q: q, valid: valid, cdf: make([]*CDF, len(p))}
}

// draftProb returns q_i(x): the draft probability, or 1 and 0 for one-hot
// drafts.
func (c *SpecChain) draftProb(i int, x int32) float32 {
	if c.q != nil {
		return c.q[i][x]
	}
	if x == c.drafts[i] {
		return 1
	}
	return 0
}

// resampler returns the CDF drawn from at position i: the residual
// Weight(max(p_i - q_i, 0)) (or Weight(p_i) when every residual weight is 0)
// for i < K, and Weight(p_K) at the bonus position.
func (c *SpecChain) resampler(i int) *CDF {
	if c.cdf[i] != nil {
		return c.cdf[i]
	}
	cdf := new(CDF)
	p := c.p[i]
	if i < len(c.drafts) {
		if cap(c.fixed) < len(p) {
			c.fixed = make([]uint64, len(p))
		}
		R := c.fixed[:len(p)]
		for j, pj := range p {
			d := float32(pj - c.draftProb(i, int32(j)))
			R[j] = philox.Weight(d) // Weight maps d <= 0 and NaN to 0
		}
		cdf.ResetFixed(R)
	}
	if cdf.Total() == 0 {
		cdf.Reset(p, nil)
	}
	c.cdf[i] = cdf
	return cdf
}

// Verify runs one trial of the chain with stream s (the row's stream for the
// trial's draw index) and writes K+1 tokens: the accepted draft prefix, then
// the resampled or bonus token, then -1. Position i < K accepts iff
// float32(u * q_i(x_i)) < p_i(x_i) with u = philox.U01(word 0 of block 2i);
// every position is tested, and accepted counts the tests that pass. At the
// first rejection i the token is drawn from the residual with the 64-bit
// uniform of block 2i+1 and emitted is i; when all K are accepted the bonus
// is drawn from p_K with block 2K+1 and emitted is K. A target position
// without a distribution ends the chain there with -1. When steps is not nil
// (length K+1) it receives the trace of the trial; the bonus position's step
// has Draft -1 and no test.
func (c *SpecChain) Verify(s philox.Stream, tokens []int32, steps []engine.SpecStep) (emitted, accepted int) {
	k := len(c.drafts)
	emitted = -1
	for i := 0; i < k; i++ {
		x := c.drafts[i]
		u := philox.U01(s.Block(uint64(2 * i))[0])
		p := c.p[i][x]
		q := c.draftProb(i, x)
		ok := float32(u*q) < p
		if ok {
			accepted++
		}
		resampled := int32(-1)
		if emitted < 0 {
			if ok {
				tokens[i] = x
			} else {
				emitted = i
				resampled = c.draw(i, s)
				tokens[i] = resampled
			}
		} else {
			tokens[i] = -1
		}
		if steps != nil {
			steps[i] = engine.SpecStep{Draft: x, U: u, P: p, Q: q, Accepted: ok, Resampled: resampled}
		}
	}
	bonus := int32(-1)
	if emitted < 0 {
		emitted = k
		bonus = c.draw(k, s)
	}
	tokens[k] = bonus
	if steps != nil {
		steps[k] = engine.SpecStep{Draft: -1, Resampled: bonus}
	}
	return emitted, accepted
}

// draw returns the token resampled at position i (the bonus at i = K) from
// the 64-bit uniform of block 2i+1, or -1 when the target has no
// distribution there.
func (c *SpecChain) draw(i int, s philox.Stream) int32 {
	if !c.valid[i] {
		return -1
	}
	return int32(c.resampler(i).Draw(s.U64(uint64(2*i + 1))))
}
