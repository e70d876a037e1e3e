package engine

// FilterOrder says how top-k and top-p combine (DUMPS.md metadata `filter_order`).
type FilterOrder string

const (
	// TopKFirst applies top-k, renormalises, then applies top-p to the
	// renormalised mass, then min-p.
	TopKFirst FilterOrder = "top_k_first"
	// Joint applies top-k and top-p to the same unfiltered distribution and
	// keeps their intersection, then min-p.
	Joint FilterOrder = "joint"
)

// TopKTies says which tokens tied with the k-th most probable survive top-k
// (DUMPS.md metadata `top_k_ties`).
type TopKTies string

const (
	// TiesKeep keeps every token tied with the k-th.
	TiesKeep TopKTies = "keep"
	// TiesLowestIndex keeps exactly k tokens, preferring lower indices among ties.
	TiesLowestIndex TopKTies = "lowest_index"
)

// NgramSemantics says whose drafting rule ngram_match follows (DUMPS.md
// metadata `ngram_semantics`, docs/SEMANTICS.md "ngram_match").
type NgramSemantics string

const (
	// NgramSampviz is sampviz's rule: one budget of threshold draft tokens
	// spent in row order, drafts left-aligned in draft_out.
	NgramSampviz NgramSemantics = "sampviz"
	// NgramFastDeploy is FastDeploy's ngram_match: the threshold counts
	// each row's current token and reserves one for every later active
	// row; drafts are written from offset 1 and seq_lens_this_time says
	// how many tokens each row runs.
	NgramFastDeploy NgramSemantics = "fastdeploy"
	// NgramFastDeployHybrid is FastDeploy's hybrid_mtp_ngram: n-gram
	// drafts appended after the tokens the MTP drafter already wrote.
	NgramFastDeployHybrid NgramSemantics = "fastdeploy_hybrid"
)

// FastDeploy reports whether s is one of FastDeploy's rules.
func (s NgramSemantics) FastDeploy() bool {
	return s == NgramFastDeploy || s == NgramFastDeployHybrid
}

// LogprobsKind says which distribution an output's log probabilities are
// of (DUMPS.md metadata `logprobs_kind`, docs/SEMANTICS.md "Logprobs").
type LogprobsKind string

const (
	// LogprobsRaw are the log-softmax of the logits at temperature 1,
	// before the temperature and the filters (vLLM's raw_logprobs, its
	// default).
	LogprobsRaw LogprobsKind = "raw"
	// LogprobsProcessed are the log probabilities of the distribution the
	// sampler draws from: after the temperature and the filters, -inf
	// where a filter drops a token (vLLM's processed_logprobs).
	LogprobsProcessed LogprobsKind = "processed"
)

// SampleMethod picks how a sampler draws. Every method draws from the same
// distribution; for one method, seed and offset, engine/cpu and the CUDA
// kernels draw the same tokens.
type SampleMethod string

const (
	// SampleAuto is the inverse CDF over the filtered distribution (the
	// filters found as thresholds, no sort): the fastest exact method, and
	// on the kernels' top-k fast path one read of each row.
	SampleAuto SampleMethod = ""
	// SampleInverseCDF filters exactly, then inverts the fixed-point CDF with one
	// 64-bit uniform per draw. The many-draws mode always uses it.
	SampleInverseCDF SampleMethod = "inverse_cdf"
	// SampleGumbel takes argmax(z_i/T + g_i) over the logits with Gumbel noise.
	SampleGumbel SampleMethod = "gumbel"
	// SampleRejection is the sort-free rejection sampler for top-k/top-p/min-p.
	SampleRejection SampleMethod = "rejection"
)

