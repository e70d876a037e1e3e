package cpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/philox"
)

// ctxCheckEvery is how many draws or trials a row makes between checks of
// its context.
const ctxCheckEvery = 1 << 12

// logitsShape checks run.Logits and returns its rows and vocabulary size.
func logitsShape(run *engine.Run) (rows, vocab int, err error) {
	if err := engine.CheckTensor(run.Logits, "logits", 2, true); err != nil {
		return 0, 0, err
	}
	return run.Logits.Dim(0), run.Logits.Dim(1), nil
}

// probs runs softmax and renorm: Probs F32 [B, V].
func (b *Backend) probs(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	rows, vocab, err := logitsShape(run)
	if err != nil {
		return nil, 0, err
	}
	renorm := run.Op == engine.OpRenorm
	need := engine.NeedTemperature
	if renorm {
		need |= engine.NeedFilters
	}
	rp, err := run.Params.ForKernels(rows, need)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", run.Op, err)
	}
	probs := engine.NewTensor("probs", engine.F32, rows, vocab)
	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		x := floats(&s.x, vocab)
		run.Logits.Floats32(r*vocab, x)
		p := floats(&s.p, vocab)
		t := rp.Temperature[r]
		switch {
		case !renorm || t == 0:
			Softmax(x, t, p)
		default:
			w := floats(&s.w, vocab)
			if !Weights(x, t, w) {
				fillNaN(p)
				break
			}
			keep := bools(&s.keep, vocab)
			filterRow(&s.filter, rp, r, w, keep)
			Renorm(w, keep, p)
		}
		putFloats(probs, r*vocab, p)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.Logits, probs) + int64(rows)*need.Bytes()
	return &engine.Output{Probs: probs}, bytes, nil
}

// argmax runs argmax: Tokens I32 [B].
func (b *Backend) argmax(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	rows, vocab, err := logitsShape(run)
	if err != nil {
		return nil, 0, err
	}
	tokens := engine.NewTensor("tokens", engine.I32, rows)
	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		x := floats(&s.x, vocab)
		run.Logits.Floats32(r*vocab, x)
		putInt32(tokens, r, int32(Argmax(x)))
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return &engine.Output{Tokens: tokens}, engine.TensorBytes(run.Logits, tokens), nil
}

// sample runs sample: Tokens I32 [B] (draw 0 with Params.Method) and, when
// Params.Draws > 0, Samples I32 [B, Draws] (draws 0..N-1, inverse CDF).
func (b *Backend) sample(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	rows, vocab, err := logitsShape(run)
	if err != nil {
		return nil, 0, err
	}
	method := run.Params.Method
	switch method {
	case engine.SampleAuto, engine.SampleInverseCDF, engine.SampleGumbel, engine.SampleRejection:
	default:
		return nil, 0, fmt.Errorf("sample method %q: %w", method, engine.ErrUnsupported)
	}
	draws := run.Params.Draws
	if draws < 0 {
		return nil, 0, fmt.Errorf("sample: draws %d is negative", draws)
	}
	rp, err := run.Params.ForKernels(rows, engine.NeedTemperature|engine.NeedFilters|engine.NeedSeeds)
	if err != nil {
		return nil, 0, fmt.Errorf("sample: %w", err)
	}
	out := &engine.Output{Tokens: engine.NewTensor("tokens", engine.I32, rows)}
	if draws > 0 {
		out.Samples = engine.NewTensor("samples", engine.I32, rows, draws)
	}
	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		x := floats(&s.x, vocab)
		run.Logits.Floats32(r*vocab, x)
		t := rp.Temperature[r]
		w := floats(&s.w, vocab)
		valid := Weights(x, t, w)
		var keep []bool
		if valid && t > 0 && rp.Filtered(r, vocab) {
			keep = bools(&s.keep, vocab)
			filterRow(&s.filter, rp, r, w, keep)
		}
		stream := func(d int) philox.Stream { return philox.NewStream(rp.Seed[r], rp.Offset[r], r, d) }
		token := -1
		switch {
		case !valid:
		case t == 0:
			token = Argmax(x)
		case method == engine.SampleGumbel:
			token = SampleGumbel(x, t, keep, stream(0))
		case method == engine.SampleRejection:
			token = s.rejection.sample(w, keep, rp.Ties, stream(0))
		default:
			s.cdf.Reset(w, keep)
			token = s.cdf.Draw(stream(0).U64(0))
		}
		putInt32(out.Tokens, r, int32(token))
		if draws == 0 {
			return nil
		}
		base := r * draws
		if !valid || t == 0 {
			for d := range draws {
				putInt32(out.Samples, base+d, int32(token))
			}
			return nil
		}
		s.cdf.Reset(w, keep)
		for d := range draws {
			if d%ctxCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			putInt32(out.Samples, base+d, int32(s.cdf.Draw(stream(d).U64(0))))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.Logits, out.Tokens, out.Samples) + int64(rows)*(engine.NeedTemperature|engine.NeedFilters|engine.NeedSeeds).Bytes()
	return out, bytes, nil
}

// maxTraceTrials is the number of spec_verify trials whose steps are traced.
const maxTraceTrials = 16

