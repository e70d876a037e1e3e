package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// maxTraceTrials is the number of spec_verify trials whose steps are traced
// (engine/cpu traces the same number).
const maxTraceTrials = 16

// plan is one run laid out for the worker: the request, the bytes to write
// into shared memory before it, and how to read the Output back after it.
type plan struct {
	req    runRequest
	size   int64
	writes []write
	// bytes is what the op moves through device memory, counted as
	// engine/cpu counts it (inputs read once, outputs written once).
	bytes  int64
	decode func(shm []byte) *engine.Output
}

type write struct {
	off  int64
	data []byte
}

// put places data in the shared memory and returns its slot.
func (p *plan) put(data []byte) slot {
	off := (p.size + 255) &^ 255
	p.size = off + int64(len(data))
	p.writes = append(p.writes, write{off, data})
	return slot{Off: off, Bytes: int64(len(data))}
}

// reserve makes room for an output of n 32-bit words filled with poison.
func (p *plan) reserve(n int, poison uint32) slot {
	off := (p.size + 255) &^ 255
	p.size = off + 4*int64(n)
	return slot{Off: off, Bytes: 4 * int64(n), Poison: poison}
}

// svDType maps a float input dtype to the kernels' dtype; F64 converts to F32.
func svDType(d engine.DType) int {
	switch d {
	case engine.F16:
		return svF16
	case engine.BF16:
		return svBF16
	}
	return svF32
}

// floatData returns t's bytes as the kernels read them: F32, F16 and BF16
// as stored, F64 rounded to F32 (as engine/cpu reads it).
func floatData(t *engine.Tensor) []byte {
	if t.DType != engine.F64 {
		return t.Data
	}
	n := t.NumElements()
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(t.Float32(i)))
	}
	return b
}

// int32Data returns t's elements as little-endian int32; an element that
// does not fit is an error.
func int32Data(t *engine.Tensor, name string) ([]byte, error) {
	if t.DType == engine.I32 {
		return t.Data, nil
	}
	n := t.NumElements()
	b := make([]byte, 4*n)
	for i := range n {
		v := t.Int(i)
		if v != int64(int32(v)) {
			return nil, fmt.Errorf("%s: element %d = %d does not fit in int32: %w", name, i, v, engine.ErrUnsupported)
		}
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v)))
	}
	return b, nil
}

// checkTensor reports whether t is present with rank dimensions, a float
// (or integer) dtype and as many bytes as its shape says.
func checkTensor(t *engine.Tensor, name string, rank int, float bool) error {
	if t == nil {
		return fmt.Errorf("%s: missing: %w", name, engine.ErrUnsupported)
	}
	if len(t.Shape) != rank {
		return fmt.Errorf("%s: shape %s, want %d dimensions: %w", name, t.ShapeString(), rank, engine.ErrUnsupported)
	}
	for _, d := range t.Shape {
		if d < 0 || d > math.MaxInt32 {
			return fmt.Errorf("%s: dimension out of range in shape %s: %w", name, t.ShapeString(), engine.ErrUnsupported)
		}
	}
	if float && !t.DType.IsFloat() || !float && !t.DType.IsInt() {
		return fmt.Errorf("%s: dtype %s, want a %s dtype: %w", name, t.DType, map[bool]string{true: "float", false: "integer"}[float], engine.ErrUnsupported)
	}
	if want := t.NumElements() * t.DType.Size(); len(t.Data) != want {
		return fmt.Errorf("%s: %d bytes for shape %s of %s, want %d: %w", name, len(t.Data), t.ShapeString(), t.DType, want, engine.ErrUnsupported)
	}
	return nil
}

// rowParams are a run's per-row parameters in the kernels' types.
type rowParams struct {
	temperature []float32
	topK        []int32
	topP, minP  []float32
	seed        []uint64
	offset      []uint64
	flags       int
}

// The parameter groups an op needs.
const (
	needTemperature = 1 << iota
	needFilters
	needSeeds
)

