package web

import "github.com/sampviz/sampviz/engine"

// SampleDetail is a sample row drawn many times, for the row page: how often
// each token was drawn by every output that drew many times, against the
// counts the reference distribution expects.
type SampleDetail struct {
	// Outputs are the outputs that drew many times (ours first), and
	// Draws[i] is how many draws output i made of this row.
	Outputs []OutputInfo `json:"outputs"`
	Draws   []int        `json:"draws"`
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
