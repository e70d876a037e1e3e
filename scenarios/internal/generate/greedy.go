package generate

import (
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// greedyBatch is one argmax launch over a batch of bf16 rows: every row has
// a clear maximum, except row 3 (the runner-up one bf16 step below the
// maximum: fragile) and row 5 (two tokens tie exactly). The external tokens
// come from an argmax whose reduction keeps the last of tied maxima (>=
// where the kernels use >): right on every row, ties included.
func greedyBatch() (*scenario, error) {
	const rows, vocab = 6, 32000
	const nearTie, tie = 3, 5
	rng := newRand(101)
	x := rounded(normals(rng, rows*vocab, 2), engine.BF16)
	tokens := make([]int64, rows)
	winners := rng.Perm(vocab)
	for r := range rows {
		row := x[r*vocab : (r+1)*vocab]
		a := winners[r]
		m, _ := maxOf(row)
		// A clear winner: a full logit above everything else, far more
		// than the bf16 tolerance (1.6e-2 of ~10) that makes a row fragile.
		top := engine.RoundToDType(m+1, engine.BF16)
		row[a] = top
		last := a
		switch r {
		case nearTie:
			b := winners[rows+r]
			row[b] = nextBelowBF16(top)
		case tie:
			b := max(a, winners[rows+r])
			a = min(a, winners[rows+r])
			row[a], row[b] = top, top
			last = b
		}
		tokens[r] = int64(last)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "greedy-batch",
			Title:   "Batched greedy decode",
			Summary: "One argmax launch for six bf16 rows of 32000 tokens: a near-tie row is marked fragile, an exact tie accepts either token.",
			Op:      engine.OpArgmax,
			View:    "/rows/3",
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true, Notes: []scenarios.RuleRows{{Rule: engine.RuleFragile, Rows: []int{nearTie, tie}}}},
				{Name: "tokens", Pass: true, Notes: []scenarios.RuleRows{{Rule: engine.RuleFragile, Rows: []int{nearTie, tie}}}},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			i64("tokens", []int{rows}, tokens),
		},
	}, nil
}

// nextBelowBF16 returns the largest bf16 value below x (x > 0, a bf16 value).
func nextBelowBF16(x float64) float64 {
	b := engine.F32ToBF16(float32(x))
	return float64(engine.BF16ToF32(b - 1))
}

// mixedBatch is a sample batch whose even rows are greedy (temperature 0,
// served by the indexed argmax) and odd rows sampled (temperature 0.8,
// top-k 50). Each greedy row's maximum is a token that every other row
// holds far below its top 50. The external tokens come from a launcher
// with the classic indexed-launch bug: the argmax of the k-th greedy row is
// written to row k instead of to that row's index, into a buffer filled
// with -1, after the sampled rows were drawn correctly.
func mixedBatch() (*scenario, error) {
	const rows, vocab, topK = 6, 32000, 50
	rng := newRand(202)
	x := rounded(normals(rng, rows*vocab, 2), engine.BF16)
	temps := make([]float64, rows)
	ks := make([]int64, rows)
	seeds := make([]int64, rows)
	var greedy []int
	perm := rng.Perm(vocab)
	argmax := map[int]int{}
	for r := range rows {
		seeds[r] = int64(1000 + r)
		if r%2 == 0 {
			greedy = append(greedy, r)
			argmax[r] = perm[r]
			continue
		}
		temps[r], ks[r] = 0.8, topK
	}
	for r := range rows {
		row := x[r*vocab : (r+1)*vocab]
		for g, t := range argmax {
			if g != r {
				row[t] = -8 // far below any row's top 50
			}
		}
		if t, ok := argmax[r]; ok {
			m, _ := maxOf(row)
			row[t] = engine.RoundToDType(m+2, engine.BF16)
		}
	}
	out := make([]int64, rows)
	for r := range out {
		out[r] = -1
	}
	for r := range rows {
		if r%2 == 0 {
			continue
		}
		p := samplertest.Softmax(x[r*vocab:(r+1)*vocab], temps[r])
		out[r] = int64(draw(restrict(p, topKKeep(p, topK)), rng.Float64()))
	}
	for k, r := range greedy {
		out[k] = int64(argmax[r]) // the bug: out[r] is meant
	}
	// Rows 0..len(greedy)-1 now hold the greedy rows' tokens in order: row 0
	// its own (right), odd rows a token far outside their top 50, even rows
	// another row's maximum. The greedy rows past them keep the -1 fill.
	var failing []scenarios.RowRules
	for r := range rows {
		switch {
		case r == 0:
		case r < len(greedy) && r%2 == 1:
			failing = append(failing, fail(r, engine.RuleSupport))
		case r < len(greedy):
			failing = append(failing, fail(r, engine.RuleToken))
		case r%2 == 0:
			failing = append(failing, fail(r, engine.RuleTokenRange))
		}
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "mixed-batch",
			Title:     "Mixed greedy and sampled batch",
			Summary:   "Greedy rows go through the indexed argmax, the rest are sampled; an external launcher that writes the k-th greedy token to row k is caught row by row.",
			Op:        engine.OpSample,
			Overrides: scenarios.Overrides{Draws: intp(300)},
			View:      "?out=1&failing=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "tokens", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, temps),
			i64("top_k", []int{rows}, ks),
			i64("seed", []int{rows}, seeds),
			i64("tokens", []int{rows}, out),
		},
	}, nil
}

// topKKeep returns the tokens of p that top-k keeps with ties kept: those
// with fewer than k tokens strictly more probable.
func topKKeep(p []float64, k int) []bool {
	s := make([]float64, len(p))
	copy(s, p)
	// The k-th largest value, by partial selection sort on a copy (k is small).
	for i := 0; i < k; i++ {
		best := i
		for j := i + 1; j < len(s); j++ {
			if s[j] > s[best] {
				best = j
			}
		}
		s[i], s[best] = s[best], s[i]
	}
	kth := s[k-1]
	keep := make([]bool, len(p))
	for i, v := range p {
		keep[i] = v >= kth && !math.IsNaN(v)
	}
	return keep
}
