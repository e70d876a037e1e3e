package generate

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// specRedrawnDrafts is a spec_verify batch whose drafts are drawn anew for
// every trial (draft_tokens [T, B, K] beside spec_trials), by a drafter with
// transformers #47932's bug: it samples each draft from the top-2 of its
// distribution, renormalised, while draft_probs reports the raw
// distribution. The verifier is exact for the q it is given, so every trial
// keeps the structural rules; what fails is the drafts' fit to draft_probs,
// and with it the acceptance rates and the lossless rule.
func specRedrawnDrafts() (*scenario, error) {
	const rows, k, v, trials, topK = 4, 3, 64, 4000, 2
	c := samplertest.SpecCase{Rows: rows, K: k, V: v, Trials: trials, Sigma: 2, DraftNoise: 1,
		Params: samplertest.Params{Temperature: 0.8, TopP: 1}, Redraw: true, DraftTopK: topK}
	tensors, _ := samplertest.SpecDump(newRand(4793), c)
	var target, draft *engine.Tensor
	for _, t := range tensors {
		switch t.Name {
		case "target_logits":
			target = t
		case "draft_probs":
			draft = t
		}
	}
	// The margins the design rests on: in every row some position accepts
	// at a rate 8 standard errors or more from exact speculative sampling's
	// (among the trials expected to reach it), and some position's drafts
	// are 8 standard errors or more off draft_probs in total variation.
	x, q := make([]float64, v), make([]float64, v)
	var failing []scenarios.RowRules
	for r := range rows {
		reach := float64(trials)
		accepts, drafts := false, false
		for i := range k {
			target.Floats64((r*(k+1)+i)*v, x)
			p := samplertest.Softmax(x, c.Params.Temperature)
			draft.Floats64((r*k+i)*v, q)
			qs := normalise(q)
			drawn := topKOf(qs, topK)
			var alpha, actual, tv float64
			for t := range p {
				alpha += math.Min(p[t], qs[t])
				if qs[t] > 0 {
					actual += drawn[t] * math.Min(1, p[t]/qs[t])
				}
				tv += math.Abs(drawn[t]-qs[t]) / 2
			}
			se := math.Sqrt(alpha*(1-alpha)/reach) + 1e-12
			accepts = accepts || math.Abs(actual-alpha) >= 8*se
			drafts = drafts || tv >= 8/math.Sqrt(float64(trials))
			reach *= actual
		}
		if !accepts || !drafts {
			return nil, fmt.Errorf("spec-redrawn-drafts: row %d: the top-%d drafter is not far enough from draft_probs (acceptance %v, drafts %v)", r, topK, accepts, drafts)
		}
		failing = append(failing, fail(r, engine.RuleAcceptance, engine.RuleFit))
	}
	var keep []*engine.Tensor
	for _, t := range tensors {
		switch t.Name {
		case "spec_tokens", "spec_emitted", "spec_accepted":
			continue // the trials alone: spec_tokens would be the first trial again
		}
		keep = append(keep, t)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "spec-redrawn-drafts",
			Title:     "Speculative sampling: drafts drawn per trial, from another q",
			Summary:   "Drafts drawn anew for every trial by a drafter that samples from the top-2 of its q while reporting the raw q (transformers #47932): the drafts fail their fit to draft_probs, and the chain is no longer lossless.",
			Op:        engine.OpSpecVerify,
			Overrides: scenarios.Overrides{Trials: intp(1000)},
			View:      "/rows/0",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "spec_trials", Pass: false, Failing: failing},
			}},
		},
		tensors: keep,
	}, nil
}

// topKOf returns q restricted to its k most probable tokens (ties by lower
// id), renormalised: what the drafter of specRedrawnDrafts draws from.
func topKOf(q []float64, k int) []float64 {
	keep := make([]bool, len(q))
	for range k {
		best := -1
		for t, x := range q {
			if !keep[t] && (best < 0 || x > q[best]) {
				best = t
			}
		}
		keep[best] = true
	}
	return restrict(q, keep)
}
