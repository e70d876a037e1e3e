package cpu

import (
	"context"
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// Draft returns the prompt-lookup draft of one row, at most limit tokens:
// for n from maxNgramSize down to 1 (skipping n > len(generated)), the
// pattern is the last n generated tokens; it is searched in prompt for the
// leftmost s with prompt[s:s+n] equal to it and s+n < len(prompt), and the
// draft is prompt[s+n : min(s+n+limit, len(prompt))]; when the prompt has no
// match, generated is searched the same way (s+n < len(generated), which
// excludes the pattern's own position). The first n that matches wins. It
// returns nil when limit is 0, generated is empty or nothing matches. prompt
// is input_ids[0:input_ids_len] and generated is pre_ids[0:step_idx].
func Draft(prompt, generated []int64, maxNgramSize, limit int) []int64 {
	if limit <= 0 || len(generated) == 0 {
		return nil
	}
	for n := min(maxNgramSize, len(generated)); n >= 1; n-- {
		pattern := generated[len(generated)-n:]
		if d := lookup(prompt, pattern, limit); d != nil {
			return d
		}
		if d := lookup(generated, pattern, limit); d != nil {
			return d
		}
	}
	return nil
}

// lookup returns the at most limit tokens of ids that follow the leftmost
// occurrence of pattern that has at least one token after it, or nil.
func lookup(ids, pattern []int64, limit int) []int64 {
	n := len(pattern)
	for s := 0; s+n < len(ids); s++ {
		if equal(ids[s:s+n], pattern) {
			end := min(s+n+limit, len(ids))
			return append([]int64(nil), ids[s+n:end]...)
		}
	}
	return nil
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ngramMatch runs ngram_match: DraftOut I32 [B, MaxDraftTokens], rows in
// order because they share the draft budget.
func (b *Backend) ngramMatch(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	for _, c := range []struct {
		t    *engine.Tensor
		name string
		rank int
	}{{run.InputIDs, "input_ids", 2}, {run.InputIDsLen, "input_ids_len", 1}, {run.PreIDs, "pre_ids", 2}, {run.StepIdx, "step_idx", 1}} {
		if err := engine.CheckTensor(c.t, c.name, c.rank, false); err != nil {
			return nil, 0, err
		}
	}
	rows := run.PreIDs.Dim(0)
	if run.InputIDs.Dim(0) != rows || run.InputIDsLen.Dim(0) != rows || run.StepIdx.Dim(0) != rows {
		return nil, 0, fmt.Errorf("ngram_match: input_ids %s, input_ids_len %s, pre_ids %s, step_idx %s disagree on the rows: %w",
			run.InputIDs.ShapeString(), run.InputIDsLen.ShapeString(), run.PreIDs.ShapeString(), run.StepIdx.ShapeString(), engine.ErrUnsupported)
	}
	if run.Params.NgramSemantics.FastDeploy() {
		return b.fastDeployMatch(ctx, run)
	}
	p := run.Params
	if p.MaxNgramSize < 0 || p.MaxDraftTokens < 0 || p.Threshold < 0 {
		return nil, 0, fmt.Errorf("ngram_match: max_ngram_size %d, max_draft_tokens %d, threshold %d: none may be negative",
			p.MaxNgramSize, p.MaxDraftTokens, p.Threshold)
	}
	promptCap, generatedCap := run.InputIDs.Dim(1), run.PreIDs.Dim(1)
	prompts, generated := run.InputIDs.Ints(), run.PreIDs.Ints()
	draftOut := engine.NewTensor("draft_out", engine.I32, rows, p.MaxDraftTokens)
	budget := p.Threshold
	for r := range rows {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		n, step := run.InputIDsLen.Int(r), run.StepIdx.Int(r)
		if n < 0 || n > int64(promptCap) {
			return nil, 0, fmt.Errorf("ngram_match: row %d: input_ids_len %d outside [0, %d]", r, n, promptCap)
		}
		if step < 0 || step > int64(generatedCap) {
			return nil, 0, fmt.Errorf("ngram_match: row %d: step_idx %d outside [0, %d]", r, step, generatedCap)
		}
		prompt := prompts[r*promptCap : r*promptCap+int(n)]
		pre := generated[r*generatedCap : r*generatedCap+int(step)]
		draft := Draft(prompt, pre, p.MaxNgramSize, min(p.MaxDraftTokens, budget))
		budget -= len(draft)
		for i := range p.MaxDraftTokens {
			v := int64(-1)
			if i < len(draft) {
				v = draft[i]
			}
			if v != int64(int32(v)) {
				return nil, 0, fmt.Errorf("ngram_match: row %d: drafted token id %d does not fit in int32", r, v)
			}
			putInt32(draftOut, r*p.MaxDraftTokens+i, int32(v))
		}
	}
	bytes := engine.TensorBytes(run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx, draftOut)
	return &engine.Output{DraftOut: draftOut}, bytes, nil
}
