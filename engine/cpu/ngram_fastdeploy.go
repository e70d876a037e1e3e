package cpu

import (
	"context"
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// fastDeployMatch runs ngram_match under FastDeploy's rules as FastDeploy's
// CPU path does: rows in order, the running sum read as the prefix sum of
// seq_lens_this_time up to and including the row (encoder rows keep their
// chunk, inactive rows 0, a decoding row its current token, or the hybrid's
// MTP tokens, and then its draft). DraftOut is I32 [B, MaxDraftTokens+1],
// -1 wherever FastDeploy leaves its buffer as it was; SeqLensThisTime is I32
// [B].
func (b *Backend) fastDeployMatch(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	p := run.Params
	hybrid := p.NgramSemantics == engine.NgramFastDeployHybrid
	rows := run.PreIDs.Dim(0)
	state, err := run.FastDeployRows()
	if err != nil {
		return nil, 0, err
	}
	width := p.MaxDraftTokens + 1
	promptCap, generatedCap := run.InputIDs.Dim(1), run.PreIDs.Dim(1)
	prompts, generated := run.InputIDs.Ints(), run.PreIDs.Ints()
	draftOut := engine.NewTensor("draft_out", engine.I32, rows, width)
	for i := range rows * width {
		putInt32(draftOut, i, -1)
	}
	seqLens := make([]int64, rows)
	unprocessed := int64(0)
	for r := range rows {
		seqLens[r] = state[r].ThisTime
		if state[r].Decoder > 0 || !hybrid && state[r].Encoder > 0 {
			unprocessed++
		}
	}
	minN := 1
	if hybrid {
		minN = max(p.MinNgramSize, 1)
	}
	threshold := int64(p.Threshold)
	for r := range rows {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		s := state[r]
		step, n := run.StepIdx.Int(r), run.InputIDsLen.Int(r)
		ori := seqLens[r]
		var maxDraft int64
		if hybrid {
			maxDraft = min(int64(p.MaxDraftTokens)-ori+1, s.MaxDecLen-step-1)
			if ori == 0 || maxDraft <= 0 {
				continue
			}
		} else {
			maxDraft = min(s.DraftTokenNum, s.MaxDecLen-step-1)
			if s.Encoder > 0 {
				continue
			}
			if s.Decoder == 0 {
				seqLens[r] = 0
				continue
			}
			ori = 1
			seqLens[r] = 1
		}
		unprocessed--
		var sum int64
		for i := 0; i <= r; i++ {
			sum += seqLens[i]
		}
		if sum+maxDraft+unprocessed > threshold {
			maxDraft = min(maxDraft, threshold-sum-unprocessed)
		}
		if sum+unprocessed >= threshold-1 {
			continue
		}
		if step < 0 || step >= int64(generatedCap) || n < 0 || n > int64(promptCap) {
			return nil, 0, fmt.Errorf("ngram_match: row %d: step_idx %d or input_ids_len %d outside pre_ids %s or input_ids %s", r, step, n, run.PreIDs.ShapeString(), run.InputIDs.ShapeString())
		}
		prompt := prompts[r*promptCap : r*promptCap+int(n)]
		pre := generated[r*generatedCap : r*generatedCap+int(step)+1]
		draft := fastDeployDraft(prompt, pre, p.MaxNgramSize, minN, maxDraft)
		for k, v := range draft {
			if v != int64(int32(v)) {
				return nil, 0, fmt.Errorf("ngram_match: row %d: drafted token id %d does not fit in int32", r, v)
			}
			putInt32(draftOut, r*width+int(ori)+k, int32(v))
		}
		seqLens[r] = ori + int64(len(draft))
	}
	seqOut := engine.NewTensor("seq_lens_this_time_out", engine.I32, rows)
	for r, v := range seqLens {
		putInt32(seqOut, r, int32(v))
	}
	bytes := engine.TensorBytes(run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx, draftOut, seqOut)
	return &engine.Output{DraftOut: draftOut, SeqLensThisTime: seqOut}, bytes, nil
}

// fastDeployDraft returns a row's draft as FastDeploy's search finds it:
// pre holds the generated tokens up to and including the current one
// (pre_ids[0 : step_idx+1]); for n from maxN down to minN with n < len(pre),
// the pattern is pre's last n tokens; windows of the prompt are scanned left
// to right, then windows of pre before the current token, and the first
// window that matches with at least one token after it (before the
// haystack's end: the prompt's length, or step_idx) gives at most limit
// tokens.
func fastDeployDraft(prompt, pre []int64, maxN, minN int, limit int64) []int64 {
	step := int64(len(pre) - 1)
	for n := maxN; n >= minN; n-- {
		if step < int64(n) {
			continue
		}
		pattern := pre[len(pre)-n:]
		for _, hay := range [][]int64{prompt, pre[:step]} {
			for i := 0; i+n <= len(hay); i++ {
				if !equal(hay[i:i+n], pattern) {
					continue
				}
				start := int64(i + n)
				end := min(start+limit, int64(len(hay)))
				if start >= end {
					continue
				}
				return append([]int64(nil), hay[start:end]...)
			}
		}
	}
	return nil
}
