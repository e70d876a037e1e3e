// Package explain describes one row of a run in full, for the row page and
// GET /api/runs/{id}/rows/{row}: the reference distribution with every
// output's values beside it, the CDF with the filter cuts, the sample
// histograms of a sampler drawn many times, the exact laws of chain
// speculative sampling with the stored trace, a draft tree with the laws at
// each node and the stored trace, how an n-gram row was drafted, and every
// logprobs output beside the reference log-softmax of its kind. It computes
// from engine/ref and never judges (engine/compare does) or formats for a
// page (web/view does).
package explain

import "github.com/sampviz/sampviz/engine"

// SampleDetail is a sample row drawn many times, for the row page: how often
// each token was drawn by every output that drew many times, against the
// counts the reference distribution expects.
type SampleDetail struct {
	// Outputs are the outputs that drew many times (ours first), and
	// Draws[i] is how many draws output i made of this row.
	Outputs []engine.OutputInfo `json:"outputs"`
	Draws   []int               `json:"draws"`
	// Tokens are the tokens the reference expects most often, most
	// probable first, then every token some output drew that the reference
	// gives no mass (Ref 0), by token id.
	Tokens []SampleToken `json:"tokens"`
	// Other pools every token not in Tokens (Token -1).
	Other SampleToken `json:"other"`
	// OutOfRange counts, per output, the draws outside [0, V): they are in
	// no bin.
	OutOfRange []int64 `json:"out_of_range"`
	// SameAsFirst[i] reports whether output i drew exactly the tokens the
	// first output drew, draw for draw (as the same seed and method must);
	// SameAsFirst[0] is false.
	SameAsFirst []bool `json:"same_as_first"`
}

// SampleToken is one bin of a sample histogram.
type SampleToken struct {
	// Token is the token id, or -1 for the pooled rest.
	Token int `json:"token"`
	// Ref is the reference probability (the pooled mass for the rest): an
	// output with N draws expects N·Ref of them here.
	Ref engine.Float `json:"ref"`
	// Class is "kept", "boundary" or "dropped" ("" for the pooled rest): a
	// boundary token may be drawn although Ref is 0.
	Class string `json:"class,omitempty"`
	// Observed counts the draws of each output (SampleDetail.Outputs order).
	Observed []int64 `json:"observed"`
}

// SpecDetail is a spec_verify row for the row page: the exact laws of chain
// speculative sampling on it (engine/ref), and our backend's trace of its
// first trials, step by step.
type SpecDetail struct {
	// K is the number of draft positions; Drafts are the draft tokens.
	K      int     `json:"k"`
	Drafts []int64 `json:"drafts"`
	// OneHot says the dump has no draft_probs: q is one-hot at each draft.
	OneHot bool `json:"one_hot"`
	// Invalid says why the laws are incomplete ("" when they are not).
	Invalid string `json:"invalid,omitempty"`
	// Accept are the acceptance probabilities a_i = min(1, p_i(x_i)/q_i(x_i))
	// (K entries), Emitted the law of the emitted length (K+1 entries) and
	// MeanAcceptanceLength its mean plus one (vLLM's mean acceptance length).
	Accept               []engine.Float `json:"accept"`
	Emitted              []engine.Float `json:"emitted"`
	MeanAcceptanceLength engine.Float   `json:"mean_acceptance_length"`
	// Positions describe p_i, q_i and the residual at each position
	// (K+1 entries; the last is the bonus position, p_K only).
	Positions []SpecPosition `json:"positions"`
	// Trace is our backend's trace of the row; NoTrace says why there is
	// none ("" when there is one).
	Trace   *RowTrace `json:"trace,omitempty"`
	NoTrace string    `json:"no_trace,omitempty"`
}

// SpecPosition is one position of a spec_verify row, on the tokens worth
// drawing: the most probable under p, q and the residual, the draft, and
// every token the trace resampled there.
type SpecPosition struct {
	Position int `json:"position"`
	// Invalid says why the target has no distribution here.
	Invalid string      `json:"invalid,omitempty"`
	Tokens  []SpecToken `json:"tokens"`
}

// SpecToken is one token at one position of a spec_verify row.
type SpecToken struct {
	Token int `json:"token"`
	// P is the target probability p_i, Q the draft probability q_i (1 at a
	// one-hot draft), Residual the normalised residual max(p_i - q_i, 0)
	// (0 at the bonus position).
	P        engine.Float `json:"p"`
	Q        engine.Float `json:"q"`
	Residual engine.Float `json:"residual"`
}

// RowTrace is one row's part of an engine.SpecTrace: Step[t][i] is
// position i of trial t (i = K is the bonus position).
type RowTrace struct {
	Trials int                 `json:"trials"`
	Steps  int                 `json:"steps"`
	Step   [][]engine.SpecStep `json:"step"`
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
	Probs []engine.OutputInfo `json:"probs"`
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
	// Tree holds the draft tree, its laws and the trace of a
	// spec_tree_verify row.
	Tree *TreeDetail `json:"tree,omitempty"`
	// Ngram shows how an ngram_match row was drafted.
	Ngram *NgramDetail `json:"ngram,omitempty"`
	// Logprobs holds every logprobs output's values on the row beside the
	// reference log-softmax of its kind.
	Logprobs []LogprobsDetail `json:"logprobs,omitempty"`
	// Text is the visible text of the token ids above, when the run has a
	// tokenizer (NameTokens); ids it lacks are shown bare.
	Text map[int64]string `json:"text,omitempty"`
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
	// Semantics is the run's ngram_semantics; under FastDeploy's rules
	// Budget is threshold - sum - the tokens reserved for later rows,
	// Offset the column the draft starts at, SeqLen the row's
	// seq_lens_this_time after the call, and Why why the row drafts
	// nothing ("" when it was searched).
	Semantics string `json:"ngram_semantics,omitempty"`
	Offset    int    `json:"offset,omitempty"`
	SeqLen    int64  `json:"seq_lens_this_time,omitempty"`
	Why       string `json:"why,omitempty"`
	// Reference is the reference draft, Drafts every output's (without
	// the -1 padding).
	Reference []int64      `json:"reference"`
	Drafts    []NamedDraft `json:"drafts"`
}

// NamedDraft is one output's draft of a row.
type NamedDraft struct {
	engine.OutputInfo
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
	// Outputs are each probability output's own cut (RowDetail.Probs
	// order), drawn beside the reference's: a filter applied on the wrong
	// mass shows as an output that keeps more or fewer tokens.
	Outputs []OutputCut `json:"outputs,omitempty"`
}

// OutputCut is where one probability output cuts the row: Kept tokens it
// gives mass, the last of them at reference rank Rank (0 when it gives
// none), with Mass the reference mass before filters up to that rank.
type OutputCut struct {
	Name string       `json:"name"`
	Kept int          `json:"kept"`
	Rank int          `json:"rank"`
	Mass engine.Float `json:"mass"`
}
