package dump

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// fastDeployState are the ngram_match inputs that only FastDeploy's rules
// read (docs/SEMANTICS.md "ngram_match").
var fastDeployState = []string{"seq_lens_encoder", "seq_lens_decoder", "seq_lens_this_time", "max_dec_len", "draft_token_num"}

// ngramState checks the FastDeploy state of an ngram_match run against its
// ngram_semantics: under sampviz's rule the state is ignored with a notice;
// under FastDeploy's, every length is a non-negative int32, draft_token_num
// and the hybrid's seq_lens_this_time fit the draft buffer (max_draft_tokens
// + 1 columns), and a row FastDeploy drafts for has its current token,
// pre_ids[step_idx], inside pre_ids. Each error names the tensor, the row
// and the rule.
func (b *builder) ngramState() error {
	run := b.run
	if run.Op != engine.OpNgramMatch {
		return nil
	}
	sem := run.Params.NgramSemantics
	reads := map[string]bool{}
	switch sem {
	case engine.NgramFastDeploy:
		for _, n := range fastDeployState {
			reads[n] = true
		}
	case engine.NgramFastDeployHybrid:
		// hybrid_mtp_ngram takes no encoder lengths and reads its
		// max_draft_tokens attribute, not draft_token_num.
		reads["seq_lens_decoder"], reads["seq_lens_this_time"], reads["max_dec_len"] = true, true, true
	}
	for _, name := range fastDeployState {
		if run.Input(name) != nil && !reads[name] {
			b.notice("ignored tensor %q: ngram_semantics %s does not read it", name, string(sem))
			run.SetTensor(name, nil)
		}
	}
	if !sem.FastDeploy() {
		return nil
	}
	if sem == engine.NgramFastDeployHybrid && run.SeqLensThisTime == nil {
		return tensorError(b.file, "seq_lens_this_time", "not found; ngram_semantics fastdeploy_hybrid needs it (the tokens the MTP drafter already wrote per row, after which the n-gram draft goes)")
	}
	width := int64(run.Params.MaxDraftTokens)
	for _, name := range fastDeployState {
		t := run.Input(name)
		if t == nil {
			continue
		}
		if err := b.f.Load(name); err != nil {
			return err
		}
		hi, why := int64(math.MaxInt32), "a length, a non-negative int32 as FastDeploy holds it"
		switch {
		case name == "draft_token_num":
			hi, why = width, "a row's draft count, which the draft buffer (max_draft_tokens + 1 columns, the current token first) must hold"
		case name == "seq_lens_this_time" && sem == engine.NgramFastDeployHybrid:
			hi, why = width+1, "the row's MTP tokens, which the draft buffer (max_draft_tokens + 1 columns) must hold"
		case name == "max_dec_len":
			hi = math.MaxInt64
		}
		for r := range t.NumElements() {
			switch v := t.Int(r); {
			case v < 0 && name == "max_dec_len":
				return tensorError(b.file, name, "row %d is %d, but max_dec_len is a request's length cap, never negative", r, v)
			case v < 0 || v > hi:
				return tensorError(b.file, name, "row %d is %d, outside [0, %d]: %s", r, v, hi, why)
			}
		}
	}
	m := run.PreIDs.Dim(1)
	for r := range b.rows {
		if !engine.FastDeployReads(run, r) {
			continue
		}
		if s := run.StepIdx.Int(r); s >= int64(m) {
			return tensorError(b.file, "step_idx", "row %d is %d, but FastDeploy reads the row's current token at pre_ids[step_idx], so it must be below %d (pre_ids has %d columns)", r, s, m, m)
		}
	}
	return nil
}
