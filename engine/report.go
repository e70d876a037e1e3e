package engine

import (
	"fmt"
	"strconv"
)

// Tolerance is an allclose bound: |out - ref| <= Atol + Rtol*|ref|.
type Tolerance struct {
	Atol float64 `json:"atol"`
	Rtol float64 `json:"rtol"`
}

// Allows reports whether out is within the tolerance of ref.
func (t Tolerance) Allows(out, ref float64) bool {
	d := out - ref
	if d < 0 {
		d = -d
	}
	if ref < 0 {
		ref = -ref
	}
	return d <= t.Atol+t.Rtol*ref
}

// Tolerances are the bounds a judgement uses. Softmax-like outputs pass when
// they are within Strict of the strict reference or within Native of the
// native one (DESIGN.md: two references).
type Tolerances struct {
	// Strict bounds the distance to the float64 reference on the exact inputs.
	Strict Tolerance `json:"strict"`
	// Native bounds the distance to the reference whose scaled logits were
	// first rounded to the input dtype.
	Native Tolerance `json:"native"`
	// PValue is the goodness-of-fit threshold of the statistical checks.
	PValue float64 `json:"p_value"`
}

// Severity says whether a finding fails its row.
type Severity string

const (
	Violation Severity = "violation" // fails the row
	Note      Severity = "note"      // worth reading, not a failure
)

// Rule names the rule a finding is about, for filtering and charts.
type Rule string

// The rules the judges apply.
const (
	RuleTolerance  Rule = "tolerance"   // elementwise allclose
	RuleNaN        Rule = "nan"         // NaN in the output, or in the input row
	RuleInf        Rule = "inf"         // Inf in the output
	RuleMasked     Rule = "masked"      // every input logit is -inf
	RuleRowSum     Rule = "row_sum"     // a distribution that does not sum to 1
	RuleSupport    Rule = "support"     // tokens kept by one side and dropped by the other
	RuleTokenRange Rule = "token_range" // a token id outside [0, V)
	RuleToken      Rule = "token"       // a wrong token (argmax, exact ops)
	RuleFragile    Rule = "fragile"     // a near-tie at the top
	RuleBoundary   Rule = "boundary"    // a tie or near-tie at a filter boundary
	RuleStructure  Rule = "structure"   // speculative output layout rules
	RuleCounter    Rule = "counter"     // spec_emitted reports the accepted counter
	RuleFit        Rule = "fit"         // goodness of fit of many draws
	RuleAcceptance Rule = "acceptance"  // speculative acceptance against theory
	RuleExact      Rule = "exact"       // exact equality (ngram_match)
	RuleParameter  Rule = "parameter"   // a row made invalid by its parameters
	RulePadding    Rule = "padding"     // a padded lane written into, or real rows shifted by the padding
	RuleAgreement  Rule = "agreement"   // outputs that declare the same seed and offset drew differently
	RuleTopN       Rule = "top_n"       // top-N logprobs: not the reference's N most probable tokens, repeated or unsorted
)

// Finding is one thing the judge says about a row.
type Finding struct {
	Rule     Rule     `json:"rule"`
	Severity Severity `json:"severity"`
	// Message is one sentence a person reads once, starting with "row N:".
	Message string `json:"message"`
	// Token is the token the finding is about, or -1.
	Token int `json:"token"`
}

// ErrorStats summarises elementwise errors (Float, since NaN outputs give NaN
// errors). Index is the element (token within
// a row, or row*V + token for a run) of the greatest error.
type ErrorStats struct {
	Max    Float `json:"max"`
	Mean   Float `json:"mean"`
	Median Float `json:"median"`
	P90    Float `json:"p90"`
	P95    Float `json:"p95"`
	P99    Float `json:"p99"`
	Index  int   `json:"index"`
}

