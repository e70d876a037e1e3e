package dump

import (
	"maps"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// topIDs returns [b, n] token ids, each row a distinct run of tokens.
func (m dumpMaker) topIDs(name string, n int) *engine.Tensor {
	t := engine.NewTensor(name, engine.I64, m.b, n)
	for r := range m.b {
		start := m.rng.IntN(m.v)
		for k := range n {
			t.SetInt(r*n+k, int64((start+k)%m.v))
		}
	}
	return t
}

func TestLogprobsOutputs(t *testing.T) {
	m := newMaker(t)
	b, v := m.b, m.v
	n := 1 + m.rng.IntN(min(v, 8))
	full := func(name string) *engine.Tensor { return m.floats(name, []int{b, v}, -9, 0) }
	top := func(name string) *engine.Tensor { return m.floats(name, []int{b, n}, -9, 0) }
	padded := m.topIDs("logprob_token_ids", n)
	padded.SetInt((b-1)*n, -1) // the last row is padding: not read
	tests := []struct {
		name     string
		tensors  []*engine.Tensor
		meta     map[string]string
		o        engine.Overrides
		op       engine.Op
		external []string
		kinds    map[string]engine.LogprobsKind // by mode ("" the plain)
		notice   string
	}{
		{name: "every token's, raw by default", tensors: []*engine.Tensor{m.logits(), full("logprobs")},
			op: engine.OpSoftmax, external: []string{"logprobs"}, kinds: map[string]engine.LogprobsKind{"": engine.LogprobsRaw}},
		{name: "a top-N with its ids", tensors: []*engine.Tensor{m.logits(), top("logprobs"), m.topIDs("logprob_token_ids", n)},
			op: engine.OpSoftmax, external: []string{"logprob_token_ids", "logprobs"}},
		{name: "modes of either kind", tensors: []*engine.Tensor{m.logits(), full("logprobs@raw"), top("logprobs@proc"), m.topIDs("logprob_token_ids@proc", n)},
			meta: map[string]string{"logprobs_kind": "raw", "logprobs_kind@proc": "processed"},
			op:   engine.OpSoftmax, external: []string{"logprob_token_ids@proc", "logprobs@proc", "logprobs@raw"},
			kinds: map[string]engine.LogprobsKind{"raw": engine.LogprobsRaw, "proc": engine.LogprobsProcessed}},
		{name: "the override wins over a mode's kind", tensors: []*engine.Tensor{m.logits(), full("logprobs@a")},
			meta: map[string]string{"logprobs_kind@a": "processed"}, o: engine.Overrides{LogprobsKind: ptr(engine.LogprobsRaw)},
			op: engine.OpSoftmax, external: []string{"logprobs@a"}, kinds: map[string]engine.LogprobsKind{"a": engine.LogprobsRaw}},
		{name: "ids without logprobs", tensors: []*engine.Tensor{m.logits(), m.topIDs("logprob_token_ids", n)},
			op: engine.OpSoftmax, external: []string{}, notice: `"logprob_token_ids": no logprobs to go with it`},
		{name: "named ids without logprobs", tensors: []*engine.Tensor{m.logits(), full("logprobs"), m.topIDs("logprob_token_ids@x", n)},
			op: engine.OpSoftmax, external: []string{"logprobs"}, notice: "no logprobs@x to go with it"},
		{name: "a kind of a mode without logprobs", tensors: []*engine.Tensor{m.logits(), full("logprobs")}, meta: map[string]string{"logprobs_kind@x": "raw"},
			op: engine.OpSoftmax, external: []string{"logprobs"}, notice: `"logprobs_kind@x": no output is named logprobs@x`},
		{name: "logprobs with tokens make a sample run", tensors: []*engine.Tensor{m.logits(), m.ints("tokens", engine.I64, []int{b}, 0, v), full("logprobs"),
			m.floats("temperature", []int{b}, 0.5, 1)},
			op: engine.OpSample, external: []string{"logprobs", "tokens"}},
		{name: "a padded row's ids are not read", tensors: []*engine.Tensor{m.logits(), top("logprobs"), padded},
			meta: map[string]string{"valid_rows": "1"}, op: engine.OpSoftmax, external: []string{"logprob_token_ids", "logprobs"}},
		{name: "not judged by spec_verify", tensors: append(m.spec(), full("logprobs")),
			op: engine.OpSpecVerify, external: []string{}, notice: `"logprobs": not used by op spec_verify`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := BuildRun(fileOf(tt.meta, tt.tensors...), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if run.Op != tt.op {
				t.Errorf("op %s, want %s", run.Op, tt.op)
			}
			if got := slices.Sorted(maps.Keys(run.External)); !slices.Equal(got, tt.external) && len(got)+len(tt.external) > 0 {
				t.Errorf("external %q, want %q", got, tt.external)
			}
			for mode, want := range tt.kinds {
				if got := run.LogprobsKindOf(mode); got != want {
					t.Errorf("kind of mode %q is %s, want %s", mode, got, want)
				}
			}
			if tt.notice != "" && !hasNotice(run, tt.notice) {
				t.Errorf("notices %q lack %q", run.Notices, tt.notice)
			}
		})
	}
}

// TestLogprobsErrors checks that logprobs a judge cannot read are refused
// when the dump is read, each in one sentence naming the file, the tensor
// and the rule.
func TestLogprobsErrors(t *testing.T) {
	m := newMaker(t)
	b, v := m.b, m.v
	lg := m.logits()
	const n = 3
	if v < 2*n {
		t.Skip("vocabulary too small")
	}
	vals := m.floats("logprobs", []int{b, n}, -9, 0)
	repeat := m.topIDs("logprob_token_ids", n)
	repeat.SetInt(n+2, repeat.Int(n)) // row 1 (a batch has 2 rows or more)
	past := m.topIDs("logprob_token_ids", n)
	past.SetInt(n-1, int64(v))
	negative := m.topIDs("logprob_token_ids@m", n)
	negative.SetInt(0, -1)
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		meta    map[string]string
		tensor  string
		words   []string
	}{
		{"repeated ids", []*engine.Tensor{lg, vals, repeat}, nil, "logprob_token_ids",
			[]string{"row 1 holds token", "at positions 0 and 2", "a top-N names each token once"}},
		{"an id past the vocabulary", []*engine.Tensor{lg, vals, past}, nil, "logprob_token_ids",
			[]string{"row 0, position 2 holds token", "outside the vocabulary [0,", "of logits"}},
		{"a negative id of a mode", []*engine.Tensor{lg, m.floats("logprobs@m", []int{b, n}, -9, 0), negative}, nil, "logprob_token_ids@m",
			[]string{"row 0, position 0 holds token -1"}},
		{"a top-N without its ids", []*engine.Tensor{lg, vals}, nil, "logprobs",
			[]string{"is neither", "every token's log probability", "logprob_token_ids"}},
		{"a shape of three dimensions", []*engine.Tensor{lg, m.floats("logprobs", []int{b, v, 1}, -9, 0)}, nil, "logprobs",
			[]string{"fits neither", "[B, V] of logits", "top-N"}},
		{"ids of another width", []*engine.Tensor{lg, vals, m.topIDs("logprob_token_ids", n+1)}, nil, "logprob_token_ids",
			[]string{"does not fit logprobs", "one token id per log probability"}},
		{"a top-N wider than the vocabulary", []*engine.Tensor{lg, m.floats("logprobs", []int{b, v + 1}, -9, 0), m.ints("logprob_token_ids", engine.I64, []int{b, v + 1}, 0, v)}, nil, "logprobs",
			[]string{"is not a top-N", "N in [1,"}},
		{"ids of floats", []*engine.Tensor{lg, vals, m.floats("logprob_token_ids", []int{b, n}, 0, 1)}, nil, "logprob_token_ids",
			[]string{"integer dtype"}},
		{"logprobs of ints", []*engine.Tensor{lg, m.ints("logprobs", engine.I32, []int{b, v}, 0, 1)}, nil, "logprobs",
			[]string{"float dtype"}},
		{"an unknown kind", []*engine.Tensor{lg, m.floats("logprobs", []int{b, v}, -9, 0)}, map[string]string{"logprobs_kind": "processed_logprobs"}, "",
			[]string{`metadata "logprobs_kind"`, "logprobs_kind must be raw or processed", `not "processed_logprobs"`}},
		{"an unknown kind of a mode", []*engine.Tensor{lg, m.floats("logprobs@a", []int{b, v}, -9, 0)}, map[string]string{"logprobs_kind@a": "logits"}, "",
			[]string{`metadata "logprobs_kind@a"`, `not "logits"`}},
		{"a kind of a bad mode", []*engine.Tensor{lg}, map[string]string{"logprobs_kind@a b": "raw"}, "",
			[]string{`metadata "logprobs_kind@a b"`, "may hold letters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildRun(fileOf(tt.meta, tt.tensors...), engine.Overrides{})
			checkError(t, err, "dump.safetensors", tt.tensor, tt.words...)
		})
	}
}
