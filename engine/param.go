package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParamScope says where a parameter's value comes from.
type ParamScope uint8

const (
	// PerRow parameters are dump tensors holding one value per row, or one
	// value for every row ([] or [B]).
	PerRow ParamScope = iota
	// RunWide parameters are metadata keys of the dump.
	RunWide
	// Work parameters say how our backend runs (which op, which sampler, how
	// many draws or trials); a person sets them, never a dump's tensors.
	Work
)

// ParamKind is how a parameter's value is written.
type ParamKind uint8

const (
	KindFloat  ParamKind = iota
	KindInt              // a whole number in an int64
	KindSeed             // a 64-bit pattern: any int64, or a uint64
	KindChoice           // one of Param.Choices
)

// Param is one entry of the parameter table: a run parameter's names, its
// default, and its range with the one sentence that states it. The dump
// reader, `sampviz check`'s flags, the web forms and the backends all check
// a value here, so it is refused in the same words wherever it comes from.
type Param struct {
	// Name is the DUMPS.md name (the tensor or metadata key), the JSON key
	// of Overrides and the web form's field.
	Name string
	// Flag is the command-line flag, without its dashes.
	Flag  string
	Scope ParamScope
	Kind  ParamKind
	// Default is the value when neither the dump nor a person gives one,
	// as it is written ("" for Work parameters whose default depends on
	// the op).
	Default string
	// Rule says what a valid value is, after "must be": "in (0, 1] (1
	// means off)".
	Rule string
	// Usage is the one line of help beside the flag and the form field.
	Usage   string
	Choices []string

	float   func(float64) bool
	integer func(int64) bool
	// field returns the pointer to this parameter's field in o.
	field func(o *Overrides) any
}

// The bounds of the Work parameters: enough draws and trials for the
// statistics to see small biases, small enough that one run cannot take
// the machine's memory (outputs hold rows × draws tokens) or its time.
// MaxDraws bounds a backend that counts its draws (DrawCounter: the
// counts hold rows × V integers whatever the draws); MaxKeptDraws bounds
// the draws a backend returns one by one (the CPU backend, keep_draws).
// MaxCountedDraws bounds a counted run's rows × draws: the cuda worker's
// watchdog (60 s) takes a longer launch for a hang and restarts the worker,
// and an H100 counts about 2.4 × 10^10 draws a second (docs/PERF.md's
// current table, sample counts; a top-k row about 3.5 × 10^10), so 2 × 10^11
// draws take about 8 s, well inside it on the slowest rows we measured.
const (
	MaxDraws        = 1_000_000_000
	MaxCountedDraws = 200_000_000_000
	MaxKeptDraws    = 1_000_000
	MaxTrials       = 100_000
	// MaxNgramSetting bounds max_ngram_size and max_draft_tokens: each
	// sizes a buffer of the kernels.
	MaxNgramSetting = 1 << 16
)