// Drift compares a float output with one reference (strict or native).
type Drift struct {
	// Reference is "strict" or "native".
	Reference string    `json:"reference"`
	Tolerance Tolerance `json:"tolerance"`
	// Elements is the number of elements compared.
	Elements      int        `json:"elements"`
	Abs           ErrorStats `json:"abs"`
	Rel           ErrorStats `json:"rel"`
	Mismatched    int        `json:"mismatched"`
	MismatchShare Float      `json:"mismatch_share"`
	// RowSumError is |sum(out) - 1| (the greatest over rows for a run).
	RowSumError Float `json:"row_sum_error"`
	// KL is KL(ref || out) in nats; TV is the total variation distance.
	KL Float `json:"kl"`
	TV Float `json:"tv"`
	// ArgmaxAgree counts rows whose output argmax is a reference argmax.
	ArgmaxAgree int `json:"argmax_agree"`
	NaN         int `json:"nan"`
	Inf         int `json:"inf"`
	// SupportMissing counts tokens the reference keeps and the output zeroes,
	// MissingMass is their reference mass; SupportExtra and ExtraMass are the
	// tokens the output keeps that the reference drops.
	SupportMissing int   `json:"support_missing"`
	MissingMass    Float `json:"missing_mass"`
	SupportExtra   int   `json:"support_extra"`
	ExtraMass      Float `json:"extra_mass"`
	// MinAtol is the least atol that passes at this Rtol; MinRtol the least
	// rtol that passes at this Atol (+Inf when no rtol would).
	MinAtol Float `json:"min_atol"`
	MinRtol Float `json:"min_rtol"`
}

// RowReport is the judgement of one row of one output.
type RowReport struct {
	Row  int  `json:"row"`
	Pass bool `json:"pass"`
	// Padding marks a padded lane of the batch (Run.Padding): it is not
	// judged against the reference; only the output's fill is checked.
	Padding bool `json:"padding,omitempty"`
	// InvalidInput marks a row whose inputs give no distribution (NaN or
	// +Inf logits, every token masked, a parameter out of range): its
	// violation is the input's, whatever the output holds.
	InvalidInput bool `json:"invalid_input,omitempty"`
	// Violations holds the messages of the violation findings, in order.
	Violations []string  `json:"violations"`
	Findings   []Finding `json:"findings,omitempty"`
	// Strict and Native are set for float outputs.
	Strict *Drift `json:"strict,omitempty"`
	Native *Drift `json:"native,omitempty"`
	// Matched is "strict" or "native": the reference the row passed against.
	Matched string `json:"matched,omitempty"`
	// Token and RefToken are set for single-token outputs.
	Token    *int64 `json:"token,omitempty"`
	RefToken *int64 `json:"ref_token,omitempty"`
	// PValue is set for rows judged statistically: the smallest p-value of
	// the row's tests (Fit, or the speculative checks in Spec).
	PValue *float64 `json:"p_value,omitempty"`
	// Fit is the goodness of fit of a row's many draws (samples).
	Fit *Fit `json:"fit,omitempty"`
	// Spec holds the statistics of a row's speculative trials (for a
	// draft tree: by depth, and by position of the emitted path).
	Spec *SpecStats `json:"spec,omitempty"`
	// Tree holds what a draft tree's trials say beyond Spec.
	Tree *TreeStats `json:"tree,omitempty"`
	// Flip is set on a row of a logits_gate output whose top-1 token is not
	// the golden's.
	Flip *Flip `json:"flip,omitempty"`
}

// Flip is a row whose top-1 token differs between two sides: an output and
// its reference, or two outputs.
type Flip struct {
	Row int `json:"row"`
	// Token is the output's top-1 (the second output's, between two),
	// RefToken the reference's (the first output's).
	Token    int `json:"token"`
	RefToken int `json:"ref_token"`
	// Margin is how far the reference logits put Token below RefToken (the
	// golden logits of logits_gate, the input logits of argmax).
	Margin Float `json:"margin"`
	// Fragile is set when the margin is within the tolerance: a near-tie
	// that rounding may flip. A flip that is not fragile is real.
	Fragile bool `json:"fragile"`
}