// resolveParams checks the parameter groups in need (as engine/cpu does:
// the same rules, the same messages) and converts them for the kernels.
func resolveParams(p *engine.Params, rows, vocab, need int) (*rowParams, error) {
	rp := &rowParams{
		temperature: make([]float32, rows),
		topK:        make([]int32, rows),
		topP:        make([]float32, rows),
		minP:        make([]float32, rows),
		seed:        make([]uint64, rows),
		offset:      make([]uint64, rows),
	}
	for r := range rows {
		rp.temperature[r], rp.topP[r] = 1, 1
	}
	count := func(name string, n int) error {
		if n != rows {
			return fmt.Errorf("%s: %d values for %d rows", name, n, rows)
		}
		return nil
	}
	if need&needTemperature != 0 {
		if err := count("temperature", len(p.Temperature)); err != nil {
			return nil, err
		}
		for r, v := range p.Temperature {
			t := float32(v)
			if !(t >= 0 && t <= math.MaxFloat32) {
				return nil, fmt.Errorf("row %d: temperature %g is not a finite number >= 0", r, v)
			}
			rp.temperature[r] = t
		}
	}
	if need&needFilters != 0 {
		for _, c := range []struct {
			name string
			n    int
		}{{"top_k", len(p.TopK)}, {"top_p", len(p.TopP)}, {"min_p", len(p.MinP)}} {
			if err := count(c.name, c.n); err != nil {
				return nil, err
			}
		}
		for r := range rows {
			if p.TopK[r] < 0 {
				return nil, fmt.Errorf("row %d: top_k %d is negative", r, p.TopK[r])
			}
			rp.topK[r] = int32(min(p.TopK[r], vocab)) // >= vocab is off either way
			tp, mp := float32(p.TopP[r]), float32(p.MinP[r])
			if !(tp > 0 && tp <= 1) {
				return nil, fmt.Errorf("row %d: top_p %g outside (0, 1]", r, p.TopP[r])
			}
			if !(mp >= 0 && mp <= 1) {
				return nil, fmt.Errorf("row %d: min_p %g outside [0, 1]", r, p.MinP[r])
			}
			rp.topP[r], rp.minP[r] = tp, mp
		}
		switch p.FilterOrder {
		case "", engine.TopKFirst:
		case engine.Joint:
			rp.flags |= flagJoint
		default:
			return nil, fmt.Errorf("filter order %q (want top_k_first or joint): %w", p.FilterOrder, engine.ErrUnsupported)
		}
		switch p.TopKTies {
		case "", engine.TiesKeep:
		case engine.TiesLowestIndex:
			rp.flags |= flagLowestIndex
		default:
			return nil, fmt.Errorf("top_k ties %q (want keep or lowest_index): %w", p.TopKTies, engine.ErrUnsupported)
		}
		for r := range rows {
			if rp.temperature[r] > 0 && rp.filtered(r, vocab) {
				rp.flags |= flagHasFilters
				break
			}
		}
	}
	if need&needSeeds != 0 {
		if err := count("seed", len(p.Seed)); err != nil {
			return nil, err
		}
		if err := count("offset", len(p.Offset)); err != nil {
			return nil, err
		}
		copy(rp.seed, p.Seed)
		copy(rp.offset, p.Offset)
	}
	return rp, nil
}

// filtered reports whether row r has a filter on.
func (rp *rowParams) filtered(r, vocab int) bool {
	return (rp.topK[r] > 0 && int(rp.topK[r]) < vocab) || rp.topP[r] < 1 || rp.minP[r] > 0
}

// bytes lays the parameters out as csrc/sampviz.h says: six arrays.
func (rp *rowParams) bytes() []byte {
	rows := len(rp.temperature)
	b := make([]byte, paramBytesPerRow*rows)
	for r := range rows {
		binary.LittleEndian.PutUint32(b[4*r:], math.Float32bits(rp.temperature[r]))
		binary.LittleEndian.PutUint32(b[4*rows+4*r:], uint32(rp.topK[r]))
		binary.LittleEndian.PutUint32(b[8*rows+4*r:], math.Float32bits(rp.topP[r]))
		binary.LittleEndian.PutUint32(b[12*rows+4*r:], math.Float32bits(rp.minP[r]))
		binary.LittleEndian.PutUint64(b[16*rows+8*r:], rp.seed[r])
		binary.LittleEndian.PutUint64(b[24*rows+8*r:], rp.offset[r])
	}
	return b
}

// methodFlags maps a sample method to its flag bits.
func methodFlags(m engine.SampleMethod) (int, error) {
	switch m {
	case engine.SampleAuto:
		return methodAuto << methodShift, nil
	case engine.SampleInverseCDF:
		return methodInverseCDF << methodShift, nil
	case engine.SampleGumbel:
		return methodGumbel << methodShift, nil
	case engine.SampleRejection:
		return methodRejection << methodShift, nil
	}
	return 0, fmt.Errorf("sample method %q: %w", m, engine.ErrUnsupported)
}

// readTensor copies a slot of shared memory into a new tensor.
func readTensor(shm []byte, s slot, name string, dtype engine.DType, shape ...int) *engine.Tensor {
	t := engine.NewTensor(name, dtype, shape...)
	copy(t.Data, shm[s.Off:s.Off+s.Bytes])
	return t
}

