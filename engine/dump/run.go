package dump

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
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

// UsedTensors lists the tensors of f that run reads or judges: its inputs,
// its per-row parameters and its external outputs.
func UsedTensors(f *File, run *engine.Run) []string {
	spec := run.Op.Spec()
	var names []string
	for _, t := range f.Tensors {
		if spec != nil && spec.Uses(t.Name) {
			names = append(names, t.Name)
		}
	}
	return names
}

// LoadRun loads (File.Load) every tensor run uses, so that the run can be
// read; BuildRun loads only those whose values it checks. Errors are
// *Error.
func LoadRun(f *File, run *engine.Run) error {
	return f.Load(UsedTensors(f, run)...)
}

// BuildRun turns a parsed dump into a Run (Inspect), then loads every
// tensor the run uses (LoadRun) so that it can be run. Errors are *Error.
func BuildRun(f *File, o engine.Overrides) (*engine.Run, error) {
	run, err := Inspect(f, o)
	if err != nil {
		return nil, err
	}
	if err := LoadRun(f, run); err != nil {
		return nil, err
	}
	return run, nil
}

// Inspect turns a parsed dump into a Run, reading the op table
// (engine.OpSpec) and the parameter table (engine.Param): the op from the
// override, the `op` metadata or the tensors present; the op's inputs with
// their dtypes, shapes and values checked; the parameters resolved from the
// table's defaults, then metadata, then tensors, then overrides (an override
// applies to every row); the external outputs with their shapes checked.
// Tensors outside DUMPS.md, or that the op does not use, become notices. The
// Run's tensors alias f's. It loads (File.Load) only the small tensors
// whose values it checks: the run's big tensors may hold no data yet, so a
// run from Inspect describes a dump (shapes, op, parameters) and serves a
// memory budget, and LoadRun makes it runnable. Errors are *Error.
func Inspect(f *File, o engine.Overrides) (*engine.Run, error) {
	if f == nil {
		return nil, fileError("dump", "no file to build a run from")
	}
	b := &builder{
		f:       f,
		file:    f.Name,
		o:       o,
		tensors: map[string]*engine.Tensor{},
		dims:    map[string]int{},
		boundBy: map[string]string{},
		given:   map[string]string{},
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
	if err := o.Validate(); err != nil {
		return nil, overrideError(b.file, err)
	}
	for _, t := range f.Tensors {
		b.tensors[t.Name] = t
		if !engine.KnownTensor(t.Name) {
			b.notice("ignored tensor %q: not part of the dump format", t.Name)
		}
		b.names = append(b.names, t.Name)
	}
	if err := b.modeNames(); err != nil {
		return nil, err
	}
	if err := b.settings(); err != nil {
		return nil, err
	}
	b.metadataKeys()
	op, err := b.op()
	if err != nil {
		return nil, err
	}
	b.run.Op, b.spec = op, op.Spec()
	for _, t := range f.Tensors {
		if engine.KnownTensor(t.Name) && !b.spec.Uses(t.Name) {
			b.notice("ignored tensor %q: not used by op %s", t.Name, op)
		}
	}
	if err := b.inputs(); err != nil {
		return nil, err
	}
	if err := b.trees(); err != nil {
		return nil, err
	}
	if err := b.ngramState(); err != nil {
		return nil, err
	}
	if err := b.params(); err != nil {
		return nil, err
	}
	if err := b.semantics(); err != nil {
		return nil, err
	}
	if err := b.padding(); err != nil {
		return nil, err
	}
	if err := b.outputs(); err != nil {
		return nil, err
	}
	if err := b.declared(); err != nil {
		return nil, err
	}
	if err := b.logprobsKinds(); err != nil {
		return nil, err
	}
	return b.run, nil
}

// builder holds the state of one BuildRun.
type builder struct {
	f       *File
	file    string
	o       engine.Overrides
	run     *engine.Run
	spec    *engine.OpSpec
	tensors map[string]*engine.Tensor
	names   []string // tensor names in file order, for messages
	// ref is the tensor that fixes B (the op's first input), rows is B.
	ref  *engine.Tensor
	rows int
	// dims holds the sizes of the dimension letters bound so far, boundBy
	// the tensor that bound each.
	dims    map[string]int
	boundBy map[string]string
	// given says where a run-wide parameter's value came from ("the
	// metadata", "the override"); absent means its default.
	given map[string]string
}

func (b *builder) notice(format string, args ...any) {
	b.run.Notices = append(b.run.Notices, fmt.Sprintf(format, args...))
}

// used returns the tensor called name when the dump has it and the op uses it.
func (b *builder) used(name string) *engine.Tensor {
	if !b.spec.Uses(name) {
		return nil
	}
	return b.tensors[name]
}

// held lists the file's tensors for messages.
func (b *builder) held() string {
	if len(b.names) == 0 {
		return "no tensors"
	}
	return strings.Join(b.names, ", ")
}

// overrideError reports an override outside its parameter's range.
func overrideError(file string, err error) error {
	return fileError(file, "override: %v", err)
}

// op resolves the op: override, then metadata, then inference.
func (b *builder) op() (engine.Op, error) {
	if b.o.Op != nil {
		b.run.Meta["op"] = string(*b.o.Op)
		return *b.o.Op, nil // checked by Validate
	}
	if s, ok := b.run.Meta["op"]; ok {
		op, err := engine.ParseOp(s)
		if err != nil {
			return "", fileError(b.file, `metadata "op": %v`, err)
		}
		return op, nil
	}
	return b.inferOp()
}

// inferOp picks the op from the tensors present, as DUMPS.md describes.
func (b *builder) inferOp() (engine.Op, error) {
	has := func(names ...string) bool {
		for _, n := range names {
			if b.tensors[n] != nil || b.named(n) || b.metaParam(n) {
				return true
			}
		}
		return false
	}
	tree := has("candidates", "retrive_next_token", "retrive_next_sibling")
	switch {
	case tree && has("target_logits"):
		return engine.OpSpecTreeVerify, nil
	case tree:
		return "", tensorError(b.file, "target_logits", "not found; spec_tree_verify needs it (the file holds %s)", b.held())
	case b.named("logits"):
		return engine.OpLogitsGate, nil
	case has("target_logits"):
		return engine.OpSpecVerify, nil
	case has("input_ids", "pre_ids"):
		return engine.OpNgramMatch, nil
	case b.tensors["logits"] == nil:
		switch {
		case has("draft_tokens", "draft_probs", "spec_tokens", "spec_emitted", "spec_accepted", "spec_trials"):
			return "", tensorError(b.file, "target_logits", "not found; spec_verify needs it (the file holds %s)", b.held())
		case has("input_ids_len", "step_idx", "draft_out"):
			return "", tensorError(b.file, "input_ids", "not found; ngram_match needs input_ids and pre_ids (the file holds %s)", b.held())
		}
		return "", tensorError(b.file, "logits", "not found; a dump holds logits, or target_logits for spec_verify, or input_ids and pre_ids for ngram_match, and the file holds %s", b.held())
	case has("samples", "sample_counts", "seed", "offset"):
		return engine.OpSample, nil
	case has("tokens"):
		if err := b.f.Load("temperature"); err != nil {
			return "", err
		}
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

// greedyTemperature reports whether a temperature is given (override,
// tensor or metadata) and whether every given temperature is 0.
func (b *builder) greedyTemperature() (zero, given bool) {
	if b.o.Temperature != nil {
		return *b.o.Temperature == 0, true
	}
	t := b.tensors["temperature"]
	if t == nil {
		text, ok := b.f.Meta["temperature"]
		if !ok {
			return false, false
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		return err == nil && v == 0, true // an unreadable one is refused later, with its reason
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

// atLeastOne are the dimensions an op's first input must have at least 1 of.
var atLeastOne = map[string]bool{"B": true, "V": true, "K+1": true, "N": true}

// inputs finds and checks the op's inputs (engine.OpSpec.Inputs), binding
// the dimension letters (B, V, K, L, M) from the first.
func (b *builder) inputs() error {
	for i, ts := range b.spec.Inputs {
		t := b.tensors[ts.Name]
		if t == nil {
			if !ts.Required {
				continue
			}
			return tensorError(b.file, ts.Name, "not found; op %s needs it (the file holds %s)", b.run.Op, b.held())
		}
		boolMask := ts.Values == "mask" && t.DType == engine.Bool // a mask's own dtype
		if err := b.wantDType(t, ts.Float); err != nil && !boolMask {
			return err
		}
		if ts.Name == "draft_tokens" && b.run.Op == engine.OpSpecVerify && len(t.Shape) == 3 {
			if err := b.draftTrials(t); err != nil {
				return err
			}
			continue
		}
		if i == 0 {
			if err := b.first(t, ts); err != nil {
				return err
			}
		} else if err := b.wantDims(t, ts.Dims); err != nil {
			return err
		}
		if err := b.wantValues(t, ts); err != nil {
			return err
		}
		b.run.SetTensor(ts.Name, t)
	}
	if b.run.DraftTrials != nil && b.run.DraftProbs == nil {
		return tensorError(b.file, "draft_tokens", "shape %s holds drafts drawn anew for every trial, which needs draft_probs [B, K, V], the distributions they were drawn from (one-hot drafts are not drawn)",
			b.run.DraftTrials.ShapeString())
	}
	return nil
}

// draftTrials checks per-trial drafts of spec_verify, draft_tokens [T, B,
// K] (DUMPS.md), files them as run.DraftTrials, and the first trial's as
// run.DraftTokens [B, K]: what our kernels verify, and spec_tokens is
// judged against.
func (b *builder) draftTrials(t *engine.Tensor) error {
	dims := []string{"T", "B", "K"}
	delete(b.dims, "T")
	if err := b.wantDims(t, dims); err != nil {
		return err
	}
	if t.Shape[0] < 1 {
		return tensorError(b.file, t.Name, "shape %s holds no trial: per-trial drafts are [T, B, K] with T at least 1", t.ShapeString())
	}
	if err := b.f.Load(t.Name); err != nil {
		return err
	}
	rows, k, v := t.Shape[1], t.Shape[2], b.dims["V"]
	for i := range t.NumElements() {
		if tok := t.Int(i); tok < 0 || tok >= int64(v) {
			return tensorError(b.file, t.Name, "trial %d, row %d, position %d holds token %d, outside the vocabulary [0, %d) of %s",
				i/max(rows*k, 1), i/max(k, 1)%max(rows, 1), i%max(k, 1), tok, v, b.boundBy["V"])
		}
	}
	first := make([]int64, rows*k)
	for i := range first {
		first[i] = t.Int(i)
	}
	b.run.DraftTrials = t
	b.run.DraftTokens = engine.FromInts("draft_tokens", engine.I64, []int{rows, k}, first)
	delete(b.dims, "T")
	return nil
}

// first checks the op's first input, which fixes B and the other sizes it
// names.
func (b *builder) first(t *engine.Tensor, ts engine.TensorSpec) error {
	fits := len(t.Shape) == len(ts.Dims)
	var must []string
	for i, d := range ts.Dims {
		if atLeastOne[d] {
			must = append(must, d)
			fits = fits && t.Shape[i] >= 1
		}
	}
	if !fits {
		hint := ""
		if len(t.Shape) == len(ts.Dims)-1 && ts.Dims[0] == "B" {
			hint = fmt.Sprintf(" (add a batch dimension: %s[None])", t.Name)
		}
		return tensorError(b.file, t.Name, "shape %s is not %s with %s at least 1%s", t.ShapeString(), engine.FormatDims(ts.Dims), andList(must), hint)
	}
	b.ref = t
	b.bind(t, ts.Dims)
	b.rows = b.dims["B"]
	return nil
}

// bind records the sizes t gives the letters of dims that are not bound yet.
func (b *builder) bind(t *engine.Tensor, dims []string) {
	for i, d := range dims {
		letter, size := d, t.Shape[i]
		if d == "K+1" {
			letter, size = "K", size-1
		}
		if _, ok := b.dims[letter]; !ok {
			b.dims[letter], b.boundBy[letter] = size, t.Name
		}
	}
}

// size returns the size of a dimension letter ("K+1" included) and whether
// it is bound.
func (b *builder) size(d string) (int, bool) {
	if d == "K+1" {
		k, ok := b.dims["K"]
		return k + 1, ok
	}
	n, ok := b.dims[d]
	return n, ok
}

// wantDims checks t's shape against the letters of dims, binding the ones
// not bound yet (N, T, M), and names the tensor that fixed the sizes when
// it does not fit.
func (b *builder) wantDims(t *engine.Tensor, dims []string) error {
	fits := len(t.Shape) == len(dims)
	want := make([]string, len(dims))
	for i, d := range dims {
		n, ok := b.size(d)
		want[i] = d
		if ok {
			want[i] = strconv.Itoa(n)
			fits = fits && t.Shape[i] == n
		}
	}
	if !fits {
		return tensorError(b.file, t.Name, "shape %s does not fit %s %s: want [%s] (%s)",
			t.ShapeString(), b.ref.Name, b.ref.ShapeString(), strings.Join(want, ", "), engine.FormatDims(dims))
	}
	b.bind(t, dims)
	return nil
}

// wantValues checks what t's elements hold (engine.TensorSpec.Values),
// loading it first.
func (b *builder) wantValues(t *engine.Tensor, ts engine.TensorSpec) error {
	if ts.Values == "id" && t.DType != engine.I64 {
		return nil // I32 and U8 fit
	}
	if ts.Values != "" {
		if err := b.f.Load(t.Name); err != nil {
			return err
		}
	}
	switch {
	case ts.Values == "token":
		v, cols := b.dims["V"], max(t.Dim(1), 1)
		for i := range t.NumElements() {
			if tok := t.Int(i); tok < 0 || tok >= int64(v) {
				return tensorError(b.file, t.Name, "row %d, position %d holds token %d, outside the vocabulary [0, %d) of %s", i/cols, i%cols, tok, v, b.boundBy["V"])
			}
		}
	case ts.Values == "id":
		cols := max(t.Dim(1), 1)
		for i := range t.NumElements() {
			if id := t.Int(i); id != int64(int32(id)) {
				return tensorError(b.file, t.Name, "row %d, position %d holds token %d, which does not fit in int32 (token ids are int32 in the kernels)", i/cols, i%cols, id)
			}
		}
	case ts.Values == "mask":
		for i := range t.NumElements() {
			if v := t.Int(i); v != 0 && v != 1 {
				return tensorError(b.file, t.Name, "row %d is %d, but a row mask holds 1 (a real row) or 0 (padding)", i, v)
			}
		}
	case strings.HasPrefix(ts.Values, "count:"):
		letter := strings.TrimPrefix(ts.Values, "count:")
		limit := b.dims[letter]
		for i := range t.NumElements() {
			if v := t.Int(i); v < 0 || v > int64(limit) {
				return tensorError(b.file, t.Name, "row %d is %d, outside [0, %d] (%s has %d columns)", i, v, limit, b.boundBy[letter], limit)
			}
		}
	}
	return nil
}

// trees checks the draft trees of a spec_tree_verify run: at most
// engine.MaxTreeNodes nodes a row, each row's links laid out as SGLang lays
// them (engine.ParseTree: no cycle, no second parent, children after their
// parent, links inside the row), and the candidate token of every node the
// root reaches inside the vocabulary. Each error names the tensor, the row
// and the node.
func (b *builder) trees() error {
	if b.run.Op != engine.OpSpecTreeVerify {
		return nil
	}
	if n := b.dims["N"]; n > engine.MaxTreeNodes {
		return tensorError(b.file, b.boundBy["N"], "shape %s has %d nodes a row, over the %d a draft tree may have", b.ref.ShapeString(), n, engine.MaxTreeNodes)
	}
	if err := b.f.Load("candidates", "retrive_next_token", "retrive_next_sibling"); err != nil {
		return err
	}
	trees, err := b.run.Trees()
	if err != nil {
		var te *engine.TreeError
		if errors.As(err, &te) {
			return tensorError(b.file, te.Tensor, "%s", te.Where())
		}
		return tensorError(b.file, "retrive_next_token", "%v", err)
	}
	cand, v := b.run.Candidates, int64(b.dims["V"])
	n := cand.Dim(1)
	for r, t := range trees {
		for node := 1; node < n; node++ {
			if tok := cand.Int(r*n + node); t.Reached(node) && (tok < 0 || tok >= v) {
				return tensorError(b.file, "candidates", "row %d, node %d holds token %d, outside the vocabulary [0, %d) of %s", r, node, tok, v, b.boundBy["V"])
			}
		}
	}
	return nil
}

func (b *builder) wantDType(t *engine.Tensor, float bool) error {
	if float && !t.DType.IsFloat() {
		return tensorError(b.file, t.Name, "dtype %s, but %s must be a float dtype (BF16, F16, F32 or F64)", t.DType, t.Name)
	}
	if !float && t.DType != engine.I32 && t.DType != engine.I64 && t.DType != engine.U8 {
		return tensorError(b.file, t.Name, "dtype %s, but %s must be an integer dtype (I32, I64 or U8)", t.DType, t.Name)
	}
	return nil
}

// params resolves the op's per-row parameters (engine.Param of scope
// PerRow): the table's default for every row, then the dump's metadata
// (one value for every row), then its tensor (one value per row, or one for
// all), then the override for every row. Every value is checked against
// the table; settings() did the run-wide ones. A metadata value the op does
// not take, or that a tensor replaces, is a notice.
func (b *builder) params() error {
	p := &b.run.Params
	rows := b.rows
	p.Temperature, p.TopP, p.MinP = make([]float64, rows), make([]float64, rows), make([]float64, rows)
	p.TopK, p.Seed, p.Offset = make([]int, rows), make([]uint64, rows), make([]uint64, rows)
	for _, param := range engine.ParamTable() {
		if param.Scope != engine.PerRow {
			continue
		}
		var first engine.Overrides // the value every row starts from
		if err := first.Set(param.Name, param.Default); err != nil {
			return fmt.Errorf("dump: the default of %s: %w", param.Name, err)
		}
		text, overridden := b.o.Get(param.Name)
		if overridden {
			if err := first.Set(param.Name, text); err != nil {
				return overrideError(b.file, err)
			}
		}
		t := b.used(param.Name)
		if text, ok := b.f.Meta[param.Name]; ok && !overridden {
			if !b.spec.Takes(param.Name) {
				b.notice("ignored metadata %q: not used by op %s", param.Name, b.run.Op)
			} else {
				var meta engine.Overrides
				if err := meta.Set(param.Name, text); err != nil {
					return fileError(b.file, "metadata %q: %v", param.Name, err)
				}
				if t != nil {
					b.notice("ignored metadata %q: the tensor %q gives every row's %s", param.Name, t.Name, param.Name)
				} else {
					first = meta
				}
			}
		}
		set := b.rowSetter(param.Name)
		for r := range rows {
			set(r, &first)
		}
		if t == nil || overridden {
			continue
		}
		if err := b.rowValues(t, param, set); err != nil {
			return err
		}
	}
	return nil
}

// metadataKeys gives a notice for each metadata key sampviz does not read:
// those outside DUMPS.md's table (op, source, tokenizer,
// logprobs_kind@MODE) and the parameter table's run-wide and per-row
// parameters.
func (b *builder) metadataKeys() {
	var unknown []string
	for key := range b.f.Meta {
		if !readMetadata(key) {
			unknown = append(unknown, key)
		}
	}
	sort.Strings(unknown)
	for _, key := range unknown {
		b.notice("ignored metadata %q: not part of the dump format (DUMPS.md, \"Metadata\")", key)
	}
}

// readMetadata reports whether sampviz reads the metadata key.
func readMetadata(key string) bool {
	switch key {
	case "op", "source", "tokenizer":
		return true
	}
	if strings.HasPrefix(key, logprobsKindPrefix) {
		return true // read per output by logprobsKinds
	}
	p := engine.ParamByName(key)
	return p != nil && (p.Scope == engine.RunWide || p.Scope == engine.PerRow)
}

// metaParam reports whether the dump's metadata gives the per-row
// parameter called name.
func (b *builder) metaParam(name string) bool {
	_, ok := b.f.Meta[name]
	p := engine.ParamByName(name)
	return ok && p != nil && p.Scope == engine.PerRow
}

// valueText writes element i of a parameter tensor as Overrides.Set reads it.
func valueText(t *engine.Tensor, i int, p *engine.Param) string {
	if p.Kind == engine.KindFloat {
		return engine.FormatFloat(t.Float(i))
	}
	return strconv.FormatInt(t.Int(i), 10)
}

// rowSetter returns the function that copies a per-row parameter from a
// checked Overrides into row r of the run's Params.
func (b *builder) rowSetter(name string) func(r int, o *engine.Overrides) {
	p := &b.run.Params
	switch name {
	case "temperature":
		return func(r int, o *engine.Overrides) { p.Temperature[r] = *o.Temperature }
	case "top_k":
		return func(r int, o *engine.Overrides) { p.TopK[r] = *o.TopK }
	case "top_p":
		return func(r int, o *engine.Overrides) { p.TopP[r] = *o.TopP }
	case "min_p":
		return func(r int, o *engine.Overrides) { p.MinP[r] = *o.MinP }
	case "seed":
		return func(r int, o *engine.Overrides) { p.Seed[r] = *o.Seed }
	case "offset":
		return func(r int, o *engine.Overrides) { p.Offset[r] = *o.Offset }
	}
	panic("dump: per-row parameter " + name + " has no field in engine.Params")
}

// perRow checks a parameter tensor's dtype and shape (a scalar, or one value
// per row) and returns the function that gives row r's element.
func (b *builder) perRow(t *engine.Tensor, p *engine.Param) (func(r int) int, error) {
	if err := b.wantDType(t, p.Kind == engine.KindFloat); err != nil {
		return nil, err
	}
	switch {
	case len(t.Shape) == 0:
		return func(int) int { return 0 }, nil
	case len(t.Shape) == 1 && t.Shape[0] == b.rows:
		return func(r int) int { return r }, nil
	}
	return nil, tensorError(b.file, t.Name, "shape %s does not fit %s %s: want [] or [%d]", t.ShapeString(), b.ref.Name, b.ref.ShapeString(), b.rows)
}

// settings resolves the run-wide parameters (engine.Param of scope RunWide)
// and the work parameters: the table's defaults, then metadata, then
// overrides, which are written back into Meta under their metadata keys.
func (b *builder) settings() error {
	meta := b.run.Meta
	var s engine.Overrides // the resolved values
	for _, p := range engine.ParamTable() {
		if p.Scope != engine.RunWide {
			continue
		}
		if p.Default != "" {
			if err := s.Set(p.Name, p.Default); err != nil {
				return fmt.Errorf("dump: the default of %s: %w", p.Name, err)
			}
		}
		if text, ok := meta[p.Name]; ok {
			if err := s.Set(p.Name, text); err != nil {
				return fileError(b.file, "metadata %q: %v", p.Name, err)
			}
			b.given[p.Name] = "the metadata"
		}
		if text, ok := b.o.Get(p.Name); ok {
			if err := s.Set(p.Name, text); err != nil {
				return overrideError(b.file, err)
			}
			meta[p.Name] = text
			b.given[p.Name] = "the override"
		}
	}
	p := &b.run.Params
	p.FilterOrder, p.TopKTies, p.TemperatureOrder = *s.FilterOrder, *s.TopKTies, *s.TemperatureOrder
	p.LogprobsKind = *s.LogprobsKind
	if s.Semantics != nil {
		p.Semantics = *s.Semantics
	}
	p.MaxNgramSize, p.MaxDraftTokens, p.Threshold = *s.MaxNgramSize, *s.MaxDraftTokens, *s.Threshold
	p.NgramSemantics, p.MinNgramSize = *s.NgramSemantics, *s.MinNgramSize
	p.ValidRows = *s.ValidRows
	p.Method, p.Draws, p.Trials = engine.SampleAuto, 0, 0
	if b.o.Method != nil {
		p.Method = *b.o.Method
	}
	if b.o.Draws != nil {
		p.Draws = *b.o.Draws
	}
	p.KeepDraws = b.o.KeepDraws != nil && *b.o.KeepDraws == 1
	if b.o.Trials != nil {
		p.Trials = *b.o.Trials
	}
	// D, the width of draft_out, is a parameter: FastDeploy's draft_tokens
	// hold the current token before the draft.
	b.dims["D"], b.boundBy["D"] = p.MaxDraftTokens, "max_draft_tokens"
	if p.NgramSemantics.FastDeploy() {
		b.dims["D"], b.boundBy["D"] = p.MaxDraftTokens+1, "max_draft_tokens + 1"
	}
	return nil
}

// semantics sets the filter chain of a run whose semantics names a preset
// (engine.Preset.Apply); a filter_order, top_k_ties or temperature_order
// given beside it that differs from the preset's is an error. any is left
// to the session, which judges under every preset; ops without filters
// ignore semantics.
func (b *builder) semantics() error {
	preset := b.run.Params.Semantics.Preset()
	if preset == nil || !b.spec.Takes("semantics") {
		return nil
	}
	notice, err := preset.Apply(&b.run.Params, func(name string) string { return b.given[name] })
	if err != nil {
		return fileError(b.file, "%v", err)
	}
	b.notice("semantics %s: judged with %s's filter chain: %s", preset.Name, preset.Engine, preset.Chain)
	if notice != "" {
		b.notice("%s", notice)
	}
	return nil
}

// andList writes items as "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