// GateStats summarise one output of a logits_gate run over its rows.
type GateStats struct {
	// MeanKL and MaxKL are the mean and the greatest KL divergence of the
	// golden distribution from the output's at T = 1, over the rows that
	// have both (MaxKLRow is the row of the greatest).
	MeanKL   Float `json:"mean_kl"`
	MaxKL    Float `json:"max_kl"`
	MaxKLRow int   `json:"max_kl_row"`
	// Flips lists every row whose top-1 differs from the golden's; Real and
	// Fragile count them by class.
	Flips   []Flip `json:"flips"`
	Real    int    `json:"real"`
	Fragile int    `json:"fragile"`
}

// LogprobsInfo says how a logprobs output was judged (docs/SEMANTICS.md
// "Logprobs").
type LogprobsInfo struct {
	// Kind is "raw" or "processed": the reference it was judged against.
	Kind LogprobsKind `json:"kind"`
	// TopN is N for a top-N output (values and token ids), 0 for the full
	// [B, V] log probabilities.
	TopN int `json:"top_n"`
}

// Fit is the goodness of fit of N draws of one row against the reference
// distribution (engine/stats).
type Fit struct {
	Draws int `json:"draws"`
	// Test is "G" or "chi-square".
	Test      string `json:"test"`
	Statistic Float  `json:"statistic"`
	DF        int    `json:"df"`
	// Bins is the number of bins after sparse expected counts were pooled.
	Bins   int   `json:"bins"`
	PValue Float `json:"p_value"`
	// TV is the total variation between frequencies and probabilities;
	// TVBound the value a correct sampler stays under at 99% for this N.
	TV      Float `json:"tv"`
	TVBound Float `json:"tv_bound"`
	// Cosine is the cosine similarity of frequencies to probabilities.
	Cosine Float `json:"cosine"`
	// ZeroMassDraws counts draws of tokens the reference gives no mass.
	ZeroMassDraws int `json:"zero_mass_draws"`
	// DetectableTV is the smallest total-variation bias these draws catch
	// 9 times in 10 at the run's p-value threshold, whatever its shape
	// (stats.Fit.DetectableTV; NaN with fewer than two bins).
	DetectableTV Float `json:"detectable_tv"`
	// Diagnosis names the class of sampler bug a failing row's draws fit
	// (docs/SEMANTICS.md "Diagnoses": tie_collapse, argmax_fallback,
	// top_p_mass, temperature_twice, temperature_place, min_p_pool,
	// min_p_clamp), "" when none does.
	Diagnosis string `json:"diagnosis,omitempty"`
}

// Power says how small a bias an output's draws catch over its rows: the
// weakest row's DetectableTV (every row catches a bias of TV at least this
// large 9 times in 10) and the strongest's.
type Power struct {
	// TV is the largest DetectableTV over the rows, at Row; Best the
	// smallest.
	TV   Float `json:"tv"`
	Row  int   `json:"row"`
	Best Float `json:"best"`
	// Probability is the chance of catching such a bias (0.9).
	Probability Float `json:"probability"`
	// Draws is the draws a row of Row made (a later field). Where they are
	// more than DefaultDraws, BaselineTV is what DefaultDraws draws of Row
	// would catch at the same threshold: TV·sqrt(Draws/DefaultDraws), the
	// bias caught shrinking with the square root of the draws (the bins
	// of Row's fit kept); 0 otherwise.
	Draws      int   `json:"draws,omitempty"`
	BaselineTV Float `json:"baseline_tv,omitempty"`
}

