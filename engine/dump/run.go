package dump

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// The tensor names of DUMPS.md: inputs, then external outputs.
var (
	inputNames = []string{
		"logits", "temperature", "top_k", "top_p", "min_p", "seed", "offset",
		"target_logits", "draft_tokens", "draft_probs",
		"input_ids", "input_ids_len", "pre_ids", "step_idx",
	}
	outputNames = []string{
		"probs", "tokens", "samples",
		"spec_tokens", "spec_emitted", "spec_accepted", "spec_trials",
		"draft_out",
	}
)

// opTensors lists the tensors each op reads or judges. A dump tensor of the
// format that its op does not use is ignored with a notice.
var opTensors = map[engine.Op][]string{
	engine.OpArgmax:  {"logits", "temperature", "tokens"},
	engine.OpSoftmax: {"logits", "temperature", "probs"},
	engine.OpRenorm:  {"logits", "temperature", "top_k", "top_p", "min_p", "probs"},
	engine.OpSample: {"logits", "temperature", "top_k", "top_p", "min_p", "seed", "offset",
		"tokens", "samples", "probs"},
	engine.OpSpecVerify: {"target_logits", "draft_tokens", "draft_probs",
		"temperature", "top_k", "top_p", "min_p", "seed", "offset",
		"spec_tokens", "spec_emitted", "spec_accepted", "spec_trials"},
	engine.OpNgramMatch: {"input_ids", "input_ids_len", "pre_ids", "step_idx", "draft_out"},
}

// Bounds on the n-gram settings: each sizes a buffer of the kernels.
const (
	maxNgramSetting = 1 << 16
	maxTopK         = math.MaxInt32 // kernels take top_k as int32
)

// Load opens the dump at path and builds its Run. The caller must Close the
// File once done with the Run, whose tensors alias the file's mapping.
// Errors are *Error.
func Load(path string, o engine.Overrides) (*engine.Run, *File, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	run, err := BuildRun(f, o)
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return run, f, nil
}

// BuildRun turns a parsed dump into a Run: the op from the override, the
// `op` metadata or the tensors present; the op's inputs with their dtypes,
// shapes and index ranges checked; the parameters resolved from defaults,
// then metadata, then tensors, then overrides (an override applies to every
// row); the external outputs with their shapes checked. Tensors outside
// DUMPS.md, or that the op does not use, become notices. The Run's tensors
// alias f's. Errors are *Error.
func BuildRun(f *File, o engine.Overrides) (*engine.Run, error) {
	if f == nil {
		return nil, fileError("dump", "no file to build a run from")
	}
	b := &builder{
		file:    f.Name,
		o:       o,
		tensors: map[string]*engine.Tensor{},
		run: &engine.Run{
			Source:   f.Name,
			Meta:     maps.Clone(f.Meta),
			External: map[string]*engine.Tensor{},
			Notices:  append([]string(nil), f.Notices...),
		},
	}
	if b.run.Meta == nil {
		b.run.Meta = map[string]string{}
	}
	known := map[string]bool{}
	for _, n := range inputNames {
		known[n] = true
	}
	for _, n := range outputNames {
		known[n] = true
	}
	for _, t := range f.Tensors {
		b.tensors[t.Name] = t
		if !known[t.Name] {
			b.notice("ignored tensor %q: not part of the dump format", t.Name)
		}
		b.names = append(b.names, t.Name)
	}
	if err := b.settings(); err != nil {
		return nil, err
	}
	op, err := b.op()
	if err != nil {
		return nil, err
	}
	b.run.Op = op
	b.uses = map[string]bool{}
	for _, n := range opTensors[op] {
		b.uses[n] = true
	}
	for _, t := range f.Tensors {
		if known[t.Name] && !b.uses[t.Name] {
			b.notice("ignored tensor %q: not used by op %s", t.Name, op)
		}
	}
	if err := b.inputs(); err != nil {
		return nil, err
	}
	if err := b.params(); err != nil {
		return nil, err
	}
	if err := b.outputs(); err != nil {
		return nil, err
	}
	return b.run, nil
}

