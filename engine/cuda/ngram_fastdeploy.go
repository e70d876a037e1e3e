package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// fastDeployPlan lays out ngram_match under FastDeploy's rules
// (ngram_semantics fastdeploy or fastdeploy_hybrid) for
// csrc/ngram_fastdeploy.cu: FastDeploy's per-row state is resolved here
// with DUMPS.md's defaults (engine.Run.FastDeployRow), so the kernel always
// gets every array. DraftOut is I32 [B, MaxDraftTokens+1] and
// SeqLensThisTime I32 [B], as engine/cpu writes them. A state engine/cpu
// refuses is refused in its words; one the kernel's int32 arrays cannot
// hold, or a row FastDeploy searches whose step_idx or input_ids_len lies
// outside pre_ids or input_ids, is ErrUnsupported (the session then runs
// engine/cpu, which says what it finds). It never reads pre_ids itself.
func fastDeployPlan(run *engine.Run) (*plan, error) {
	p := run.Params
	hybrid := p.NgramSemantics == engine.NgramFastDeployHybrid
	rows := run.PreIDs.Dim(0)
	states, err := run.FastDeployRows()
	if err != nil {
		return nil, err
	}
	if p.MaxDraftTokens < 0 || p.MaxDraftTokens >= math.MaxInt32 {
		return nil, fmt.Errorf("ngram_match: max_draft_tokens %d outside [0, %d): %w", p.MaxDraftTokens, math.MaxInt32, engine.ErrUnsupported)
	}
	width := p.MaxDraftTokens + 1
	promptCap, generatedCap := run.InputIDs.Dim(1), run.PreIDs.Dim(1)
	enc, dec, now, draftNum := make([]byte, 4*rows), make([]byte, 4*rows), make([]byte, 4*rows), make([]byte, 4*rows)
	decCap := make([]byte, 8*rows)
	fits := func(v int64) bool { return v == int64(int32(v)) }
	for r, s := range states {
		if !fits(s.Encoder) || !fits(s.Decoder) || !fits(s.ThisTime) {
			return nil, fmt.Errorf("ngram_match: row %d: FastDeploy state %+v does not fit the kernel's int32 lengths: %w", r, s, engine.ErrUnsupported)
		}
		if s.Reads(hybrid) {
			step, n := run.StepIdx.Int(r), run.InputIDsLen.Int(r)
			if step < 0 || step >= int64(generatedCap) || n < 0 || n > int64(promptCap) {
				return nil, fmt.Errorf("ngram_match: row %d: step_idx %d or input_ids_len %d outside pre_ids %s or input_ids %s: %w",
					r, step, n, run.PreIDs.ShapeString(), run.InputIDs.ShapeString(), engine.ErrUnsupported)
			}
		}
		binary.LittleEndian.PutUint32(enc[4*r:], uint32(s.Encoder))
		binary.LittleEndian.PutUint32(dec[4*r:], uint32(s.Decoder))
		binary.LittleEndian.PutUint32(now[4*r:], uint32(s.ThisTime))
		binary.LittleEndian.PutUint32(draftNum[4*r:], uint32(s.DraftTokenNum))
		binary.LittleEndian.PutUint64(decCap[8*r:], uint64(s.MaxDecLen))
	}
	minN := 1
	if hybrid {
		minN = max(p.MinNgramSize, 1)
	}
	pl := &plan{req: runRequest{Op: run.Op, Rows: rows, L: promptCap, M: generatedCap,
		MaxNgram: min(p.MaxNgramSize, math.MaxInt32), MinNgram: min(minN, math.MaxInt32), MaxDraft: p.MaxDraftTokens,
		Threshold: p.Threshold, FastDeploy: true, Hybrid: hybrid,
		In: map[string]slot{}, Out: map[string]slot{}}}
	if err := pl.putNgramInputs(run); err != nil {
		return nil, err
	}
	pl.req.In["seq_lens_encoder"] = pl.put(enc)
	pl.req.In["seq_lens_decoder"] = pl.put(dec)
	pl.req.In["seq_lens_this_time"] = pl.put(now)
	pl.req.In["draft_token_num"] = pl.put(draftNum)
	pl.req.In["max_dec_len"] = pl.put(decCap)
	draft := pl.reserve(rows*width, poisonDraft)
	seqLens := pl.reserve(rows, poisonToken)
	pl.req.Out["draft_out"], pl.req.Out["seq_lens_this_time_out"] = draft, seqLens
	pl.decode = func(shm []byte) *engine.Output {
		return &engine.Output{
			DraftOut:        readTensor(shm, draft, "draft_out", engine.I32, rows, width),
			SeqLensThisTime: readTensor(shm, seqLens, "seq_lens_this_time_out", engine.I32, rows),
		}
	}
	// As engine/cpu counts it: the four tensors every rule reads, and the outputs.
	pl.bytes = engine.TensorBytes(run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx) + 4*int64(rows)*int64(width) + 4*int64(rows)
	return pl, nil
}
