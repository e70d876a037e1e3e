package ref

import (
	"github.com/sampviz/sampviz/engine"
)

// fastDeployRows drafts every row of an ngram_match run under FastDeploy's
// rules (docs/SEMANTICS.md "ngram_match under FastDeploy's rules"), the
// rule as the page states it, row by row:
//
//   - the rows still to draft reserve one token each: at the start, every
//     row with a decoder (or, under fastdeploy, an encoder) length;
//   - a row's own tokens this step (its current token, or its MTP tokens)
//     join the running sum before it drafts, and its draft after;
//   - a row drafts at most min(its count, max_dec_len - step_idx - 1),
//     clamped to threshold - sum - reserved, and nothing once sum +
//     reserved reaches threshold - 1.
func fastDeployRows(run *engine.Run) []NgramRow {
	p := &run.Params
	hybrid := p.NgramSemantics == engine.NgramFastDeployHybrid
	in, inLen, pre, step := run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx
	rows := min(pre.Dim(0), in.Dim(0), inLen.NumElements(), step.NumElements())
	l, m := in.Dim(1), pre.Dim(1)
	threshold := int64(p.Threshold)
	minN := 1
	if hybrid {
		minN = max(p.MinNgramSize, 1)
	}
	var reserved int64
	for r := range rows {
		s := run.FastDeployRow(r)
		if s.Decoder > 0 || !hybrid && s.Encoder > 0 {
			reserved++
		}
	}
	var sum int64
	out := make([]NgramRow, rows)
	for r := range rows {
		nr := &out[r]
		s := run.FastDeployRow(r)
		st := step.Int(r)
		nr.Prompt = rowInts(in, r, clamp(int(inLen.Int(r)), 0, l))
		nr.Generated = rowInts(pre, r, clamp(int(st)+1, 0, m))
		remaining := s.MaxDecLen - st - 1
		var own, limit int64
		if hybrid {
			own = s.ThisTime
			limit = min(int64(p.MaxDraftTokens)-own+1, remaining)
			nr.SeqLen, nr.Offset = own, int(own)
			if own == 0 || limit <= 0 {
				sum += own
				nr.Why = "no MTP tokens"
				if own > 0 {
					nr.Why = "no room left under max_draft_tokens or max_dec_len"
				}
				continue
			}
		} else {
			limit = min(s.DraftTokenNum, remaining)
			switch {
			case s.Encoder > 0:
				sum += s.ThisTime
				nr.SeqLen, nr.Why = s.ThisTime, "an encoder (prefill) row"
				continue
			case s.Decoder == 0:
				nr.Why = "an inactive row"
				continue
			}
			own = 1
			nr.SeqLen, nr.Offset = 1, 1
		}
		reserved--
		sum += own
		if sum+limit+reserved > threshold {
			limit = min(limit, threshold-sum-reserved)
		}
		nr.Budget, nr.Limit = int(threshold-sum-reserved), int(max(limit, 0))
		if sum+reserved >= threshold-1 {
			nr.Why = "the threshold is spent (sum with the reserved tokens reaches threshold - 1)"
			continue
		}
		if limit <= 0 {
			nr.Why = "no room left under max_dec_len"
			continue
		}
		nr.proposeFastDeploy(p.MaxNgramSize, minN)
		nr.SeqLen += int64(len(nr.Draft))
		sum += int64(len(nr.Draft))
	}
	return out
}

// proposeFastDeploy finds the row's draft as FastDeploy's CPU path does:
// for n from maxN down to minN (n at most step_idx), the pattern is the
// last n generated tokens, the current one included; the leftmost match in
// the prompt with a token after it wins, else the leftmost in the
// generated tokens before the current one with a token after it there
// (the current token is never drafted).
func (nr *NgramRow) proposeFastDeploy(maxN, minN int) {
	gen := nr.Generated
	step := len(gen) - 1
	for n := min(maxN, step); n >= minN; n-- {
		pattern := gen[len(gen)-n:]
		for _, src := range []struct {
			name string
			seq  []int64
		}{{"prompt", nr.Prompt}, {"generated", gen[:step]}} {
			if s := leftmost(src.seq, pattern); s >= 0 {
				nr.N, nr.Source, nr.Start = n, src.name, s
				nr.Draft = src.seq[s+n : min(s+n+nr.Limit, len(src.seq))]
				return
			}
		}
	}
}

// NgramSeqLens returns seq_lens_this_time after an ngram_match run under
// FastDeploy's rules, one per row, or nil under sampviz's rule or when the
// run lacks an input.
func NgramSeqLens(run *engine.Run) []int64 {
	if !run.Params.NgramSemantics.FastDeploy() {
		return nil
	}
	rows := NgramRows(run)
	if rows == nil {
		return nil
	}
	out := make([]int64, len(rows))
	for r, nr := range rows {
		out[r] = nr.SeqLen
	}
	return out
}