func tensorBytes(ts ...*engine.Tensor) int64 {
	var n int64
	for _, t := range ts {
		if t != nil {
			n += int64(len(t.Data))
		}
	}
	return n
}

// Bytes of the per-row parameters each op reads (as engine/cpu counts them).
const (
	temperatureBytes = 4
	filterBytes      = 3 * 4
	seedBytes        = 2 * 8
)

// buildPlan validates run and lays it out for the worker.
func buildPlan(run *engine.Run) (*plan, error) {
	switch run.Op {
	case engine.OpArgmax, engine.OpSoftmax, engine.OpRenorm, engine.OpSample:
		return logitsPlan(run)
	case engine.OpSpecVerify:
		return specPlan(run)
	case engine.OpNgramMatch:
		return ngramPlan(run)
	}
	return nil, fmt.Errorf("op %q: %w", run.Op, engine.ErrUnsupported)
}

func logitsPlan(run *engine.Run) (*plan, error) {
	if err := checkTensor(run.Logits, "logits", 2, true); err != nil {
		return nil, err
	}
	rows, vocab := run.Logits.Dim(0), run.Logits.Dim(1)
	if vocab < 1 && rows > 0 {
		return nil, fmt.Errorf("logits: shape %s has no tokens: %w", run.Logits.ShapeString(), engine.ErrUnsupported)
	}
	p := &plan{req: runRequest{Op: run.Op, DType: svDType(run.Logits.DType), Rows: rows, Vocab: vocab,
		In: map[string]slot{}, Out: map[string]slot{}}}
	p.req.In["logits"] = p.put(floatData(run.Logits))
	switch run.Op {
	case engine.OpArgmax:
		out := p.reserve(rows, poisonToken)
		p.req.Out["tokens"] = out
		p.decode = func(shm []byte) *engine.Output {
			return &engine.Output{Tokens: readTensor(shm, out, "tokens", engine.I32, rows)}
		}
		p.bytes = tensorBytes(run.Logits) + 4*int64(rows)
		return p, nil
	case engine.OpSoftmax, engine.OpRenorm:
		need, perRow := needTemperature, int64(temperatureBytes)
		if run.Op == engine.OpRenorm {
			need |= needFilters
			perRow += filterBytes
		}
		rp, err := resolveParams(&run.Params, rows, vocab, need)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.Op, err)
		}
		p.req.Flags = rp.flags
		p.req.In["params"] = p.put(rp.bytes())
		out := p.reserve(rows*vocab, poisonFloat)
		p.req.Out["probs"] = out
		p.decode = func(shm []byte) *engine.Output {
			return &engine.Output{Probs: readTensor(shm, out, "probs", engine.F32, rows, vocab)}
		}
		p.bytes = tensorBytes(run.Logits) + 4*int64(rows)*int64(vocab) + int64(rows)*perRow
		return p, nil
	}
	// sample
	flags, err := methodFlags(run.Params.Method)
	if err != nil {
		return nil, err
	}
	draws := run.Params.Draws
	if draws < 0 {
		return nil, fmt.Errorf("sample: draws %d is negative", draws)
	}
	rp, err := resolveParams(&run.Params, rows, vocab, needTemperature|needFilters|needSeeds)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	p.req.Flags = rp.flags | flags
	p.req.In["params"] = p.put(rp.bytes())
	// Greedy rows first, then sampled rows: two launches, one per kind.
	order := make([]byte, 0, 4*rows)
	for pass := range 2 {
		for r := range rows {
			if (rp.temperature[r] == 0) == (pass == 0) {
				order = binary.LittleEndian.AppendUint32(order, uint32(r))
				if pass == 0 {
					p.req.NGreedy++
				} else {
					p.req.NSampled++
				}
			}
		}
	}
	p.req.In["rows"] = p.put(order)
	p.req.Draws = draws
	tokens := p.reserve(rows, poisonToken)
	p.req.Out["tokens"] = tokens
	var samples slot
	if draws > 0 {
		samples = p.reserve(rows*draws, poisonToken)
		p.req.Out["samples"] = samples
	}
	p.decode = func(shm []byte) *engine.Output {
		out := &engine.Output{Tokens: readTensor(shm, tokens, "tokens", engine.I32, rows)}
		if draws > 0 {
			out.Samples = readTensor(shm, samples, "samples", engine.I32, rows, draws)
		}
		return out
	}
	p.bytes = tensorBytes(run.Logits) + 4*int64(rows)*int64(1+draws) + int64(rows)*(temperatureBytes+filterBytes+seedBytes)
	return p, nil
}