// params is the parameter table, in the order forms and help list them.
var params = []*Param{
	{
		Name: "temperature", Flag: "temperature", Scope: PerRow, Kind: KindFloat, Default: "1",
		Rule:  "a finite number >= 0 in float32 (0 means greedy)",
		Usage: "temperature of every row (0: greedy)",
		// Kernels receive it as float32: a value that overflows there is
		// no temperature.
		float: func(v float64) bool { return v >= 0 && !math.IsInf(float64(float32(v)), 0) },
		field: func(o *Overrides) any { return &o.Temperature },
	},
	{
		Name: "top_k", Flag: "top-k", Scope: PerRow, Kind: KindInt, Default: "0",
		Rule:    "an integer in [0, 2147483647] (0 means off)",
		Usage:   "top-k of every row (0: off)",
		integer: func(v int64) bool { return v >= 0 && v <= math.MaxInt32 },
		field:   func(o *Overrides) any { return &o.TopK },
	},
	{
		Name: "top_p", Flag: "top-p", Scope: PerRow, Kind: KindFloat, Default: "1",
		Rule:  "in (0, 1] (1 means off), and above 0 in float32",
		Usage: "top-p of every row (1: off)",
		float: func(v float64) bool { return v > 0 && v <= 1 && float32(v) > 0 },
		field: func(o *Overrides) any { return &o.TopP },
	},
	{
		Name: "min_p", Flag: "min-p", Scope: PerRow, Kind: KindFloat, Default: "0",
		Rule:  "in [0, 1] (0 means off)",
		Usage: "min-p of every row (0: off)",
		float: func(v float64) bool { return v >= 0 && v <= 1 },
		field: func(o *Overrides) any { return &o.MinP },
	},
	{
		Name: "seed", Flag: "seed", Scope: PerRow, Kind: KindSeed, Default: "0",
		Rule: "an integer (a negative int64 stands for the uint64 of the same bits)",
		// torch has no uint64, so a negative int64 seed stands for the
		// seed with the same bits.
		Usage:   "RNG seed of every row",
		integer: func(int64) bool { return true },
		field:   func(o *Overrides) any { return &o.Seed },
	},
	{
		Name: "offset", Flag: "offset", Scope: PerRow, Kind: KindInt, Default: "0",
		Rule:    "an integer >= 0",
		Usage:   "RNG counter offset of every row",
		integer: func(v int64) bool { return v >= 0 },
		field:   func(o *Overrides) any { return &o.Offset },
	},
	{
		// A preset sets filter_order, top_k_ties and temperature_order
		// (engine/semantics.go); it has no default.
		Name: "semantics", Flag: "semantics", Scope: RunWide, Kind: KindChoice,
		Choices: semanticsChoices(),
		Usage:   "an engine's filter chain (hf, vllm, sglang, flashinfer, llamacpp, tokenspeed; docs/SEMANTICS.md), or any: judge the dump's outputs under every preset and say which pass",
		field:   func(o *Overrides) any { return &o.Semantics },
	},
	{
		Name: "filter_order", Flag: "filter-order", Scope: RunWide, Kind: KindChoice, Default: string(TopKFirst),
		Choices: []string{string(TopKFirst), string(Joint), string(MinPFirst)},
		Usage:   "how top-k, top-p and min-p combine: top_k_first (top-p on the top-k mass), joint (top-p on the whole mass) or min_p_first (min-p first, top-p on what min-p and top-k keep)",
		field:   func(o *Overrides) any { return &o.FilterOrder },
	},
	{
		Name: "top_k_ties", Flag: "top-k-ties", Scope: RunWide, Kind: KindChoice, Default: string(TiesKeep),
		Choices: []string{string(TiesKeep), string(TiesLowestIndex), string(TiesAny)},
		Usage:   "tokens tied with the k-th: keep (all survive), lowest_index (exactly k, lowest indices first) or any (exactly k, any of the tied)",
		field:   func(o *Overrides) any { return &o.TopKTies },
	},
	{
		Name: "temperature_order", Flag: "temperature-order", Scope: RunWide, Kind: KindChoice, Default: string(TemperatureFirst),
		Choices: []string{string(TemperatureFirst), string(TemperatureLast)},
		Usage:   "where the temperature applies: first (the filters see softmax(x/T)) or last (the filters see softmax(x), then T rescales the survivors)",
		field:   func(o *Overrides) any { return &o.TemperatureOrder },
	},
	{
		Name: "logprobs_kind", Flag: "logprobs-kind", Scope: RunWide, Kind: KindChoice, Default: string(LogprobsRaw),
		Choices: []string{string(LogprobsRaw), string(LogprobsProcessed)},
		Usage:   "what the dump's logprobs are: raw (log-softmax of the logits at temperature 1, before temperature and filters; vLLM's default) or processed (after temperature and filters, -inf where a filter drops a token)",
		field:   func(o *Overrides) any { return &o.LogprobsKind },
	},
	{
		Name: "max_ngram_size", Flag: "max-ngram-size", Scope: RunWide, Kind: KindInt, Default: "3",
		Rule:    fmt.Sprintf("an integer in [1, %d]", MaxNgramSetting),
		Usage:   "n-gram drafting: the longest n-gram tried",
		integer: func(v int64) bool { return v >= 1 && v <= MaxNgramSetting },
		field:   func(o *Overrides) any { return &o.MaxNgramSize },
	},
	{
		Name: "max_draft_tokens", Flag: "max-draft-tokens", Scope: RunWide, Kind: KindInt, Default: "8",
		Rule:    fmt.Sprintf("an integer in [1, %d]", MaxNgramSetting),
		Usage:   "n-gram drafting: tokens proposed per row",
		integer: func(v int64) bool { return v >= 1 && v <= MaxNgramSetting },
		field:   func(o *Overrides) any { return &o.MaxDraftTokens },
	},
	{
		Name: "threshold", Flag: "threshold", Scope: RunWide, Kind: KindInt, Default: "1024",
		Rule:    "an integer in [0, 2147483647]",
		Usage:   "n-gram drafting: draft tokens shared across the batch",
		integer: func(v int64) bool { return v >= 0 && v <= math.MaxInt32 },
		field:   func(o *Overrides) any { return &o.Threshold },
	},
	{
		Name: "ngram_semantics", Flag: "ngram-semantics", Scope: RunWide, Kind: KindChoice, Default: string(NgramSampviz),
		Choices: []string{string(NgramSampviz), string(NgramFastDeploy), string(NgramFastDeployHybrid)},
		Usage:   "n-gram drafting: whose rule: sampviz (one budget spent in row order), fastdeploy (FastDeploy's ngram_match: seq_lens inputs, drafts from offset 1) or fastdeploy_hybrid (FastDeploy's hybrid_mtp_ngram: drafts after the MTP tokens)",
		field:   func(o *Overrides) any { return &o.NgramSemantics },
	},
	{
		Name: "min_ngram_size", Flag: "min-ngram-size", Scope: RunWide, Kind: KindInt, Default: "1",
		Rule:    fmt.Sprintf("an integer in [1, %d]", MaxNgramSetting),
		Usage:   "n-gram drafting: the shortest n-gram tried (ngram_semantics fastdeploy_hybrid)",
		integer: func(v int64) bool { return v >= 1 && v <= MaxNgramSetting },
		field:   func(o *Overrides) any { return &o.MinNgramSize },
	},
	{
		Name: "valid_rows", Flag: "valid-rows", Scope: RunWide, Kind: KindInt, Default: "0",
		Rule:    "an integer in [0, 2147483647] (0 means every row is real)",
		Usage:   "padded batch: the number of real rows at the front; the rows after them are padding, never judged (0: every row is real)",
		integer: func(v int64) bool { return v >= 0 && v <= math.MaxInt32 },
		field:   func(o *Overrides) any { return &o.ValidRows },
	},
	{
		Name: "op", Flag: "op", Scope: Work, Kind: KindChoice,
		Usage: "the op to run (default: the dump's op metadata, else inferred from its tensors)",
		field: func(o *Overrides) any { return &o.Op },
	},
	{
		Name: "method", Flag: "method", Scope: Work, Kind: KindChoice,
		Choices: []string{string(SampleInverseCDF), string(SampleGumbel), string(SampleRejection)},
		Usage:   "sample: how our sampler draws (default inverse_cdf)",
		field:   func(o *Overrides) any { return &o.Method },
	},
	{
		Name: "draws", Flag: "draws", Scope: Work, Kind: KindInt,
		Rule:    fmt.Sprintf("an integer in [0, %d] (0 means one token per row)", MaxDraws),
		Usage:   fmt.Sprintf("sample: independent draws per row that our sampler makes, judged statistically (default %d on the cpu backend, %d on cuda, which counts them on the device, rows × draws at most %d a run so that it ends inside the worker's watchdog; at most %d where the draws are kept)", DefaultDraws, DefaultCountedDraws, int64(MaxCountedDraws), MaxKeptDraws),
		integer: func(v int64) bool { return v >= 0 && v <= MaxDraws },
		field:   func(o *Overrides) any { return &o.Draws },
	},
	{
		Name: "keep_draws", Flag: "keep-draws", Scope: Work, Kind: KindInt, Default: "0",
		Rule:    "0 or 1",
		Usage:   fmt.Sprintf("sample: 1 keeps every draw in the run's outputs (at most %d a row) instead of the counts per token that the cuda backend makes", MaxKeptDraws),
		integer: func(v int64) bool { return v == 0 || v == 1 },
		field:   func(o *Overrides) any { return &o.KeepDraws },
	},
	{
		Name: "trials", Flag: "trials", Scope: Work, Kind: KindInt,
		Rule:    fmt.Sprintf("an integer in [0, %d] (0 and 1 both mean one)", MaxTrials),
		Usage:   fmt.Sprintf("spec_verify, spec_tree_verify: speculative trials per row that our backend runs (default %d)", DefaultTrials),
		integer: func(v int64) bool { return v >= 0 && v <= MaxTrials },
		field:   func(o *Overrides) any { return &o.Trials },
	},
}

