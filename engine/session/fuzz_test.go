package session

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
)

// FuzzJob feeds arbitrary bytes as a dump through the whole session: the
// readers, the op and parameter tables, the memory budget (scaled down to
// fuzzBudget), our CPU backend (with a few draws and trials) and the judge.
// Nothing may panic or hang; a file that cannot be used must be an
// *InputError; every run that goes through must give a report of its rows.
// (engine/dump's fuzz targets stop after building the run.)
func FuzzJob(f *testing.F) {
	for _, seed := range jobSeeds(f) {
		f.Add(seed)
	}
	path := filepath.Join(f.TempDir(), "fuzz.dump")
	draws, trials := 32, 8
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := New(cpu.New())
		s.Workers, s.MaxMemory = 1, fuzzBudget
		job := Job{DumpPath: path, FileName: "fuzz.dump", Overrides: engine.Overrides{Draws: &draws, Trials: &trials}}
		rep, err := s.Execute(context.Background(), job, nil)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) && !errors.Is(err, engine.ErrUnsupported) {
				t.Fatalf("Execute: %v (%T), want an *InputError or ErrUnsupported", err, err)
			}
			return
		}
		for _, o := range rep.Outputs {
			if len(o.Rows) != rep.Rows && o.Pass {
				t.Fatalf("output %s judged %d of %d rows and passes", o.Name, len(o.Rows), rep.Rows)
			}
		}
	})
}

// fuzzBudget is the memory budget of a fuzzed job: what a small dump needs,
// so that a dump that declares more is refused.
const fuzzBudget = 16 << 20

// jobSeeds writes one small dump per op, with outputs to judge, as
// safetensors and as npz (deflated when it can be), and a few hostile ones.
func jobSeeds(tb testing.TB) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	floats := func(name string, dt engine.DType, shape []int, lo, hi float64) *engine.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = lo + (hi-lo)*rng.Float64()
		}
		return engine.FromFloat64s(name, dt, shape, x)
	}
	ints := func(name string, shape []int, lo, hi int) *engine.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x := make([]int64, n)
		for i := range x {
			x[i] = int64(lo + rng.IntN(hi-lo))
		}
		return engine.FromInts(name, engine.I64, shape, x)
	}
	const b, v, k = 3, 7, 2
	lg := floats("logits", engine.F32, []int{b, v}, -3, 3)
	dumps := []struct {
		meta map[string]string
		ts   []*engine.Tensor
	}{
		{map[string]string{"op": "argmax"}, []*engine.Tensor{lg, ints("tokens", []int{b}, 0, v)}},
		{map[string]string{"op": "softmax"}, []*engine.Tensor{lg, floats("temperature", engine.F32, []int{b}, 0.5, 2), floats("probs", engine.F32, []int{b, v}, 0, 0.3)}},
		{map[string]string{"op": "renorm"}, []*engine.Tensor{lg, floats("top_p", engine.F32, []int{b}, 0.5, 1), ints("top_k", []int{b}, 0, v), floats("probs", engine.F32, []int{b, v}, 0, 0.3)}},
		{map[string]string{"op": "sample"}, []*engine.Tensor{lg, ints("seed", []int{b}, 0, 99), ints("samples", []int{b, 5}, 0, v)}},
		{map[string]string{"op": "spec_verify"}, []*engine.Tensor{floats("target_logits", engine.F32, []int{b, k + 1, v}, -3, 3), ints("draft_tokens", []int{b, k}, 0, v),
			floats("draft_probs", engine.F32, []int{b, k, v}, 0, 1), ints("spec_trials", []int{4, b, k + 1}, -1, v)}},
		{map[string]string{"op": "ngram_match", "max_draft_tokens": "3"}, []*engine.Tensor{ints("input_ids", []int{b, 6}, 0, 4), ints("input_ids_len", []int{b}, 0, 7),
			ints("pre_ids", []int{b, 5}, 0, 4), ints("step_idx", []int{b}, 0, 6), ints("draft_out", []int{b, 3}, -1, 4)}},
		{map[string]string{"op": "spec_tree_verify"}, []*engine.Tensor{floats("target_logits", engine.F32, []int{b, 4, v}, -3, 3), ints("candidates", []int{b, 4}, 0, v),
			engine.FromInts("retrive_next_token", engine.I64, []int{b, 4}, []int64{1, 3, -1, -1, 1, 3, -1, -1, 1, -1, -1, -1}),
			engine.FromInts("retrive_next_sibling", engine.I64, []int{b, 4}, []int64{-1, 2, -1, -1, -1, 2, -1, -1, -1, 2, 3, -1}),
			floats("draft_probs", engine.F32, []int{b, 4, v}, 0, 1), ints("tree_path_trials", []int{4, b, 3}, -1, 4), ints("tree_trials", []int{4, b, 3}, -1, v)}},
		// Hostile: a huge draft count and a huge vocabulary for its bytes.
		{map[string]string{"op": "sample"}, []*engine.Tensor{floats("logits", engine.F32, []int{1, 1 << 14}, -1, 1)}},
	}
	var seeds [][]byte
	for _, d := range dumps {
		var st, npz bytes.Buffer
		if err := dump.WriteSafetensors(&st, d.ts, d.meta); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, st.Bytes())
		if err := dump.WriteNPZ(&npz, d.ts, d.meta); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, npz.Bytes())
	}
	return seeds
}
