package cpu

import (
	"context"
	"fmt"

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

// specVerify runs spec_verify: SpecTokens I32 [B, K+1], SpecEmitted and
// SpecAccepted I32 [B] of trial 0, SpecTrials I32 [T, B, K+1] when T > 1, and
// the Trace of the first min(T, 16) trials.
func (b *Backend) specVerify(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	if err := engine.CheckTensor(run.TargetLogits, "target_logits", 3, true); err != nil {
		return nil, 0, err
	}
	if err := engine.CheckTensor(run.DraftTokens, "draft_tokens", 2, false); err != nil {
		return nil, 0, err
	}
	rows, positions, vocab := run.TargetLogits.Dim(0), run.TargetLogits.Dim(1), run.TargetLogits.Dim(2)
	k := run.DraftTokens.Dim(1)
	if run.DraftTokens.Dim(0) != rows || positions != k+1 {
		return nil, 0, fmt.Errorf("spec_verify: target_logits %s and draft_tokens %s, want [B, K+1, V] and [B, K]: %w",
			run.TargetLogits.ShapeString(), run.DraftTokens.ShapeString(), engine.ErrUnsupported)
	}
	if run.DraftProbs != nil {
		if err := engine.CheckTensor(run.DraftProbs, "draft_probs", 3, true); err != nil {
			return nil, 0, err
		}
		if run.DraftProbs.Dim(0) != rows || run.DraftProbs.Dim(1) != k || run.DraftProbs.Dim(2) != vocab {
			return nil, 0, fmt.Errorf("spec_verify: draft_probs %s, want [%d, %d, %d]: %w",
				run.DraftProbs.ShapeString(), rows, k, vocab, engine.ErrUnsupported)
		}
	}
	drafts := make([]int32, rows*k)
	for i := range drafts {
		x := run.DraftTokens.Int(i)
		if x < 0 || x >= int64(vocab) {
			return nil, 0, fmt.Errorf("spec_verify: row %d: draft token %d at position %d outside [0, %d)", i/max(k, 1), x, i%max(k, 1), vocab)
		}
		drafts[i] = int32(x)
	}
	if run.Params.Trials < 0 {
		return nil, 0, fmt.Errorf("spec_verify: trials %d is negative", run.Params.Trials)
	}
	rp, err := run.Params.ForOp(run.Op, rows)
	if err != nil {
		return nil, 0, fmt.Errorf("spec_verify: %w", err)
	}
	trials := max(run.Params.Trials, 1)
	steps := k + 1
	out := &engine.Output{
		SpecTokens:   engine.NewTensor("spec_tokens", engine.I32, rows, steps),
		SpecEmitted:  engine.NewTensor("spec_emitted", engine.I32, rows),
		SpecAccepted: engine.NewTensor("spec_accepted", engine.I32, rows),
	}
	if trials > 1 {
		out.SpecTrials = engine.NewTensor("spec_trials", engine.I32, trials, rows, steps)
	}
	traced := min(trials, maxTraceTrials)
	out.Trace = &engine.SpecTrace{Trials: traced, Rows: rows, Steps: steps, Step: make([]engine.SpecStep, traced*rows*steps)}

	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		chain := specRow(run, rp, s, r, k, vocab, drafts[r*k:(r+1)*k])
		tokens := make([]int32, steps)
		for d := range trials {
			if d%ctxCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			var trace []engine.SpecStep
			if d < traced {
				at := (d*rows + r) * steps
				trace = out.Trace.Step[at : at+steps]
			}
			emitted, accepted := chain.Verify(philox.NewStream(rp.Seed[r], rp.Offset[r], r, d), tokens, trace)
			if d == 0 {
				for i, v := range tokens {
					putInt32(out.SpecTokens, r*steps+i, v)
				}
				putInt32(out.SpecEmitted, r, int32(emitted))
				putInt32(out.SpecAccepted, r, int32(accepted))
			}
			if out.SpecTrials != nil {
				for i, v := range tokens {
					putInt32(out.SpecTrials, (d*rows+r)*steps+i, v)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.TargetLogits, run.DraftTokens, run.DraftProbs,
		out.SpecTokens, out.SpecEmitted, out.SpecAccepted, out.SpecTrials) +
		int64(rows)*run.Op.Spec().Kernel.Bytes()
	return out, bytes, nil
}

// specRow builds the chain of row r: the renorm of its K+1 target rows and
// its K draft distributions, in the worker's scratch.
func specRow(run *engine.Run, rp *engine.KernelParams, s *scratch, r, k, vocab int, drafts []int32) *SpecChain {
	steps := k + 1
	buf := floats(&s.p, (steps+k)*vocab)
	p := make([][]float32, steps)
	valid := make([]bool, steps)
	for i := range steps {
		p[i] = buf[i*vocab : (i+1)*vocab]
		valid[i] = targetRow(run, rp, s, r, (r*steps+i)*vocab, p[i])
	}
	var q [][]float32
	if run.DraftProbs != nil {
		q = make([][]float32, k)
		for i := range k {
			q[i] = buf[(steps+i)*vocab : (steps+i+1)*vocab]
			run.DraftProbs.Floats32((r*k+i)*vocab, q[i])
		}
	}
	return NewSpecChain(drafts, p, q, valid)
}

// targetRow writes into p the target distribution that starts at element
// start of run.TargetLogits, for row r's temperature and filters: the
// renorm of its weights in float32, or NaN everywhere when it has no
// distribution (the result). It uses s's row buffers.
func targetRow(run *engine.Run, rp *engine.KernelParams, s *scratch, r, start int, p []float32) bool {
	vocab := len(p)
	x := floats(&s.x, vocab)
	w := floats(&s.w, vocab)
	t := rp.Temperature[r]
	run.TargetLogits.Floats32(start, x)
	switch {
	case !Weights(x, t, w):
		fillNaN(p)
		return false
	case t > 0 && rp.Filtered(r, vocab):
		keep := bools(&s.keep, vocab)
		filterRow(s, rp, r, x, w, keep)
		Renorm(w, keep, p)
	default:
		Renorm(w, nil, p)
	}
	return true
}

// maxTraceTrials is the number of spec_verify trials whose steps are traced.
const maxTraceTrials = 16
