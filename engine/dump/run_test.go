package dump

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// fileOf wraps tensors and metadata as a parsed safetensors dump.
func fileOf(meta map[string]string, tensors ...*engine.Tensor) *File {
	if meta == nil {
		meta = map[string]string{}
	}
	return &File{Name: "dump.safetensors", Format: Safetensors, Tensors: tensors, Meta: meta}
}

// dumpMaker builds random tensors of one batch shape.
type dumpMaker struct {
	rng        *rand.Rand
	b, v, k, l int
}

func (m dumpMaker) logits() *engine.Tensor {
	return randomTensor(m.rng, "logits", engine.BF16, m.b, m.v)
}

func (m dumpMaker) floats(name string, shape []int, lo, hi float64) *engine.Tensor {
	t := engine.NewTensor(name, engine.F32, shape...)
	for i := range t.NumElements() {
		t.SetFloat(i, lo+(hi-lo)*(0.05+0.9*m.rng.Float64()))
	}
	return t
}

func (m dumpMaker) ints(name string, dtype engine.DType, shape []int, lo, hi int) *engine.Tensor {
	t := engine.NewTensor(name, dtype, shape...)
	for i := range t.NumElements() {
		t.SetInt(i, int64(lo+m.rng.IntN(hi-lo)))
	}
	return t
}

func (m dumpMaker) spec() []*engine.Tensor {
	return []*engine.Tensor{
		randomTensor(m.rng, "target_logits", engine.F32, m.b, m.k+1, m.v),
		m.ints("draft_tokens", engine.I64, []int{m.b, m.k}, 0, m.v),
	}
}

func (m dumpMaker) ngram() []*engine.Tensor {
	return []*engine.Tensor{
		m.ints("input_ids", engine.I64, []int{m.b, m.l}, 1, 50),
		m.ints("input_ids_len", engine.I32, []int{m.b}, 0, m.l+1),
		m.ints("pre_ids", engine.I64, []int{m.b, m.l + 2}, 1, 50),
		m.ints("step_idx", engine.I32, []int{m.b}, 0, m.l+3),
	}
}

func newMaker(t *testing.T) dumpMaker {
	rng := newRand(t)
	return dumpMaker{rng: rng, b: 2 + rng.IntN(5), v: 10 + rng.IntN(90), k: 1 + rng.IntN(5), l: 3 + rng.IntN(10)}
}

func ptr[T any](v T) *T { return &v }

