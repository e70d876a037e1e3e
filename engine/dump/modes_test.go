package dump

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

func TestNamedOutputs(t *testing.T) {
	m := newMaker(t)
	b, v := m.b, m.v
	probs := func(name string) *engine.Tensor { return m.floats(name, []int{b, v}, 0, 1) }
	tokens := func(name string) *engine.Tensor { return m.ints(name, engine.I64, []int{b}, 0, v) }
	mask := engine.NewTensor("valid", engine.Bool, b)
	mask.SetInt(0, 1)
	tests := []struct {
		name     string
		tensors  []*engine.Tensor
		meta     map[string]string
		op       engine.Op
		external []string
		declared []string
		padding  []int
		notice   string
	}{
		{name: "plain and named probs", tensors: []*engine.Tensor{m.logits(), probs("probs"), probs("probs@eager"), probs("probs@graph.v2")},
			op: engine.OpSoftmax, external: []string{"probs", "probs@eager", "probs@graph.v2"}},
		{name: "named tokens alone declare seeds", tensors: []*engine.Tensor{m.logits(), tokens("tokens@rank0"), tokens("tokens@rank1"),
			m.ints("seed@rank0", engine.I64, nil, 1, 9), m.ints("seed@rank1", engine.I64, []int{b}, 1, 9), m.ints("offset@rank1", engine.I64, []int{b}, 0, 9)},
			op: engine.OpSample, external: []string{"tokens@rank0", "tokens@rank1"}, declared: []string{"rank0", "rank1"}},
		{name: "samples of different draws", tensors: []*engine.Tensor{m.logits(), m.ints("samples@a", engine.I32, []int{b, 5}, 0, v), m.ints("samples@b", engine.I32, []int{b, 9}, 0, v)},
			op: engine.OpSample, external: []string{"samples@a", "samples@b"}},
		{name: "golden and engine logits", tensors: []*engine.Tensor{m.logits(), randomTensor(m.rng, "logits@eager", engine.BF16, b, v), randomTensor(m.rng, "logits@graph", engine.F16, b, v)},
			op: engine.OpLogitsGate, external: []string{"logits@eager", "logits@graph"}},
		{name: "engine logits on another op", tensors: []*engine.Tensor{m.logits(), randomTensor(m.rng, "logits@eager", engine.BF16, b, v)}, meta: map[string]string{"op": "softmax"},
			op: engine.OpSoftmax, external: []string{}, notice: `"logits@eager": not used by op softmax`},
		{name: "companion without its tokens", tensors: append(m.spec(), m.ints("spec_emitted@v2", engine.I32, []int{b}, 0, 1)),
			op: engine.OpSpecVerify, external: []string{}, notice: "no spec_tokens@v2"},
		{name: "seed of no output", tensors: []*engine.Tensor{m.logits(), tokens("tokens@a"), m.ints("seed@b", engine.I64, nil, 1, 9)},
			op: engine.OpSample, external: []string{"tokens@a"}, notice: "no output is named b"},
		{name: "valid mask", tensors: []*engine.Tensor{m.logits(), mask}, op: engine.OpSoftmax, external: []string{}, padding: span(1, b)},
		{name: "valid_rows", tensors: []*engine.Tensor{m.logits()}, meta: map[string]string{"valid_rows": "1"}, op: engine.OpSoftmax, external: []string{}, padding: span(1, b)},
		{name: "unknown base with a mode", tensors: []*engine.Tensor{m.logits(), probs("weights@x y")}, op: engine.OpSoftmax, external: []string{}, notice: `"weights@x y": not part of the dump format`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := BuildRun(fileOf(tt.meta, tt.tensors...), engine.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if run.Op != tt.op {
				t.Errorf("op %s, want %s", run.Op, tt.op)
			}
			if got := slices.Sorted(maps.Keys(run.External)); !slices.Equal(got, tt.external) && len(got)+len(tt.external) > 0 {
				t.Errorf("external %q, want %q", got, tt.external)
			}
			if got := slices.Sorted(maps.Keys(run.Declared)); !slices.Equal(got, tt.declared) {
				t.Errorf("declared modes %q, want %q", got, tt.declared)
			}
			if got := run.PaddedRows(); !slices.Equal(got, tt.padding) {
				t.Errorf("padded rows %v, want %v", got, tt.padding)
			}
			if tt.notice != "" && !hasNotice(run, tt.notice) {
				t.Errorf("notices %q lack %q", run.Notices, tt.notice)
			}
		})
	}
}