// Params are the per-row sampling parameters of a run, resolved from the
// dump's tensors, its metadata and any overrides. Every per-row slice has one
// entry per row.
type Params struct {
	Temperature []float64 // 0 means greedy
	TopK        []int     // 0 or >= V means off
	TopP        []float64 // in (0, 1]; 1 means off
	MinP        []float64 // in [0, 1]; 0 means off
	Seed        []uint64
	Offset      []uint64

	FilterOrder FilterOrder
	TopKTies    TopKTies
	// TemperatureOrder says where the temperature applies ("" means
	// first); Semantics names the preset that set the chain, or any.
	TemperatureOrder TemperatureOrder
	Semantics        Semantics
	// LogprobsKind is what the dump's logprobs outputs are ("" means raw);
	// Run.LogprobsKinds may say otherwise for one mode.
	LogprobsKind LogprobsKind

	// Method picks the sampler for sample runs.
	Method SampleMethod
	// Draws is the number of independent draws per row that a sample run makes
	// beyond its one token per row (0: none).
	Draws int
	// KeepDraws asks a DrawCounter backend for every draw (Output.Samples)
	// instead of the counts; without it a stored run keeps the counts only.
	KeepDraws bool
	// Trials is the number of independent speculative trials per row (0 and 1
	// both mean one).
	Trials int

	MaxNgramSize   int // n-gram drafting: longest n tried (default 3)
	MaxDraftTokens int // n-gram drafting: tokens proposed per row (default 8)
	Threshold      int // n-gram drafting: draft tokens shared across the batch (default 1024)
	// NgramSemantics says whose drafting rule ngram_match follows ("" means
	// sampviz's); MinNgramSize is the shortest n the fastdeploy_hybrid
	// rule tries (default 1).
	NgramSemantics NgramSemantics
	MinNgramSize   int

	// ValidRows is the number of real rows at the front of a padded batch
	// (0: every row is real; docs/SEMANTICS.md "Padded rows").
	ValidRows int
}

// Filtered reports whether row r has top-k, top-p or min-p active for a
// vocabulary of v tokens.
func (p *Params) Filtered(r, v int) bool {
	return (p.TopK[r] > 0 && p.TopK[r] < v) || p.TopP[r] < 1 || p.MinP[r] > 0
}

// Run is one operation on one batch: the inputs found in a dump, the resolved
// parameters and the external outputs to judge. Tensors that the op does not
// use, or that the dump lacks, are nil.
type Run struct {
	// Source names where the inputs came from (a file name), for messages.
	Source string
	Op     Op
	// Meta is the dump's metadata map, after overrides.
	Meta map[string]string
	// BackendDraws says Params.Draws is a DrawCounter's default
	// (SetBackendDefaults), not a person's: a backend that returns every
	// draw, run in its place, makes DefaultDraws instead.
	BackendDraws bool

	Logits       *Tensor // [B, V]
	TargetLogits *Tensor // [B, K+1, V]; [B, N, V] for a draft tree
	DraftTokens  *Tensor // [B, K]
	// DraftTrials holds drafts drawn anew for every trial, [T, B, K]
	// (DUMPS.md: draft_tokens of three dimensions), nil for fixed drafts;
	// DraftTokens is then its first trial.
	DraftTrials *Tensor
	DraftProbs  *Tensor // [B, K, V] ([B, N, V] for a tree); nil means one-hot drafts
	Candidates  *Tensor // [B, N]: a draft tree's token per node
	NextToken   *Tensor // [B, N]: a draft tree's first child per node, -1 for none
	NextSibling *Tensor // [B, N]: a draft tree's next sibling per node, -1 for none
	InputIDs    *Tensor // [B, L]
	InputIDsLen *Tensor // [B]
	PreIDs      *Tensor // [B, M]
	StepIdx     *Tensor // [B]
	// FastDeploy's per-row state for ngram_match under ngram_semantics
	// fastdeploy or fastdeploy_hybrid (docs/SEMANTICS.md), each [B] or nil:
	// prefill and decode lengths, the tokens each row runs this step before
	// drafting, the request's length cap and its draft count.
	SeqLensEncoder  *Tensor
	SeqLensDecoder  *Tensor
	SeqLensThisTime *Tensor
	MaxDecLen       *Tensor
	DraftTokenNum   *Tensor
	// Valid marks the real rows of a padded batch ([B], 0 for padding); nil
	// when the dump has no mask.
	Valid *Tensor

	Params Params

	// External holds the outputs some other implementation produced, by their
	// DUMPS.md names ("probs", "tokens", "samples", "spec_tokens", ...),
	// with their modes ("probs@eager").
	External map[string]*Tensor
	// Declared holds the seeds and offsets that modes declare (seed@MODE,
	// offset@MODE), by mode; modes that declare none are absent.
	Declared map[string]*DeclaredSeeds
	// LogprobsKinds holds the kinds that modes declare for their logprobs
	// (the metadata key logprobs_kind@MODE), by mode; the others are
	// Params.LogprobsKind.
	LogprobsKinds map[string]LogprobsKind

	// Notices are things worth saying that are not errors (ignored tensors).
	Notices []string
}