// specVerify runs spec_verify: SpecTokens I32 [B, K+1], SpecEmitted and
// SpecAccepted I32 [B] of trial 0, SpecTrials I32 [T, B, K+1] when T > 1, and
// the Trace of the first min(T, 16) trials.
func (b *Backend) specVerify(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	if err := engine.CheckTensor(run.TargetLogits, "target_logits", 3, true); err != nil {
		return nil, 0, err
	}
	if err := engine.CheckTensor(run.DraftTokens, "draft_tokens", 2, false); err != nil {
		return nil, 0, err
	}
	rows, positions, vocab := run.TargetLogits.Dim(0), run.TargetLogits.Dim(1), run.TargetLogits.Dim(2)
	k := run.DraftTokens.Dim(1)
	if run.DraftTokens.Dim(0) != rows || positions != k+1 {
		return nil, 0, fmt.Errorf("spec_verify: target_logits %s and draft_tokens %s, want [B, K+1, V] and [B, K]: %w",
			run.TargetLogits.ShapeString(), run.DraftTokens.ShapeString(), engine.ErrUnsupported)
	}
	if run.DraftProbs != nil {
		if err := engine.CheckTensor(run.DraftProbs, "draft_probs", 3, true); err != nil {
			return nil, 0, err
		}
		if run.DraftProbs.Dim(0) != rows || run.DraftProbs.Dim(1) != k || run.DraftProbs.Dim(2) != vocab {
			return nil, 0, fmt.Errorf("spec_verify: draft_probs %s, want [%d, %d, %d]: %w",
				run.DraftProbs.ShapeString(), rows, k, vocab, engine.ErrUnsupported)
		}
	}
	drafts := make([]int32, rows*k)
	for i := range drafts {
		x := run.DraftTokens.Int(i)
		if x < 0 || x >= int64(vocab) {
			return nil, 0, fmt.Errorf("spec_verify: row %d: draft token %d at position %d outside [0, %d)", i/max(k, 1), x, i%max(k, 1), vocab)
		}
		drafts[i] = int32(x)
	}
	if run.Params.Trials < 0 {
		return nil, 0, fmt.Errorf("spec_verify: trials %d is negative", run.Params.Trials)
	}
	rp, err := run.Params.ForKernels(rows, engine.NeedTemperature|engine.NeedFilters|engine.NeedSeeds)
	if err != nil {
		return nil, 0, fmt.Errorf("spec_verify: %w", err)
	}
	trials := max(run.Params.Trials, 1)
	steps := k + 1
	out := &engine.Output{
		SpecTokens:   engine.NewTensor("spec_tokens", engine.I32, rows, steps),
		SpecEmitted:  engine.NewTensor("spec_emitted", engine.I32, rows),
		SpecAccepted: engine.NewTensor("spec_accepted", engine.I32, rows),
	}
	if trials > 1 {
		out.SpecTrials = engine.NewTensor("spec_trials", engine.I32, trials, rows, steps)
	}
	traced := min(trials, maxTraceTrials)
	out.Trace = &engine.SpecTrace{Trials: traced, Rows: rows, Steps: steps, Step: make([]engine.SpecStep, traced*rows*steps)}

	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		chain := specRow(run, rp, s, r, k, vocab, drafts[r*k:(r+1)*k])
		tokens := make([]int32, steps)
		for d := range trials {
			if d%ctxCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			var trace []engine.SpecStep
			if d < traced {
				at := (d*rows + r) * steps
				trace = out.Trace.Step[at : at+steps]
			}
			emitted, accepted := chain.Verify(philox.NewStream(rp.Seed[r], rp.Offset[r], r, d), tokens, trace)
			if d == 0 {
				for i, v := range tokens {
					putInt32(out.SpecTokens, r*steps+i, v)
				}
				putInt32(out.SpecEmitted, r, int32(emitted))
				putInt32(out.SpecAccepted, r, int32(accepted))
			}
			if out.SpecTrials != nil {
				for i, v := range tokens {
					putInt32(out.SpecTrials, (d*rows+r)*steps+i, v)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.TargetLogits, run.DraftTokens, run.DraftProbs,
		out.SpecTokens, out.SpecEmitted, out.SpecAccepted, out.SpecTrials) +
		int64(rows)*(engine.NeedTemperature|engine.NeedFilters|engine.NeedSeeds).Bytes()
	return out, bytes, nil
}

// specRow builds the chain of row r: the renorm of its K+1 target rows and
// its K draft distributions, in the worker's scratch.
func specRow(run *engine.Run, rp *engine.KernelParams, s *scratch, r, k, vocab int, drafts []int32) *SpecChain {
	steps := k + 1
	buf := floats(&s.p, (steps+k)*vocab)
	p := make([][]float32, steps)
	valid := make([]bool, steps)
	x := floats(&s.x, vocab)
	w := floats(&s.w, vocab)
	t := rp.Temperature[r]
	for i := range steps {
		p[i] = buf[i*vocab : (i+1)*vocab]
		run.TargetLogits.Floats32((r*steps+i)*vocab, x)
		valid[i] = Weights(x, t, w)
		switch {
		case !valid[i]:
			fillNaN(p[i])
		case t > 0 && rp.Filtered(r, vocab):
			keep := bools(&s.keep, vocab)
			filterRow(&s.filter, rp, r, w, keep)
			Renorm(w, keep, p[i])
		default:
			Renorm(w, nil, p[i])
		}
	}
	var q [][]float32
	if run.DraftProbs != nil {
		q = make([][]float32, k)
		for i := range k {
			q[i] = buf[(steps+i)*vocab : (steps+i+1)*vocab]
			run.DraftProbs.Floats32((r*k+i)*vocab, q[i])
		}
	}
	return NewSpecChain(drafts, p, q, valid)
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

// putFloats writes v as F32 into t starting at element start.
func putFloats(t *engine.Tensor, start int, v []float32) {
	b := t.Data[4*start : 4*(start+len(v))]
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// putInt32 writes v as element i of the I32 tensor t.
func putInt32(t *engine.Tensor, i int, v int32) {
	binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
}