// Gain says what the draws buy over DefaultDraws, "10^7 draws a row catch
// a total-variation bias of 0.0011; 10^5 would catch 0.011", or "" when
// they are not more.
func (p *Power) Gain() string {
	if p == nil || p.BaselineTV <= 0 || p.Draws <= DefaultDraws {
		return ""
	}
	return fmt.Sprintf("%s draws a row catch a total-variation bias of %s; %s would catch %s",
		DrawsText(p.Draws), FormatSig(float64(p.TV), 2), DrawsText(DefaultDraws), FormatSig(float64(p.BaselineTV), 2))
}

// DrawsText writes a number of draws as a power of ten where it is one
// ("10^7"), else in digits.
func DrawsText(n int) string {
	e, m := 0, n
	for m >= 10 && m%10 == 0 {
		m /= 10
		e++
	}
	if m == 1 && e >= 2 {
		return fmt.Sprintf("10^%d", e)
	}
	return strconv.Itoa(n)
}

// PositionRate is the measured acceptance at one draft position beside its
// theoretical rate. Only trials that accepted every earlier position count.
type PositionRate struct {
	Position int   `json:"position"`
	Reached  int   `json:"reached"`
	Accepted int   `json:"accepted"`
	Rate     Float `json:"rate"`
	// Lo and Hi bound Rate with a 95% Wilson interval.
	Lo     Float `json:"lo"`
	Hi     Float `json:"hi"`
	Theory Float `json:"theory"`
	PValue Float `json:"p_value"`
}

// SpecStats are the statistics of repeated speculative trials, for one row
// or pooled over a run's rows.
type SpecStats struct {
	Trials    int            `json:"trials"`
	Positions []PositionRate `json:"positions"`
	// Emitted[j] counts trials whose accepted prefix had length j (0..K);
	// EmittedTheory is its exact distribution.
	Emitted       []int   `json:"emitted"`
	EmittedTheory []Float `json:"emitted_theory"`
	EmittedPValue Float   `json:"emitted_p_value"`
	// MeanAcceptanceLength is 1 + accepted/drafts as vLLM reports it, beside
	// its expected value.
	MeanAcceptanceLength       Float `json:"mean_acceptance_length"`
	TheoryMeanAcceptanceLength Float `json:"theory_mean_acceptance_length"`
	// Lossless[j] is the fit of the tokens at output position j (among the
	// trials that reached it) to what exact speculative sampling gives.
	Lossless []Fit `json:"lossless,omitempty"`
	// Drafts[i] is the fit of the drafts at position i, drawn anew for
	// every trial, to draft_probs (set only for per-trial drafts).
	Drafts []Fit `json:"drafts,omitempty"`
}

// TreeStats are the statistics of a draft tree's trials beyond SpecStats,
// whose Positions are then the acceptance by depth (among the trials that
// accepted d tokens, how many accepted one more), Emitted the histogram of
// accepted tokens and Lossless the fits of the tokens at each position of
// the emitted path. For one row, or pooled over a run's rows (trial
// weighted, without Reached).
type TreeStats struct {
	Trials int `json:"trials"`
	// Reached[n] counts the trials whose accepted path holds node n;
	// ReachTheory[n] is its exact probability (the root: every trial).
	Reached     []int   `json:"reached,omitempty"`
	ReachTheory []Float `json:"reach_theory,omitempty"`
	// Accepted is the mean number of tokens a trial accepted, Theory what
	// the lossless rule gives, Excess = Accepted/Theory - 1 (0 when Theory
	// is 0): an engine with relaxed thresholds accepts more.
	Accepted Float `json:"accepted"`
	Theory   Float `json:"theory"`
	Excess   Float `json:"excess"`
	// FirstTV is the total variation between the first emitted tokens and
	// their exact law, FirstTVBound what a lossless verifier stays under at
	// 99% for this many trials. TargetTV is the exact law's own distance
	// from the target at the root: 0 for one-hot drafts (a lossless tree
	// verifier then emits the target itself), above 0 for draft
	// distributions, whose fixed drafts the law is conditioned on.
	FirstTV      Float `json:"first_tv"`
	FirstTVBound Float `json:"first_tv_bound"`
	TargetTV     Float `json:"target_tv"`
}

