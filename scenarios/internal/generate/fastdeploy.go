package generate

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/scenarios"
)

// fdRow is one row of the FastDeploy scenarios: enc and dec are
// seq_lens_encoder and seq_lens_decoder, this is seq_lens_this_time before
// the call (an encoder row's chunk, the hybrid's MTP tokens), capLeft is
// max_dec_len - step_idx - 1.
type fdRow struct {
	enc, dec, this, capLeft int64
}

// fdBudget says how a simulated FastDeploy drafter charges the threshold.
type fdBudget struct {
	hybrid bool
	// reserve keeps one token for every later active row (FastDeploy);
	// false is the bug of a budget that ignores them.
	reserve bool
	// offsetOne writes the hybrid's draft from column 1, over the MTP
	// tokens (a bug), instead of after them.
	offsetOne bool
}

// fdSimulate drafts rows as FastDeploy's CPU loop does under b: every
// decoding row's prompt holds its pattern followed by draftable tokens, so
// the draft is the first limit of them. It returns draft_out (width
// maxDraft+1, column 0 the current token, stale 0 where nothing is
// written) and seq_lens_this_time.
func fdSimulate(rows []fdRow, drafts [][]int64, current []int64, maxDraft, threshold int64, b fdBudget) ([]int64, []int64) {
	width := maxDraft + 1
	out := make([]int64, int64(len(rows))*width)
	lens := make([]int64, len(rows))
	var reserved, sum int64
	for _, r := range rows {
		if r.dec > 0 || !b.hybrid && r.enc > 0 {
			reserved++
		}
	}
	for i, r := range rows {
		out[int64(i)*width] = current[i]
		lens[i] = r.this
		if b.hybrid {
			// The MTP drafter's tokens after the current one.
			for k := int64(1); k < r.this && k < width; k++ {
				out[int64(i)*width+k] = current[i] + 90 + k
			}
		}
		var own, limit int64
		if b.hybrid {
			own, limit = r.this, min(maxDraft-r.this+1, r.capLeft)
			if own == 0 || limit <= 0 {
				sum += own
				continue
			}
		} else {
			limit = min(maxDraft, r.capLeft)
			if r.enc > 0 {
				sum += r.this
				continue
			}
			if r.dec == 0 {
				lens[i] = 0
				continue
			}
			own, lens[i] = 1, 1
		}
		reserved--
		sum += own
		res := reserved
		if !b.reserve {
			res = 0
		}
		if sum+limit+res > threshold {
			limit = min(limit, threshold-sum-res)
		}
		if sum+res >= threshold-1 {
			continue
		}
		d := drafts[i][:min(int64(len(drafts[i])), limit)]
		at := own
		if b.offsetOne {
			at = 1
		}
		copy(out[int64(i)*width+at:], d)
		lens[i] = own + int64(len(d))
		sum += int64(len(d))
	}
	return out, lens
}

// fdInputs lays out the scenario rows: row i's prompt is 100i+1 .. 100i+12,
// its generated tokens [7, 100i+2, 100i+3] (step_idx 2, the current token
// 100i+3), so the 2-gram [100i+2, 100i+3] matches the prompt at 1 and the
// draft is 100i+4 onward.
func fdInputs(rows []fdRow) (tensors []*engine.Tensor, drafts [][]int64, current []int64) {
	const l, m = 12, 3
	b := len(rows)
	var in, inLen, pre, step, enc, dec, this, maxDec []int64
	for i, r := range rows {
		base := int64(100 * (i + 1))
		for j := range l {
			in = append(in, base+int64(j)+1)
		}
		inLen = append(inLen, l)
		pre = append(pre, 7, base+2, base+3)
		step = append(step, m-1)
		enc, dec, this = append(enc, r.enc), append(dec, r.dec), append(this, r.this)
		maxDec = append(maxDec, m-1+r.capLeft+1)
		drafts = append(drafts, []int64{base + 4, base + 5, base + 6, base + 7, base + 8})
		current = append(current, base+3)
	}
	tensors = []*engine.Tensor{
		i64("input_ids", []int{b, l}, in),
		i64("input_ids_len", []int{b}, inLen),
		i64("pre_ids", []int{b, m}, pre),
		i64("step_idx", []int{b}, step),
		i64("seq_lens_encoder", []int{b}, enc),
		i64("seq_lens_decoder", []int{b}, dec),
		i64("seq_lens_this_time", []int{b}, this),
		i64("max_dec_len", []int{b}, maxDec),
	}
	return tensors, drafts, current
}

