package engine

import (
	"fmt"
	"strings"
)

// The low-level rules an engine's filter chain needs beyond top_k_first,
// joint, keep and lowest_index (docs/SEMANTICS.md "Semantics presets").
const (
	// MinPFirst applies min-p to the whole distribution (relative to its
	// most probable token), then top-k, then top-p to the mass of the
	// tokens min-p and top-k both keep (vLLM).
	MinPFirst FilterOrder = "min_p_first"
	// TiesAny keeps exactly k tokens, but which of the tokens tied with the
	// k-th is not specified (llama.cpp's partial sort): the kernels keep the
	// lowest indices, and the reference lets an output keep any of them.
	TiesAny TopKTies = "any"
)

// TemperatureOrder says where the temperature sits in the filter chain
// (DUMPS.md metadata `temperature_order`).
type TemperatureOrder string

const (
	// TemperatureFirst scales the logits before the filters: top-p and
	// min-p see softmax(x/T).
	TemperatureFirst TemperatureOrder = "first"
	// TemperatureLast decides the filters on softmax(x) (T = 1), then
	// scales the survivors by the temperature: their probabilities are
	// softmax(x/T) renormalised over them (llama.cpp's default chain).
	TemperatureLast TemperatureOrder = "last"
)

// Semantics names a semantics preset: one engine's filter chain (DUMPS.md
// metadata `semantics`).
type Semantics string

// The presets of docs/SEMANTICS.md, and any.
const (
	SemanticsHF         Semantics = "hf"
	SemanticsVLLM       Semantics = "vllm"
	SemanticsSGLang     Semantics = "sglang"
	SemanticsFlashInfer Semantics = "flashinfer"
	SemanticsLlamaCpp   Semantics = "llamacpp"
	SemanticsTokenSpeed Semantics = "tokenspeed"
	// SemanticsAny is no preset: it asks the session to judge the dump's
	// external outputs under every preset and say which pass.
	SemanticsAny Semantics = "any"
)

// Preset is one engine's filter chain, read from the engine's source
// (docs/SEMANTICS.md cites the files and commits), as the low-level
// parameters that express it.
type Preset struct {
	Name Semantics
	// Engine is the engine's name for people: "vLLM".
	Engine string
	// Chain is the order of temperature, top-k, top-p and min-p, in words.
	Chain string
	// Source names the files read, with the commit.
	Source string

	Order FilterOrder
	// OrderWithoutMinP, when set, is the order of a batch in which no row
	// has min-p on (SGLang takes a different kernel then).
	OrderWithoutMinP FilterOrder
	Ties             TopKTies
	Temperature      TemperatureOrder
	// IgnoresMinP says the engine's default path drops min_p: every row
	// is judged with min-p off.
	IgnoresMinP bool
}

// presets is the preset table, in the order docs and reports list it.
var presets = []*Preset{
	{
		Name: SemanticsHF, Engine: "Hugging Face transformers",
		Chain:  "temperature, top-k, top-p on the top-k mass, then min-p",
		Source: "transformers src/transformers/generation/utils.py@000034a4 (_get_logits_processor), logits_process.py@00857b6c",
		Order:  TopKFirst, Ties: TiesKeep, Temperature: TemperatureFirst,
	},
	{
		Name: SemanticsVLLM, Engine: "vLLM",
		Chain:  "temperature, min-p, then top-k and top-p, top-p on the mass min-p and top-k keep",
		Source: "vllm vllm/v1/sample/sampler.py@3e342658, logits_processor/builtin.py@bf17660a, ops/topk_topp_sampler.py@3babc05a",
		Order:  MinPFirst, Ties: TiesKeep, Temperature: TemperatureFirst,
	},
	{
		Name: SemanticsSGLang, Engine: "SGLang",
		Chain:  "temperature, then top-k and top-p jointly on the whole mass; when any row of the batch has min-p: top-k, top-p on the top-k mass, then min-p",
		Source: "sglang python/sglang/srt/layers/sampler.py@584f55d1 (flashinfer backend, the default on CUDA)",
		Order:  TopKFirst, OrderWithoutMinP: Joint, Ties: TiesKeep, Temperature: TemperatureFirst,
	},
	{
		Name: SemanticsFlashInfer, Engine: "FlashInfer",
		Chain:  "temperature (the caller's softmax), top-k, top-p on the top-k mass, then min-p",
		Source: "flashinfer flashinfer/sampling.py, include/flashinfer/sampling.cuh, topk.cuh@fb28d724 (0.6.18)",
		Order:  TopKFirst, Ties: TiesKeep, Temperature: TemperatureFirst,
	},
	{
		Name: SemanticsLlamaCpp, Engine: "llama.cpp",
		Chain:  "top-k, top-p on the top-k mass, min-p (both at temperature 1), then temperature",
		Source: "llama.cpp common/common.h@de93b991 (default sampler chain), src/llama-sampling.cpp@e19fb5f1",
		Order:  TopKFirst, Ties: TiesAny, Temperature: TemperatureLast,
	},
	{
		Name: SemanticsTokenSpeed, Engine: "TokenSpeed",
		Chain:  "temperature, then top-k and top-p jointly on the whole mass; min-p ignored",
		Source: "lightseekorg/tokenspeed python/tokenspeed/runtime/sampling/registry.py, backends/flashinfer.py@f4d8ec6e (the default backend on NVIDIA)",
		Order:  Joint, Ties: TiesKeep, Temperature: TemperatureFirst, IgnoresMinP: true,
	},
}

