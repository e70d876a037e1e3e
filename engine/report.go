package engine

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
	RuleFit        Rule = "fit"         // goodness of fit of many draws
	RuleAcceptance Rule = "acceptance"  // speculative acceptance against theory
	RuleExact      Rule = "exact"       // exact equality (ngram_match)
	RuleParameter  Rule = "parameter"   // a row made invalid by its parameters
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
	// Spec holds the statistics of a row's speculative trials.
	Spec *SpecStats `json:"spec,omitempty"`
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
	// Kind is what was judged: "probs", "tokens", "samples", "spec", "draft".
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
	Notices    []string       `json:"notices,omitempty"`
	// For `--semantics any`, Matches holds the verdict of every preset on
	// the dump's external outputs, and Semantics names the preset whose
	// judgement the report is (the first that passes). A run under one
	// preset says so in its notices.
	Semantics Semantics        `json:"semantics,omitempty"`
	Matches   []SemanticsMatch `json:"matches,omitempty"`
}