// AddFinding appends f, keeping Violations and Pass in step with it.
func (r *RowReport) AddFinding(f Finding) {
	r.Findings = append(r.Findings, f)
	if f.Severity == Violation {
		r.Violations = append(r.Violations, f.Message)
		r.Pass = false
	}
}

// OutputReport is the judgement of one output over every row.
type OutputReport struct {
	// Name is "cpu"/"cuda" for ours, the tensor name for external outputs.
	Name     string `json:"name"`
	External bool   `json:"external"`
	// Kind is what was judged: "probs", "logprobs", "tokens", "samples", "spec",
	// "tree", "draft".
	Kind       string `json:"kind"`
	Pass       bool   `json:"pass"`
	FailedRows int    `json:"failed_rows"`
	// Strict and Native summarise the drift over all rows (float outputs).
	Strict *Drift      `json:"strict,omitempty"`
	Native *Drift      `json:"native,omitempty"`
	Rows   []RowReport `json:"rows"`
	// Violations are failures of the output as a whole that belong to no
	// single row (pooled acceptance by position, the spec_accepted counter,
	// different seeds drawing the same tokens); any of them fails the output.
	Violations []string `json:"violations,omitempty"`
	// Spec pools the speculative statistics of every row (acceptance by
	// position, emitted lengths) for the run page.
	Spec *SpecStats `json:"spec,omitempty"`
	// Gate summarises a logits_gate output: KL and top-1 flips.
	Gate *GateStats `json:"gate,omitempty"`
	// Tree pools a draft tree output's rows: accepted tokens against the
	// lossless rule, and the first token's distance from its law.
	Tree *TreeStats `json:"tree,omitempty"`
	// Logprobs says what a logprobs output was judged as.
	Logprobs *LogprobsInfo `json:"logprobs,omitempty"`
	// Power is set for samples outputs: the smallest bias their draws catch.
	Power *Power `json:"power,omitempty"`
	// Notes are run-level remarks (for example, how many failures chance alone
	// would give at the p-value threshold).
	Notes  []string `json:"notes,omitempty"`
	Timing *Timing  `json:"timing,omitempty"`
}

// Report is the judgement of a run: every output against the reference.
type Report struct {
	Pass       bool           `json:"pass"`
	Op         Op             `json:"op"`
	Source     string         `json:"source"`
	Rows       int            `json:"rows"`
	Vocab      int            `json:"vocab"`
	DType      DType          `json:"dtype"`
	Device     *Device        `json:"device,omitempty"`
	Tolerances Tolerances     `json:"tolerances"`
	Outputs    []OutputReport `json:"outputs"`
	// Padding lists the padded lanes of the batch (RowReport.Padding).
	Padding []int `json:"padding,omitempty"`
	// Modes puts side by side the outputs of each kind that has more than
	// one, in the order of Outputs.
	Modes []ModeTable `json:"modes,omitempty"`
	// Agreement compares every pair of outputs of one kind.
	Agreement []Agreement `json:"agreement,omitempty"`
	Notices   []string    `json:"notices,omitempty"`
	// For `--semantics any`, Matches holds the verdict of every preset on
	// the dump's external outputs, and Semantics names the preset whose
	// judgement the report is (the first that passes). A run under one
	// preset says so in its notices.
	Semantics Semantics        `json:"semantics,omitempty"`
	Matches   []SemanticsMatch `json:"matches,omitempty"`
}

// ModeTable puts side by side the outputs of one kind, ours included: one
// line per output with its verdict, its error against the reference and its
// greatest difference from each other output (pegainfer's gate table,
// mode | mean | P99 | max, from one dump).
type ModeTable struct {
	Kind string `json:"kind"`
	// Metric says what the lines' Mean, P99 and Max measure: "abs"
	// (|output - reference| of probabilities) or "logit" (|Δlogit| against
	// the golden logits); "" for token kinds, whose lines count Mismatches.
	Metric string     `json:"metric"`
	Lines  []ModeLine `json:"lines"`
	// Summary says in words which outputs pass and why the others fail.
	Summary string `json:"summary"`
}