// differing lists the rows where two simulated outputs differ.
func differing(aLens, bLens, aOut, bOut []int64, width int) []int {
	var rows []int
	for r := range aLens {
		if aLens[r] != bLens[r] || !slices.Equal(aOut[r*width:(r+1)*width], bOut[r*width:(r+1)*width]) {
			rows = append(rows, r)
		}
	}
	return rows
}

// fastDeployNgram is FastDeploy's ngram_match on eight rows, threshold 19,
// max_draft_tokens 4: decoding rows 0, 2, 4 to 7, an encoder row 1 (a
// prefill chunk of 3, which counts and keeps its reserved token), an
// inactive row 3, row 4 capped at 2 by max_dec_len. FastDeploy's budget
// reserves a token for every later active row: rows 0 and 2 draft 4, and
// from row 4 on the sum with the reservations reaches threshold - 1, so
// rows 4 to 7 draft nothing. The output @fastdeploy is FastDeploy's; the
// output @no_reservation charges the same threshold without the
// reservation and over-drafts rows 4 and 5.
func fastDeployNgram() (*scenario, error) {
	const maxDraft, threshold = 4, 19
	big := int64(1 << 20)
	rows := []fdRow{{dec: 9, capLeft: big}, {enc: 3, this: 3, capLeft: big}, {dec: 9, capLeft: big}, {capLeft: big},
		{dec: 9, capLeft: 2}, {dec: 9, capLeft: big}, {dec: 9, capLeft: big}, {dec: 9, capLeft: big}}
	tensors, drafts, current := fdInputs(rows)
	good, goodLens := fdSimulate(rows, drafts, current, maxDraft, threshold, fdBudget{reserve: true})
	bad, badLens := fdSimulate(rows, drafts, current, maxDraft, threshold, fdBudget{})
	over := differing(goodLens, badLens, good, bad, maxDraft+1)
	if !slices.Equal(over, []int{4, 5}) {
		return nil, fmt.Errorf("fastdeploy-ngram: the budget without the reservation differs on rows %v, want 4 and 5", over)
	}
	if !slices.Equal(goodLens, []int64{5, 3, 5, 0, 1, 1, 1, 1}) {
		return nil, fmt.Errorf("fastdeploy-ngram: FastDeploy's seq_lens_this_time %v, want [5 3 5 0 1 1 1 1]", goodLens)
	}
	var failing []scenarios.RowRules
	for _, r := range over {
		failing = append(failing, fail(r, engine.RuleExact))
	}
	b := len(rows)
	tensors = append(tensors,
		i64("draft_out@fastdeploy", []int{b, maxDraft + 1}, good),
		i64("seq_lens_this_time_out@fastdeploy", []int{b}, goodLens),
		i64("draft_out@no_reservation", []int{b, maxDraft + 1}, bad),
		i64("seq_lens_this_time_out@no_reservation", []int{b}, badLens),
	)
	return &scenario{
		cfg: scenarios.Config{
			Name:    "fastdeploy-ngram",
			Title:   "FastDeploy's n-gram budget",
			Summary: "FastDeploy's ngram_match on eight rows: each row's current token counts, one token is reserved for every later active row, encoder and inactive rows propose nothing; a budget without the reservation over-drafts rows 4 and 5.",
			Op:      engine.OpNgramMatch,
			View:    "/rows/4",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "draft_out@fastdeploy", Pass: true},
				{Name: "draft_out@no_reservation", Pass: false, Failing: failing},
			}},
		},
		tensors: tensors,
		meta: map[string]string{
			"ngram_semantics":  string(engine.NgramFastDeploy),
			"max_ngram_size":   "3",
			"max_draft_tokens": strconv.Itoa(maxDraft),
			"threshold":        strconv.Itoa(threshold),
			"source":           "a simulation of FastDeploy's CPU ngram_match (custom_ops/gpu_ops/speculate_decoding/ngram_match.cc)",
		},
	}, nil
}

