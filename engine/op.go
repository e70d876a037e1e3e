package engine

import (
	"fmt"
	"strings"
)

// Op names one sampling operation; the values are the ones DUMPS.md uses in
// the `op` metadata key.
type Op string

// The operations of DESIGN.md.
const (
	OpArgmax         Op = "argmax"
	OpSoftmax        Op = "softmax"
	OpRenorm         Op = "renorm"
	OpSample         Op = "sample"
	OpSpecVerify     Op = "spec_verify"
	OpSpecTreeVerify Op = "spec_tree_verify"
	OpNgramMatch     Op = "ngram_match"
	OpLogitsGate     Op = "logits_gate"
)

// TensorSpec is one tensor of the dump format (DUMPS.md): its name, the
// letters of its dimensions, its kind of dtype and what its values must
// hold.
type TensorSpec struct {
	Name string
	// Dims names each dimension: B (rows), V (vocabulary), K (draft
	// positions; "K+1" with the bonus position), L and M (prompt and
	// generated lengths), N (draws; the nodes of a draft tree), T
	// (trials), D (draft tokens), P (the positions of a tree's path).
	Dims  []string
	Float bool
	// Required inputs must be in the dump; the others are optional.
	Required bool
	// Values says what the elements must hold: "" anything of the dtype,
	// "token" ids in [0, V), "top_tokens" ids in [0, V) each at most once
	// in a row (a top-N's ids; padded rows are not read), "id" token ids of
	// no vocabulary (a prompt's, padded with anything) that fit in int32,
	// the kernels' type for them, "count:X" integers in [0, X] where X is a
	// dimension letter, "mask" 0 or 1. A draft tree's links and candidates
	// are checked together, per row (Run.Trees).
	Values string
	// NamedOnly marks an output that exists only as TENSOR@NAME: the
	// tensor of the plain name is an input (logits, the golden of
	// logits_gate).
	NamedOnly bool
	// With marks a companion: the output tensor it goes with, of the same
	// mode (spec_emitted with spec_tokens, logprob_token_ids with
	// logprobs). A companion counts as no output of its own.
	With string
	// TopN names the companion that, when the dump holds it beside this
	// output (of the same mode), makes the output a top-N: its last
	// dimension is then N, the companion's, instead of V (logprobs with
	// logprob_token_ids).
	TopN string
}

// OpSpec is one op's entry in the op table: the tensors it reads, the
// outputs it judges and the parameters it takes. Adding an op is one entry
// here plus its four faces: the kernel (csrc/<op>.cu), the CPU twin
// (engine/cpu/<op>.go), the float64 reference (engine/ref/<op>.go) and the
// judging rule (engine/compare/<op>.go).
type OpSpec struct {
	Op Op
	// Summary says what the op does, in one line.
	Summary string
	// Inputs are the data tensors the op reads, the one that fixes B first;
	// its per-row parameter tensors are Params of scope PerRow.
	Inputs []TensorSpec
	// Params names the parameters the op takes (Param.Name), in table
	// order.
	Params []string
	// Outputs names the external output tensors the op judges (outputSpecs).
	Outputs []string
	// Kernel is what the op's kernels read of the per-row parameters.
	Kernel ParamGroup
	// NoKernel marks an op that has nothing for a backend to run: only the
	// dump's outputs are judged (logits_gate, whose outputs are another
	// engine's logits). Its faces are the reference and the judging rule.
	NoKernel bool
}

// outputSpecs are the output tensors of DUMPS.md, by name.
var outputSpecs = []TensorSpec{
	{Name: "probs", Dims: []string{"B", "V"}, Float: true},
	{Name: "tokens", Dims: []string{"B"}},
	{Name: "samples", Dims: []string{"B", "N"}},
	// sample_counts are the draws counted per token: engines that cannot
	// store 10^7 draws a row bring these instead.
	{Name: "sample_counts", Dims: []string{"B", "V"}},
	{Name: "spec_tokens", Dims: []string{"B", "K+1"}},
	{Name: "spec_emitted", Dims: []string{"B"}, With: "spec_tokens"},
	{Name: "spec_accepted", Dims: []string{"B"}, With: "spec_tokens"},
	{Name: "spec_trials", Dims: []string{"T", "B", "K+1"}},
	{Name: "draft_out", Dims: []string{"B", "D"}},
	// seq_lens_this_time_out is FastDeploy's: the tokens each row runs
	// this step, its current token (or MTP tokens) and its draft.
	{Name: "seq_lens_this_time_out", Dims: []string{"B"}, With: "draft_out"},
	{Name: "logits", Dims: []string{"B", "V"}, Float: true, NamedOnly: true},
	{Name: "tree_path", Dims: []string{"B", "P"}},
	{Name: "tree_tokens", Dims: []string{"B", "P"}},
	{Name: "tree_accepted", Dims: []string{"B"}},
	{Name: "tree_path_trials", Dims: []string{"T", "B", "P"}},
	{Name: "tree_trials", Dims: []string{"T", "B", "P"}},
	// logprobs are [B, V], or a top-N [B, N] with the token ids beside
	// them (docs/SEMANTICS.md "Logprobs").
	{Name: "logprobs", Dims: []string{"B", "V"}, Float: true, TopN: "logprob_token_ids"},
	{Name: "logprob_token_ids", Dims: []string{"B", "N"}, Values: "top_tokens", With: "logprobs"},
}