// ModeLine is one output of a mode table.
type ModeLine struct {
	Output   string `json:"output"`
	External bool   `json:"external"`
	Pass     bool   `json:"pass"`
	// Rows counts the rows judged (padded lanes aside), FailedRows those
	// that fail, padded lanes written into included.
	Rows       int `json:"rows"`
	FailedRows int `json:"failed_rows"`
	// Mean, P99 and Max summarise the metric over every element (float
	// kinds): the run-level strict drift.
	Mean *Float `json:"mean,omitempty"`
	P99  *Float `json:"p99,omitempty"`
	Max  *Float `json:"max,omitempty"`
	// KL is the mean KL divergence of the golden distribution from the
	// output's (logits).
	KL *Float `json:"kl,omitempty"`
	// Mismatches counts the rows whose tokens the reference rules out (a
	// violation of the token, token_range or support rules): argmax tokens
	// that are no tied maximum, draws the reference gives no mass (token
	// kinds).
	Mismatches *int `json:"mismatches,omitempty"`
	// RealFlips and FragileFlips count the top-1 flips (logits).
	RealFlips    *int `json:"real_flips,omitempty"`
	FragileFlips *int `json:"fragile_flips,omitempty"`
	// Against holds the difference from each other output of the table, in
	// table order.
	Against []ModeDiff `json:"against"`
}

// ModeDiff is how far one output of a mode table is from another.
type ModeDiff struct {
	Output string `json:"output"`
	// Max is the greatest elementwise |difference| (float kinds).
	Max *Float `json:"max,omitempty"`
	// Differ counts the rows that differ (token kinds).
	Differ *int `json:"differ,omitempty"`
	// Row is the row of Max, or the first row that differs (-1: none).
	Row int `json:"row"`
}

// Agreement compares two outputs of one kind row by row
// (docs/SEMANTICS.md "Agreement between outputs").
type Agreement struct {
	Kind string `json:"kind"`
	// A and B name the outputs, A first in report order.
	A string `json:"a"`
	B string `json:"b"`
	// Rule is what is asked of the pair: "same_draws" (seeded draws whose
	// modes declare the same seed and offset must be identical: each row
	// where they are not fails in B), "draws" (draws not declared to share
	// a seed: compared, never failed), "argmax" (top-1 flips between the
	// two, fragile or real), "drift" (probabilities or logits: how far
	// apart elementwise).
	Rule string `json:"rule"`
	// Compared counts the rows compared (real rows, and for same_draws
	// those where both declare the same seed and offset), Agree those where
	// the two are identical.
	Compared int `json:"compared"`
	Agree    int `json:"agree"`
	// FirstRow and FirstDraw say where the two first part (-1 when they
	// never do): the draw is the element of the row (a sample, a spec
	// position k, or trial t's position k as t·(K+1)+k).
	FirstRow  int `json:"first_row"`
	FirstDraw int `json:"first_draw"`
	// Flips lists the rows whose top-1 tokens differ (argmax, logits),
	// each fragile or real by the reference logits at the two tokens.
	Flips []Flip `json:"flips,omitempty"`
	// MaxAbs is the greatest elementwise |A - B| (drift), at MaxRow and
	// MaxToken; MeanAbs the mean over every element compared.
	MaxAbs   *Float `json:"max_abs,omitempty"`
	MaxRow   int    `json:"max_row"`
	MaxToken int    `json:"max_token"`
	MeanAbs  *Float `json:"mean_abs,omitempty"`
	// Pass is false when the pair breaks its rule: same_draws that part,
	// or a real flip.
	Pass bool `json:"pass"`
	// Message says it in one sentence.
	Message string `json:"message"`
}
