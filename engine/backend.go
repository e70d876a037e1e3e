package engine

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors shared by backends.
var (
	// ErrUnsupported: the backend cannot run this op with these inputs.
	ErrUnsupported = errors.New("unsupported by this backend")
	// ErrUnavailable: the backend cannot run at all here (no GPU, no library).
	ErrUnavailable = errors.New("backend unavailable")
)

// Backend runs ops the way a GPU kernel does. engine/cpu and engine/cuda
// implement it.
type Backend interface {
	// Name is the backend's short name: "cpu" or "cuda".
	Name() string
	// Device describes where the work runs.
	Device() Device
	// Run executes run.Op on run's inputs with run.Params and returns what it
	// produced. It returns an error wrapping ErrUnsupported for an op or input it
	// cannot handle, and the context's error when ctx ends first. It never
	// modifies run's tensors and the Output never aliases them.
	Run(ctx context.Context, run *Run) (*Output, error)
}

// DrawCounter is a Backend that counts a sample run's many draws per token
// (Output.SampleCounts) instead of returning every draw, unless the run
// keeps them (Params.KeepDraws): the counts of a row take V integers
// whatever the draws, so its draws are a power setting, not a memory one.
type DrawCounter interface {
	Backend
	// DefaultDraws is the draws per row of a sample run that names none
	// (Run.SetBackendDefaults); it never depends on the run.
	DefaultDraws() int
	// MaxDraws is the most draws per row it takes.
	MaxDraws() int
}

// CountsDraws reports whether b returns run's draws as counts
// (Output.SampleCounts) rather than as Samples.
func CountsDraws(b Backend, run *Run) bool {
	_, ok := b.(DrawCounter)
	return ok && run.Params.Draws > 0 && !run.Params.KeepDraws
}

// Device describes the hardware behind a backend, for headers and reports.
type Device struct {
	Backend string `json:"backend"` // "cpu" or "cuda"
	Name    string `json:"name"`    // "NVIDIA H100 80GB HBM3", or the CPU's model
	// SMs is the GPU's multiprocessor count (0 on the CPU).
	SMs int `json:"sms,omitempty"`
	// MemoryBytes is the GPU's global memory (0 on the CPU).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CopyBandwidth is the device-to-device copy bandwidth measured at start,
	// bytes read plus bytes written per second (0 when not measured).
	CopyBandwidth float64 `json:"copy_bandwidth,omitempty"`
	// Reason says why this backend was chosen ("--backend auto: ...").
	Reason string `json:"reason,omitempty"`
}

// Output is what one implementation produced for a run: ours from a Backend,
// or an external one found in the dump. Fields the op does not produce are nil.
type Output struct {
	// Name is "cpu" or "cuda" for ours, the DUMPS.md tensor name for external
	// ("probs", or with its mode "probs@eager").
	Name     string
	External bool
	// Declared is the seed and offset the output's mode declares it drew
	// with (seed@MODE, offset@MODE), or nil.
	Declared *DeclaredSeeds

	Probs        *Tensor // [B, V]: softmax or renorm
	Tokens       *Tensor // [B]: argmax, or one sampled token per row
	Samples      *Tensor // [B, N]: N independent draws per row
	SpecTokens   *Tensor // [B, K+1], -1 after the first rejection
	SpecEmitted  *Tensor // [B]
	SpecAccepted *Tensor // [B]
	SpecTrials   *Tensor // [T, B, K+1]
	Trace        *SpecTrace
	DraftOut     *Tensor // [B, D], -1 padded
	// SeqLensThisTime is FastDeploy's seq_lens_this_time after
	// ngram_match ([B]; ngram_semantics fastdeploy and fastdeploy_hybrid).
	SeqLensThisTime *Tensor
	Logits          *Tensor // [B, V]: an engine's logits, judged against golden ones (logits_gate)

	// Logprobs are an engine's log probabilities: [B, V], or a top-N [B,
	// N] whose tokens LogprobTokenIDs holds (most probable first);
	// LogprobsKind says whether they are raw or processed.
	Logprobs        *Tensor
	LogprobTokenIDs *Tensor // [B, N]
	LogprobsKind    LogprobsKind

	// A draft tree's verification (spec_tree_verify), P = D+1 positions
	// with D the deepest row's depth: TreePath holds the accepted path's
	// nodes (the root 0 first), TreeTokens the accepted nodes' tokens and
	// then the token drawn where the walk stopped (the bonus), each -1
	// after; TreeAccepted the number of accepted tokens. The Trials
	// tensors hold every trial; the first rows above are trial 0.
	TreePath       *Tensor // [B, P]
	TreeTokens     *Tensor // [B, P]
	TreeAccepted   *Tensor // [B]
	TreePathTrials *Tensor // [T, B, P]
	TreeTrials     *Tensor // [T, B, P]
	TreeTrace      *TreeTrace

	// SampleCounts holds a sample run's many draws counted per token ([B,
	// V], integers): [r, t] is how many of row r's draws are token t. A
	// row's counts sum to its draws, less the draws outside [0, V).
	// Backends that count on the device (DrawCounter) return it instead of
	// Samples; SampleDraws is then the draws each row made (0: the row's
	// sum).
	SampleCounts *Tensor
	SampleDraws  int

	// Timing is set by backends that measure their kernels.
	Timing *Timing
}