// builder holds the state of one BuildRun.
type builder struct {
	file    string
	o       engine.Overrides
	run     *engine.Run
	tensors map[string]*engine.Tensor
	names   []string        // tensor names in file order, for messages
	uses    map[string]bool // the tensors the op reads or judges
	// ref is the tensor that fixes B (logits, target_logits or input_ids).
	ref  *engine.Tensor
	rows int
}

func (b *builder) notice(format string, args ...any) {
	b.run.Notices = append(b.run.Notices, fmt.Sprintf(format, args...))
}

// used returns the tensor called name when the dump has it and the op uses it.
func (b *builder) used(name string) *engine.Tensor {
	if !b.uses[name] {
		return nil
	}
	return b.tensors[name]
}

// required returns a tensor the op cannot do without.
func (b *builder) required(name string) (*engine.Tensor, error) {
	if t := b.tensors[name]; t != nil {
		return t, nil
	}
	return nil, tensorError(b.file, name, "not found; op %s needs it (the file holds %s)", b.run.Op, b.held())
}

// held lists the file's tensors for messages.
func (b *builder) held() string {
	if len(b.names) == 0 {
		return "no tensors"
	}
	return strings.Join(b.names, ", ")
}

// op resolves the op: override, then metadata, then inference.
func (b *builder) op() (engine.Op, error) {
	if b.o.Op != nil {
		op, err := engine.ParseOp(string(*b.o.Op))
		if err != nil {
			return "", &Error{File: b.file, Rule: "override op", Err: err}
		}
		b.run.Meta["op"] = string(op)
		return op, nil
	}
	if s, ok := b.run.Meta["op"]; ok {
		op, err := engine.ParseOp(s)
		if err != nil {
			return "", &Error{File: b.file, Rule: `metadata "op"`, Err: err}
		}
		return op, nil
	}
	return b.inferOp()
}

// inferOp picks the op from the tensors present, as DUMPS.md describes.
func (b *builder) inferOp() (engine.Op, error) {
	has := func(names ...string) bool {
		for _, n := range names {
			if b.tensors[n] != nil {
				return true
			}
		}
		return false
	}
	switch {
	case has("target_logits"):
		return engine.OpSpecVerify, nil
	case has("input_ids", "pre_ids"):
		return engine.OpNgramMatch, nil
	case !has("logits"):
		switch {
		case has("draft_tokens", "draft_probs", "spec_tokens", "spec_emitted", "spec_accepted", "spec_trials"):
			return "", tensorError(b.file, "target_logits", "not found; spec_verify needs it (the file holds %s)", b.held())
		case has("input_ids_len", "step_idx", "draft_out"):
			return "", tensorError(b.file, "input_ids", "not found; ngram_match needs input_ids and pre_ids (the file holds %s)", b.held())
		}
		return "", tensorError(b.file, "logits", "not found; the dump fits no op: every op needs logits, but spec_verify (target_logits) and ngram_match (input_ids and pre_ids) (the file holds %s)", b.held())
	case has("samples", "seed", "offset"):
		return engine.OpSample, nil
	case has("tokens"):
		if zero, given := b.greedyTemperature(); given {
			if zero {
				return engine.OpArgmax, nil
			}
			return engine.OpSample, nil
		}
		if has("top_k", "top_p", "min_p") {
			return engine.OpSample, nil // tokens drawn through filters
		}
		return engine.OpArgmax, nil
	case has("top_k", "top_p", "min_p"):
		return engine.OpRenorm, nil
	}
	return engine.OpSoftmax, nil
}

// greedyTemperature reports whether a temperature is given (override or
// tensor) and whether every given temperature is 0.
func (b *builder) greedyTemperature() (zero, given bool) {
	if b.o.Temperature != nil {
		return *b.o.Temperature == 0, true
	}
	t := b.tensors["temperature"]
	if t == nil {
		return false, false
	}
	if !t.DType.IsFloat() {
		return false, true // refused later, with its reason
	}
	for i := range t.NumElements() {
		if t.Float(i) != 0 {
			return false, true
		}
	}
	return true, true
}

