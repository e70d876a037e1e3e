package generate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// specRow is one row of a spec_verify dump: K drafts, K+1 target
// distributions (the last is the bonus position) and K draft distributions
// (nil for one-hot drafts).
type specRow struct {
	drafts []int
	p      [][]float64
	q      [][]float64
}

// stored returns the row as the dump will hold it: target logits log(p)
// rounded to fp32 (and p recomputed from them), draft probs rounded to fp32.
func (s specRow) stored() specRow {
	out := specRow{drafts: s.drafts}
	for _, p := range s.p {
		out.p = append(out.p, samplertest.Softmax(rounded(logProbs(p), engine.F32), 1))
	}
	for _, q := range s.q {
		out.q = append(out.q, rounded(q, engine.F32))
	}
	return out
}

// draftProb returns q_i(x): the draft probability, 1 and 0 for one-hot drafts.
func (s specRow) draftProb(i, x int) float64 {
	if s.q == nil {
		if x == s.drafts[i] {
			return 1
		}
		return 0
	}
	return s.q[i][x]
}

// accept returns a_i = min(1, p_i(x_i)/q_i(x_i)) (1 when q is 0 and p is
// not, 0 when p is 0).
func (s specRow) accept(i int) float64 {
	x := s.drafts[i]
	p, q := s.p[i][x], s.draftProb(i, x)
	switch {
	case p == 0:
		return 0
	case q == 0:
		return 1
	}
	return min(1, p/q)
}

// residualAt returns r_i = normalise(max(p_i - q_i, 0)).
func (s specRow) residualAt(i int) []float64 {
	q := make([]float64, len(s.p[i]))
	for x := range q {
		q[x] = s.draftProb(i, x)
	}
	return residual(s.p[i], q)
}

// trial is one simulated chain: the acceptance test at every position
// (what spec_accepted counts), the first rejection (the emitted length),
// and the uniform that a resampling at that position uses.
type trial struct {
	accepted []bool
	emitted  int
	count    int
	u        float64
}

// simulate runs the acceptance tests of s with rng.
func (s specRow) simulate(rng *rand.Rand) trial {
	k := len(s.drafts)
	t := trial{accepted: make([]bool, k), emitted: k}
	for i := range k {
		t.accepted[i] = rng.Float64() < s.accept(i)
		if t.accepted[i] {
			t.count++
		} else if t.emitted == k {
			t.emitted = i
		}
	}
	t.u = rng.Float64()
	return t
}

// chainOutput writes one chain's tokens: drafts[0:n], then tok, then -1.
func chainOutput(s specRow, n, tok int) []int64 {
	out := make([]int64, len(s.drafts)+1)
	for j := range out {
		switch {
		case j < n:
			out[j] = int64(s.drafts[j])
		case j == n:
			out[j] = int64(tok)
		default:
			out[j] = -1
		}
	}
	return out
}

// specTensors returns the input tensors of rows.
func specTensors(rows []specRow) []*engine.Tensor {
	b, k, v := len(rows), len(rows[0].drafts), len(rows[0].p[0])
	var logits, probs []float64
	var drafts []int64
	oneHot := rows[0].q == nil
	for _, r := range rows {
		for _, p := range r.p {
			logits = append(logits, logProbs(p)...)
		}
		for _, q := range r.q {
			probs = append(probs, q...)
		}
		drafts = append(drafts, ints(r.drafts)...)
	}
	ts := []*engine.Tensor{
		f64("target_logits", engine.F32, []int{b, k + 1, v}, logits),
		i64("draft_tokens", []int{b, k}, drafts),
	}
	if !oneHot {
		ts = append(ts, f64("draft_probs", engine.F32, []int{b, k, v}, probs))
	}
	return ts
}

// specOutputs returns external spec_tokens, spec_emitted and spec_accepted.
func specOutputs(tokens [][]int64, emitted, accepted []int) []*engine.Tensor {
	return namedSpecOutputs("", tokens, emitted, accepted)
}

// namedSpecOutputs is specOutputs for the mode mode ("" for none):
// spec_tokens@mode, spec_emitted@mode and spec_accepted@mode.
func namedSpecOutputs(mode string, tokens [][]int64, emitted, accepted []int) []*engine.Tensor {
	var flat []int64
	for _, t := range tokens {
		flat = append(flat, t...)
	}
	at := ""
	if mode != "" {
		at = "@" + mode
	}
	return []*engine.Tensor{
		i64("spec_tokens"+at, []int{len(tokens), len(tokens[0])}, flat),
		i64("spec_emitted"+at, []int{len(emitted)}, ints(emitted)),
		i64("spec_accepted"+at, []int{len(accepted)}, ints(accepted)),
	}
}

