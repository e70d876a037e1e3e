package ref

import (
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// NgramMatch returns the exact drafts of an ngram_match run (SEMANTICS.md
// "ngram_match"): one row of MaxDraftTokens tokens per batch row, -1 after
// the draft, with the draft budget (Threshold) shared across the batch in row
// order. It returns nil when the run lacks input_ids, input_ids_len, pre_ids
// or step_idx.
func NgramMatch(run *engine.Run) [][]int64 {
	in, inLen, pre, step := run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx
	if in == nil || inLen == nil || pre == nil || step == nil {
		return nil
	}
	p := &run.Params
	width := max(p.MaxDraftTokens, 0)
	rows := min(pre.Dim(0), in.Dim(0), inLen.NumElements(), step.NumElements())
	l, m := in.Dim(1), pre.Dim(1)
	budget := p.Threshold
	out := make([][]int64, rows)
	for r := range rows {
		draft := make([]int64, width)
		for j := range draft {
			draft[j] = -1
		}
		out[r] = draft
		limit := min(width, budget)
		n := clamp(int(step.Int(r)), 0, m)
		if limit <= 0 || n == 0 {
			continue
		}
		prompt := rowInts(in, r, clamp(int(inLen.Int(r)), 0, l))
		gen := rowInts(pre, r, n)
		got := proposal(prompt, gen, p.MaxNgramSize, limit)
		copy(draft, got)
		budget -= len(got)
	}
	return out
}

// proposal returns the draft for one row: for n from maxN down to 1, the
// tokens after the leftmost earlier match of the last n generated tokens,
// searched in the prompt first, then in the generated tokens; at most limit.
func proposal(prompt, gen []int64, maxN, limit int) []int64 {
	for n := min(maxN, len(gen)); n >= 1; n-- {
		pattern := gen[len(gen)-n:]
		for _, seq := range [][]int64{prompt, gen} {
			if s := leftmost(seq, pattern); s >= 0 {
				return seq[s+n : min(s+n+limit, len(seq))]
			}
		}
	}
	return nil
}

// leftmost returns the least s with seq[s:s+n] equal to pattern and at least
// one token after it (s+n < len(seq)), or -1.
func leftmost(seq, pattern []int64) int {
	n := len(pattern)
	for s := 0; s+n < len(seq); s++ {
		if slices.Equal(seq[s:s+n], pattern) {
			return s
		}
	}
	return -1
}

// rowInts returns the first n elements of row r of a [rows, width] tensor.
func rowInts(t *engine.Tensor, r, n int) []int64 {
	w := t.Dim(1)
	out := make([]int64, n)
	for j := range out {
		out[j] = t.Int(r*w + j)
	}
	return out
}

// clamp returns x limited to [lo, hi].
func clamp(x, lo, hi int) int { return max(lo, min(x, hi)) }