// inputs finds and checks the op's inputs, fixing B (and V, K, L, M).
func (b *builder) inputs() error {
	r := b.run
	switch r.Op {
	case engine.OpSpecVerify:
		tl, err := b.required("target_logits")
		if err != nil {
			return err
		}
		if err := b.wantFloat(tl); err != nil {
			return err
		}
		if len(tl.Shape) != 3 || tl.Shape[0] == 0 || tl.Shape[1] == 0 || tl.Shape[2] == 0 {
			return tensorError(b.file, tl.Name, "shape %s is not [B, K+1, V] with B, K+1 and V at least 1", tl.ShapeString())
		}
		b.ref, b.rows, r.TargetLogits = tl, tl.Shape[0], tl
		bsz, k, v := tl.Shape[0], tl.Shape[1]-1, tl.Shape[2]
		dt, err := b.required("draft_tokens")
		if err != nil {
			return err
		}
		if err := b.wantInt(dt); err != nil {
			return err
		}
		if err := b.wantShape(dt, tl, []int{bsz, k}, "B", "K"); err != nil {
			return err
		}
		for i := range dt.NumElements() {
			if tok := dt.Int(i); tok < 0 || tok >= int64(v) {
				return tensorError(b.file, dt.Name, "row %d, position %d holds token %d, outside the vocabulary [0, %d) of target_logits", i/max(k, 1), i%max(k, 1), tok, v)
			}
		}
		r.DraftTokens = dt
		if dp := b.used("draft_probs"); dp != nil {
			if err := b.wantFloat(dp); err != nil {
				return err
			}
			if err := b.wantShape(dp, tl, []int{bsz, k, v}, "B", "K", "V"); err != nil {
				return err
			}
			r.DraftProbs = dp
		}
	case engine.OpNgramMatch:
		ids, err := b.required("input_ids")
		if err != nil {
			return err
		}
		if err := b.wantInt(ids); err != nil {
			return err
		}
		if len(ids.Shape) != 2 || ids.Shape[0] == 0 {
			return tensorError(b.file, ids.Name, "shape %s is not [B, L] with B at least 1", ids.ShapeString())
		}
		b.ref, b.rows, r.InputIDs = ids, ids.Shape[0], ids
		bsz, l := ids.Shape[0], ids.Shape[1]
		idsLen, err := b.required("input_ids_len")
		if err != nil {
			return err
		}
		if err := b.wantInt(idsLen); err != nil {
			return err
		}
		if err := b.wantShape(idsLen, ids, []int{bsz}, "B"); err != nil {
			return err
		}
		if err := b.wantCounts(idsLen, l, "input_ids has"); err != nil {
			return err
		}
		r.InputIDsLen = idsLen
		pre, err := b.required("pre_ids")
		if err != nil {
			return err
		}
		if err := b.wantInt(pre); err != nil {
			return err
		}
		if err := b.wantShape(pre, ids, []int{bsz, -1}, "B", "M"); err != nil {
			return err
		}
		r.PreIDs = pre
		step, err := b.required("step_idx")
		if err != nil {
			return err
		}
		if err := b.wantInt(step); err != nil {
			return err
		}
		if err := b.wantShape(step, ids, []int{bsz}, "B"); err != nil {
			return err
		}
		if err := b.wantCounts(step, pre.Shape[1], "pre_ids has"); err != nil {
			return err
		}
		r.StepIdx = step
	default:
		lg, err := b.required("logits")
		if err != nil {
			return err
		}
		if err := b.wantFloat(lg); err != nil {
			return err
		}
		if len(lg.Shape) != 2 || lg.Shape[0] == 0 || lg.Shape[1] == 0 {
			hint := ""
			if len(lg.Shape) == 1 {
				hint = " (add a batch dimension: logits[None])"
			}
			return tensorError(b.file, lg.Name, "shape %s is not [B, V] with B and V at least 1%s", lg.ShapeString(), hint)
		}
		b.ref, b.rows, r.Logits = lg, lg.Shape[0], lg
	}
	return nil
}

// wantCounts checks that every element of t lies in [0, limit].
func (b *builder) wantCounts(t *engine.Tensor, limit int, what string) error {
	for i := range t.NumElements() {
		if v := t.Int(i); v < 0 || v > int64(limit) {
			return tensorError(b.file, t.Name, "row %d is %d, outside [0, %d] (%s %d columns)", i, v, limit, what, limit)
		}
	}
	return nil
}