// spread returns weights on the given tokens of a vocabulary of v, random
// around 1 and normalised to total mass.
func spread(rng *rand.Rand, v int, tokens []int, mass float64) []float64 {
	w := make([]float64, v)
	var s float64
	for _, t := range tokens {
		w[t] = math.Exp(0.5 * rng.NormFloat64())
		s += w[t]
	}
	for _, t := range tokens {
		w[t] *= mass / s
	}
	return w
}

// others returns the tokens [0, v) without x.
func others(v int, x ...int) []int {
	var out []int
	for t := range v {
		skip := false
		for _, y := range x {
			skip = skip || t == y
		}
		if !skip {
			out = append(out, t)
		}
	}
	return out
}

// specFullAcceptance puts all of each target position's mass on its draft:
// every draft is accepted (a = min(1, 1/q) = 1 whatever the drafter's
// probability), and the bonus token is drawn from the last target position.
// The external outputs come from a verifier that forgets the bonus token: it
// writes the K drafts, then -1, and still reports spec_emitted = K.
func specFullAcceptance() (*scenario, error) {
	const rows, k, v = 8, 4, 32
	rng := newRand(909)
	var batch []specRow
	var toks [][]int64
	var emitted, accepted []int
	var failing []scenarios.RowRules
	for r := range rows {
		s := specRow{}
		for i := range k {
			x := rng.IntN(v)
			s.drafts = append(s.drafts, x)
			s.p = append(s.p, oneHot(v, x))
			q := spread(rng, v, others(v, x), 1)
			qx := 0.3 + 0.6*rng.Float64()
			for t := range q {
				q[t] *= 1 - qx
			}
			q[x] = qx
			s.q = append(s.q, q)
			if s.accept(i) != 1 {
				return nil, fmt.Errorf("spec-full-acceptance: row %d position %d accepts with %g", r, i, s.accept(i))
			}
		}
		s.p = append(s.p, samplertest.Softmax(normals(rng, v, 1.5), 1))
		batch = append(batch, s)
		t := chainOutput(s, k, -1) // the bonus token is never written
		toks = append(toks, t)
		emitted, accepted = append(emitted, k), append(accepted, k)
		failing = append(failing, fail(r, engine.RuleStructure))
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "spec-full-acceptance",
			Title:     "Speculative sampling: full acceptance and the bonus token",
			Summary:   "Each target position puts all its mass on its draft, so every draft is accepted and a bonus token follows; a verifier that forgets the bonus is flagged on every row.",
			Op:        engine.OpSpecVerify,
			Overrides: scenarios.Overrides{Trials: intp(64)},
			View:      "/rows/0",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "spec_tokens", Pass: false, Failing: failing},
			}},
		},
		tensors: append(specTensors(batch), specOutputs(toks, emitted, accepted)...),
	}, nil
}