// fastDeployHybrid is FastDeploy's hybrid_mtp_ngram on five rows,
// min_ngram_size 2, max_draft_tokens 4, threshold 18: the MTP drafter wrote
// 1, 2, 0, 2 and 1 tokens; each row may add max_draft_tokens - MTP + 1
// n-gram tokens after them, within the threshold and a token reserved for
// every later row with a decoder length (row 2, without MTP tokens, keeps
// its reservation to the end: with it, row 4's sum of 16 reaches
// threshold - 1, and row 4 drafts nothing). The output @hybrid is FastDeploy's; the output
// @offset_one writes the n-gram draft from column 1, over the MTP tokens,
// and differs on the rows with 2 MTP tokens that draft.
func fastDeployHybrid() (*scenario, error) {
	const maxDraft, threshold = 4, 18
	big := int64(1 << 20)
	rows := []fdRow{{dec: 9, this: 1, capLeft: big}, {dec: 9, this: 2, capLeft: big}, {dec: 9, this: 0, capLeft: big},
		{dec: 9, this: 2, capLeft: big}, {dec: 9, this: 1, capLeft: big}}
	tensors, drafts, current := fdInputs(rows)
	// The hybrid reads no encoder lengths.
	tensors = slices.DeleteFunc(tensors, func(t *engine.Tensor) bool { return t.Name == "seq_lens_encoder" })
	good, goodLens := fdSimulate(rows, drafts, current, maxDraft, threshold, fdBudget{hybrid: true, reserve: true})
	bad, badLens := fdSimulate(rows, drafts, current, maxDraft, threshold, fdBudget{hybrid: true, reserve: true, offsetOne: true})
	wrong := differing(goodLens, badLens, good, bad, maxDraft+1)
	if !slices.Equal(wrong, []int{1, 3}) {
		return nil, fmt.Errorf("fastdeploy-hybrid: the draft from column 1 differs on rows %v, want 1 and 3", wrong)
	}
	if !slices.Equal(goodLens, []int64{5, 5, 0, 5, 1}) {
		return nil, fmt.Errorf("fastdeploy-hybrid: FastDeploy's seq_lens_this_time %v, want [5 5 0 5 1]", goodLens)
	}
	var failing []scenarios.RowRules
	for _, r := range wrong {
		failing = append(failing, fail(r, engine.RuleExact))
	}
	b := len(rows)
	tensors = append(tensors,
		i64("draft_out@hybrid", []int{b, maxDraft + 1}, good),
		i64("seq_lens_this_time_out@hybrid", []int{b}, goodLens),
		i64("draft_out@offset_one", []int{b, maxDraft + 1}, bad),
		i64("seq_lens_this_time_out@offset_one", []int{b}, badLens),
	)
	return &scenario{
		cfg: scenarios.Config{
			Name:    "fastdeploy-hybrid",
			Title:   "FastDeploy's hybrid MTP + n-gram drafts",
			Summary: "FastDeploy's hybrid_mtp_ngram: n-gram drafts appended after the tokens the MTP drafter wrote, with their own budget; a draft written from column 1 overwrites the MTP tokens on rows 1 and 3.",
			Op:      engine.OpNgramMatch,
			View:    "/rows/1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "draft_out@hybrid", Pass: true},
				{Name: "draft_out@offset_one", Pass: false, Failing: failing},
			}},
		},
		tensors: tensors,
		meta: map[string]string{
			"ngram_semantics":  string(engine.NgramFastDeployHybrid),
			"max_ngram_size":   "3",
			"min_ngram_size":   "2",
			"max_draft_tokens": strconv.Itoa(maxDraft),
			"threshold":        strconv.Itoa(threshold),
			"source":           "a simulation of FastDeploy's CPU hybrid_mtp_ngram (custom_ops/gpu_ops/speculate_decoding/draft_model/ngram_match_mixed.cu)",
		},
	}, nil
}