func specPlan(run *engine.Run) (*plan, error) {
	if err := checkTensor(run.TargetLogits, "target_logits", 3, true); err != nil {
		return nil, err
	}
	if err := checkTensor(run.DraftTokens, "draft_tokens", 2, false); err != nil {
		return nil, err
	}
	rows, positions, vocab := run.TargetLogits.Dim(0), run.TargetLogits.Dim(1), run.TargetLogits.Dim(2)
	k := run.DraftTokens.Dim(1)
	if run.DraftTokens.Dim(0) != rows || positions != k+1 {
		return nil, fmt.Errorf("spec_verify: target_logits %s and draft_tokens %s, want [B, K+1, V] and [B, K]: %w",
			run.TargetLogits.ShapeString(), run.DraftTokens.ShapeString(), engine.ErrUnsupported)
	}
	if vocab < 1 && rows > 0 {
		return nil, fmt.Errorf("target_logits: shape %s has no tokens: %w", run.TargetLogits.ShapeString(), engine.ErrUnsupported)
	}
	if run.DraftProbs != nil {
		if err := checkTensor(run.DraftProbs, "draft_probs", 3, true); err != nil {
			return nil, err
		}
		if run.DraftProbs.Dim(0) != rows || run.DraftProbs.Dim(1) != k || run.DraftProbs.Dim(2) != vocab {
			return nil, fmt.Errorf("spec_verify: draft_probs %s, want [%d, %d, %d]: %w",
				run.DraftProbs.ShapeString(), rows, k, vocab, engine.ErrUnsupported)
		}
	}
	drafts := make([]byte, 4*rows*k)
	draftIDs := make([]int32, rows*k)
	for i := range draftIDs {
		x := run.DraftTokens.Int(i)
		if x < 0 || x >= int64(vocab) {
			return nil, fmt.Errorf("spec_verify: row %d: draft token %d at position %d outside [0, %d)", i/max(k, 1), x, i%max(k, 1), vocab)
		}
		draftIDs[i] = int32(x)
		binary.LittleEndian.PutUint32(drafts[4*i:], uint32(x))
	}
	if run.Params.Trials < 0 {
		return nil, fmt.Errorf("spec_verify: trials %d is negative", run.Params.Trials)
	}
	rp, err := resolveParams(&run.Params, rows, vocab, needTemperature|needFilters|needSeeds)
	if err != nil {
		return nil, fmt.Errorf("spec_verify: %w", err)
	}
	trials := max(run.Params.Trials, 1)
	traced := min(trials, maxTraceTrials)
	steps := k + 1
	p := &plan{req: runRequest{Op: run.Op, Rows: rows, Vocab: vocab, K: k, Trials: trials, TraceTrials: traced,
		In: map[string]slot{}, Out: map[string]slot{}}}
	flags := rp.flags | svDType(run.TargetLogits.DType)<<specTargetShift
	p.req.In["target"] = p.put(floatData(run.TargetLogits))
	p.req.In["params"] = p.put(rp.bytes())
	if rows*k > 0 {
		p.req.In["drafts"] = p.put(drafts)
	}
	if run.DraftProbs != nil && rows*k > 0 {
		flags |= svDType(run.DraftProbs.DType) << specDraftShift
		p.req.In["qprobs"] = p.put(floatData(run.DraftProbs))
	}
	p.req.Flags = flags
	tokens := p.reserve(trials*rows*steps, poisonToken)
	emitted := p.reserve(trials*rows, poisonToken)
	accepted := p.reserve(trials*rows, poisonToken)
	trace := p.reserve(5*traced*rows*steps, poisonFloat)
	p.req.Out["spec_tokens"], p.req.Out["emitted"], p.req.Out["accepted"], p.req.Out["trace"] = tokens, emitted, accepted, trace
	p.decode = func(shm []byte) *engine.Output {
		all := readTensor(shm, tokens, "spec_trials", engine.I32, trials, rows, steps)
		em := readTensor(shm, emitted, "spec_emitted", engine.I32, trials, rows)
		ac := readTensor(shm, accepted, "spec_accepted", engine.I32, trials, rows)
		out := &engine.Output{
			SpecTokens:   &engine.Tensor{Name: "spec_tokens", DType: engine.I32, Shape: []int{rows, steps}, Data: all.Data[:4*rows*steps]},
			SpecEmitted:  &engine.Tensor{Name: "spec_emitted", DType: engine.I32, Shape: []int{rows}, Data: em.Data[:4*rows]},
			SpecAccepted: &engine.Tensor{Name: "spec_accepted", DType: engine.I32, Shape: []int{rows}, Data: ac.Data[:4*rows]},
		}
		if trials > 1 {
			out.SpecTrials = all
		}
		n := traced * rows * steps
		tr := shm[trace.Off : trace.Off+trace.Bytes]
		word := func(array, i int) uint32 { return binary.LittleEndian.Uint32(tr[4*(array*n+i):]) }
		st := &engine.SpecTrace{Trials: traced, Rows: rows, Steps: steps, Step: make([]engine.SpecStep, n)}
		for i := range n {
			pos := i % steps
			r := (i / steps) % rows
			draft := int32(-1)
			if pos < k {
				draft = draftIDs[r*k+pos]
			}
			st.Step[i] = engine.SpecStep{
				Draft:     draft,
				U:         math.Float32frombits(word(0, i)),
				P:         math.Float32frombits(word(1, i)),
				Q:         math.Float32frombits(word(2, i)),
				Accepted:  word(3, i) != 0,
				Resampled: int32(word(4, i)),
			}
		}
		out.Trace = st
		return out
	}
	outBytes := 4 * int64(rows*steps+2*rows)
	if trials > 1 {
		outBytes += 4 * int64(trials) * int64(rows*steps)
	}
	p.bytes = tensorBytes(run.TargetLogits, run.DraftTokens, run.DraftProbs) + outBytes +
		int64(rows)*(temperatureBytes+filterBytes+seedBytes)
	return p, nil
}