// Presets returns the preset table, in the order docs and reports list it.
// The entries must not be changed.
func Presets() []*Preset { return presets }

// Preset returns the preset s names, or nil (for "", any, or no preset).
func (s Semantics) Preset() *Preset {
	for _, p := range presets {
		if p.Name == s {
			return p
		}
	}
	return nil
}

// semanticsChoices are the semantics parameter's values: every preset, then
// any.
func semanticsChoices() []string {
	var c []string
	for _, p := range presets {
		c = append(c, string(p.Name))
	}
	return append(c, string(SemanticsAny))
}

// OrderFor returns the filter order the preset takes for a batch whose
// rows have min-p values minP.
func (s *Preset) OrderFor(minP []float64) FilterOrder {
	if s.OrderWithoutMinP == "" {
		return s.Order
	}
	for _, m := range minP {
		if m > 0 {
			return s.Order
		}
	}
	return s.OrderWithoutMinP
}

// Apply sets p's filter chain to the preset's: FilterOrder (for p's rows),
// TopKTies and TemperatureOrder, and min_p 0 on every row of an engine that
// ignores it; it sets p.Semantics. set tells where a person or the dump
// gave a value of the parameter called name ("metadata", "the override"),
// or "" where the value is the default: a value given that differs from the
// preset's is an error, one sentence. Apply returns what it did that a
// person should know (a notice), or "".
func (s *Preset) Apply(p *Params, set func(name string) string) (string, error) {
	want := []struct {
		name      string
		have, set string
	}{
		{"filter_order", string(p.FilterOrder), string(s.OrderFor(p.MinP))},
		{"top_k_ties", string(p.TopKTies), string(s.Ties)},
		{"temperature_order", string(p.TemperatureOrder), string(s.Temperature)},
	}
	for _, w := range want {
		if from := set(w.name); from != "" && w.have != w.set {
			return "", fmt.Errorf("semantics %s means %s %s, but %s sets %s %s: give one or the other", s.Name, w.name, w.set, from, w.name, w.have)
		}
	}
	p.Semantics = s.Name
	p.FilterOrder, p.TopKTies, p.TemperatureOrder = s.OrderFor(p.MinP), s.Ties, s.Temperature
	if !s.IgnoresMinP {
		return "", nil
	}
	var rows []int
	for r, m := range p.MinP {
		if m > 0 {
			rows = append(rows, r)
			p.MinP[r] = 0
		}
	}
	if len(rows) == 0 {
		return "", nil
	}
	return fmt.Sprintf("semantics %s: %s ignores min_p, so min-p is off on %s", s.Name, s.Engine, rowList(rows)), nil
}

// rowList writes row numbers as "row 3", "rows 0, 1 and 5" or, past ten,
// "42 rows".
func rowList(rows []int) string {
	switch {
	case len(rows) == 1:
		return fmt.Sprintf("row %d", rows[0])
	case len(rows) > 10:
		return fmt.Sprintf("%d rows", len(rows))
	}
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = fmt.Sprint(r)
	}
	return "rows " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// SemanticsMatch is the judgement of a dump's external outputs under one
// preset, as `sampviz check --semantics any` reports it.
type SemanticsMatch struct {
	Semantics Semantics `json:"semantics"`
	Engine    string    `json:"engine"`
	Chain     string    `json:"chain"`
	Pass      bool      `json:"pass"`
	// FailedRows counts failing rows over every output judged, and
	// Violations the failures of whole outputs.
	FailedRows int `json:"failed_rows"`
	Violations int `json:"violations"`
	// SameAs names the earlier preset whose parameters are the same on
	// this dump: it was judged once, for both.
	SameAs Semantics `json:"same_as,omitempty"`
	// First is the first violation, for a preset that fails, and FirstRow
	// its row (-1 for none, or a failure of a whole output).
	First    string `json:"first,omitempty"`
	FirstRow int    `json:"first_row"`
}