func (b *builder) wantFloat(t *engine.Tensor) error {
	if !t.DType.IsFloat() {
		return tensorError(b.file, t.Name, "dtype %s, but %s must be a float dtype (BF16, F16, F32 or F64)", t.DType, t.Name)
	}
	return nil
}

func (b *builder) wantInt(t *engine.Tensor) error {
	if t.DType != engine.I32 && t.DType != engine.I64 && t.DType != engine.U8 {
		return tensorError(b.file, t.Name, "dtype %s, but %s must be an integer dtype (I32, I64 or U8)", t.DType, t.Name)
	}
	return nil
}

// wantShape checks t's shape against want (-1: any size) and names ref, the
// tensor the sizes come from, when it does not fit. letters name the dims.
func (b *builder) wantShape(t, ref *engine.Tensor, want []int, letters ...string) error {
	fits := len(t.Shape) == len(want)
	for i := 0; fits && i < len(want); i++ {
		fits = want[i] < 0 || want[i] == t.Shape[i]
	}
	if fits {
		return nil
	}
	parts := make([]string, len(want))
	for i, d := range want {
		if d < 0 {
			parts[i] = letters[i]
		} else {
			parts[i] = strconv.Itoa(d)
		}
	}
	return tensorError(b.file, t.Name, "shape %s does not fit %s %s: want [%s] ([%s])",
		t.ShapeString(), ref.Name, ref.ShapeString(), strings.Join(parts, ", "), strings.Join(letters, ", "))
}

// perRow returns the tensor called name when the op uses it, checked to be
// a scalar or one value per row, and the function that reads row r of it.
func (b *builder) perRow(name string, float bool) (*engine.Tensor, func(r int) int, error) {
	t := b.used(name)
	if t == nil {
		return nil, nil, nil
	}
	check := b.wantInt
	if float {
		check = b.wantFloat
	}
	if err := check(t); err != nil {
		return nil, nil, err
	}
	switch {
	case len(t.Shape) == 0:
		return t, func(int) int { return 0 }, nil
	case len(t.Shape) == 1 && t.Shape[0] == b.rows:
		return t, func(r int) int { return r }, nil
	}
	return nil, nil, tensorError(b.file, t.Name, "shape %s does not fit %s %s: want [] or [%d]", t.ShapeString(), b.ref.Name, b.ref.ShapeString(), b.rows)
}

// rowError reports a per-row value outside its range.
func (b *builder) rowError(t *engine.Tensor, r int, v any, rule string) error {
	if len(t.Shape) == 0 {
		return tensorError(b.file, t.Name, "value %v, but %s must be %s", v, t.Name, rule)
	}
	return tensorError(b.file, t.Name, "row %d is %v, but %s must be %s", r, v, t.Name, rule)
}

// overrideError reports an override outside its range.
func (b *builder) overrideError(name string, v any, rule string) error {
	return fileError(b.file, "override %s %v: %s must be %s", name, v, name, rule)
}

// floatParam resolves one float parameter per row.
func (b *builder) floatParam(name string, def float64, ov *float64, rule string, ok func(float64) bool) ([]float64, error) {
	return rowParam(b, name, true, (*engine.Tensor).Float, def, ov, rule, ok)
}

// intParam resolves one integer parameter per row, as int64.
func (b *builder) intParam(name string, ov *int64, rule string, ok func(int64) bool) ([]int64, error) {
	return rowParam(b, name, false, (*engine.Tensor).Int, 0, ov, rule, ok)
}

// rowParam resolves one parameter per row: def for every row, then the
// dump's tensor (per row or one scalar), then the override for every row;
// each value must pass ok, else the error names the row and the rule.
func rowParam[V float64 | int64](b *builder, name string, float bool, read func(*engine.Tensor, int) V, def V, ov *V, rule string, ok func(V) bool) ([]V, error) {
	out := make([]V, b.rows)
	for r := range out {
		out[r] = def
	}
	t, at, err := b.perRow(name, float)
	if err != nil {
		return nil, err
	}
	if t != nil {
		for r := range out {
			v := read(t, at(r))
			if !ok(v) {
				return nil, b.rowError(t, r, v, rule)
			}
			out[r] = v
		}
	}
	if ov != nil {
		if !ok(*ov) {
			return nil, b.overrideError(name, *ov, rule)
		}
		for r := range out {
			out[r] = *ov
		}
	}
	return out, nil
}

