package engine

import (
	"fmt"
	"math"
)

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
	return run.FastDeployRow(r).Reads(run.Params.NgramSemantics == NgramFastDeployHybrid)
}

// Reads is FastDeployReads for a row in state s, under the hybrid rule
// where hybrid.
func (s FastDeployRow) Reads(hybrid bool) bool {
	if hybrid {
		return s.ThisTime > 0
	}
	return s.Encoder == 0 && s.Decoder > 0
}

// FastDeployRows is every row's state, checked as both backends need it
// before they draft: each state tensor holds one value a row (else
// ErrUnsupported: the backend cannot tell the rows' states), and each
// row's state lies in FastDeploy's ranges (DUMPS.md, "FastDeploy's n-gram
// drafting"; engine/dump refuses a dump outside them, and a run built in
// memory gets the same rule rather than a write past its row of the draft
// buffer).
func (r *Run) FastDeployRows() ([]FastDeployRow, error) {
	p := r.Params
	hybrid := p.NgramSemantics == NgramFastDeployHybrid
	rows := r.PreIDs.Dim(0)
	for _, t := range []*Tensor{r.SeqLensEncoder, r.SeqLensDecoder, r.SeqLensThisTime, r.MaxDecLen, r.DraftTokenNum} {
		if t != nil && t.NumElements() != rows {
			return nil, fmt.Errorf("ngram_match: %s has shape %s, want [%d]: %w", t.Name, t.ShapeString(), rows, ErrUnsupported)
		}
	}
	width := int64(p.MaxDraftTokens) + 1
	states := make([]FastDeployRow, rows)
	for row := range rows {
		s := r.FastDeployRow(row)
		if s.ThisTime < 0 || hybrid && s.ThisTime > width || s.DraftTokenNum < 0 || s.DraftTokenNum > int64(p.MaxDraftTokens) || s.Encoder < 0 || s.Decoder < 0 {
			return nil, fmt.Errorf("ngram_match: row %d: FastDeploy state %+v outside its ranges (DUMPS.md, \"FastDeploy's n-gram drafting\")", row, s)
		}
		states[row] = s
	}
	return states, nil
}