// logprobsOutputs are the tensors of a logprobs output, which every op
// with a distribution of its own per row judges.
var logprobsOutputs = []string{"logprobs", "logprob_token_ids"}

var (
	logitsInput  = TensorSpec{Name: "logits", Dims: []string{"B", "V"}, Float: true, Required: true}
	filterParams = []string{"temperature", "top_k", "top_p", "min_p", "semantics", "filter_order", "top_k_ties", "temperature_order"}
	seedParams   = []string{"seed", "offset"}
	// validInput marks the real rows of a padded batch; every op takes it
	// (docs/SEMANTICS.md "Padded rows").
	validInput = TensorSpec{Name: "valid", Dims: []string{"B"}, Values: "mask"}
)

// opTable is the op table, in the order the documentation presents the ops.
var opTable = []*OpSpec{
	{
		Op: OpArgmax, Summary: "the greedy token of every row",
		Inputs: []TensorSpec{logitsInput}, Params: []string{"temperature", "logprobs_kind"},
		Outputs: join([]string{"tokens"}, logprobsOutputs),
	},
	{
		Op: OpSoftmax, Summary: "the temperature softmax of every row",
		Inputs: []TensorSpec{logitsInput}, Params: []string{"temperature", "logprobs_kind"},
		Outputs: join([]string{"probs"}, logprobsOutputs), Kernel: NeedTemperature,
	},
	{
		Op: OpRenorm, Summary: "the softmax after top-k, top-p and min-p, renormalised",
		Inputs: []TensorSpec{logitsInput}, Params: join(filterParams, []string{"logprobs_kind"}),
		Outputs: join([]string{"probs"}, logprobsOutputs), Kernel: NeedTemperature | NeedFilters,
	},
	{
		Op: OpSample, Summary: "seeded draws from the renormalised distribution",
		Inputs: []TensorSpec{logitsInput}, Params: join(filterParams, seedParams, []string{"method", "draws", "keep_draws", "logprobs_kind"}),
		Outputs: join([]string{"tokens", "samples", "sample_counts", "probs"}, logprobsOutputs), Kernel: NeedTemperature | NeedFilters | NeedSeeds,
	},
	{
		Op: OpSpecVerify, Summary: "chain speculative sampling: accept, resample, bonus",
		Inputs: []TensorSpec{
			{Name: "target_logits", Dims: []string{"B", "K+1", "V"}, Float: true, Required: true},
			{Name: "draft_tokens", Dims: []string{"B", "K"}, Required: true, Values: "token"},
			{Name: "draft_probs", Dims: []string{"B", "K", "V"}, Float: true},
		},
		Params:  join(filterParams, seedParams, []string{"trials"}),
		Outputs: []string{"spec_tokens", "spec_emitted", "spec_accepted", "spec_trials"},
		Kernel:  NeedTemperature | NeedFilters | NeedSeeds,
	},
	{
		Op: OpSpecTreeVerify, Summary: "tree speculative sampling: children tried in sibling order against the residual, one path accepted, one token drawn",
		Inputs: []TensorSpec{
			{Name: "target_logits", Dims: []string{"B", "N", "V"}, Float: true, Required: true},
			{Name: "candidates", Dims: []string{"B", "N"}, Required: true},
			{Name: "retrive_next_token", Dims: []string{"B", "N"}, Required: true},
			{Name: "retrive_next_sibling", Dims: []string{"B", "N"}, Required: true},
			{Name: "draft_probs", Dims: []string{"B", "N", "V"}, Float: true},
		},
		Params:  join(filterParams, seedParams, []string{"trials"}),
		Outputs: []string{"tree_path", "tree_tokens", "tree_accepted", "tree_path_trials", "tree_trials"},
		Kernel:  NeedTemperature | NeedFilters | NeedSeeds,
	},
	{
		Op: OpNgramMatch, Summary: "prompt-lookup drafting over the batch",
		Inputs: []TensorSpec{
			{Name: "input_ids", Dims: []string{"B", "L"}, Required: true, Values: "id"},
			{Name: "input_ids_len", Dims: []string{"B"}, Required: true, Values: "count:L"},
			{Name: "pre_ids", Dims: []string{"B", "M"}, Required: true, Values: "id"},
			{Name: "step_idx", Dims: []string{"B"}, Required: true, Values: "count:M"},
			// FastDeploy's per-row state (ngram_semantics fastdeploy and
			// fastdeploy_hybrid); their ranges are checked with the
			// semantics (engine/dump).
			{Name: "seq_lens_encoder", Dims: []string{"B"}},
			{Name: "seq_lens_decoder", Dims: []string{"B"}},
			{Name: "seq_lens_this_time", Dims: []string{"B"}},
			{Name: "max_dec_len", Dims: []string{"B"}},
			{Name: "draft_token_num", Dims: []string{"B"}},
		},
		Params:  []string{"max_ngram_size", "max_draft_tokens", "threshold", "ngram_semantics", "min_ngram_size"},
		Outputs: []string{"draft_out", "seq_lens_this_time_out"},
	},
	{
		Op: OpLogitsGate, Summary: "an engine's logits against golden logits: |Δlogit|, KL and top-1 flips",
		Inputs: []TensorSpec{logitsInput}, Outputs: []string{"logits"}, NoKernel: true,
	},
}

