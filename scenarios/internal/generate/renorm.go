package generate

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// margin is how far (relative) every filter decision of a designed row
// stays from its threshold: about eight times the boundary band of fp32
// (docs/SEMANTICS.md "Boundary tokens", 1.3e-6), so that no token is a
// boundary token and the simulation keeps exactly what the reference keeps.
const margin = 1e-5

// filterOrder filters one designed distribution five ways. Its top ten
// tokens hold 12, 9, 7, 6, 5, 4, 3, 2, 1.5 and 0.5% of the mass, the other
// 1014 tokens share the remaining half. The dump says top_k_first; the
// external probs were filtered jointly. Rows 0 (top-k 10, top-p 0.6) and 4
// (top-k 10, top-p 0.2) keep different tokens under the two orders:
// renormalising the top ten first doubles their shares, so top-p reaches
// its cut sooner (4 tokens instead of 10; 1 instead of 2). Rows 1 (top-p
// alone), 2 (top-k alone) and 3 (top-p 0.995, which keeps the whole top ten
// either way) agree.
func filterOrder() (*scenario, error) {
	const rows, vocab = 5, 1024
	rng := newRand(707)
	top := []float64{0.12, 0.09, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02, 0.015, 0.005}
	tail := make([]float64, vocab-len(top))
	for i := range tail {
		tail[i] = math.Exp(0.3 * rng.NormFloat64())
	}
	tail = normalise(tail)
	p := make([]float64, vocab)
	perm := rng.Perm(vocab)
	for i, t := range perm {
		if i < len(top) {
			p[t] = top[i]
		} else {
			p[t] = 0.5 * tail[i-len(top)]
		}
	}
	x := rounded(logProbs(p), engine.F32)
	p = samplertest.Softmax(x, 1) // what the stored logits mean exactly
	params := []filters{
		{topK: 10, topP: 0.6},
		{topK: 0, topP: 0.3},
		{topK: 3, topP: 1},
		{topK: 10, topP: 0.995},
		{topK: 10, topP: 0.2},
	}
	var logits, probs, topP []float64
	var topK []int64
	var failing []scenarios.RowRules
	for r, f := range params {
		f.order = engine.TopKFirst
		ours, err := f.keep(p, margin)
		if err != nil {
			return nil, fmt.Errorf("top-k-then-top-p row %d: %w", r, err)
		}
		f.order = engine.Joint
		joint, err := f.keep(p, margin)
		if err != nil {
			return nil, fmt.Errorf("top-k-then-top-p row %d: %w", r, err)
		}
		if differ(ours, joint) != (r == 0 || r == 4) {
			return nil, fmt.Errorf("top-k-then-top-p row %d: the orders differ: %t", r, differ(ours, joint))
		}
		if r == 0 || r == 4 {
			// The joint order keeps more tokens (support) and spreads the
			// mass over them (every kept token off by its share).
			failing = append(failing, fail(r, engine.RuleSupport, engine.RuleTolerance))
		}
		logits = append(logits, x...)
		probs = append(probs, restrict(p, joint)...)
		topK = append(topK, int64(f.topK))
		topP = append(topP, f.topP)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "top-k-then-top-p",
			Title:   "Top-k then top-p, in both orders",
			Summary: "The same distribution filtered with top_k_first (the dump's order) and jointly (the external probs): two rows keep different tokens.",
			Op:      engine.OpRenorm,
			View:    "/rows/0",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "probs", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.F32, []int{rows, vocab}, logits),
			i64("top_k", []int{rows}, topK),
			f64("top_p", engine.F32, []int{rows}, topP),
			f64("probs", engine.F32, []int{rows, vocab}, probs),
		},
		meta: map[string]string{"filter_order": string(engine.TopKFirst)},
	}, nil
}

// differ reports whether two kept sets differ.
func differ(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return true
		}
	}
	return false
}

// verifyProbs is the target distribution a speculative verifier reads, with
// top-k, top-p and min-p per row (row 4 unfiltered). The external probs come
// from a verifier that clamps probabilities at 1e-10 before taking p/q (so
// that it never divides by zero) and passes the clamped tensor on: every
// filtered token holds 1e-10 instead of exactly 0. The values are all
// within tolerance; the support is not, on every filtered row.
func verifyProbs() (*scenario, error) {
	const rows, vocab = 6, 4096
	const clamp = 1e-10
	rng := newRand(808)
	x := rounded(normals(rng, rows*vocab, 2), engine.F32)
	temps := []float64{1, 1, 1, 1, 0.8, 1}
	params := []filters{
		{topK: 50, topP: 1},
		{topP: 0.9},
		{topP: 1, minP: 0.1},
		{topK: 100, topP: 1, minP: 0.05},
		{topP: 1},
		{topK: 20, topP: 0.8, minP: 0.02},
	}
	var probs, topP, minP []float64
	var topK []int64
	var failing []scenarios.RowRules
	for r, f := range params {
		f.order = engine.TopKFirst
		p := samplertest.Softmax(x[r*vocab:(r+1)*vocab], float64(float32(temps[r])))
		keep, err := f.keep(p, margin)
		if err != nil {
			return nil, fmt.Errorf("verify-probs row %d: %w", r, err)
		}
		q := restrict(p, keep)
		filtered := false
		for i := range q {
			if q[i] < clamp {
				filtered = filtered || !keep[i]
				q[i] = clamp
			}
		}
		if filtered != (r != 4) {
			return nil, fmt.Errorf("verify-probs row %d: filtered is %t", r, filtered)
		}
		if filtered {
			failing = append(failing, fail(r, engine.RuleSupport))
		}
		probs = append(probs, q...)
		topK = append(topK, int64(f.topK))
		topP = append(topP, f.topP)
		minP = append(minP, f.minP)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "verify-probs",
			Title:   "Verify-side probabilities",
			Summary: "Filtered tokens must be exactly zero, min-p rows included: a verifier that clamps at 1e-10 is within tolerance everywhere, and still wrong on every filtered row.",
			Op:      engine.OpRenorm,
			View:    "/rows/2?log=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "probs", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.F32, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, temps),
			i64("top_k", []int{rows}, topK),
			f64("top_p", engine.F32, []int{rows}, topP),
			f64("min_p", engine.F32, []int{rows}, minP),
			f64("probs", engine.F32, []int{rows, vocab}, probs),
		},
	}, nil
}
