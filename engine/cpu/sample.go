package cpu

import (
	"context"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/f32math"
	"github.com/sampviz/sampviz/engine/philox"
)

// CDF is the fixed-point cumulative distribution of one row: the tokens of
// positive fixed-point weight in index order with their inclusive prefix
// sums, and a guide table that narrows each search to the tokens that the
// top bits of the uniform can reach. It draws a token with one 64-bit uniform
// and a short binary search, which is what makes many draws per row cheap;
// every draw lands where a linear scan of the whole row would.
type CDF struct {
	tokens []int32
	cum    []uint64
	// guide[g] is the first position whose prefix sum exceeds the target of
	// the smallest uniform with top bits g (g < guideSize); guide[guideSize]
	// is the last position.
	guide []int32
}

// guideBits is the number of top bits of the uniform that index the guide.
const guideBits = 12

const guideSize = 1 << guideBits

// Reset rebuilds c from probabilities or weights w, weighing token i by
// philox.Weight(w_i) when keep is nil or keep[i] is true and by 0 otherwise.
func (c *CDF) Reset(w []float32, keep []bool) {
	c.tokens, c.cum = c.tokens[:0], c.cum[:0]
	var s uint64
	for i, v := range w {
		if keep != nil && !keep[i] {
			continue
		}
		if W := philox.Weight(v); W > 0 {
			s += W
			c.tokens = append(c.tokens, int32(i))
			c.cum = append(c.cum, s)
		}
	}
	c.buildGuide()
}

// ResetFixed rebuilds c from fixed-point weights W.
func (c *CDF) ResetFixed(W []uint64) {
	c.tokens, c.cum = c.tokens[:0], c.cum[:0]
	var s uint64
	for i, v := range W {
		if v > 0 {
			s += v
			c.tokens = append(c.tokens, int32(i))
			c.cum = append(c.cum, s)
		}
	}
	c.buildGuide()
}

// buildGuide fills the guide table in one sweep over the prefix sums.
func (c *CDF) buildGuide() {
	if cap(c.guide) < guideSize+1 {
		c.guide = make([]int32, guideSize+1)
	}
	c.guide = c.guide[:guideSize+1]
	total := c.Total()
	j := 0
	for g := range guideSize {
		t := philox.Pick(uint64(g)<<(64-guideBits), total)
		for j < len(c.cum)-1 && c.cum[j] <= t {
			j++
		}
		c.guide[g] = int32(j)
	}
	c.guide[guideSize] = int32(max(len(c.cum)-1, 0))
}

// Total returns the sum of the fixed-point weights (0 when no token has
// positive weight).
func (c *CDF) Total() uint64 {
	if len(c.cum) == 0 {
		return 0
	}
	return c.cum[len(c.cum)-1]
}

// Draw returns the token that the 64-bit uniform u selects: with
// t = philox.Pick(u, Total), the first token whose inclusive prefix sum
// exceeds t. It returns -1 when Total is 0.
func (c *CDF) Draw(u uint64) int {
	total := c.Total()
	if total == 0 {
		return -1
	}
	t := philox.Pick(u, total)
	// Targets of uniforms with top bits g lie between the targets of the
	// smallest uniforms with top bits g and g+1, so the answer lies between
	// their guide entries.
	g := u >> (64 - guideBits)
	lo, hi := int(c.guide[g]), int(c.guide[g+1])
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.cum[mid] > t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return int(c.tokens[lo])
}

// SampleInverseCDF draws one token from the kept tokens (keep nil keeps
// all) of a row with weights w, with the inverse fixed-point CDF and the
// 64-bit uniform of block 0 of stream s. It returns -1 when no kept token
// has positive fixed-point weight.
func SampleInverseCDF(w []float32, keep []bool, s philox.Stream) int {
	var c CDF
	c.Reset(w, keep)
	return c.Draw(s.U64(0))
}