func ngramPlan(run *engine.Run) (*plan, error) {
	for _, c := range []struct {
		t    *engine.Tensor
		name string
		rank int
	}{{run.InputIDs, "input_ids", 2}, {run.InputIDsLen, "input_ids_len", 1}, {run.PreIDs, "pre_ids", 2}, {run.StepIdx, "step_idx", 1}} {
		if err := checkTensor(c.t, c.name, c.rank, false); err != nil {
			return nil, err
		}
	}
	rows := run.PreIDs.Dim(0)
	if run.InputIDs.Dim(0) != rows || run.InputIDsLen.Dim(0) != rows || run.StepIdx.Dim(0) != rows {
		return nil, fmt.Errorf("ngram_match: input_ids %s, input_ids_len %s, pre_ids %s, step_idx %s disagree on the rows: %w",
			run.InputIDs.ShapeString(), run.InputIDsLen.ShapeString(), run.PreIDs.ShapeString(), run.StepIdx.ShapeString(), engine.ErrUnsupported)
	}
	pr := run.Params
	if pr.MaxNgramSize < 0 || pr.MaxDraftTokens < 0 || pr.Threshold < 0 {
		return nil, fmt.Errorf("ngram_match: max_ngram_size %d, max_draft_tokens %d, threshold %d: none may be negative",
			pr.MaxNgramSize, pr.MaxDraftTokens, pr.Threshold)
	}
	promptCap, generatedCap := run.InputIDs.Dim(1), run.PreIDs.Dim(1)
	for r := range rows {
		n, step := run.InputIDsLen.Int(r), run.StepIdx.Int(r)
		if n < 0 || n > int64(promptCap) {
			return nil, fmt.Errorf("ngram_match: row %d: input_ids_len %d outside [0, %d]", r, n, promptCap)
		}
		if step < 0 || step > int64(generatedCap) {
			return nil, fmt.Errorf("ngram_match: row %d: step_idx %d outside [0, %d]", r, step, generatedCap)
		}
	}
	p := &plan{req: runRequest{Op: run.Op, Rows: rows, L: promptCap, M: generatedCap,
		MaxNgram: min(pr.MaxNgramSize, math.MaxInt32), MaxDraft: pr.MaxDraftTokens, Threshold: min(pr.Threshold, math.MaxInt32),
		In: map[string]slot{}, Out: map[string]slot{}}}
	for _, c := range []struct {
		t    *engine.Tensor
		name string
	}{{run.InputIDs, "input_ids"}, {run.InputIDsLen, "input_len"}, {run.PreIDs, "pre_ids"}, {run.StepIdx, "step_idx"}} {
		b, err := int32Data(c.t, c.name)
		if err != nil {
			return nil, fmt.Errorf("ngram_match: %w", err)
		}
		p.req.In[c.name] = p.put(b)
	}
	d := pr.MaxDraftTokens
	out := p.reserve(rows*d, poisonDraft)
	p.req.Out["draft_out"] = out
	p.decode = func(shm []byte) *engine.Output {
		return &engine.Output{DraftOut: readTensor(shm, out, "draft_out", engine.I32, rows, d)}
	}
	p.bytes = tensorBytes(run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx) + 4*int64(rows*d)
	return p, nil
}