func TestInferOp(t *testing.T) {
	m := newMaker(t)
	b := m.b
	zeros := engine.NewTensor("temperature", engine.F32, b)
	someHot := engine.NewTensor("temperature", engine.F32, b)
	someHot.SetFloat(b-1, 0.8)
	tokens := m.ints("tokens", engine.I32, []int{b}, 0, m.v)
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		meta    map[string]string
		o       engine.Overrides
		want    engine.Op
	}{
		{"logits alone", []*engine.Tensor{m.logits()}, nil, engine.Overrides{}, engine.OpSoftmax},
		{"logits and probs", []*engine.Tensor{m.logits(), m.floats("probs", []int{b, m.v}, 0, 1)}, nil, engine.Overrides{}, engine.OpSoftmax},
		{"top_k", []*engine.Tensor{m.logits(), m.ints("top_k", engine.I32, []int{b}, 1, 5)}, nil, engine.Overrides{}, engine.OpRenorm},
		{"top_p", []*engine.Tensor{m.logits(), m.floats("top_p", nil, 0.1, 1)}, nil, engine.Overrides{}, engine.OpRenorm},
		{"min_p", []*engine.Tensor{m.logits(), m.floats("min_p", []int{b}, 0, 0.5)}, nil, engine.Overrides{}, engine.OpRenorm},
		{"samples", []*engine.Tensor{m.logits(), m.ints("samples", engine.I64, []int{b, 9}, 0, m.v)}, nil, engine.Overrides{}, engine.OpSample},
		{"sample_counts", []*engine.Tensor{m.logits(), m.ints("sample_counts", engine.I32, []int{b, m.v}, 0, 50)}, nil, engine.Overrides{}, engine.OpSample},
		{"seed", []*engine.Tensor{m.logits(), m.ints("seed", engine.I64, nil, 1, 99)}, nil, engine.Overrides{}, engine.OpSample},
		{"offset", []*engine.Tensor{m.logits(), m.ints("offset", engine.I64, []int{b}, 1, 99)}, nil, engine.Overrides{}, engine.OpSample},
		{"tokens", []*engine.Tensor{m.logits(), tokens}, nil, engine.Overrides{}, engine.OpArgmax},
		{"tokens, temperatures 0", []*engine.Tensor{m.logits(), tokens, zeros}, nil, engine.Overrides{}, engine.OpArgmax},
		{"tokens, one temperature not 0", []*engine.Tensor{m.logits(), tokens, someHot}, nil, engine.Overrides{}, engine.OpSample},
		{"tokens, temperature override", []*engine.Tensor{m.logits(), tokens}, nil, engine.Overrides{Temperature: ptr(0.7)}, engine.OpSample},
		{"tokens, zero temperature override", []*engine.Tensor{m.logits(), tokens, someHot}, nil, engine.Overrides{Temperature: ptr(0.0)}, engine.OpArgmax},
		{"tokens and top_p", []*engine.Tensor{m.logits(), tokens, m.floats("top_p", nil, 0.1, 1)}, nil, engine.Overrides{}, engine.OpSample},
		{"target_logits", m.spec(), nil, engine.Overrides{}, engine.OpSpecVerify},
		{"input_ids", m.ngram(), nil, engine.Overrides{}, engine.OpNgramMatch},
		{"metadata op", []*engine.Tensor{m.logits(), m.floats("probs", []int{b, m.v}, 0, 1)}, map[string]string{"op": "renorm"}, engine.Overrides{}, engine.OpRenorm},
		{"override beats metadata", []*engine.Tensor{m.logits(), tokens}, map[string]string{"op": "softmax"}, engine.Overrides{Op: ptr(engine.OpSample)}, engine.OpSample},
		// Per-row parameters in the metadata count as the tensors do.
		{"metadata top_p", []*engine.Tensor{m.logits()}, map[string]string{"top_p": "0.9"}, engine.Overrides{}, engine.OpRenorm},
		{"metadata seed", []*engine.Tensor{m.logits()}, map[string]string{"seed": "7"}, engine.Overrides{}, engine.OpSample},
		{"tokens, metadata temperature 0", []*engine.Tensor{m.logits(), tokens}, map[string]string{"temperature": "0"}, engine.Overrides{}, engine.OpArgmax},
		{"tokens, metadata temperature 0.7", []*engine.Tensor{m.logits(), tokens}, map[string]string{"temperature": "0.7"}, engine.Overrides{}, engine.OpSample},
		{"unread metadata keys", []*engine.Tensor{m.logits()}, map[string]string{"draws": "5", "note": "x"}, engine.Overrides{}, engine.OpSoftmax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := BuildRun(fileOf(tt.meta, tt.tensors...), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if run.Op != tt.want {
				t.Errorf("op %s, want %s", run.Op, tt.want)
			}
		})
	}
}