// SampleGumbel draws one token by Gumbel-max over the kept tokens (keep nil
// keeps all) of logits x at temperature t > 0: the first index of the largest
// score_i = float32((x_i - m)/t + g_i), with (x_i - m)/t formed as Weights
// forms it and g_i = -Log(-Log(OpenU01(word i%4 of block i/4 of s))) in the
// float32 arithmetic of engine/f32math. It returns -1 for a row without a
// distribution.
func SampleGumbel(x []float32, t float32, keep []bool, s philox.Stream) int {
	m, ok := rowMax(x)
	if !ok {
		return -1
	}
	best := -1
	bestScore := float32(math.Inf(-1))
	var words [4]uint32
	block := uint64(math.MaxUint64)
	for i, v := range x {
		if keep != nil && !keep[i] {
			continue
		}
		if b := uint64(i / 4); b != block {
			words, block = s.Block(b), b
		}
		g := -f32math.Log(-f32math.Log(philox.OpenU01(words[i%4])))
		score := float32(float32(float32(v-m)/t) + g)
		if best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// SampleRejection draws one token from the kept tokens of a row with
// weights w by sort-free rejection: the candidates start as every token of
// positive fixed-point weight; round j draws a candidate c by inverse CDF
// over the candidates (in index order) with the 64-bit uniform of block j of
// s; if keep[c] (keep nil keeps all), c is the token, else the candidates
// become the tokens ordered strictly before c (w_i > w_c, and under
// engine.TiesLowestIndex also w_i = w_c with i < c) and the next round
// starts. keep must be what Filter marks for ties (a set closed under that
// order that holds the most probable token), so the rounds end; the tokens
// drawn follow the renormalised kept weights. It returns -1 when no token has
// positive fixed-point weight.
func SampleRejection(w []float32, keep []bool, ties engine.TopKTies, s philox.Stream) int {
	var r rejection
	return r.sample(w, keep, ties, s)
}

// rejection holds the scratch space of SampleRejection.
type rejection struct {
	fixed []uint64
}

func (r *rejection) sample(w []float32, keep []bool, ties engine.TopKTies, s philox.Stream) int {
	if cap(r.fixed) < len(w) {
		r.fixed = make([]uint64, len(w))
	}
	W := r.fixed[:len(w)]
	for i, v := range w {
		W[i] = philox.Weight(v)
	}
	// The candidates are the tokens ordered strictly before (bw, bi): all of
	// them at the start.
	bw, bi := float32(math.Inf(1)), -1
	before := func(i int) bool {
		if bi < 0 {
			return true
		}
		return w[i] > bw || (ties == engine.TiesLowestIndex && w[i] == bw && i < bi)
	}
	for round := uint64(0); ; round++ {
		var total uint64
		for i, v := range W {
			if v > 0 && before(i) {
				total += v
			}
		}
		if total == 0 {
			return -1
		}
		t := philox.Pick(s.U64(round), total)
		c := -1
		var sum uint64
		for i, v := range W {
			if v > 0 && before(i) {
				sum += v
				if sum > t {
					c = i
					break
				}
			}
		}
		if keep == nil || keep[c] {
			return c
		}
		bw, bi = w[c], c
	}
}

// sample runs sample: Tokens I32 [B] (draw 0 with Params.Method) and, when
// Params.Draws > 0, Samples I32 [B, Draws] (draws 0..N-1, inverse CDF).
func (b *Backend) sample(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	rows, vocab, err := logitsShape(run)
	if err != nil {
		return nil, 0, err
	}
	method := run.Params.Method
	switch method {
	case engine.SampleAuto, engine.SampleInverseCDF, engine.SampleGumbel, engine.SampleRejection:
	default:
		return nil, 0, fmt.Errorf("sample method %q: %w", method, engine.ErrUnsupported)
	}
	draws := run.Params.Draws
	if draws < 0 {
		return nil, 0, fmt.Errorf("sample: draws %d is negative", draws)
	}
	if draws > engine.MaxKeptDraws {
		return nil, 0, fmt.Errorf("sample: %d draws a row, over the %d a row the cpu backend makes (the cuda backend counts up to %d): %w",
			draws, engine.MaxKeptDraws, engine.MaxDraws, engine.ErrUnsupported)
	}
	rp, err := run.Params.ForOp(run.Op, rows)
	if err != nil {
		return nil, 0, fmt.Errorf("sample: %w", err)
	}
	out := &engine.Output{Tokens: engine.NewTensor("tokens", engine.I32, rows)}
	if draws > 0 {
		out.Samples = engine.NewTensor("samples", engine.I32, rows, draws)
	}
	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		x := floats(&s.x, vocab)
		run.Logits.Floats32(r*vocab, x)
		t := rp.Temperature[r]
		w := floats(&s.w, vocab)
		valid := Weights(x, t, w)
		var keep []bool
		if valid && t > 0 && rp.Filtered(r, vocab) {
			keep = bools(&s.keep, vocab)
			filterRow(s, rp, r, x, w, keep)
		}
		stream := func(d int) philox.Stream { return philox.NewStream(rp.Seed[r], rp.Offset[r], r, d) }
		token := -1
		switch {
		case !valid:
		case t == 0:
			token = Argmax(x)
		case method == engine.SampleGumbel:
			token = SampleGumbel(x, t, keep, stream(0))
		case method == engine.SampleRejection:
			token = s.rejection.sample(w, keep, rp.Ties, stream(0))
		default:
			s.cdf.Reset(w, keep)
			token = s.cdf.Draw(stream(0).U64(0))
		}
		putInt32(out.Tokens, r, int32(token))
		if draws == 0 {
			return nil
		}
		base := r * draws
		if !valid || t == 0 {
			for d := range draws {
				putInt32(out.Samples, base+d, int32(token))
			}
			return nil
		}
		s.cdf.Reset(w, keep)
		for d := range draws {
			if d%ctxCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			putInt32(out.Samples, base+d, int32(s.cdf.Draw(stream(d).U64(0))))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.Logits, out.Tokens, out.Samples) + int64(rows)*run.Op.Spec().Kernel.Bytes()
	return out, bytes, nil
}