// params resolves the per-row parameters; settings() did the run-wide ones.
func (b *builder) params() error {
	p := &b.run.Params
	var err error
	finiteNonNeg := func(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }
	if p.Temperature, err = b.floatParam("temperature", 1, b.o.Temperature, "finite and >= 0", finiteNonNeg); err != nil {
		return err
	}
	if p.TopP, err = b.floatParam("top_p", 1, b.o.TopP, "in (0, 1]", func(v float64) bool { return v > 0 && v <= 1 }); err != nil {
		return err
	}
	if p.MinP, err = b.floatParam("min_p", 0, b.o.MinP, "in [0, 1]", func(v float64) bool { return v >= 0 && v <= 1 }); err != nil {
		return err
	}
	var topK *int64
	if b.o.TopK != nil {
		v := int64(*b.o.TopK)
		topK = &v
	}
	ks, err := b.intParam("top_k", topK, fmt.Sprintf("in [0, %d]", maxTopK), func(v int64) bool { return v >= 0 && v <= maxTopK })
	if err != nil {
		return err
	}
	p.TopK = make([]int, len(ks))
	for i, k := range ks {
		p.TopK[i] = int(k)
	}
	// Seeds are 64-bit patterns: torch has no uint64, so a negative int64
	// seed stands for the seed with the same bits.
	var seed *int64
	if b.o.Seed != nil {
		v := int64(*b.o.Seed)
		seed = &v
	}
	seeds, err := b.intParam("seed", seed, "an integer", func(int64) bool { return true })
	if err != nil {
		return err
	}
	p.Seed = make([]uint64, len(seeds))
	for i, s := range seeds {
		p.Seed[i] = uint64(s)
	}
	var offset *int64
	if b.o.Offset != nil {
		if *b.o.Offset > math.MaxInt64 {
			return b.overrideError("offset", *b.o.Offset, "at most 2^63-1")
		}
		v := int64(*b.o.Offset)
		offset = &v
	}
	offs, err := b.intParam("offset", offset, ">= 0", func(v int64) bool { return v >= 0 })
	if err != nil {
		return err
	}
	p.Offset = make([]uint64, len(offs))
	for i, v := range offs {
		p.Offset[i] = uint64(v)
	}
	return nil
}

