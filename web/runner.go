package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sampviz/sampviz/engine"
)

// Runner is the pipeline behind the server: it reads dumps, runs a backend's
// kernels on them and judges every output against the float64 reference.
// web/pipeline implements it on engine/dump, the backends and engine/compare;
// tests use a fake. The server calls Execute and Rejudge from one goroutine
// at a time (its kernel executor) and Inspect and Row from handlers.
type Runner interface {
	// Backends lists the backends a run may use, the default first.
	Backends() []engine.Device
	// Inspect reads the dump at path, which its uploader named name, and
	// describes it. A dump that cannot be used gives an error that wraps a
	// *BadDumpError, whose message is shown to the person who uploaded it.
	Inspect(ctx context.Context, path, name string) (*DumpInfo, error)
	// Execute runs job.Backend's kernels on the dump with job.Params, writes
	// the outputs to job.OutputsPath, then judges them and the dump's external
	// outputs with job.Tolerances (nil: the defaults). It tells sink the
	// outputs before the first row and every row as soon as it is judged,
	// never concurrently. A kernel fault is an error whose message says what
	// failed, in words a person reads.
	Execute(ctx context.Context, job Job, sink RowSink) (*engine.Report, error)
	// Rejudge judges the outputs that Execute stored at job.OutputsPath and
	// the dump's external outputs with job.Tolerances, without running
	// kernels, telling sink as Execute does.
	Rejudge(ctx context.Context, job Job, sink RowSink) (*engine.Report, error)
	// Row describes row r of a finished run for the row page: the reference,
	// every probability output and the filter cuts, for the top most probable
	// tokens; the sample histograms of sample runs with many draws; the
	// speculative laws and the stored trace of spec_verify rows. It reads the
	// outputs (and the trace) that Execute stored.
	Row(ctx context.Context, job Job, r, top int) (*RowDetail, error)
	// Teach runs lesson l of the teaching mode on row r of a spec_verify
	// dump: l.Steps accept/reject steps on the row's real target logits at
	// l.Position with the lesson's controls, on the CPU whatever job.Backend
	// says. The same lesson gives the same steps. It reads the dump only, so
	// it works before the run has finished. A run that is not spec_verify, or
	// a position or control out of range, gives a *LessonError.
	Teach(ctx context.Context, job Job, r int, l Lesson) (*LessonState, error)
}

// RowSink receives a judgement as it happens.
type RowSink interface {
	// Outputs names the outputs being judged, in report order.
	Outputs(outs []OutputInfo)
	// Row delivers one judged row of one output.
	Row(u RowUpdate)
}

// BadDumpError is an upload the runner cannot use: not a dump, truncated,
// inconsistent shapes. Its message is one sentence naming the file, the
// tensor and the rule it broke.
type BadDumpError struct {
	Err error
}

// Error returns the parser's sentence.
func (e *BadDumpError) Error() string { return e.Err.Error() }

// Unwrap returns the parser's error (a *dump.Error from web/pipeline).
func (e *BadDumpError) Unwrap() error { return e.Err }

// ErrNoOutputs is returned by Rejudge and Row when a run stored no outputs of
// its own (its kernels never finished).
var ErrNoOutputs = errors.New("this run has no stored outputs")

// LessonError is a lesson Teach cannot give: not a spec_verify run, or a
// position or control out of range. Its message is one sentence for the
// person who asked.
type LessonError struct {
	Msg string
}

// Error returns the sentence.
func (e *LessonError) Error() string { return e.Msg }

// Job is what the executor hands the runner: one run of one dump.
type Job struct {
	RunID string
	// DumpPath is the stored dump; FileName is what its uploader called it.
	DumpPath string
	FileName string
	// OutputsPath is where Execute writes the backend's outputs and where
	// Rejudge and Row read them.
	OutputsPath string
	// Backend names the backend ("cpu", "cuda").
	Backend string
	Params  Params
	// Tolerances replace the dtype defaults when not nil.
	Tolerances *engine.Tolerances
}

// DumpInfo describes a dump for the run header and the index.
type DumpInfo struct {
	Op    engine.Op    `json:"op"`
	DType engine.DType `json:"dtype"`
	// Input names the main input tensor ("logits", "target_logits", ...) and
	// Shape is its shape.
	Input string `json:"input"`
	Shape []int  `json:"shape"`
	Rows  int    `json:"rows"`
	Vocab int    `json:"vocab"`
	// External lists the external outputs the dump holds, by DUMPS.md name.
	External []string `json:"external"`
	// Source is the dump's `source` metadata.
	Source  string   `json:"source,omitempty"`
	Notices []string `json:"notices,omitempty"`
}

