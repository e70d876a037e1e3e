package engine

import "math"

// FastDeployRow is one row's state under FastDeploy's ngram rules
// (ngram_semantics fastdeploy and fastdeploy_hybrid), with DUMPS.md's
// defaults for the tensors a dump leaves out.
type FastDeployRow struct {
	// Encoder is seq_lens_encoder (0 when absent: every row decodes);
	// Decoder is seq_lens_decoder (1 when absent: every row is active).
	Encoder, Decoder int64
	// ThisTime is seq_lens_this_time before the call: an encoder row's
	// prefill chunk (seq_lens_encoder when absent), the hybrid's MTP
	// tokens.
	ThisTime int64
	// MaxDecLen is max_dec_len (no cap when absent), DraftTokenNum the
	// row's draft count (max_draft_tokens when absent).
	MaxDecLen, DraftTokenNum int64
}

// NoDecCap stands for an absent max_dec_len: a cap no step reaches.
const NoDecCap = math.MaxInt64 / 4

// FastDeployRow returns row r's FastDeploy state.
func (r *Run) FastDeployRow(row int) FastDeployRow {
	at := func(t *Tensor, def int64) int64 {
		if t == nil || row >= t.NumElements() {
			return def
		}
		return t.Int(row)
	}
	s := FastDeployRow{
		Encoder:       at(r.SeqLensEncoder, 0),
		Decoder:       at(r.SeqLensDecoder, 1),
		MaxDecLen:     at(r.MaxDecLen, NoDecCap),
		DraftTokenNum: at(r.DraftTokenNum, int64(r.Params.MaxDraftTokens)),
	}
	s.ThisTime = at(r.SeqLensThisTime, s.Encoder)
	return s
}

// FastDeployReads reports whether FastDeploy's rule searches row r for a
// draft, so reads its current token pre_ids[step_idx]: a decoding row
// (no encoder length, a decoder length) under fastdeploy, a row with MTP
// tokens under fastdeploy_hybrid.
func FastDeployReads(run *Run, r int) bool {
	s := run.FastDeployRow(r)
	if run.Params.NgramSemantics == NgramFastDeployHybrid {
		return s.ThisTime > 0
	}
	return s.Encoder == 0 && s.Decoder > 0
}