// specCertainRejection gives the first draft (token 3) no target mass, so
// it is always rejected, and the token is drawn from the residual
// max(p - q, 0): tokens 0, 1 and 2 hold half of the target's mass but even
// more of the drafter's, so the residual lives on tokens 4 to 7 only. The
// external outputs come from a verifier that resamples from the target p
// instead of the residual: whenever it draws token 0, 1 or 2 (half the
// time) the row is wrong, and the judge says so.
func specCertainRejection() (*scenario, error) {
	const rows, k, v = 16, 3, 16
	rng := newRand(1010)
	p0 := make([]float64, v)
	q0 := make([]float64, v)
	copy(p0, []float64{0.2, 0.2, 0.1, 0, 0.2, 0.15, 0.1, 0.05})
	copy(q0, []float64{0.25, 0.25, 0.15, 0.35})
	var batch []specRow
	var toks [][]int64
	var emitted, accepted []int
	var failing []scenarios.RowRules
	for r := range rows {
		s := specRow{drafts: []int{3}, p: [][]float64{p0}, q: [][]float64{q0}}
		for range k - 1 {
			s.drafts = append(s.drafts, rng.IntN(v))
			s.p = append(s.p, samplertest.Softmax(normals(rng, v, 1.5), 1))
			s.q = append(s.q, samplertest.Softmax(normals(rng, v, 1.5), 1))
		}
		s.p = append(s.p, samplertest.Softmax(normals(rng, v, 1.5), 1))
		batch = append(batch, s)
		st := s.stored()
		t := st.simulate(rng)
		if t.emitted != 0 {
			return nil, fmt.Errorf("spec-certain-rejection: row %d accepted the first draft", r)
		}
		tok := draw(st.p[0], t.u) // the bug: the residual is meant
		toks = append(toks, chainOutput(st, 0, tok))
		emitted, accepted = append(emitted, 0), append(accepted, t.count)
		if st.residualAt(0)[tok] == 0 {
			failing = append(failing, fail(r, engine.RuleSupport))
		}
	}
	if len(failing) == 0 || len(failing) == rows {
		return nil, fmt.Errorf("spec-certain-rejection: %d of %d rows fail", len(failing), rows)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "spec-certain-rejection",
			Title:     "Speculative sampling: certain rejection, exact residual",
			Summary:   "The first draft has no target mass, so it is always rejected and the token comes from max(p - q, 0); a verifier that resamples from p is caught whenever it lands outside the residual.",
			Op:        engine.OpSpecVerify,
			Overrides: scenarios.Overrides{Trials: intp(200)},
			View:      fmt.Sprintf("/rows/%d", failing[0].Row),
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "spec_tokens", Pass: false, Failing: failing},
			}},
		},
		tensors: append(specTensors(batch), specOutputs(toks, emitted, accepted)...),
	}, nil
}

// partialRow is the row every row of specPartialAcceptance repeats: at each
// of its three positions the draft (token i) has target probability 0.35
// and draft probability 0.5, so it is accepted with probability 0.7.
func partialRow(rng *rand.Rand, v int) specRow {
	var s specRow
	support := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for i := range 3 {
		rest := others(8, i)
		p := spread(rng, v, rest, 0.65)
		p[i] = 0.35
		q := spread(rng, v, rest, 0.5)
		q[i] = 0.5
		s.drafts = append(s.drafts, i)
		s.p = append(s.p, p)
		s.q = append(s.q, q)
	}
	s.p = append(s.p, spread(rng, v, support, 1))
	return s
}

// specPartialAcceptance repeats one row 200 times: three drafts, each
// accepted with probability 0.7. Row by row the acceptances look random;
// over the batch the rate by position converges to 0.7, 0.7 and 0.7 among
// the chains that reach each position, and the emitted lengths to 0.3,
// 0.21, 0.147 and 0.343.
func specPartialAcceptance() (*scenario, error) {
	const rows, v = 200, 16
	s := partialRow(newRand(1111), v)
	for i := range 3 {
		if a := s.stored().accept(i); math.Abs(a-0.7) > 1e-6 {
			return nil, fmt.Errorf("spec-partial-acceptance: position %d accepts with %g", i, a)
		}
	}
	batch := make([]specRow, rows)
	for r := range batch {
		batch[r] = s
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "spec-partial-acceptance",
			Title:     "Speculative sampling: acceptance 0.7, over many rows",
			Summary:   "200 copies of one row whose three drafts are each accepted with probability 0.7: per row a coin toss, over the batch the rate by position converges to theory.",
			Op:        engine.OpSpecVerify,
			Overrides: scenarios.Overrides{Trials: intp(25)},
			View:      "",
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
			}},
		},
		tensors: specTensors(batch),
	}, nil
}