// Timing is what a backend measured of its own work.
type Timing struct {
	// Kernel is the device time of the op's kernels (median when repeated).
	Kernel time.Duration `json:"kernel_ns"`
	// Bytes is the number of bytes the op must move through device memory.
	Bytes int64 `json:"bytes"`
	// Wall is the time the whole backend call took, transfers included.
	Wall time.Duration `json:"wall_ns"`
}

// Bandwidth returns the achieved bytes per second of the kernels, or 0.
func (t *Timing) Bandwidth() float64 {
	if t == nil || t.Kernel <= 0 {
		return 0
	}
	return float64(t.Bytes) / t.Kernel.Seconds()
}

// SpecStep is one position of one speculative trial.
type SpecStep struct {
	Draft    int32   `json:"draft"`    // proposed token; -1 at the bonus position
	U        float32 `json:"u"`        // the acceptance uniform
	P        float32 `json:"p"`        // target probability of the draft
	Q        float32 `json:"q"`        // draft probability of the draft
	Accepted bool    `json:"accepted"` // u*q < p
	// Resampled is the token drawn at this step from the residual (after a
	// rejection) or from the target (bonus); -1 when none was drawn.
	Resampled int32 `json:"resampled"`
}

// SpecTrace holds the steps of the first Trials trials of a spec_verify run,
// indexed [trial][row][step] with Steps = K+1 (the last is the bonus position).
// Steps after the first rejection carry the acceptance test that the
// spec_accepted counter counts, and Resampled -1.
type SpecTrace struct {
	Trials int        `json:"trials"`
	Rows   int        `json:"rows"`
	Steps  int        `json:"steps"`
	Step   []SpecStep `json:"step"`
}

// At returns the step of trial t, row r, position i.
func (s *SpecTrace) At(t, r, i int) *SpecStep { return &s.Step[(t*s.Rows+r)*s.Steps+i] }

// TreeStep is what one trial of spec_tree_verify did at one node of the
// tree: the test of the node's token, when the walk came to it (its parent
// on the path, every earlier sibling rejected), and the token drawn there
// when the walk stopped at it.
type TreeStep struct {
	// Tried says the node's token was tested; U, P, Q and Accepted are
	// then the test: accepted iff float32(U·Q) < P, with P the residual
	// probability of the token when its turn came (the target's for a
	// first child) and Q its draft probability (1 for one-hot drafts).
	Tried    bool    `json:"tried"`
	U        float32 `json:"u"`
	P        float32 `json:"p"`
	Q        float32 `json:"q"`
	Accepted bool    `json:"accepted"`
	// Drawn is the token drawn at this node when the walk stopped here:
	// from the residual left by rejecting every child, or from the target
	// at a leaf (the bonus); -1 elsewhere.
	Drawn int32 `json:"drawn"`
}

// TreeTrace holds the steps of the first Trials trials of a
// spec_tree_verify run, indexed [trial][row][node].
type TreeTrace struct {
	Trials int        `json:"trials"`
	Rows   int        `json:"rows"`
	Nodes  int        `json:"nodes"`
	Step   []TreeStep `json:"step"`
}

// At returns the step of trial t, row r, node n.
func (s *TreeTrace) At(t, r, n int) *TreeStep { return &s.Step[(t*s.Rows+r)*s.Nodes+n] }

// Kind is what a judge judges of the output, in its order of priority:
// "logits", "probs", "logprobs", "spec", "tree", "samples", "tokens" or
// "draft" ("" when it holds none of them).
func (o *Output) Kind() string {
	switch {
	case o.Logits != nil:
		return "logits"
	case o.Probs != nil:
		return "probs"
	case o.Logprobs != nil:
		return "logprobs"
	case o.SpecTokens != nil || o.SpecTrials != nil:
		return "spec"
	case o.TreeTokens != nil || o.TreeTrials != nil:
		return "tree"
	case o.Samples != nil || o.SampleCounts != nil:
		return "samples"
	case o.Tokens != nil:
		return "tokens"
	case o.DraftOut != nil:
		return "draft"
	}
	return ""
}

// OutputInfo names one judged output, for the pages and the stream.
type OutputInfo struct {
	// Name is "cpu" or "cuda" for ours, the DUMPS.md tensor name for external.
	Name     string `json:"name"`
	External bool   `json:"external"`
	// Kind is what is judged: "probs", "tokens", "samples", "spec", "tree",
	// "draft", "logits", "logprobs".
	Kind string `json:"kind"`
	// Tolerances are what this output is judged with (they depend on its
	// dtype), when the judge says so before judging; the charts draw the
	// p-value threshold and the atol line from them.
	Tolerances *Tolerances `json:"tolerances,omitempty"`
}

// Label says which output this is, in words: "cpu kernel (ours)" or
// "probs (from the dump)".
func (o OutputInfo) Label() string {
	if o.External {
		return o.Name + " (from the dump)"
	}
	return o.Name + " kernel (ours)"
}
