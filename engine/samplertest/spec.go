package samplertest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// SpecMistake is a way a chain speculative sampler can be subtly wrong.
type SpecMistake int

// The chain mistakes.
const (
	// SpecCorrect is exact chain speculative sampling (DUMPS.md).
	SpecCorrect SpecMistake = iota
	// ResampleFromTarget draws a rejected position's token from p_i, not
	// from the residual max(p_i - q_i, 0).
	ResampleFromTarget
	// ResampleFromDraft draws a rejected position's token from q_i.
	ResampleFromDraft
	// UnnormalisedResidual inverts the CDF of max(p_i - q_i, 0) with a
	// uniform in [0, 1) as if it summed to 1: the mass it lacks falls on the
	// last token.
	UnnormalisedResidual
	// BonusFromLastDraft draws the bonus token from p_{K-1}, not p_K.
	BonusFromLastDraft
	// AcceptIgnoresDraft accepts with probability p(x), as for a one-hot
	// draft, although draft probabilities are given.
	AcceptIgnoresDraft
	// AcceptInverted accepts with probability min(1, q(x)/p(x)).
	AcceptInverted
	// ContinueAfterRejection writes the drafts accepted after the first
	// rejection instead of -1.
	ContinueAfterRejection
	// TargetWithoutTemperature verifies against the temperature-1 target.
	TargetWithoutTemperature
)

// Chain is one row of chain speculative sampling in float64: the targets
// p_0..p_K, the draft distributions q_0..q_{K-1} (nil for one-hot drafts),
// and the K draft tokens.
type Chain struct {
	Target  [][]float64
	Draft   [][]float64
	Drafts  []int64
	Mistake SpecMistake
	cdfs    []*CDF
}

// q returns q_i(t): the draft probability, or one-hot at the draft token.
func (c *Chain) q(i, t int) float64 {
	if c.Draft != nil {
		return c.Draft[i][t]
	}
	if int64(t) == c.Drafts[i] {
		return 1
	}
	return 0
}

// accept returns the probability that the chain accepts draft position i.
func (c *Chain) accept(i int) float64 {
	x := int(c.Drafts[i])
	p, q := c.Target[i][x], c.q(i, x)
	switch {
	case c.Mistake == AcceptIgnoresDraft:
		return p
	case c.Mistake == AcceptInverted && p > 0:
		return math.Min(1, q/p)
	case p == 0:
		return 0
	case q == 0:
		return 1
	}
	return math.Min(1, p/q)
}

// resample draws the token of position i after a rejection (i < K), or the
// bonus token (i = K), with uniform u.
func (c *Chain) resample(i int, u float64) int {
	if c.cdfs == nil {
		c.cdfs = make([]*CDF, len(c.Target))
	}
	k := len(c.Drafts)
	if c.cdfs[i] == nil {
		p := c.Target[i]
		var w []float64
		switch {
		case i == k && c.Mistake == BonusFromLastDraft && k > 0:
			w = c.Target[k-1]
		case i == k, c.Mistake == ResampleFromTarget:
			w = p
		case c.Mistake == ResampleFromDraft && c.Draft != nil:
			w = c.Draft[i]
		default:
			w = make([]float64, len(p))
			var s float64
			for t := range p {
				w[t] = math.Max(p[t]-c.q(i, t), 0)
				s += w[t]
			}
			if s == 0 {
				w = p
			} else if c.Mistake == UnnormalisedResidual {
				w[len(p)-1] += 1 - s // the mass a uniform in [0, 1) finds past the end
			}
		}
		c.cdfs[i] = NewCDF(w)
	}
	return c.cdfs[i].Draw(u)
}

// Trial runs the chain once and returns its K+1 output tokens (the accepted
// prefix, the resampled or bonus token, then -1), spec_emitted and
// spec_accepted (acceptances counted at every position, with a fresh
// uniform each).
func (c *Chain) Trial(rng *rand.Rand) (toks []int64, emitted, accepted int) {
	k := len(c.Drafts)
	toks = make([]int64, k+1)
	for i := range toks {
		toks[i] = -1
	}
	emitted = -1
	for i := range k {
		ok := rng.Float64() < c.accept(i)
		if ok {
			accepted++
		}
		switch {
		case emitted < 0 && ok:
			toks[i] = c.Drafts[i]
		case emitted < 0:
			emitted = i
			toks[i] = int64(c.resample(i, rng.Float64()))
		case c.Mistake == ContinueAfterRejection && ok:
			toks[i] = c.Drafts[i]
		}
	}
	if emitted < 0 {
		emitted = k
		toks[k] = int64(c.resample(k, rng.Float64()))
	}
	return toks, emitted, accepted
}

// SpecCase describes a spec_verify dump of Rows rows, K drafts and V
// tokens: target logits normal with standard deviation Sigma, draft
// distributions softmax((target + N(0, DraftNoise)) / T) stored as F32
// draft_probs (or none with OneHot), draft tokens drawn from them, and
// Trials trials of a chain with Mistake as spec_trials, the first also as
// spec_tokens, spec_emitted and spec_accepted.
type SpecCase struct {
	Rows, K, V, Trials int
	// DType stores the target logits (F32 when invalid).
	DType             engine.DType
	Sigma, DraftNoise float64
	Params            Params
	OneHot            bool
	Mistake           SpecMistake
	// EmittedIsAccepted makes spec_emitted report the acceptances counted
	// at every position; AcceptedIsEmitted makes spec_accepted count only
	// the accepted prefix.
	EmittedIsAccepted, AcceptedIsEmitted bool
	// Redraw draws the drafts anew for every trial: draft_tokens is then
	// [Trials, Rows, K] (DUMPS.md), the first trial's drafts as before.
	Redraw bool
	// DraftTopK, when above 0, makes the drafter draw from its q restricted
	// to the DraftTopK most probable tokens and renormalised, while
	// draft_probs reports the raw q (transformers #47932).
	DraftTopK int
}