// specCounters shows the two counters of a chain: spec_emitted (the
// accepted prefix, what is committed) and spec_accepted (acceptance tests
// passed at every position, telemetry). Every draft is accepted with
// probability 0.5, so a chain often accepts a draft after its first
// rejection. The external outputs come from an engine whose counters are
// right but which commits on spec_accepted: it appends that many drafts,
// then the token resampled at the first rejection. Wherever the counters
// differ, the committed tokens do not fit spec_emitted, and the row fails.
func specCounters() (*scenario, error) {
	const rows, k, v = 32, 4, 16
	rng := newRand(1212)
	var batch []specRow
	var toks [][]int64
	var emitted, accepted []int
	var failing, swapped []scenarios.RowRules
	var right [][]int64 // the tokens committed on the accepted prefix, as they should be
	for r := range rows {
		var s specRow
		for range k {
			x := rng.IntN(8)
			rest := others(8, x)
			p := spread(rng, v, rest, 0.6)
			q := make([]float64, v)
			for _, t := range rest {
				q[t] = p[t] / 3 // p > q off the draft: the residual is p's shape
			}
			p[x], q[x] = 0.4, 0.8
			s.drafts = append(s.drafts, x)
			s.p = append(s.p, p)
			s.q = append(s.q, q)
		}
		s.p = append(s.p, spread(rng, v, others(8), 1))
		batch = append(batch, s)
		st := s.stored()
		t := st.simulate(rng)
		var tok int
		if t.emitted < k {
			tok = draw(st.residualAt(t.emitted), t.u)
		} else {
			tok = draw(st.p[k], t.u)
		}
		toks = append(toks, chainOutput(st, t.count, tok)) // the bug: t.emitted is meant
		right = append(right, chainOutput(st, t.emitted, tok))
		emitted, accepted = append(emitted, t.emitted), append(accepted, t.count)
		if t.count != t.emitted {
			failing = append(failing, fail(r, engine.RuleStructure))
			swapped = append(swapped, fail(r, engine.RuleCounter))
		}
	}
	if len(failing) == 0 || len(failing) == rows {
		return nil, fmt.Errorf("spec-counters: %d of %d rows fail", len(failing), rows)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "spec-counters",
			Title:     "Speculative sampling: emitted and accepted counters",
			Summary:   "spec_emitted counts the accepted prefix, spec_accepted every passed test; an engine that commits on spec_accepted is flagged on exactly the rows where they differ.",
			Op:        engine.OpSpecVerify,
			Overrides: scenarios.Overrides{Trials: intp(32)},
			View:      fmt.Sprintf("/rows/%d", failing[0].Row),
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "spec_tokens", Pass: false, Failing: failing},
				{Name: "spec_tokens@counter_swapped", Pass: false, Failing: swapped},
			}},
		},
		tensors: slices.Concat(specTensors(batch), specOutputs(toks, emitted, accepted), namedSpecOutputs("counter_swapped", right, accepted, accepted)),
	}, nil
}

// specOneHotDrafts has a greedy drafter: no draft_probs, so q is one-hot at
// each draft and a draft is accepted with exactly its target probability
// (0.6 at position 0, 0.45 at position 1). On rejection the residual is p
// without the draft, renormalised, which makes the output follow p exactly.
// The external outputs come from a verifier that resamples from p itself:
// now and then it draws the very draft it just rejected, which no correct
// chain can emit.
func specOneHotDrafts() (*scenario, error) {
	const rows, v = 64, 16
	rng := newRand(1313)
	base := specRow{drafts: []int{5, 9}}
	for i, px := range []float64{0.6, 0.45} {
		x := base.drafts[i]
		p := spread(rng, v, others(12, x), 1-px)
		p[x] = px
		base.p = append(base.p, p)
	}
	base.p = append(base.p, spread(rng, v, others(12), 1))
	st := base.stored()
	var batch []specRow
	var toks [][]int64
	var emitted, accepted []int
	var failing []scenarios.RowRules
	for r := range rows {
		batch = append(batch, base)
		t := st.simulate(rng)
		var tok int
		if t.emitted < len(st.drafts) {
			tok = draw(st.p[t.emitted], t.u) // the bug: the residual is meant
			if tok == st.drafts[t.emitted] {
				failing = append(failing, fail(r, engine.RuleSupport))
			}
		} else {
			tok = draw(st.p[len(st.drafts)], t.u)
		}
		toks = append(toks, chainOutput(st, t.emitted, tok))
		emitted, accepted = append(emitted, t.emitted), append(accepted, t.count)
	}
	if len(failing) == 0 || len(failing) == rows {
		return nil, fmt.Errorf("spec-one-hot-drafts: %d of %d rows fail", len(failing), rows)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "spec-one-hot-drafts",
			Title:     "Speculative sampling: one-hot drafts from a greedy drafter",
			Summary:   "Without draft probabilities a draft is accepted with its target probability, and the output still follows the target; resampling from p instead of the residual re-emits rejected drafts.",
			Op:        engine.OpSpecVerify,
			Overrides: scenarios.Overrides{Trials: intp(64)},
			View:      fmt.Sprintf("/rows/%d", failing[0].Row),
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "spec_tokens", Pass: false, Failing: failing},
			}},
		},
		tensors: append(specTensors(batch), specOutputs(toks, emitted, accepted)...),
	}, nil
}