// Params are the parameters a rerun overrides, for every row; nil fields
// keep what the dump says.
type Params struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopK        *int     `json:"top_k,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MinP        *float64 `json:"min_p,omitempty"`
	Seed        *uint64  `json:"seed,omitempty"`
	// Draws is the number of independent draws per row of a sample run,
	// judged by their goodness of fit (engine.Params.Draws).
	Draws *int `json:"draws,omitempty"`
	// Trials is the number of independent speculative trials per row of a
	// spec_verify run, judged against the acceptance laws
	// (engine.Params.Trials).
	Trials *int `json:"trials,omitempty"`
}

// Bounds of Params.Draws and Params.Trials: enough for the statistics to
// see small biases, small enough that one run cannot fill the server's
// memory (outputs hold rows × draws tokens).
const (
	MaxDraws  = 1_000_000
	MaxTrials = 100_000
)

// Overrides returns p as the engine's overrides.
func (p Params) Overrides() engine.Overrides {
	return engine.Overrides{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP, MinP: p.MinP, Seed: p.Seed, Draws: p.Draws, Trials: p.Trials}
}

// Empty reports whether p overrides nothing.
func (p Params) Empty() bool {
	return p.Temperature == nil && p.TopK == nil && p.TopP == nil && p.MinP == nil && p.Seed == nil && p.Draws == nil && p.Trials == nil
}

// Validate checks p against DUMPS.md's ranges and returns one sentence for
// the first value out of range.
func (p Params) Validate() error {
	switch {
	case p.Temperature != nil && (*p.Temperature < 0 || math.IsNaN(*p.Temperature) || math.IsInf(*p.Temperature, 0)):
		return fmt.Errorf("temperature must be a finite number >= 0 (0 means greedy), not %v", *p.Temperature)
	case p.TopK != nil && *p.TopK < 0:
		return fmt.Errorf("top-k must be >= 0 (0 means off), not %d", *p.TopK)
	case p.TopP != nil && !(*p.TopP > 0 && *p.TopP <= 1):
		return fmt.Errorf("top-p must be in (0, 1] (1 means off), not %v", *p.TopP)
	case p.MinP != nil && !(*p.MinP >= 0 && *p.MinP <= 1):
		return fmt.Errorf("min-p must be in [0, 1] (0 means off), not %v", *p.MinP)
	case p.Draws != nil && (*p.Draws < 0 || *p.Draws > MaxDraws):
		return fmt.Errorf("draws must be in [0, %d] (0 means one token per row), not %d", MaxDraws, *p.Draws)
	case p.Trials != nil && (*p.Trials < 0 || *p.Trials > MaxTrials):
		return fmt.Errorf("trials must be in [0, %d] (0 and 1 both mean one), not %d", MaxTrials, *p.Trials)
	}
	return nil
}

// OutputInfo names one judged output.
type OutputInfo struct {
	// Name is "cpu" or "cuda" for ours, the DUMPS.md tensor name for external.
	Name     string `json:"name"`
	External bool   `json:"external"`
	// Kind is what is judged: "probs", "tokens", "samples", "spec", "draft".
	Kind string `json:"kind"`
	// Tolerances are what this output is judged with (they depend on its
	// dtype), when the runner says so before judging; the charts draw the
	// p-value threshold and the atol line from them.
	Tolerances *engine.Tolerances `json:"tolerances,omitempty"`
}

// Label says which output this is, in words: "cpu kernel (ours)" or
// "probs (from the dump)".
func (o OutputInfo) Label() string {
	if o.External {
		return o.Name + " (from the dump)"
	}
	return o.Name + " kernel (ours)"
}

// RowUpdate is one judged row of one output, with what the charts need.
type RowUpdate struct {
	// Output indexes the outputs given to RowSink.Outputs.
	Output int
	Report engine.RowReport
	// Errors is set for probability outputs.
	Errors *RowErrors
}

// RowErrors summarises one row's elementwise errors against the reference
// the row is judged by (strict, or native when the row matched native).
type RowErrors struct {
	// Hist counts tokens by |output - reference|: bin 0 holds exact matches,
	// bin i (1..HistBins-1) holds errors in [HistEdge(i), HistEdge(i+1)),
	// and the last bin also holds larger and non-finite errors.
	Hist [HistBins]int `json:"hist"`
	// Buckets holds, for each of up to HeatBuckets equal slices of the
	// vocabulary, the worst error divided by the error the tolerance allows
	// at that token (above 1 breaks the tolerance; +Inf for NaN or Inf).
	Buckets []engine.Float `json:"buckets"`
	// Token is the token where error/allowed is greatest, Worst its error
	// and Allowed what the tolerance allows there: Worst > Allowed exactly
	// when the row breaks the tolerance against this reference.
	Token   int          `json:"token"`
	Worst   engine.Float `json:"worst"`
	Allowed engine.Float `json:"allowed"`
}

// HistBins is the number of bins of RowErrors.Hist.
const HistBins = 26

// HeatBuckets is the number of vocabulary buckets of RowErrors.Buckets.
const HeatBuckets = 40

// HistEdge returns the lower edge of histogram bin i >= 1: bins are half a
// decade wide from 1e-12 up, so bin 25 starts at 1e0.
func HistEdge(i int) float64 { return math.Pow(10, -12+float64(i-1)/2) }

// HistBin returns the bin of an absolute error e.
func HistBin(e float64) int {
	switch {
	case e == 0:
		return 0
	case math.IsNaN(e) || e >= 1:
		return HistBins - 1
	case e < HistEdge(1):
		return 1
	}
	b := 1 + int(math.Floor(2*(math.Log10(e)+12)))
	if b > HistBins-1 {
		b = HistBins - 1
	}
	return b
}

// RowDetail is one row in full, for the row page.
type RowDetail struct {
	Row   int       `json:"row"`
	Vocab int       `json:"vocab"`
	Op    engine.Op `json:"op"`
	// The row's resolved parameters.
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
	// Invalid says why the row has no distribution ("" when it has one).
	Invalid string `json:"invalid,omitempty"`
	// Probs names the probability outputs whose values Tokens carry, in order.
	Probs []OutputInfo `json:"probs"`
	// Tokens are the Top most probable tokens under the reference.
	Tokens []TokenDetail `json:"tokens"`
	// CDF is the cumulative reference mass (before filters) by rank,
	// sampled at up to a few hundred ranks.
	CDF []CDFPoint `json:"cdf"`
	// Cuts are where the filters cut the row.
	Cuts Cuts `json:"cuts"`
	// Worst lists the tokens with the greatest error of each probability
	// output, for outputs whose worst token is not among Tokens.
	Worst []TokenDetail `json:"worst,omitempty"`
	// Chosen are the tokens each token output picked for this row, by name.
	Chosen map[string]int64 `json:"chosen,omitempty"`
	// Samples holds the sample histograms of a sample row drawn many times.
	Samples *SampleDetail `json:"samples,omitempty"`
	// Spec holds the speculative laws and the trace of a spec_verify row.
	Spec *SpecDetail `json:"spec,omitempty"`
	// Ngram shows how an ngram_match row was drafted.
	Ngram *NgramDetail `json:"ngram,omitempty"`
}

// NgramDetail shows how the reference drafted one row of an ngram_match run
// (ref.NgramRows), beside every output's draft of the row.
type NgramDetail struct {
	// Prompt is input_ids[:input_ids_len], Generated pre_ids[:step_idx].
	Prompt    []int64 `json:"prompt"`
	Generated []int64 `json:"generated"`
	// MaxNgram is max_ngram_size; N the length of the n-gram that matched
	// (the last N generated tokens), 0 for none.
	MaxNgram int `json:"max_ngram_size"`
	N        int `json:"n"`
	// Source is where the leftmost match lies ("prompt" or "generated", ""
	// for none) and Start its index there.
	Source string `json:"source"`
	Start  int    `json:"start"`
	// Budget is the draft budget left when the row's turn came; Limit =
	// min(max_draft_tokens, Budget) is what the row could propose.
	Budget         int `json:"budget"`
	Limit          int `json:"limit"`
	MaxDraftTokens int `json:"max_draft_tokens"`
	// Reference is the reference draft, Drafts every output's (without
	// the -1 padding).
	Reference []int64      `json:"reference"`
	Drafts    []NamedDraft `json:"drafts"`
}

// NamedDraft is one output's draft of a row.
type NamedDraft struct {
	OutputInfo
	Tokens []int64 `json:"tokens"`
}

// TokenDetail is one token of a row.
type TokenDetail struct {
	Token int `json:"token"`
	// Rank is the token's place by reference probability, 1 for the most
	// probable.
	Rank int `json:"rank"`
	// Base is the softmax probability before filters, Ref the reference
	// probability the outputs are judged against (after filters).
	Base engine.Float `json:"base"`
	Ref  engine.Float `json:"ref"`
	// Class is "kept", "dropped" or "boundary".
	Class string `json:"class"`
	// Values holds each probability output's value (RowDetail.Probs order).
	Values []engine.Float `json:"values"`
	// Allowed is the error the strict tolerance allows at this token.
	Allowed engine.Float `json:"allowed"`
}

// CDFPoint is the cumulative reference mass of the Rank most probable tokens.
type CDFPoint struct {
	Rank int          `json:"rank"`
	Mass engine.Float `json:"mass"`
}

// Cuts are where a row's filters cut, in the terms the CDF chart draws.
type Cuts struct {
	// TopKRank is k when top-k is active, else 0.
	TopKRank int `json:"top_k_rank"`
	// TopPMass is top_p when top-p is active (else 0), TopPRank the number of
	// tokens that survive top-p.
	TopPMass float64 `json:"top_p_mass"`
	TopPRank int     `json:"top_p_rank"`
	// MinPProb is the probability below which min-p drops a token (0: off),
	// MinPRank the number of tokens at or above it.
	MinPProb float64 `json:"min_p_prob"`
	MinPRank int     `json:"min_p_rank"`
	// Kept is the number of tokens that survive every filter.
	Kept int `json:"kept"`
}

// formatFloat writes v the short way for forms and URLs.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
