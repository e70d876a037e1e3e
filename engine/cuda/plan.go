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

// write is one input placed in the shared memory: data copied as it is,
// or n bytes that fill writes there (a conversion, done in place so that no
// converted copy of a whole tensor is ever held).
type write struct {
	off  int64
	data []byte
	n    int64
	fill func(dst []byte)
}

// put places data in the shared memory and returns its slot.
func (p *plan) put(data []byte) slot {
	off := (p.size + 255) &^ 255
	p.size = off + int64(len(data))
	p.writes = append(p.writes, write{off: off, data: data, n: int64(len(data))})
	return slot{Off: off, Bytes: int64(len(data))}
}

// putFloats places a float input as the kernels read it: F32, F16 and BF16
// as stored, F64 rounded to F32 (as engine/cpu reads it) straight into the
// shared memory.
func (p *plan) putFloats(t *engine.Tensor) slot {
	if t.DType != engine.F64 {
		return p.put(t.Data)
	}
	n := t.NumElements()
	off := (p.size + 255) &^ 255
	p.size = off + 4*int64(n)
	p.writes = append(p.writes, write{off: off, n: 4 * int64(n), fill: func(dst []byte) {
		for i := range n {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(t.Float32(i)))
		}
	}})
	return slot{Off: off, Bytes: 4 * int64(n)}
}

