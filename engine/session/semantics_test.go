package session

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

// chainCase is the data of one semantics test: random logits and the
// parameters under which the engines' chains part.
type chainCase struct {
	rows, vocab int
	sigma       float64 // the logits' spread
	minP        bool    // min-p on every row
}

// chainInputs are a case's logits and per-row parameters, as dump tensors.
func chainInputs(rng *rand.Rand, c chainCase) []*engine.Tensor {
	logits := make([]float32, c.rows*c.vocab)
	temp, topK, topP, minP := make([]float64, c.rows), make([]int64, c.rows), make([]float64, c.rows), make([]float64, c.rows)
	for r := range c.rows {
		row := logits[r*c.vocab : (r+1)*c.vocab]
		for i := range row {
			row[i] = float32(rng.NormFloat64() * c.sigma)
		}
		temp[r] = 0.45 + 0.2*rng.Float64()
		topK[r] = int64(12 + rng.IntN(12))
		topP[r] = 0.6 + 0.25*rng.Float64()
		if c.minP {
			minP[r] = 0.04 + 0.08*rng.Float64()
		}
		// Tie the token after the k-th with the k-th: ties at the top-k cut.
		order := make([]int, c.vocab)
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		k := int(topK[r])
		row[order[k]] = row[order[k-1]]
	}
	return []*engine.Tensor{
		engine.FromFloat32s("logits", engine.F32, []int{c.rows, c.vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{c.rows}, temp),
		engine.FromInts("top_k", engine.I64, []int{c.rows}, topK),
		engine.FromFloat64s("top_p", engine.F32, []int{c.rows}, topP),
		engine.FromFloat64s("min_p", engine.F32, []int{c.rows}, minP),
	}
}

// cpuUnder runs the CPU backend on run under preset s and returns its
// output.
func cpuUnder(t *testing.T, run *engine.Run, s engine.Semantics) *engine.Output {
	t.Helper()
	pr := presetRun(run, s.Preset())
	out, err := cpu.New().Run(context.Background(), pr)
	if err != nil {
		t.Fatalf("cpu under %s: %v", s, err)
	}
	return out
}

// equivalent lists the presets whose chain keeps, on this data, what made's
// does: the CPU backend's renorm under each, compared bit for bit with its
// renorm under made.
func equivalent(t *testing.T, tensors []*engine.Tensor, made engine.Semantics) []string {
	t.Helper()
	run := buildRun(t, tensors, map[string]string{"op": "renorm"}, engine.Overrides{})
	want := cpuUnder(t, run, made).Probs.Data
	var same []string
	for _, p := range engine.Presets() {
		if bytes.Equal(cpuUnder(t, run, p.Name).Probs.Data, want) {
			same = append(same, string(p.Name))
		}
	}
	return same
}

// TestSemanticsAnyNamesTheChain makes outputs in each preset's order (the
// CPU backend under that preset) on fresh random logits with parameters
// where the chains differ: temperatures below 1, small top-k with a tie at
// the cut, top-p and, in half the cases, min-p on. `--semantics any` must
// name exactly the presets whose chain keeps the same tokens on that data.
// Data on which the chains do not part as the presets' table says they can
// is drawn again, so that each case tests what it names.
func TestSemanticsAnyNamesTheChain(t *testing.T) {
	withMinP := chainCase{rows: 8, vocab: 500, sigma: 1.2, minP: true}
	noMinP := chainCase{rows: 8, vocab: 500, sigma: 1.2}
	tests := []struct {
		name    string
		c       chainCase
		made    engine.Semantics
		op      engine.Op
		nominal []string // the presets equivalent on data where the chains part
	}{
		{"hf, min-p on", withMinP, engine.SemanticsHF, engine.OpRenorm, []string{"hf", "sglang", "flashinfer"}},
		{"vllm, min-p on", withMinP, engine.SemanticsVLLM, engine.OpRenorm, []string{"vllm"}},
		{"sglang, min-p on", withMinP, engine.SemanticsSGLang, engine.OpRenorm, []string{"hf", "sglang", "flashinfer"}},
		{"llamacpp, min-p on", withMinP, engine.SemanticsLlamaCpp, engine.OpRenorm, []string{"llamacpp"}},
		{"tokenspeed, min-p on", withMinP, engine.SemanticsTokenSpeed, engine.OpRenorm, []string{"tokenspeed"}},
		{"hf, min-p off", noMinP, engine.SemanticsHF, engine.OpRenorm, []string{"hf", "vllm", "flashinfer"}},
		{"sglang, min-p off", noMinP, engine.SemanticsSGLang, engine.OpRenorm, []string{"sglang", "tokenspeed"}},
		{"llamacpp, min-p off", noMinP, engine.SemanticsLlamaCpp, engine.OpRenorm, []string{"llamacpp"}},
		{"vllm samples, min-p on", withMinP, engine.SemanticsVLLM, engine.OpSample, []string{"vllm"}},
	}
	sess := New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			var tensors []*engine.Tensor
			var want []string
			for try := 0; ; try++ {
				if try == 20 {
					t.Fatalf("20 draws of data never parted the chains as %v", tt.nominal)
				}
				tensors = chainInputs(rng, tt.c)
				if want = equivalent(t, tensors, tt.made); slices.Equal(want, tt.nominal) {
					break
				}
			}

			meta := map[string]string{"op": string(tt.op)}
			run := buildRun(t, tensors, meta, engine.Overrides{})
			if tt.op == engine.OpSample {
				run.Params.Draws = 20000
			}
			out := cpuUnder(t, run, tt.made)
			made := out.Probs
			if tt.op == engine.OpSample {
				made = out.Samples
				tensors = append(tensors, engine.FromInts("seed", engine.I64, nil, []int64{0}))
			}
			ext := &engine.Tensor{Name: map[engine.Op]string{engine.OpRenorm: "probs", engine.OpSample: "samples"}[tt.op],
				DType: made.DType, Shape: made.Shape, Data: made.Data}
			path := writeDump(t, "made.safetensors", append(tensors, ext), meta)

			any := engine.SemanticsAny
			rep, err := sess.Execute(context.Background(), Job{DumpPath: path, Backend: NoBackend, Overrides: engine.Overrides{Semantics: &any}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range rep.Matches {
				if m.Pass {
					got = append(got, string(m.Semantics))
				} else if m.First == "" {
					t.Errorf("%s fails without a first violation", m.Semantics)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("presets that pass: %v, want %v\n%s", got, want, describeMatches(rep.Matches))
			}
			if !rep.Pass || string(rep.Semantics) != want[0] || len(rep.Matches) != len(engine.Presets()) {
				t.Errorf("report: pass %v, judged under %q, %d matches; want a pass under %s", rep.Pass, rep.Semantics, len(rep.Matches), want[0])
			}
		})
	}
}

// TestSemanticsAnyNoneMatches: an output no chain made (mass moved between
// kept tokens) passes no preset, and the report fails under the preset
// with the fewest failures.
func TestSemanticsAnyNoneMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	tensors := chainInputs(rng, chainCase{rows: 4, vocab: 300, sigma: 1.2, minP: true})
	run := buildRun(t, tensors, map[string]string{"op": "renorm"}, engine.Overrides{})
	probs := cpuUnder(t, run, engine.SemanticsHF).Probs
	for r := range 4 {
		i := r * 300
		best := i
		for j := i; j < i+300; j++ {
			if probs.Float(j) > probs.Float(best) {
				best = j
			}
		}
		probs.SetFloat(best, probs.Float(best)*0.9)
	}
	path := writeDump(t, "made.safetensors", append(tensors, &engine.Tensor{Name: "probs", DType: probs.DType, Shape: probs.Shape, Data: probs.Data}), map[string]string{"op": "renorm"})
	any := engine.SemanticsAny
	rec := &recorder{}
	rep, err := New().Execute(context.Background(), Job{DumpPath: path, Backend: NoBackend, Overrides: engine.Overrides{Semantics: &any}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass {
		t.Errorf("the report passes:\n%s", describeMatches(rep.Matches))
	}
	for _, m := range rep.Matches {
		if m.Pass || m.FailedRows == 0 {
			t.Errorf("%s: pass %v with %d failed rows", m.Semantics, m.Pass, m.FailedRows)
		}
	}
	if got := MatchSummary(rep.Matches); got != "the outputs follow none of the 6 presets" {
		t.Errorf("summary %q", got)
	}
	if len(rec.outputs) != 1 || len(rec.rows) != 4 {
		t.Errorf("the sink heard %d outputs and %d rows, want 1 and 4", len(rec.outputs), len(rec.rows))
	}
}

// TestSemanticsAnyNeedsExternalOutputs: any judges the dump's outputs, so a
// dump without one is refused in one sentence naming it.
func TestSemanticsAnyNeedsExternalOutputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	path := writeDump(t, "made.safetensors", chainInputs(rng, chainCase{rows: 2, vocab: 50, sigma: 1}), map[string]string{"semantics": "any"})
	_, err := New(cpu.New()).Execute(context.Background(), Job{DumpPath: path, FileName: "mine.safetensors"}, nil)
	var ie *InputError
	if !asInputError(err, &ie) || !strings.Contains(ie.Msg, "mine.safetensors: semantics any judges the dump's external outputs") {
		t.Errorf("error %v, want an InputError naming the file", err)
	}
}

// TestSemanticsRefusals: a semantics naming no preset, and a preset beside
// a filter_order, top_k_ties or temperature_order that differs from its
// own, are refused in one sentence naming the file and the rule; the same
// values given by the preset pass.
func TestSemanticsRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	tensors := chainInputs(rng, chainCase{rows: 2, vocab: 60, sigma: 1, minP: true})
	tests := []struct {
		name string
		meta map[string]string
		o    engine.Overrides
		want string // "" for no error
	}{
		{"no preset", map[string]string{"semantics": "ollama"}, engine.Overrides{},
			`x.safetensors: metadata "semantics": semantics must be hf, vllm, sglang, flashinfer, llamacpp, tokenspeed or any, not "ollama"`},
		{"filter_order beside vllm", map[string]string{"semantics": "vllm", "filter_order": "joint"}, engine.Overrides{},
			"x.safetensors: semantics vllm means filter_order min_p_first, but the metadata sets filter_order joint: give one or the other"},
		{"an override beside a preset", map[string]string{"semantics": "hf"}, engine.Overrides{TopKTies: ptr(engine.TiesLowestIndex)},
			"x.safetensors: semantics hf means top_k_ties keep, but the override sets top_k_ties lowest_index: give one or the other"},
		{"temperature_order beside llamacpp", map[string]string{"temperature_order": "first"}, engine.Overrides{Semantics: ptr(engine.SemanticsLlamaCpp)},
			"x.safetensors: semantics llamacpp means temperature_order last, but the metadata sets temperature_order first: give one or the other"},
		{"sglang with min-p is top_k_first", map[string]string{"semantics": "sglang", "filter_order": "joint"}, engine.Overrides{},
			"semantics sglang means filter_order top_k_first, but the metadata sets filter_order joint"},
		{"the preset's own values", map[string]string{"semantics": "vllm", "filter_order": "min_p_first", "top_k_ties": "keep"}, engine.Overrides{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeDump(t, "made.safetensors", tensors, tt.meta)
			_, err := New(cpu.New()).Execute(context.Background(), Job{DumpPath: path, FileName: "x.safetensors", Overrides: tt.o}, nil)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ie *InputError
			if !asInputError(err, &ie) || !strings.Contains(ie.Msg, tt.want) {
				t.Fatalf("error %v, want an InputError saying %q", err, tt.want)
			}
			if strings.Count(strings.TrimSuffix(ie.Msg, "."), ". ") > 0 {
				t.Errorf("%q is more than one sentence", ie.Msg)
			}
		})
	}
}