func TestDeclaredSeeds(t *testing.T) {
	m := newMaker(t)
	b := m.b
	seed := m.ints("seed@a", engine.I64, []int{b}, 100, 200)
	run, err := BuildRun(fileOf(nil, m.logits(), m.ints("tokens@a", engine.I64, []int{b}, 0, m.v), seed,
		m.ints("offset", engine.I64, nil, 7, 8)), engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	d := run.Declared["a"]
	for r := range b {
		if d.Seed[r] != uint64(seed.Int(r)) || d.Offset[r] != 7 {
			t.Errorf("row %d: seed %d offset %d, want %d and the dump's offset 7", r, d.Seed[r], d.Offset[r], seed.Int(r))
		}
	}
}

func TestNamedOutputErrors(t *testing.T) {
	m := newMaker(t)
	b, v := m.b, m.v
	lg := m.logits()
	probs := func(name string, cols int) *engine.Tensor { return m.floats(name, []int{b, cols}, 0, 1) }
	many := []*engine.Tensor{lg}
	for i := range engine.MaxNamedOutputs + 1 {
		many = append(many, probs(fmt.Sprintf("probs@m%02d", i), v))
	}
	twoValues := m.ints("valid", engine.U8, []int{b}, 0, 2)
	twoValues.SetInt(b-1, 2)
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		meta    map[string]string
		tensor  string
		words   []string
	}{
		{"a space in the name", []*engine.Tensor{lg, probs("probs@a b", v)}, nil, "probs@a b", []string{"may hold letters, digits", `not ' '`}},
		{"an empty name", []*engine.Tensor{lg, probs("probs@", v)}, nil, "probs@", []string{"1 to 64 characters"}},
		{"a second @", []*engine.Tensor{lg, probs("probs@a@b", v)}, nil, "probs@a@b", []string{`not '@'`}},
		{"too many named outputs", many, nil, fmt.Sprintf("probs@m%02d", engine.MaxNamedOutputs), []string{"more than 16 named outputs"}},
		{"named probs of another vocabulary", []*engine.Tensor{lg, probs("probs@eager", v+1)}, nil, "probs@eager", []string{"does not fit logits"}},
		{"named tokens of floats", []*engine.Tensor{lg, m.floats("tokens@eager", []int{b}, 0, 1)}, nil, "tokens@eager", []string{"integer dtype"}},
		{"named logits of ints", []*engine.Tensor{lg, m.ints("logits@eager", engine.I32, []int{b, v}, 0, 3)}, nil, "logits@eager", []string{"float dtype"}},
		{"declared seed of wrong length", []*engine.Tensor{lg, m.ints("tokens@a", engine.I64, []int{b}, 0, v), m.ints("seed@a", engine.I64, []int{b + 1}, 0, 9)}, nil, "seed@a", []string{"want [] or ["}},
		{"declared offset negative", []*engine.Tensor{lg, m.ints("tokens@a", engine.I64, []int{b}, 0, v), m.ints("offset@a", engine.I64, nil, -3, -1)}, nil, "offset@a", []string{"offset must be an integer >= 0"}},
		{"valid mask of wrong length", []*engine.Tensor{lg, m.ints("valid", engine.U8, []int{b + 1}, 0, 2)}, nil, "valid", []string{"does not fit logits", fmt.Sprintf("want [%d]", b)}},
		{"valid mask holding 2", []*engine.Tensor{lg, twoValues}, nil, "valid", []string{fmt.Sprintf("row %d is 2", b-1), "1 (a real row) or 0 (padding)"}},
		{"valid mask of floats", []*engine.Tensor{lg, m.floats("valid", []int{b}, 0, 1)}, nil, "valid", []string{"integer dtype"}},
		{"valid_rows past the batch", []*engine.Tensor{lg}, map[string]string{"valid_rows": fmt.Sprint(b + 1)}, "", []string{fmt.Sprintf("valid_rows is %d, more than the %d rows of logits", b+1, b)}},
		{"valid_rows negative", []*engine.Tensor{lg}, map[string]string{"valid_rows": "-1"}, "", []string{`metadata "valid_rows"`, "not -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildRun(fileOf(tt.meta, tt.tensors...), engine.Overrides{})
			checkError(t, err, "dump.safetensors", tt.tensor, tt.words...)
		})
	}
}

// TestDuplicateNamedOutput checks that a named output written twice is
// refused by the reader, as any tensor is.
func TestDuplicateNamedOutput(t *testing.T) {
	entry := `"probs@eager":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}`
	data := rawSafetensors("{"+entry+","+entry+"}", f32Bytes(1, 2, 3, 4, 5, 6))
	_, err := Parse("dump.safetensors", data)
	checkError(t, err, "dump.safetensors", "probs@eager", "appears twice")
}

// span returns the rows [from, to).
func span(from, to int) []int {
	var rows []int
	for r := from; r < to; r++ {
		rows = append(rows, r)
	}
	return rows
}
