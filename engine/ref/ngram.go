package ref

import (
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// NgramRow is how the reference drafted one row of an ngram_match run, for
// showing the match in the token sequence.
type NgramRow struct {
	// Prompt is input_ids[:input_ids_len]; Generated is pre_ids[:step_idx].
	Prompt, Generated []int64
	// Budget is the threshold left when the row's turn came (rows draft in
	// order), Limit = min(max_draft_tokens, Budget) what the row may propose.
	Budget, Limit int
	// N is the length of the n-gram that matched (its pattern is the last N
	// generated tokens), 0 when nothing matched or nothing was searched.
	N int
	// Source is where the leftmost match lies: "prompt" or "generated"
	// ("" without a match), and Start its index there.
	Source string
	Start  int
	// Draft is the proposal: the tokens after the match, at most Limit.
	Draft []int64

	// Under FastDeploy's rules (ngram_semantics fastdeploy and
	// fastdeploy_hybrid): Offset is the column of draft_out the draft
	// starts at (1 after the current token; the MTP tokens under the
	// hybrid), SeqLen the row's seq_lens_this_time after the call, and
	// Why says, in a few words, why a row drafts nothing ("" when it
	// drafts, or was searched and nothing matched).
	Offset int
	SeqLen int64
	Why    string
}

// NgramRows returns how each row of an ngram_match run is drafted
// (SEMANTICS.md "ngram_match"), with the draft budget (Threshold) shared
// across the batch in row order. It returns nil when the run lacks
// input_ids, input_ids_len, pre_ids or step_idx.
func NgramRows(run *engine.Run) []NgramRow {
	in, inLen, pre, step := run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx
	if in == nil || inLen == nil || pre == nil || step == nil {
		return nil
	}
	p := &run.Params
	if p.NgramSemantics.FastDeploy() {
		return fastDeployRows(run)
	}
	width := max(p.MaxDraftTokens, 0)
	rows := min(pre.Dim(0), in.Dim(0), inLen.NumElements(), step.NumElements())
	l, m := in.Dim(1), pre.Dim(1)
	budget := p.Threshold
	out := make([]NgramRow, rows)
	for r := range rows {
		nr := &out[r]
		nr.Prompt = rowInts(in, r, clamp(int(inLen.Int(r)), 0, l))
		nr.Generated = rowInts(pre, r, clamp(int(step.Int(r)), 0, m))
		nr.Budget, nr.Limit = budget, min(width, budget)
		if nr.Limit <= 0 || len(nr.Generated) == 0 {
			continue
		}
		nr.propose(p.MaxNgramSize)
		budget -= len(nr.Draft)
	}
	return out
}

// NgramMatch returns the exact drafts of an ngram_match run: one row of
// MaxDraftTokens tokens per batch row, -1 after the draft (NgramRows says
// how each was found). Under FastDeploy's rules a row has MaxDraftTokens+1
// columns and the draft starts at NgramRow.Offset, -1 in every column
// FastDeploy does not write. It returns nil when the run lacks an input.
func NgramMatch(run *engine.Run) [][]int64 {
	rows := NgramRows(run)
	if rows == nil {
		return nil
	}
	width := max(run.Params.MaxDraftTokens, 0)
	if run.Params.NgramSemantics.FastDeploy() {
		width++
	}
	out := make([][]int64, len(rows))
	for r, nr := range rows {
		draft := make([]int64, width)
		for j := range draft {
			draft[j] = -1
		}
		copy(draft[min(nr.Offset, width):], nr.Draft)
		out[r] = draft
	}
	return out
}

// propose finds the row's draft: for n from maxN down to 1, the tokens after
// the leftmost earlier match of the last n generated tokens, searched in the
// prompt first, then in the generated tokens; at most Limit of them.
func (nr *NgramRow) propose(maxN int) {
	gen := nr.Generated
	for n := min(maxN, len(gen)); n >= 1; n-- {
		pattern := gen[len(gen)-n:]
		for _, src := range []struct {
			name string
			seq  []int64
		}{{"prompt", nr.Prompt}, {"generated", gen}} {
			if s := leftmost(src.seq, pattern); s >= 0 {
				nr.N, nr.Source, nr.Start = n, src.name, s
				nr.Draft = src.seq[s+n : min(s+n+nr.Limit, len(src.seq))]
				return
			}
		}
	}
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