func TestBuildRunErrors(t *testing.T) {
	m := newMaker(t)
	b, v, k := m.b, m.v, m.k
	with := func(base []*engine.Tensor, extra ...*engine.Tensor) []*engine.Tensor {
		out := slices.Clone(base)
		for _, e := range extra {
			out = slices.DeleteFunc(out, func(t *engine.Tensor) bool { return t.Name == e.Name })
			out = append(out, e)
		}
		return out
	}
	without := func(base []*engine.Tensor, name string) []*engine.Tensor {
		return slices.DeleteFunc(slices.Clone(base), func(t *engine.Tensor) bool { return t.Name == name })
	}
	lg := []*engine.Tensor{m.logits()}
	setRow := func(t *engine.Tensor, row int, v float64) *engine.Tensor {
		t.SetFloat(row, v)
		return t
	}
	setInt := func(t *engine.Tensor, i int, v int64) *engine.Tensor {
		t.SetInt(i, v)
		return t
	}
	badDraft := m.ints("draft_tokens", engine.I64, []int{b, k}, 0, v)
	badDraft.SetInt(k*(b-1)+k-1, int64(v))
	ngram := m.ngram()
	longLen := m.ints("input_ids_len", engine.I32, []int{b}, 0, m.l+1)
	longLen.SetInt(1, int64(m.l+1))
	negStep := m.ints("step_idx", engine.I64, []int{b}, 0, m.l+3)
	negStep.SetInt(0, -1)
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		meta    map[string]string
		o       engine.Overrides
		tensor  string
		words   []string
	}{
		{"no tensors", nil, nil, engine.Overrides{}, "logits", []string{`tensor "logits": not found; a dump holds logits, or target_logits for spec_verify, or input_ids and pre_ids for ngram_match, and the file holds no tensors`}},
		{"only probs", []*engine.Tensor{m.floats("probs", []int{b, v}, 0, 1)}, nil, engine.Overrides{}, "logits", []string{"and the file holds probs"}},
		{"drafts without target", []*engine.Tensor{m.ints("draft_tokens", engine.I64, []int{b, k}, 0, v)}, nil, engine.Overrides{}, "target_logits", []string{"not found", "draft_tokens"}},
		{"step_idx alone", []*engine.Tensor{m.ints("step_idx", engine.I32, []int{b}, 0, 3)}, nil, engine.Overrides{}, "input_ids", []string{"not found"}},
		{"spec without drafts", without(m.spec(), "draft_tokens"), nil, engine.Overrides{}, "draft_tokens", []string{"op spec_verify needs it"}},
		{"ngram without step_idx", without(ngram, "step_idx"), nil, engine.Overrides{}, "step_idx", []string{"op ngram_match needs it"}},
		{"metadata op without logits", m.spec(), map[string]string{"op": "sample"}, engine.Overrides{}, "logits", []string{"op sample needs it", "target_logits"}},
		{"metadata op unknown", lg, map[string]string{"op": "beam"}, engine.Overrides{}, "", []string{`metadata "op"`, `op must be argmax`, `not "beam"`}},
		{"override op unknown", lg, nil, engine.Overrides{Op: ptr(engine.Op("beam"))}, "", []string{"override: op must be", `"beam"`}},
		{"logits 1-D", []*engine.Tensor{randomTensor(m.rng, "logits", engine.F32, v)}, nil, engine.Overrides{}, "logits", []string{"is not [B, V]", "logits[None]"}},
		{"logits empty vocab", []*engine.Tensor{engine.NewTensor("logits", engine.F32, b, 0)}, nil, engine.Overrides{}, "logits", []string{"is not [B, V]"}},
		{"logits of ints", []*engine.Tensor{m.ints("logits", engine.I32, []int{b, v}, -5, 5)}, nil, engine.Overrides{}, "logits", []string{"dtype I32", "float dtype"}},
		{"float tokens", with(lg, m.floats("tokens", []int{b}, 0, 3)), nil, engine.Overrides{}, "tokens", []string{"dtype F32", "integer dtype"}},
		{"bool tokens", with(lg, engine.NewTensor("tokens", engine.Bool, b)), nil, engine.Overrides{}, "tokens", []string{"dtype BOOL"}},
		{"tokens wrong rows", with(lg, m.ints("tokens", engine.I64, []int{b + 1}, 0, v)), nil, engine.Overrides{}, "tokens", []string{"does not fit logits", "want ["}},
		{"probs wrong vocab", with(lg, m.floats("probs", []int{b, v + 1}, 0, 1)), nil, engine.Overrides{}, "probs", []string{"does not fit logits"}},
		{"samples 1-D", with(lg, m.ints("samples", engine.I64, []int{b}, 0, v)), nil, engine.Overrides{}, "samples", []string{"does not fit logits", "[B, N]"}},
		{"temperature wrong rows", with(lg, m.floats("temperature", []int{b + 2}, 0.1, 2)), nil, engine.Overrides{}, "temperature", []string{"does not fit logits", "want [] or ["}},
		{"temperature of ints", with(lg, m.ints("temperature", engine.I32, []int{b}, 1, 2)), nil, engine.Overrides{}, "temperature", []string{"float dtype"}},
		{"temperature negative", with(lg, setRow(m.floats("temperature", []int{b}, 0.1, 2), 1, -0.5)), nil, engine.Overrides{}, "temperature", []string{"row 1: temperature must be a finite number >= 0", "not -0.5"}},
		{"temperature NaN", with(lg, setRow(m.floats("temperature", []int{b}, 0.1, 2), 0, math.NaN())), nil, engine.Overrides{}, "temperature", []string{"row 0: temperature must be", "not NaN"}},
		{"temperature scalar Inf", with(lg, setRow(m.floats("temperature", nil, 0.1, 2), 0, math.Inf(1))), nil, engine.Overrides{}, "temperature", []string{"temperature must be", "not +Inf"}},
		{"top_p zero", with(lg, setRow(m.floats("top_p", []int{b}, 0.1, 1), b-1, 0)), nil, engine.Overrides{}, "top_p", []string{"row " + strconv.Itoa(b-1) + ": top_p must be in (0, 1]", "not 0"}},
		{"top_p over one", with(lg, m.floats("top_p", nil, 1.2, 1.5)), nil, engine.Overrides{}, "top_p", []string{"in (0, 1]"}},
		{"min_p negative", with(lg, setRow(m.floats("min_p", []int{b}, 0, 0.5), 0, -0.1)), nil, engine.Overrides{}, "min_p", []string{"in [0, 1]"}},
		{"top_k negative", with(lg, m.ints("top_k", engine.I64, []int{b}, -9, -1)), nil, engine.Overrides{}, "top_k", []string{"in [0, 2147483647]"}},
		{"top_k past int32", with(lg, m.ints("top_k", engine.I64, nil, 1<<31, 1<<32)), nil, engine.Overrides{}, "top_k", []string{"in [0, 2147483647]"}},
		{"offset negative", with(lg, m.ints("offset", engine.I64, []int{b}, -9, -1)), nil, engine.Overrides{}, "offset", []string{">= 0"}},
		{"draft token out of vocab", with(m.spec(), badDraft), nil, engine.Overrides{}, "draft_tokens", []string{"row " + strconv.Itoa(b-1) + ", position " + strconv.Itoa(k-1), "outside the vocabulary"}},
		{"draft tokens wrong K", with(m.spec(), m.ints("draft_tokens", engine.I64, []int{b, k + 1}, 0, v)), nil, engine.Overrides{}, "draft_tokens", []string{"does not fit target_logits"}},
		{"draft probs wrong vocab", with(m.spec(), m.floats("draft_probs", []int{b, k, v - 1}, 0, 1)), nil, engine.Overrides{}, "draft_probs", []string{"does not fit target_logits"}},
		{"target_logits 2-D", []*engine.Tensor{randomTensor(m.rng, "target_logits", engine.F32, b, v), m.ints("draft_tokens", engine.I64, []int{b, k}, 0, v)}, nil, engine.Overrides{}, "target_logits", []string{"[B, K+1, V]"}},
		{"spec trials wrong K", with(m.spec(), m.ints("spec_trials", engine.I32, []int{7, b, k}, 0, v)), nil, engine.Overrides{}, "spec_trials", []string{"does not fit target_logits", "[T, B, K+1]"}},
		{"spec tokens float", with(m.spec(), m.floats("spec_tokens", []int{b, k + 1}, 0, 1)), nil, engine.Overrides{}, "spec_tokens", []string{"integer dtype"}},
		{"input_ids_len past L", with(ngram, longLen), nil, engine.Overrides{}, "input_ids_len", []string{"row 1 is " + strconv.Itoa(m.l+1), "outside [0, " + strconv.Itoa(m.l) + "]"}},
		{"step_idx negative", with(ngram, negStep), nil, engine.Overrides{}, "step_idx", []string{"row 0 is -1"}},
		{"pre_ids wrong rows", with(ngram, m.ints("pre_ids", engine.I64, []int{b + 1, 4}, 0, 9)), nil, engine.Overrides{}, "pre_ids", []string{"does not fit input_ids"}},
		{"draft_out columns", with(ngram, m.ints("draft_out", engine.I64, []int{b, 5}, -1, 9)), nil, engine.Overrides{}, "draft_out", []string{"5 columns, but max_draft_tokens is 8"}},
		{"metadata filter_order", lg, map[string]string{"filter_order": "both"}, engine.Overrides{}, "", []string{`metadata "filter_order"`, `"both"`}},
		{"metadata top_k_ties", lg, map[string]string{"top_k_ties": "random"}, engine.Overrides{}, "", []string{`metadata "top_k_ties"`}},
		{"metadata max_ngram_size not int", lg, map[string]string{"max_ngram_size": "three"}, engine.Overrides{}, "", []string{`metadata "max_ngram_size"`, "must be an integer", `not "three"`}},
		{"metadata max_draft_tokens zero", lg, map[string]string{"max_draft_tokens": "0"}, engine.Overrides{}, "", []string{`metadata "max_draft_tokens"`, "in [1, 65536]", "not 0"}},
		{"metadata threshold negative", lg, map[string]string{"threshold": "-1"}, engine.Overrides{}, "", []string{`metadata "threshold"`}},
		{"override temperature", lg, nil, engine.Overrides{Temperature: ptr(-1.0)}, "", []string{"override: temperature must be a finite number >= 0", "not -1"}},
		{"override top_p", lg, nil, engine.Overrides{Op: ptr(engine.OpRenorm), TopP: ptr(2.0)}, "", []string{"override: top_p must be", "not 2"}},
		{"override top_k", lg, nil, engine.Overrides{Op: ptr(engine.OpRenorm), TopK: ptr(-3)}, "", []string{"override: top_k must be", "not -3"}},
		{"override method", lg, nil, engine.Overrides{Method: ptr(engine.SampleMethod("magic"))}, "", []string{"override: method must be", `"magic"`}},
		{"override draws", lg, nil, engine.Overrides{Draws: ptr(-1)}, "", []string{"override: draws must be", "not -1"}},
		{"override filter_order", lg, nil, engine.Overrides{FilterOrder: ptr(engine.FilterOrder("x"))}, "", []string{"override: filter_order must be"}},
		{"override max_ngram_size", lg, nil, engine.Overrides{MaxNgramSize: ptr(0)}, "", []string{"override: max_ngram_size must be", "not 0"}},
		// Per-row parameters in the metadata: one value for every row,
		// checked in the table's words.
		{"metadata temperature negative", lg, map[string]string{"op": "softmax", "temperature": "-1"}, engine.Overrides{}, "", []string{`metadata "temperature": temperature must be a finite number >= 0`, "not -1"}},
		{"metadata temperature not a number", lg, map[string]string{"temperature": "warm"}, engine.Overrides{}, "", []string{`metadata "temperature": temperature must be`, `not "warm"`}},
		{"metadata top_p 2", lg, map[string]string{"top_p": "2"}, engine.Overrides{}, "", []string{`metadata "top_p": top_p must be in (0, 1]`, "not 2"}},
		{"metadata top_k negative", lg, map[string]string{"top_k": "-5"}, engine.Overrides{}, "", []string{`metadata "top_k": top_k must be an integer in [0, 2147483647]`, "not -5"}},
		{"metadata min_p over 1", lg, map[string]string{"min_p": "1.5"}, engine.Overrides{}, "", []string{`metadata "min_p"`, "in [0, 1]"}},
		{"metadata seed not an integer", lg, map[string]string{"seed": "0x2a"}, engine.Overrides{}, "", []string{`metadata "seed": seed must be an integer`}},
		{"metadata offset negative", lg, map[string]string{"offset": "-3"}, engine.Overrides{}, "", []string{`metadata "offset": offset must be an integer >= 0`, "not -3"}},
		// Token ids of ngram_match are int32 in the kernels: refused when
		// the dump is read, naming the tensor, not by a backend mid-run.
		{"input_ids past int32", with(ngram, setInt(m.ints("input_ids", engine.I64, []int{b, m.l}, 1, 50), b*m.l-1, 1<<40)), nil, engine.Overrides{}, "input_ids",
			[]string{"row " + strconv.Itoa(b-1) + ", position " + strconv.Itoa(m.l-1) + " holds token 1099511627776, which does not fit in int32"}},
		{"pre_ids below int32", with(ngram, setInt(m.ints("pre_ids", engine.I64, []int{b, m.l + 2}, 1, 50), 0, -1<<31-1)), nil, engine.Overrides{}, "pre_ids",
			[]string{"row 0, position 0 holds token -2147483649, which does not fit in int32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildRun(fileOf(tt.meta, tt.tensors...), tt.o)
			checkError(t, err, "dump.safetensors", tt.tensor, tt.words...)
		})
	}
}