func init() {
	for _, s := range opTable {
		s.Inputs = append(s.Inputs, validInput)
		s.Params = append(s.Params, "valid_rows")
	}
}

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Ops lists every op in the order the documentation presents them.
var Ops = func() []Op {
	ops := make([]Op, len(opTable))
	for i, s := range opTable {
		ops[i] = s.Op
	}
	return ops
}()

// Spec returns op's entry in the op table, or nil for an unknown op.
func (op Op) Spec() *OpSpec {
	for _, s := range opTable {
		if s.Op == op {
			return s
		}
	}
	return nil
}

// ParseOp maps an op name to an Op; its error is the op parameter's
// sentence.
func ParseOp(s string) (Op, error) {
	if Op(s).Spec() != nil {
		return Op(s), nil
	}
	return "", &ParamError{Param: ParamByName("op"), Value: fmt.Sprintf("%q", s)}
}

// Takes reports whether the op takes the parameter called name.
func (s *OpSpec) Takes(name string) bool {
	for _, n := range s.Params {
		if n == name {
			return true
		}
	}
	return false
}

// Judges reports whether the op judges the output tensor called name.
func (s *OpSpec) Judges(name string) bool {
	for _, n := range s.Outputs {
		if n == name {
			return true
		}
	}
	return false
}

// Input returns the op's input called name, or nil.
func (s *OpSpec) Input(name string) *TensorSpec {
	for i := range s.Inputs {
		if s.Inputs[i].Name == name {
			return &s.Inputs[i]
		}
	}
	return nil
}

// Uses reports whether the op reads or judges the tensor called name: an
// input, a per-row parameter or an output, or, named after a mode
// (TENSOR@MODE), an output or a seed or offset the mode declares.
func (s *OpSpec) Uses(name string) bool {
	if base, _ := SplitName(name); HasMode(name) {
		return s.Judges(base) || Declares(base) && s.Takes(base)
	}
	if o := OutputSpec(name); o != nil && o.NamedOnly {
		return s.Input(name) != nil
	}
	if s.Input(name) != nil || s.Judges(name) {
		return true
	}
	p := ParamByName(name)
	return p != nil && p.Scope == PerRow && s.Takes(name)
}

// OutputSpec returns the output tensor called name, or nil.
func OutputSpec(name string) *TensorSpec {
	for i := range outputSpecs {
		if outputSpecs[i].Name == name {
			return &outputSpecs[i]
		}
	}
	return nil
}

// KnownTensor reports whether name is a tensor of the dump format: an input
// of some op, a per-row parameter or an output, or an output or a seed or
// offset named after a mode (TENSOR@MODE, whatever the mode).
func KnownTensor(name string) bool {
	if base, _ := SplitName(name); HasMode(name) {
		return OutputSpec(base) != nil || Declares(base)
	}
	if OutputSpec(name) != nil {
		return true
	}
	if p := ParamByName(name); p != nil && p.Scope == PerRow {
		return true
	}
	for _, s := range opTable {
		if s.Input(name) != nil {
			return true
		}
	}
	return false
}

// FormatDims writes dimension letters as "[B, K+1, V]".
func FormatDims(dims []string) string { return "[" + strings.Join(dims, ", ") + "]" }