// SetTensor files t as the input called name (an engine.TensorSpec name of
// the op table). It panics on a name that is no input: the op table and
// Run must agree.
func (r *Run) SetTensor(name string, t *Tensor) {
	switch name {
	case "logits":
		r.Logits = t
	case "target_logits":
		r.TargetLogits = t
	case "draft_tokens":
		r.DraftTokens = t
	case "draft_probs":
		r.DraftProbs = t
	case "candidates":
		r.Candidates = t
	case "retrive_next_token":
		r.NextToken = t
	case "retrive_next_sibling":
		r.NextSibling = t
	case "input_ids":
		r.InputIDs = t
	case "input_ids_len":
		r.InputIDsLen = t
	case "pre_ids":
		r.PreIDs = t
	case "step_idx":
		r.StepIdx = t
	case "seq_lens_encoder":
		r.SeqLensEncoder = t
	case "seq_lens_decoder":
		r.SeqLensDecoder = t
	case "seq_lens_this_time":
		r.SeqLensThisTime = t
	case "max_dec_len":
		r.MaxDecLen = t
	case "draft_token_num":
		r.DraftTokenNum = t
	case "valid":
		r.Valid = t
	default:
		panic("engine: Run has no input " + name)
	}
}

// Input returns the input called name (an engine.TensorSpec name of the op
// table), or nil when the run has none.
func (r *Run) Input(name string) *Tensor {
	switch name {
	case "logits":
		return r.Logits
	case "target_logits":
		return r.TargetLogits
	case "draft_tokens":
		return r.DraftTokens
	case "draft_probs":
		return r.DraftProbs
	case "input_ids":
		return r.InputIDs
	case "input_ids_len":
		return r.InputIDsLen
	case "pre_ids":
		return r.PreIDs
	case "step_idx":
		return r.StepIdx
	case "seq_lens_encoder":
		return r.SeqLensEncoder
	case "seq_lens_decoder":
		return r.SeqLensDecoder
	case "seq_lens_this_time":
		return r.SeqLensThisTime
	case "max_dec_len":
		return r.MaxDecLen
	case "draft_token_num":
		return r.DraftTokenNum
	case "valid":
		return r.Valid
	}
	return nil
}

// Padding reports whether row is a padded lane of the batch: after the
// first Params.ValidRows rows, or 0 in the valid mask.
func (r *Run) Padding(row int) bool {
	if n := r.Params.ValidRows; n > 0 && row >= n {
		return true
	}
	return r.Valid != nil && row < r.Valid.NumElements() && r.Valid.Int(row) == 0
}

// PaddedRows lists the padded lanes of the batch, ascending (nil when every
// row is real).
func (r *Run) PaddedRows() []int {
	var rows []int
	for row := range r.Rows() {
		if r.Padding(row) {
			rows = append(rows, row)
		}
	}
	return rows
}