// TestPresetNotices: a preset says what it did that changes the dump's
// parameters (TokenSpeed drops min-p), and sets the chain it names.
func TestPresetNotices(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	tensors := chainInputs(rng, chainCase{rows: 3, vocab: 40, sigma: 1, minP: true})
	run := buildRun(t, tensors, map[string]string{"op": "renorm", "semantics": "tokenspeed"}, engine.Overrides{})
	p := run.Params
	if p.Semantics != engine.SemanticsTokenSpeed || p.FilterOrder != engine.Joint || p.TopKTies != engine.TiesKeep || p.TemperatureOrder != engine.TemperatureFirst {
		t.Errorf("tokenspeed gives %s, %s, %s, %s", p.Semantics, p.FilterOrder, p.TopKTies, p.TemperatureOrder)
	}
	if slices.ContainsFunc(p.MinP, func(m float64) bool { return m != 0 }) {
		t.Errorf("min_p %v under tokenspeed, want 0 everywhere", p.MinP)
	}
	if !slices.Contains(run.Notices, "semantics tokenspeed: TokenSpeed ignores min_p, so min-p is off on rows 0, 1 and 2") {
		t.Errorf("notices %q", run.Notices)
	}
	run = buildRun(t, tensors, map[string]string{"op": "renorm", "semantics": "llamacpp"}, engine.Overrides{})
	if p := run.Params; p.TemperatureOrder != engine.TemperatureLast || p.TopKTies != engine.TiesAny || p.FilterOrder != engine.TopKFirst {
		t.Errorf("llamacpp gives %s, %s, %s", p.FilterOrder, p.TopKTies, p.TemperatureOrder)
	}
}

func asInputError(err error, ie **InputError) bool {
	e, ok := err.(*InputError)
	*ie = e
	return ok
}

// describeMatches writes the matches one per line, for failures.
func describeMatches(ms []engine.SemanticsMatch) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %-10s pass=%v failed=%d+%d same_as=%q %s\n", m.Semantics, m.Pass, m.FailedRows, m.Violations, m.SameAs, m.First)
	}
	return b.String()
}