// topK returns q restricted to its k most probable tokens (ties by lower
// id), renormalised.
func topK(q []float64, k int) []float64 {
	order := make([]int, len(q))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case q[a] > q[b]:
			return -1
		case q[a] < q[b]:
			return 1
		}
		return 0
	})
	keep := make([]bool, len(q))
	for _, i := range order[:min(k, len(q))] {
		keep[i] = true
	}
	return restrict(q, keep)
}

// SpecDump returns the tensors and metadata of c's dump, with fresh values
// from rng.
func SpecDump(rng *rand.Rand, c SpecCase) ([]*engine.Tensor, map[string]string) {
	steps := c.K + 1
	if c.DType == engine.DTypeInvalid {
		c.DType = engine.F32
	}
	target := engine.FromFloat64s("target_logits", c.DType, []int{c.Rows, steps, c.V}, normals(rng, c.Rows*steps*c.V, c.Sigma))
	drafts := make([]int64, c.Rows*c.K)
	qs := make([]float64, 0, c.Rows*c.K*c.V)
	chains := make([]*Chain, c.Rows)
	sampled := make([][]*CDF, c.Rows) // what the drafter draws from, by row and position
	x := make([]float64, c.V)
	for r := range c.Rows {
		ch := &Chain{Mistake: c.Mistake, Drafts: drafts[r*c.K : (r+1)*c.K]}
		tp := c.Params
		if c.Mistake == TargetWithoutTemperature {
			tp.Temperature = 1
		}
		for i := range steps {
			target.Floats64((r*steps+i)*c.V, x)
			ch.Target = append(ch.Target, Filter(Softmax(x, tp.Temperature), tp))
			if i == c.K {
				break
			}
			noisy := make([]float64, c.V)
			for t, v := range x {
				noisy[t] = v + rng.NormFloat64()*c.DraftNoise
			}
			q := Softmax(noisy, c.Params.Temperature)
			for t := range q {
				q[t] = float64(float32(q[t])) // as the dump holds it
			}
			from := q
			if c.DraftTopK > 0 {
				from = topK(q, c.DraftTopK)
			}
			sampled[r] = append(sampled[r], NewCDF(from))
			ch.Drafts[i] = int64(sampled[r][i].Draw(rng.Float64()))
			qs = append(qs, q...)
			if !c.OneHot {
				ch.Draft = append(ch.Draft, q)
			}
		}
		chains[r] = ch
	}
	trials := make([]int64, c.Trials*c.Rows*steps)
	specTokens := make([]int64, c.Rows*steps)
	emitted, accepted := make([]int64, c.Rows), make([]int64, c.Rows)
	var redrawn []int64
	if c.Redraw {
		redrawn = make([]int64, c.Trials*c.Rows*c.K)
		copy(redrawn, drafts)
	}
	for d := range c.Trials {
		for r, ch := range chains {
			if c.Redraw && d > 0 {
				ch.Drafts = redrawn[(d*c.Rows+r)*c.K : (d*c.Rows+r+1)*c.K]
				for i := range ch.Drafts {
					ch.Drafts[i] = int64(sampled[r][i].Draw(rng.Float64()))
				}
				ch.cdfs = nil // one-hot residuals depend on the drafts
			}
			toks, e, a := ch.Trial(rng)
			copy(trials[(d*c.Rows+r)*steps:], toks)
			if d == 0 {
				copy(specTokens[r*steps:], toks)
				emitted[r], accepted[r] = int64(e), int64(a)
				if c.EmittedIsAccepted {
					emitted[r] = int64(a)
				}
				if c.AcceptedIsEmitted {
					accepted[r] = int64(e)
				}
			}
		}
	}
	tensors := append(paramTensors(slices.Repeat([]Params{c.Params}, c.Rows)),
		target,
		draftTensor(c, drafts, redrawn),
		engine.FromInts("spec_tokens", engine.I32, []int{c.Rows, steps}, specTokens),
		engine.FromInts("spec_emitted", engine.I32, []int{c.Rows}, emitted),
		engine.FromInts("spec_accepted", engine.I32, []int{c.Rows}, accepted),
		engine.FromInts("spec_trials", engine.I32, []int{c.Trials, c.Rows, steps}, trials))
	if !c.OneHot {
		tensors = append(tensors, engine.FromFloat64s("draft_probs", engine.F32, []int{c.Rows, c.K, c.V}, qs))
	}
	return tensors, map[string]string{"op": "spec_verify", "source": "samplertest"}
}

// draftTensor returns c's draft_tokens: [B, K] of fixed drafts, or [T, B, K]
// of drafts drawn per trial.
func draftTensor(c SpecCase, drafts, redrawn []int64) *engine.Tensor {
	if c.Redraw {
		return engine.FromInts("draft_tokens", engine.I64, []int{c.Trials, c.Rows, c.K}, redrawn)
	}
	return engine.FromInts("draft_tokens", engine.I64, []int{c.Rows, c.K}, drafts)
}