// Rows returns the batch size B.
func (r *Run) Rows() int {
	switch {
	case r.Logits != nil:
		return r.Logits.Dim(0)
	case r.TargetLogits != nil:
		return r.TargetLogits.Dim(0)
	case r.PreIDs != nil:
		return r.PreIDs.Dim(0)
	}
	return 0
}

// Vocab returns V, the vocabulary size (0 for ngram_match).
func (r *Run) Vocab() int {
	switch {
	case r.Logits != nil:
		return r.Logits.Dim(1)
	case r.TargetLogits != nil:
		return r.TargetLogits.Dim(2)
	}
	return 0
}

// DraftLen returns K, the number of draft positions of a spec_verify run
// (0 for the other ops).
func (r *Run) DraftLen() int {
	if r.DraftTokens != nil {
		return r.DraftTokens.Dim(1)
	}
	return 0
}

// Nodes returns N, the number of nodes of a spec_tree_verify run's draft
// trees (0 for the other ops).
func (r *Run) Nodes() int {
	if r.Op == OpSpecTreeVerify && r.TargetLogits != nil {
		return r.TargetLogits.Dim(1)
	}
	return 0
}

// InputDType returns the dtype of the run's float input (logits or target
// logits), or DTypeInvalid for ngram_match.
func (r *Run) InputDType() DType {
	switch {
	case r.Logits != nil:
		return r.Logits.DType
	case r.TargetLogits != nil:
		return r.TargetLogits.DType
	}
	return DTypeInvalid
}

// How much statistical work our backend does when the person names none: the
// draws per row of a sample run and the trials per row of a spec_verify or
// spec_tree_verify run.
// At 10^5 draws a row's fit catches a bias of 0.6% of mass moved between its
// two most probable tokens (engine/stats, power); 10^4 trials measure each
// position's acceptance rate to about ±1% and give the lossless check 10^4
// tokens at the first position.
// A backend that counts its draws on the device (DrawCounter) makes
// DefaultCountedDraws a row: 100 times the draws catch a bias 10 times
// smaller.
const (
	DefaultDraws        = 100_000
	DefaultCountedDraws = 10_000_000
	DefaultTrials       = 10_000
)

// SetWorkDefaults gives a sample run DefaultDraws and a speculative run
// DefaultTrials unless o names them (an explicit 0 stays 0).
func (r *Run) SetWorkDefaults(o Overrides) {
	s := r.Op.Spec()
	if s == nil {
		return
	}
	if s.Takes("draws") && o.Draws == nil {
		r.Params.Draws = DefaultDraws
	}
	if s.Takes("trials") && o.Trials == nil {
		r.Params.Trials = DefaultTrials
	}
}

// SetBackendDefaults gives a sample run that names no draws the draws per
// row of backend b when b counts its draws on the device (DrawCounter), so
// the run's parameters show the draws that were used. Call it after
// SetWorkDefaults.
func (r *Run) SetBackendDefaults(o Overrides, b Backend) {
	s := r.Op.Spec()
	if s == nil || !s.Takes("draws") || o.Draws != nil {
		return
	}
	if _, ok := b.(DrawCounter); ok {
		r.Params.Draws, r.BackendDraws = DefaultDrawsOn(b), true
	}
}

// DefaultDrawsOn is the draws per row that a sample run naming none makes
// on backend b: a DrawCounter's DefaultDraws, else DefaultDraws.
func DefaultDrawsOn(b Backend) int {
	if dc, ok := b.(DrawCounter); ok {
		return dc.DefaultDraws()
	}
	return DefaultDraws
}

// LogprobsKindOf returns the kind of the logprobs output of mode ("" for
// the plain logprobs): the mode's own declaration, else the run's.
func (r *Run) LogprobsKindOf(mode string) LogprobsKind {
	if k, ok := r.LogprobsKinds[mode]; ok && mode != "" {
		return k
	}
	if r.Params.LogprobsKind == "" {
		return LogprobsRaw
	}
	return r.Params.LogprobsKind
}