func init() {
	// The op's choices come from the op table, which is built after params.
	p := ParamByName("op")
	for _, s := range opTable {
		p.Choices = append(p.Choices, string(s.Op))
	}
	for _, p := range params {
		if p.Kind == KindChoice {
			p.Rule = choiceRule(p.Choices)
		}
	}
}

// choiceRule writes choices as "a, b or c".
func choiceRule(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

// Params returns the parameter table, in the order forms and help list it.
// The entries must not be changed.
func ParamTable() []*Param { return params }

// ParamByName returns the parameter called name (its DUMPS.md name), or nil.
func ParamByName(name string) *Param {
	for _, p := range params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// ParamError is a value outside its parameter's range. Its message is the
// table's one sentence for the rule: "top_p must be in (0, 1] (1 means
// off), not 1.5"; callers say where the value came from around it.
type ParamError struct {
	Param *Param
	// Value is the value as it was given.
	Value string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("%s must be %s, not %s", e.Param.Name, e.Param.Rule, e.Value)
}

// CheckFloat returns a *ParamError when v is outside the range of a float
// parameter.
func (p *Param) CheckFloat(v float64) error {
	if p.float == nil || !p.float(v) {
		return &ParamError{Param: p, Value: FormatFloat(v)}
	}
	return nil
}

// CheckInt returns a *ParamError when v is outside the range of an integer
// (or seed) parameter.
func (p *Param) CheckInt(v int64) error {
	if p.integer == nil || !p.integer(v) {
		return &ParamError{Param: p, Value: strconv.FormatInt(v, 10)}
	}
	return nil
}

// CheckChoice returns a *ParamError when s is not one of a choice
// parameter's choices.
func (p *Param) CheckChoice(s string) error {
	for _, c := range p.Choices {
		if s == c {
			return nil
		}
	}
	return &ParamError{Param: p, Value: strconv.Quote(s)}
}

// Overrides are the parameters a person sets on the command line, in the
// web form or in an API request; each non-nil field replaces what the dump
// says, for every row. The JSON keys are the parameters' names.
type Overrides struct {
	Op          *Op          `json:"op,omitempty"`
	Temperature *float64     `json:"temperature,omitempty"`
	TopK        *int         `json:"top_k,omitempty"`
	TopP        *float64     `json:"top_p,omitempty"`
	MinP        *float64     `json:"min_p,omitempty"`
	Seed        *uint64      `json:"seed,omitempty"`
	Offset      *uint64      `json:"offset,omitempty"`
	Semantics   *Semantics   `json:"semantics,omitempty"`
	FilterOrder *FilterOrder `json:"filter_order,omitempty"`
	TopKTies    *TopKTies    `json:"top_k_ties,omitempty"`
	// TemperatureOrder is a later field: JSON of older Overrides lacks it.
	TemperatureOrder *TemperatureOrder `json:"temperature_order,omitempty"`
	// LogprobsKind is a later field, as TemperatureOrder is.
	LogprobsKind   *LogprobsKind `json:"logprobs_kind,omitempty"`
	Method         *SampleMethod `json:"method,omitempty"`
	Draws          *int          `json:"draws,omitempty"`
	Trials         *int          `json:"trials,omitempty"`
	MaxNgramSize   *int          `json:"max_ngram_size,omitempty"`
	MaxDraftTokens *int          `json:"max_draft_tokens,omitempty"`
	Threshold      *int          `json:"threshold,omitempty"`
	// NgramSemantics and MinNgramSize are later fields, as
	// TemperatureOrder is.
	NgramSemantics *NgramSemantics `json:"ngram_semantics,omitempty"`
	MinNgramSize   *int            `json:"min_ngram_size,omitempty"`
	ValidRows      *int            `json:"valid_rows,omitempty"`
	// KeepDraws is a later field, as TemperatureOrder is.
	KeepDraws *int `json:"keep_draws,omitempty"`
}

// Set parses text as the value of the parameter called name, checks it
// against the table and sets it. Its errors are one sentence: a
// *ParamError for a value out of range.
func (o *Overrides) Set(name, text string) error {
	p := ParamByName(name)
	if p == nil {
		return fmt.Errorf("%q is not a parameter (want one of %s)", name, paramNames())
	}
	text = strings.TrimSpace(text)
	bad := &ParamError{Param: p, Value: strconv.Quote(text)}
	switch f := p.field(o).(type) {
	case **float64:
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return bad
		}
		if err := p.CheckFloat(v); err != nil {
			return err
		}
		*f = &v
	case **int:
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil || v != int64(int(v)) {
			return bad
		}
		if err := p.CheckInt(v); err != nil {
			return err
		}
		n := int(v)
		*f = &n
	case **uint64:
		var v uint64
		if p.Kind == KindSeed {
			u, err := parseSeed(text)
			if err != nil {
				return bad
			}
			v = u
		} else {
			// Dumps hold these as int64.
			n, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return bad
			}
			if err := p.CheckInt(n); err != nil {
				return err
			}
			v = uint64(n)
		}
		*f = &v
	default:
		if err := p.CheckChoice(text); err != nil {
			return err
		}
		setChoice(f, text)
	}
	return nil
}