func TestParamsResolution(t *testing.T) {
	m := newMaker(t)
	b := m.b
	temps := m.floats("temperature", []int{b}, 0.1, 2)
	topP := m.floats("top_p", nil, 0.2, 1)
	topK := m.ints("top_k", engine.I32, []int{b}, 1, 50)
	seeds := m.ints("seed", engine.I64, []int{b}, 1, 1<<30)
	seeds.SetInt(0, -2) // a uint64 seed stored in torch's int64
	offsets := m.ints("offset", engine.I64, nil, 1, 1<<20)
	minP := m.floats("min_p", []int{b}, 0.01, 0.3)
	col := func(t *engine.Tensor) []float64 {
		out := make([]float64, b)
		for r := range out {
			if len(t.Shape) == 0 {
				out[r] = t.Float(0)
			} else {
				out[r] = t.Float(r)
			}
		}
		return out
	}
	meta := map[string]string{"filter_order": "joint", "top_k_ties": "lowest_index", "max_ngram_size": "5", "max_draft_tokens": "4", "threshold": "99", "source": "vllm"}

	t.Run("defaults", func(t *testing.T) {
		run, err := BuildRun(fileOf(nil, m.logits()), engine.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		p := run.Params
		for r := range b {
			if p.Temperature[r] != 1 || p.TopK[r] != 0 || p.TopP[r] != 1 || p.MinP[r] != 0 || p.Seed[r] != 0 || p.Offset[r] != 0 {
				t.Errorf("row %d: %v %v %v %v %v %v", r, p.Temperature[r], p.TopK[r], p.TopP[r], p.MinP[r], p.Seed[r], p.Offset[r])
			}
		}
		if len(p.Temperature) != b || p.FilterOrder != engine.TopKFirst || p.TopKTies != engine.TiesKeep || p.MaxNgramSize != 3 ||
			p.MaxDraftTokens != 8 || p.Threshold != 1024 || p.Draws != 0 || p.Trials != 0 || p.Method != engine.SampleAuto {
			t.Errorf("params %+v", p)
		}
		if run.Source != "dump.safetensors" || run.Rows() != b || run.Vocab() != m.v || len(run.Meta) != 0 {
			t.Errorf("source %q rows %d vocab %d meta %v", run.Source, run.Rows(), run.Vocab(), run.Meta)
		}
	})
	t.Run("metadata and tensors", func(t *testing.T) {
		run, err := BuildRun(fileOf(meta, m.logits(), temps, topP, topK, seeds, offsets, minP), engine.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		p := run.Params
		if run.Op != engine.OpSample {
			t.Errorf("op %s", run.Op)
		}
		if !slices.Equal(p.Temperature, col(temps)) || !slices.Equal(p.TopP, col(topP)) || !slices.Equal(p.MinP, col(minP)) {
			t.Errorf("float params %v %v %v", p.Temperature, p.TopP, p.MinP)
		}
		for r := range b {
			if p.TopK[r] != int(topK.Int(r)) || p.Seed[r] != uint64(seeds.Int(r)) || p.Offset[r] != uint64(offsets.Int(0)) {
				t.Errorf("row %d: top_k %d seed %d offset %d", r, p.TopK[r], p.Seed[r], p.Offset[r])
			}
		}
		if p.Seed[0] != math.MaxUint64-1 {
			t.Errorf("seed -2 read as %d, want the same bits as uint64", p.Seed[0])
		}
		if p.FilterOrder != engine.Joint || p.TopKTies != engine.TiesLowestIndex || p.MaxNgramSize != 5 || p.MaxDraftTokens != 4 || p.Threshold != 99 {
			t.Errorf("settings %+v", p)
		}
		if run.Meta["source"] != "vllm" || run.Meta["threshold"] != "99" {
			t.Errorf("meta %v", run.Meta)
		}
	})
	t.Run("overrides", func(t *testing.T) {
		f := fileOf(meta, m.logits(), temps, topP, topK, seeds, offsets, minP)
		o := engine.Overrides{
			Op: ptr(engine.OpRenorm), Temperature: ptr(0.25), TopK: ptr(7), TopP: ptr(0.5), MinP: ptr(0.125),
			Seed: ptr(uint64(1) << 63), Offset: ptr(uint64(12)), FilterOrder: ptr(engine.TopKFirst), TopKTies: ptr(engine.TiesKeep),
			Method: ptr(engine.SampleGumbel), Draws: ptr(1000), Trials: ptr(50), MaxNgramSize: ptr(2), MaxDraftTokens: ptr(16), Threshold: ptr(7),
		}
		run, err := BuildRun(f, o)
		if err != nil {
			t.Fatal(err)
		}
		p := run.Params
		if run.Op != engine.OpRenorm {
			t.Errorf("op %s", run.Op)
		}
		for r := range b {
			if p.Temperature[r] != 0.25 || p.TopK[r] != 7 || p.TopP[r] != 0.5 || p.MinP[r] != 0.125 {
				t.Errorf("row %d: %v %v %v %v", r, p.Temperature[r], p.TopK[r], p.TopP[r], p.MinP[r])
			}
		}
		if p.Method != engine.SampleGumbel || p.Draws != 1000 || p.Trials != 50 || p.MaxNgramSize != 2 || p.MaxDraftTokens != 16 || p.Threshold != 7 || p.FilterOrder != engine.TopKFirst || p.TopKTies != engine.TiesKeep {
			t.Errorf("settings %+v", p)
		}
		want := map[string]string{"op": "renorm", "filter_order": "top_k_first", "top_k_ties": "keep", "max_ngram_size": "2", "max_draft_tokens": "16", "threshold": "7", "source": "vllm"}
		for k, v := range want {
			if run.Meta[k] != v {
				t.Errorf("meta %q = %q, want %q", k, run.Meta[k], v)
			}
		}
		if f.Meta["threshold"] != "99" {
			t.Error("overrides changed the file's own metadata")
		}
		// renorm ignores the seed tensor (with a notice); the override still applies.
		if p.Seed[0] != 1<<63 || p.Offset[b-1] != 12 || !hasNotice(run, `ignored tensor "seed": not used by op renorm`) {
			t.Errorf("seed %d, offset %d, notices %q", p.Seed[0], p.Offset[b-1], run.Notices)
		}
	})
}

func hasNotice(run *engine.Run, word string) bool {
	return slices.ContainsFunc(run.Notices, func(s string) bool { return strings.Contains(s, word) })
}

func TestRunInputsAndOutputs(t *testing.T) {
	m := newMaker(t)
	b, v, k := m.b, m.v, m.k
	nanLogits := m.logits()
	nanLogits.SetFloat(0, math.NaN())
	nanLogits.SetFloat(1, math.Inf(1))
	nanLogits.SetFloat(2, math.Inf(-1))
	wildTokens := m.ints("tokens", engine.I32, []int{b}, 0, v)
	wildTokens.SetInt(0, -5)
	wildTokens.SetInt(1, int64(v+3))
	probs := m.floats("probs", []int{b, v}, 0, 1)
	probs.SetFloat(3, math.NaN())

	t.Run("sample", func(t *testing.T) {
		samples := m.ints("samples", engine.I64, []int{b, 11}, 0, v)
		run, err := BuildRun(fileOf(nil, nanLogits, wildTokens, samples, probs, m.ints("seed", engine.I64, nil, 1, 9),
			m.floats("foo", []int{3}, 0, 1), m.spec()[1]), engine.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if run.Op != engine.OpSample || run.Logits != nanLogits || run.External["tokens"] != wildTokens || run.External["samples"] != samples || run.External["probs"] != probs {
			t.Errorf("run %+v", run)
		}
		if !hasNotice(run, `ignored tensor "foo": not part of the dump format`) || !hasNotice(run, `ignored tensor "draft_tokens": not used by op sample`) {
			t.Errorf("notices %q", run.Notices)
		}
	})
	t.Run("spec_verify", func(t *testing.T) {
		spec := m.spec()
		spec[0].SetFloat(5, math.NaN())
		draftProbs := m.floats("draft_probs", []int{b, k, v}, 0, 1)
		draftProbs.SetFloat(0, math.Inf(1))
		outs := []*engine.Tensor{
			m.ints("spec_tokens", engine.I32, []int{b, k + 1}, -1, v),
			m.ints("spec_emitted", engine.I32, []int{b}, 0, k+1),
			m.ints("spec_accepted", engine.I64, []int{b}, 0, k+1),
			m.ints("spec_trials", engine.I32, []int{13, b, k + 1}, -1, v),
		}
		run, err := BuildRun(fileOf(nil, append(append(spec, draftProbs, m.floats("top_p", nil, 0.3, 1)), outs...)...), engine.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if run.TargetLogits != spec[0] || run.DraftTokens != spec[1] || run.DraftProbs != draftProbs || run.Logits != nil || run.DraftLen() != k || run.Vocab() != v {
			t.Errorf("run inputs %+v", run)
		}
		for _, o := range outs {
			if run.External[o.Name] != o {
				t.Errorf("external %s missing", o.Name)
			}
		}
		if run.Params.TopP[b-1] == 1 {
			t.Error("top_p tensor not applied")
		}
	})
	t.Run("ngram_match", func(t *testing.T) {
		ng := m.ngram()
		draftOut := m.ints("draft_out", engine.I32, []int{b, 6}, -1, 50)
		run, err := BuildRun(fileOf(map[string]string{"max_draft_tokens": "6"}, append(ng, draftOut, m.floats("temperature", nil, 0.5, 1))...), engine.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if run.InputIDs != ng[0] || run.InputIDsLen != ng[1] || run.PreIDs != ng[2] || run.StepIdx != ng[3] || run.External["draft_out"] != draftOut || run.Rows() != b {
			t.Errorf("run %+v", run)
		}
		if !hasNotice(run, `"temperature": not used by op ngram_match`) || run.Params.Temperature[0] != 1 {
			t.Errorf("notices %q, temperature %v", run.Notices, run.Params.Temperature)
		}
	})
	t.Run("npz notices carry over", func(t *testing.T) {
		f := fileOf(nil, m.logits())
		f.Notices = []string{`ignored zip member "a.txt": not an .npy array`}
		run, err := BuildRun(f, engine.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasNotice(run, "a.txt") {
			t.Errorf("notices %q", run.Notices)
		}
	})
}

// TestMetadataParams: a per-row parameter in the metadata is one value for
// every row, below a tensor of the same name and an override; one the op
// does not take, or a tensor replaces, is a notice, as is every key
// sampviz does not read.
func TestMetadataParams(t *testing.T) {
	m := newMaker(t)
	b := m.b
	temps := m.floats("temperature", []int{b}, 0.1, 2)
	all := func(v float64) []float64 {
		out := make([]float64, b)
		for i := range out {
			out[i] = v
		}
		return out
	}
	col := make([]float64, b)
	for r := range col {
		col[r] = temps.Float(r)
	}
	tests := []struct {
		name        string
		tensors     []*engine.Tensor
		meta        map[string]string
		o           engine.Overrides
		temperature []float64
		topP        float64
		seed        uint64
		notices     []string // each a notice's words
		quiet       []string // words no notice may hold
	}{
		{"metadata temperature", []*engine.Tensor{m.logits()}, map[string]string{"temperature": "0.5"}, engine.Overrides{}, all(0.5), 1, 0, nil, []string{"temperature"}},
		{"metadata seed as int64 bits", []*engine.Tensor{m.logits()}, map[string]string{"op": "sample", "seed": "-2"}, engine.Overrides{}, all(1), 1, math.MaxUint64 - 1, nil, []string{"seed"}},
		{"metadata top_p for renorm", []*engine.Tensor{m.logits()}, map[string]string{"op": "renorm", "top_p": "0.75"}, engine.Overrides{}, all(1), 0.75, 0, nil, []string{"top_p"}},
		{"the tensor beats the metadata", []*engine.Tensor{m.logits(), temps}, map[string]string{"temperature": "0.5"}, engine.Overrides{}, col, 1, 0,
			[]string{`ignored metadata "temperature": the tensor "temperature" gives every row's temperature`}, nil},
		{"the override beats both", []*engine.Tensor{m.logits(), temps}, map[string]string{"temperature": "0.5"}, engine.Overrides{Temperature: ptr(0.25)}, all(0.25), 1, 0, nil, []string{"temperature"}},
		{"a parameter the op does not take", []*engine.Tensor{m.logits()}, map[string]string{"op": "softmax", "top_p": "0.5"}, engine.Overrides{}, all(1), 1, 0,
			[]string{`ignored metadata "top_p": not used by op softmax`}, nil},
		{"keys sampviz does not read", []*engine.Tensor{m.logits()}, map[string]string{"op": "softmax", "source": "vllm", "note": "x", "draws": "5", "filter_order": "joint"}, engine.Overrides{}, all(1), 1, 0,
			[]string{`ignored metadata "draws": not part of the dump format`, `ignored metadata "note": not part of the dump format`}, []string{"source", `"op"`, "filter_order"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := BuildRun(fileOf(tt.meta, tt.tensors...), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			p := run.Params
			if !slices.Equal(p.Temperature, tt.temperature) || p.TopP[b-1] != tt.topP || p.Seed[0] != tt.seed {
				t.Errorf("temperature %v, top_p %v, seed %d; want %v, %v, %d", p.Temperature, p.TopP, p.Seed[0], tt.temperature, tt.topP, tt.seed)
			}
			for _, w := range tt.notices {
				if !hasNotice(run, w) {
					t.Errorf("notices %q lack %q", run.Notices, w)
				}
			}
			for _, w := range tt.quiet {
				if hasNotice(run, w) {
					t.Errorf("notices %q mention %q", run.Notices, w)
				}
			}
		})
	}
}