// settings resolves the run-wide parameters: defaults, then metadata, then
// overrides, which are written back into Meta under their metadata keys.
func (b *builder) settings() error {
	p := &b.run.Params
	meta := b.run.Meta
	p.FilterOrder, p.TopKTies = engine.TopKFirst, engine.TiesKeep
	p.MaxNgramSize, p.MaxDraftTokens, p.Threshold = 3, 8, 1024
	p.Method, p.Draws, p.Trials = engine.SampleAuto, 0, 0

	if s, ok := meta["filter_order"]; ok {
		v := engine.FilterOrder(s)
		if v != engine.TopKFirst && v != engine.Joint {
			return fileError(b.file, `metadata "filter_order": %q is not top_k_first or joint`, s)
		}
		p.FilterOrder = v
	}
	if b.o.FilterOrder != nil {
		v := *b.o.FilterOrder
		if v != engine.TopKFirst && v != engine.Joint {
			return fileError(b.file, "override filter_order %q: want top_k_first or joint", v)
		}
		p.FilterOrder, meta["filter_order"] = v, string(v)
	}
	if s, ok := meta["top_k_ties"]; ok {
		v := engine.TopKTies(s)
		if v != engine.TiesKeep && v != engine.TiesLowestIndex {
			return fileError(b.file, `metadata "top_k_ties": %q is not keep or lowest_index`, s)
		}
		p.TopKTies = v
	}
	if b.o.TopKTies != nil {
		v := *b.o.TopKTies
		if v != engine.TiesKeep && v != engine.TiesLowestIndex {
			return fileError(b.file, "override top_k_ties %q: want keep or lowest_index", v)
		}
		p.TopKTies, meta["top_k_ties"] = v, string(v)
	}
	for _, s := range []struct {
		key      string
		dst      *int
		ov       *int
		min, max int
	}{
		{"max_ngram_size", &p.MaxNgramSize, b.o.MaxNgramSize, 1, maxNgramSetting},
		{"max_draft_tokens", &p.MaxDraftTokens, b.o.MaxDraftTokens, 1, maxNgramSetting},
		{"threshold", &p.Threshold, b.o.Threshold, 0, math.MaxInt32},
	} {
		if text, ok := meta[s.key]; ok {
			v, err := strconv.Atoi(text)
			if err != nil {
				return fileError(b.file, "metadata %q: %q is not an integer", s.key, text)
			}
			if v < s.min || v > s.max {
				return fileError(b.file, "metadata %q: %d is outside [%d, %d]", s.key, v, s.min, s.max)
			}
			*s.dst = v
		}
		if s.ov != nil {
			if v := *s.ov; v < s.min || v > s.max {
				return fileError(b.file, "override %s %d: outside [%d, %d]", s.key, v, s.min, s.max)
			}
			*s.dst, meta[s.key] = *s.ov, strconv.Itoa(*s.ov)
		}
	}
	if b.o.Method != nil {
		switch m := *b.o.Method; m {
		case engine.SampleAuto, engine.SampleInverseCDF, engine.SampleGumbel, engine.SampleRejection:
			p.Method = m
		default:
			return fileError(b.file, "override method %q: want inverse_cdf, gumbel or rejection (or empty for auto)", m)
		}
	}
	if b.o.Draws != nil {
		if *b.o.Draws < 0 {
			return fileError(b.file, "override draws %d: must be >= 0", *b.o.Draws)
		}
		p.Draws = *b.o.Draws
	}
	if b.o.Trials != nil {
		if *b.o.Trials < 0 {
			return fileError(b.file, "override trials %d: must be >= 0", *b.o.Trials)
		}
		p.Trials = *b.o.Trials
	}
	return nil
}

// outputs checks the external outputs the op judges and files them in
// run.External by name. Token values are not checked: out-of-range tokens
// are the judge's findings, not reading errors.
func (b *builder) outputs() error {
	r := b.run
	bsz := b.rows
	type want struct {
		float   bool
		dims    []int
		letters []string
	}
	var k1 int
	if r.TargetLogits != nil {
		k1 = r.TargetLogits.Shape[1]
	}
	wants := map[string]want{
		"probs":         {true, []int{bsz, r.Vocab()}, []string{"B", "V"}},
		"tokens":        {false, []int{bsz}, []string{"B"}},
		"samples":       {false, []int{bsz, -1}, []string{"B", "N"}},
		"spec_tokens":   {false, []int{bsz, k1}, []string{"B", "K+1"}},
		"spec_emitted":  {false, []int{bsz}, []string{"B"}},
		"spec_accepted": {false, []int{bsz}, []string{"B"}},
		"spec_trials":   {false, []int{-1, bsz, k1}, []string{"T", "B", "K+1"}},
		"draft_out":     {false, []int{bsz, r.Params.MaxDraftTokens}, []string{"B", "D"}},
	}
	for _, name := range outputNames {
		t := b.used(name)
		if t == nil {
			continue
		}
		w := wants[name]
		check := b.wantInt
		if w.float {
			check = b.wantFloat
		}
		if err := check(t); err != nil {
			return err
		}
		if name == "draft_out" && len(t.Shape) == 2 && t.Shape[0] == bsz && t.Shape[1] != r.Params.MaxDraftTokens {
			return tensorError(b.file, t.Name, "shape %s has %d columns, but max_draft_tokens is %d: set max_draft_tokens to %d in the metadata or with the override", t.ShapeString(), t.Shape[1], r.Params.MaxDraftTokens, t.Shape[1])
		}
		if err := b.wantShape(t, b.ref, w.dims, w.letters...); err != nil {
			return err
		}
		r.External[name] = t
	}
	return nil
}