// parseSeed reads a uint64, or an int64 whose bits stand for one.
func parseSeed(text string) (uint64, error) {
	if v, err := strconv.ParseUint(text, 10, 64); err == nil {
		return v, nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	return uint64(v), err
}

// setChoice stores a checked choice in one of the string-typed fields.
func setChoice(field any, s string) {
	switch f := field.(type) {
	case **Op:
		v := Op(s)
		*f = &v
	case **FilterOrder:
		v := FilterOrder(s)
		*f = &v
	case **TopKTies:
		v := TopKTies(s)
		*f = &v
	case **Semantics:
		v := Semantics(s)
		*f = &v
	case **TemperatureOrder:
		v := TemperatureOrder(s)
		*f = &v
	case **LogprobsKind:
		v := LogprobsKind(s)
		*f = &v
	case **SampleMethod:
		v := SampleMethod(s)
		*f = &v
	case **NgramSemantics:
		v := NgramSemantics(s)
		*f = &v
	}
}

// Get returns the value set for the parameter called name, as text, and
// whether one is set.
func (o *Overrides) Get(name string) (string, bool) {
	p := ParamByName(name)
	if p == nil {
		return "", false
	}
	switch f := p.field(o).(type) {
	case **float64:
		if *f != nil {
			return FormatFloat(**f), true
		}
	case **int:
		if *f != nil {
			return strconv.Itoa(**f), true
		}
	case **uint64:
		if *f != nil {
			return strconv.FormatUint(**f, 10), true
		}
	case **Op:
		if *f != nil {
			return string(**f), true
		}
	case **FilterOrder:
		if *f != nil {
			return string(**f), true
		}
	case **TopKTies:
		if *f != nil {
			return string(**f), true
		}
	case **Semantics:
		if *f != nil {
			return string(**f), true
		}
	case **TemperatureOrder:
		if *f != nil {
			return string(**f), true
		}
	case **LogprobsKind:
		if *f != nil {
			return string(**f), true
		}
	case **SampleMethod:
		if *f != nil {
			return string(**f), true
		}
	case **NgramSemantics:
		if *f != nil {
			return string(**f), true
		}
	}
	return "", false
}

// Validate checks every value set (as one decoded from JSON, which Set did
// not see) against the table and returns the first *ParamError.
func (o *Overrides) Validate() error {
	for _, p := range params {
		text, ok := o.Get(p.Name)
		if !ok {
			continue
		}
		if p.Name == "method" && text == string(SampleAuto) {
			continue
		}
		var probe Overrides
		if err := probe.Set(p.Name, text); err != nil {
			return err
		}
	}
	return nil
}

// Empty reports whether o sets nothing.
func (o *Overrides) Empty() bool {
	for _, p := range params {
		if _, ok := o.Get(p.Name); ok {
			return false
		}
	}
	return true
}

// Each calls fn for every parameter set, in table order, with its value as
// text.
func (o *Overrides) Each(fn func(p *Param, text string)) {
	for _, p := range params {
		if text, ok := o.Get(p.Name); ok {
			fn(p, text)
		}
	}
}

// paramNames lists the table's names for messages.
func paramNames() string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return choiceRule(names)
}