// writeTo writes the input into the shared memory shm.
func (w write) writeTo(shm []byte) {
	if w.fill != nil {
		w.fill(shm[w.off : w.off+w.n])
		return
	}
	copy(shm[w.off:], w.data)
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

// checkTensor is engine.CheckTensor plus what the kernels' int32 indices
// need: every dimension at most 2^31-1.
func checkTensor(t *engine.Tensor, name string, rank int, float bool) error {
	if err := engine.CheckTensor(t, name, rank, float); err != nil {
		return err
	}
	for _, d := range t.Shape {
		if d > math.MaxInt32 {
			return fmt.Errorf("%s: dimension out of range in shape %s: %w", name, t.ShapeString(), engine.ErrUnsupported)
		}
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

// resolveParams checks the parameter groups in need (engine.Params.ForKernels,
// as engine/cpu does) and converts them for the kernels.
func resolveParams(p *engine.Params, rows, vocab int, need engine.ParamGroup) (*rowParams, error) {
	kp, err := p.ForKernels(rows, need)
	if err != nil {
		return nil, err
	}
	// ForKernels keeps these only where the batch needs them; csrc has no
	// kernel for either (docs/SEMANTICS.md "Semantics presets").
	switch {
	case kp.Order == engine.MinPFirst:
		return nil, fmt.Errorf("filter_order min_p_first (min-p before top-p, the vllm semantics) has no CUDA kernel; the cpu backend serves it (--backend cpu): %w", engine.ErrUnsupported)
	case kp.TemperatureOrder == engine.TemperatureLast:
		return nil, fmt.Errorf("temperature_order last (filters before the temperature, the llamacpp semantics) has no CUDA kernel; the cpu backend serves it (--backend cpu): %w", engine.ErrUnsupported)
	}
	rp := &rowParams{
		temperature: kp.Temperature,
		topK:        make([]int32, rows),
		topP:        kp.TopP,
		minP:        kp.MinP,
		seed:        kp.Seed,
		offset:      kp.Offset,
	}
	for r, k := range kp.TopK {
		rp.topK[r] = int32(min(k, vocab)) // >= vocab is off either way
	}
	if kp.Order == engine.Joint {
		rp.flags |= flagJoint
	}
	if kp.Ties == engine.TiesLowestIndex {
		rp.flags |= flagLowestIndex
	}
	for r := range rows {
		if kp.Temperature[r] > 0 && kp.Filtered(r, vocab) {
			rp.flags |= flagHasFilters
			break
		}
	}
	rp.flags |= hints(rp, rp.flags, kp.Order, vocab)
	return rp, nil
}

// hints are the launch hints (flagAllFast, flagTopPOnly) that the rows'
// parameters rp earn, given the launch's flags so far.
func hints(rp *rowParams, flags int, order engine.FilterOrder, vocab int) int {
	h := 0
	if allFast(rp, order, vocab) {
		h |= flagAllFast
	}
	if flags&flagHasFilters != 0 && topPOnly(rp, vocab) {
		h |= flagTopPOnly
	}
	return h
}

// fastMaxK is csrc/fast_layout.cuh's kFastMaxK: the largest top_k its fast
// path serves.
const fastMaxK = 256

// allFast says whether every row's parameters take the kernels' top-k fast
// path (T > 0, 0 < top_k < vocab, top_k <= fastMaxK, top-p only after
// top-k): the hint flagAllFast, under which the kernels start the
// full-row kernel that follows the fast one early, expecting it to find
// nothing to do. A wrong hint costs time, never a different answer.
func allFast(rp *rowParams, order engine.FilterOrder, vocab int) bool {
	for r, k := range rp.topK {
		if !(rp.temperature[r] > 0) || k <= 0 || int(k) >= vocab || k > fastMaxK ||
			(order == engine.Joint && rp.topP[r] < 1) {
			return false
		}
	}
	return len(rp.topK) > 0
}

// topPOnly says whether no row has top-k or min-p on, so that top-p is the
// only filter of the launch: the hint flagTopPOnly, under which sample's
// single draws from bf16 logits take csrc's topp_kernel instead of the
// top-k fast path. A wrong hint costs time, never a different answer.
func topPOnly(rp *rowParams, vocab int) bool {
	for r, k := range rp.topK {
		if (k > 0 && int(k) < vocab) || rp.minP[r] > 0 {
			return false
		}
	}
	return true
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

// planners lay out each op of the op table (engine.OpSpec) for the worker.
var planners = map[engine.Op]func(run *engine.Run) (*plan, error){
	engine.OpArgmax:         argmaxPlan,
	engine.OpSoftmax:        probsPlan,
	engine.OpRenorm:         probsPlan,
	engine.OpSample:         samplePlan,
	engine.OpSpecVerify:     specPlan,
	engine.OpSpecTreeVerify: treePlan,
	engine.OpNgramMatch:     ngramPlan,
}

// buildPlan validates run and lays it out for the worker.
func buildPlan(run *engine.Run) (*plan, error) {
	planner := planners[run.Op]
	if planner == nil {
		return nil, fmt.Errorf("op %q: %w", run.Op, engine.ErrUnsupported)
	}
	return planner(run)
}

// logitsPlan starts the plan of an op on [B, V] logits.
func logitsPlan(run *engine.Run) (p *plan, rows, vocab int, err error) {
	if err := checkTensor(run.Logits, "logits", 2, true); err != nil {
		return nil, 0, 0, err
	}
	rows, vocab = run.Logits.Dim(0), run.Logits.Dim(1)
	if vocab < 1 && rows > 0 {
		return nil, 0, 0, fmt.Errorf("logits: shape %s has no tokens: %w", run.Logits.ShapeString(), engine.ErrUnsupported)
	}
	p = &plan{req: runRequest{Op: run.Op, DType: svDType(run.Logits.DType), Rows: rows, Vocab: vocab,
		In: map[string]slot{}, Out: map[string]slot{}}}
	p.req.In["logits"] = p.putFloats(run.Logits)
	return p, rows, vocab, nil
}

// argmaxPlan: Tokens I32 [B].
func argmaxPlan(run *engine.Run) (*plan, error) {
	p, rows, _, err := logitsPlan(run)
	if err != nil {
		return nil, err
	}
	out := p.reserve(rows, poisonToken)
	p.req.Out["tokens"] = out
	p.decode = func(shm []byte) *engine.Output {
		return &engine.Output{Tokens: readTensor(shm, out, "tokens", engine.I32, rows)}
	}
	p.bytes = engine.TensorBytes(run.Logits) + 4*int64(rows)
	return p, nil
}

// probsPlan, softmax and renorm: Probs F32 [B, V].
func probsPlan(run *engine.Run) (*plan, error) {
	p, rows, vocab, err := logitsPlan(run)
	if err != nil {
		return nil, err
	}
	need := run.Op.Spec().Kernel
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
	p.bytes = engine.TensorBytes(run.Logits) + 4*int64(rows)*int64(vocab) + int64(rows)*need.Bytes()
	return p, nil
}

// samplePlan: Tokens I32 [B] and, with draws, SampleCounts I32 [B, V]
// counted on the device, or Samples I32 [B, Draws] when the run keeps its
// draws (Params.KeepDraws).
func samplePlan(run *engine.Run) (*plan, error) {
	p, rows, vocab, err := logitsPlan(run)
	if err != nil {
		return nil, err
	}
	flags, err := methodFlags(run.Params.Method)
	if err != nil {
		return nil, err
	}
	draws := run.Params.Draws
	if draws < 0 {
		return nil, fmt.Errorf("sample: draws %d is negative", draws)
	}
	keep := run.Params.KeepDraws
	if keep && draws > engine.MaxKeptDraws {
		return nil, fmt.Errorf("sample: %d draws a row with keep_draws, over the %d a row that are kept one by one (count them instead: keep_draws 0): %w",
			draws, engine.MaxKeptDraws, engine.ErrUnsupported)
	}
	need := run.Op.Spec().Kernel
	rp, err := resolveParams(&run.Params, rows, vocab, need)
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
	var samples, counts slot
	switch {
	case draws > 0 && keep:
		samples = p.reserve(rows*draws, poisonToken)
		p.req.Out["samples"] = samples
	case draws > 0:
		counts = p.reserve(rows*vocab, poisonToken)
		p.req.Out["sample_counts"] = counts
	}
	p.decode = func(shm []byte) *engine.Output {
		out := &engine.Output{Tokens: readTensor(shm, tokens, "tokens", engine.I32, rows)}
		switch {
		case draws > 0 && keep:
			out.Samples = readTensor(shm, samples, "samples", engine.I32, rows, draws)
		case draws > 0:
			out.SampleCounts = readTensor(shm, counts, "sample_counts", engine.I32, rows, vocab)
			out.SampleDraws = draws
		}
		return out
	}
	written := int64(draws)
	if draws > 0 && !keep {
		written = int64(vocab)
	}
	p.bytes = engine.TensorBytes(run.Logits) + 4*int64(rows)*(1+written) + int64(rows)*need.Bytes()
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
	rp, err := resolveParams(&run.Params, rows, vocab, run.Op.Spec().Kernel)
	if err != nil {
		return nil, fmt.Errorf("spec_verify: %w", err)
	}
	trials := max(run.Params.Trials, 1)
	traced := min(trials, maxTraceTrials)
	steps := k + 1
	p := &plan{req: runRequest{Op: run.Op, Rows: rows, Vocab: vocab, K: k, Trials: trials, TraceTrials: traced,
		In: map[string]slot{}, Out: map[string]slot{}}}
	flags := rp.flags | svDType(run.TargetLogits.DType)<<specTargetShift
	p.req.In["target"] = p.putFloats(run.TargetLogits)
	p.req.In["params"] = p.put(rp.bytes())
	if rows*k > 0 {
		p.req.In["drafts"] = p.put(drafts)
	}
	if run.DraftProbs != nil && rows*k > 0 {
		flags |= svDType(run.DraftProbs.DType) << specDraftShift
		p.req.In["qprobs"] = p.putFloats(run.DraftProbs)
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
	p.bytes = engine.TensorBytes(run.TargetLogits, run.DraftTokens, run.DraftProbs) + outBytes +
		int64(rows)*run.Op.Spec().Kernel.Bytes()
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
	if run.Params.NgramSemantics.FastDeploy() {
		return fastDeployPlan(run)
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
	if err := p.putNgramInputs(run); err != nil {
		return nil, err
	}
	d := pr.MaxDraftTokens
	out := p.reserve(rows*d, poisonDraft)
	p.req.Out["draft_out"] = out
	p.decode = func(shm []byte) *engine.Output {
		return &engine.Output{DraftOut: readTensor(shm, out, "draft_out", engine.I32, rows, d)}
	}
	p.bytes = engine.TensorBytes(run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx) + 4*int64(rows*d)
	return p, nil
}

// putNgramInputs puts the four int32 inputs both n-gram rules read
// (input_ids, input_len, pre_ids, step_idx) into the plan's inputs.
func (p *plan) putNgramInputs(run *engine.Run) error {
	for _, c := range []struct {
		t    *engine.Tensor
		name string
	}{{run.InputIDs, "input_ids"}, {run.InputIDsLen, "input_len"}, {run.PreIDs, "pre_ids"}, {run.StepIdx, "step_idx"}} {
		b, err := int32Data(c.t, c.name)
		if err != nil {
			return fmt.Errorf("ngram_match: %w", err)
		}
		p.req.In[c.name] = p.put(b)
	}
	return nil
}
