package cuda

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

// ngramRow is one row of a hand-made ngram_match run: its prompt
// (input_ids[0:input_ids_len]) and its generated tokens (pre_ids[0:step_idx]).
type ngramRow struct{ prompt, gen []int64 }

// ngramRun builds the ngram_match run of rows under sampviz's rule. The
// prompt and generated capacities are the longest row's plus two, and the
// cells past a row's lengths hold its last generated token, so a kernel
// that reads past input_ids_len or step_idx finds a match there.
func ngramRun(rows []ngramRow, maxNgram, maxDraft, threshold int) *engine.Run {
	l, m := 2, 2
	for _, r := range rows {
		l, m = max(l, len(r.prompt)+2), max(m, len(r.gen)+2)
	}
	in := engine.NewTensor("input_ids", engine.I64, len(rows), l)
	inLen := engine.NewTensor("input_ids_len", engine.I32, len(rows))
	pre := engine.NewTensor("pre_ids", engine.I32, len(rows), m)
	step := engine.NewTensor("step_idx", engine.I64, len(rows))
	for i, r := range rows {
		pad := int64(7)
		if len(r.gen) > 0 {
			pad = r.gen[len(r.gen)-1]
		}
		inLen.SetInt(i, int64(len(r.prompt)))
		step.SetInt(i, int64(len(r.gen)))
		for j := range l {
			v := pad
			if j < len(r.prompt) {
				v = r.prompt[j]
			}
			in.SetInt(i*l+j, v)
		}
		for j := range m {
			v := pad
			if j < len(r.gen) {
				v = r.gen[j]
			}
			pre.SetInt(i*m+j, v)
		}
	}
	return &engine.Run{Op: engine.OpNgramMatch, InputIDs: in, InputIDsLen: inLen, PreIDs: pre, StepIdx: step,
		Params: engine.Params{MaxNgramSize: maxNgram, MaxDraftTokens: maxDraft, Threshold: threshold}}
}

// TestGPUNgramMatchEdges runs csrc/ngram.cu on hand-made rows that pin the
// rule's every branch: each case's drafts are first checked against
// engine/cpu (so the case tests what its name says, even without a GPU),
// then the GPU's must be equal bit for bit.
func TestGPUNgramMatchEdges(t *testing.T) {
	none := []int32{-1, -1, -1, -1}
	tests := []struct {
		name                          string
		rows                          []ngramRow
		maxNgram, maxDraft, threshold int
		want                          [][]int32
	}{
		{"step 0 proposes nothing", []ngramRow{{[]int64{1, 2, 3}, nil}}, 3, 4, 100, [][]int32{none}},
		{"max_ngram 0 proposes nothing", []ngramRow{{[]int64{1, 2}, []int64{1}}}, 0, 4, 100, [][]int32{none}},
		{"threshold 0 proposes nothing", []ngramRow{{[]int64{1, 2}, []int64{1}}}, 3, 4, 0, [][]int32{none}},
		{"a threshold below the draft cuts it at one row", []ngramRow{{[]int64{1, 5, 6, 7}, []int64{1}}}, 3, 4, 2,
			[][]int32{{5, 6, -1, -1}}},
		{"n = 3 in the prompt", []ngramRow{{[]int64{5, 1, 2, 3, 9, 9}, []int64{7, 1, 2, 3}}}, 3, 4, 100,
			[][]int32{{9, 9, -1, -1}}},
		{"the longest n beats a leftmost shorter one", []ngramRow{{[]int64{2, 3, 8, 1, 2, 3, 4}, []int64{1, 2, 3}}}, 3, 4, 100,
			[][]int32{{4, -1, -1, -1}}},
		{"the prompt beats the generated tokens at the same n", []ngramRow{{[]int64{1, 2, 7}, []int64{1, 2, 6, 1, 2}}}, 3, 4, 100,
			[][]int32{{7, -1, -1, -1}}},
		{"a longer n in the generated tokens beats a shorter one in the prompt",
			[]ngramRow{{[]int64{9, 2, 4}, []int64{1, 2, 5, 1, 2}}}, 3, 4, 100, [][]int32{{5, 1, 2, -1}}},
		{"a match at the prompt's very end is refused", []ngramRow{{[]int64{4, 1, 2}, []int64{1, 2}}}, 2, 4, 100,
			[][]int32{none}},
		{"a refused end match falls back to a shorter n", []ngramRow{{[]int64{2, 4, 1, 2}, []int64{1, 2}}}, 2, 4, 100,
			[][]int32{{4, 1, 2, -1}}},
		{"the leftmost of several matches", []ngramRow{{[]int64{3, 1, 5, 1, 6, 1, 7}, []int64{1}}}, 3, 4, 100,
			[][]int32{{5, 1, 6, 1}}},
		{"a prompt shorter than n, the generated tokens overlapping their pattern",
			[]ngramRow{{[]int64{1}, []int64{1, 1, 1}}}, 3, 4, 100, [][]int32{{1, -1, -1, -1}}},
		{"an empty prompt", []ngramRow{{nil, []int64{4, 4}}}, 3, 4, 100, [][]int32{{4, -1, -1, -1}}},
		{"max_ngram above step_idx", []ngramRow{{[]int64{8, 6, 7, 9}, []int64{6, 7}}}, 5, 4, 100, [][]int32{{9, -1, -1, -1}}},
		{"every n from 4 down to 1", []ngramRow{
			{[]int64{0, 1, 2, 3, 4, 54}, []int64{1, 2, 3, 4}},
			{[]int64{0, 2, 3, 4, 53}, []int64{1, 2, 3, 4}},
			{[]int64{0, 3, 4, 52}, []int64{1, 2, 3, 4}},
			{[]int64{0, 4, 51}, []int64{1, 2, 3, 4}},
		}, 4, 4, 100, [][]int32{{54, -1, -1, -1}, {53, -1, -1, -1}, {52, -1, -1, -1}, {51, -1, -1, -1}}},
		{"the budget runs out in row order", []ngramRow{
			{[]int64{1, 5, 6, 7}, []int64{1}},
			{[]int64{4}, []int64{9}},
			{[]int64{2, 8, 9, 10, 11}, []int64{3, 2}},
			{[]int64{1, 5}, []int64{1}},
		}, 3, 4, 5, [][]int32{{5, 6, 7, -1}, none, {8, 9, -1, -1}, none}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := ngramRun(tt.rows, tt.maxNgram, tt.maxDraft, tt.threshold)
			host, err := cpu.New().Run(context.Background(), run)
			if err != nil {
				t.Fatalf("cpu: %v", err)
			}
			for r, want := range tt.want {
				for i, w := range want {
					if got := host.DraftOut.Int(r*tt.maxDraft + i); got != int64(w) {
						t.Fatalf("the case is wrong: engine/cpu drafts %d at row %d token %d, the case wants %d", got, r, i, w)
					}
				}
			}
			gpuBackend(t)
			gpu, host := runBoth(t, run)
			sameBits(t, "draft_out", gpu.DraftOut, host.DraftOut)
		})
	}
}

// TestGPUNgramMatchShapes runs csrc/ngram.cu against engine/cpu on random
// rows at the shapes that take its other paths: one row (no counter), more
// rows than a block has threads (the budget's scan in several chunks),
// prompts longer than one round of loads, small alphabets and generated
// tails copied from the prompt (long matches, max_ngram above the match),
// and thresholds that bind. SAMPVIZ_GPU_QUICK keeps the cases marked quick
// (a long prompt at one row, and the budget's scan in two chunks).
func TestGPUNgramMatchShapes(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	tests := []struct {
		name                                                string
		rows, l, m, alphabet, maxNgram, maxDraft, threshold int
		quick                                               bool
	}{
		{"bench shape B1", 1, 4096, 512, 64, 3, 8, 1 << 20, false},
		{"B1 long prompt", 1, 20000, 300, 2, 12, 8, 1 << 20, true},
		{"B1 long prompt max_ngram 40", 1, 9000, 700, 3, 40, 16, 1 << 20, false},
		{"B600 budget binds", 600, 64, 16, 3, 3, 4, 700, true},
		{"B1100 budget loose", 1100, 40, 12, 4, 2, 3, 1 << 20, false},
		{"B128 bench shape", 128, 4096, 512, 64, 3, 8, 300, false},
	}
	for _, tt := range tests {
		if quick() && !tt.quick {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			rows := make([]ngramRow, tt.rows)
			for r := range rows {
				n, s := rng.IntN(tt.l+1), rng.IntN(tt.m+1)
				if r%9 == 4 {
					s = 0
				}
				if r%3 == 0 { // the longest rows, as in the benchmark
					n, s = tt.l-2, tt.m-2
				}
				rows[r] = ngramRow{randomIDs(rng, n, tt.alphabet), randomIDs(rng, s, tt.alphabet)}
				if g, p := rows[r].gen, rows[r].prompt; len(g) > 0 && len(p) > 0 && rng.IntN(2) == 0 {
					// The generated tail copies a stretch of the prompt.
					k := 1 + rng.IntN(min(len(g), len(p), 2*tt.maxNgram+1))
					at := rng.IntN(len(p) - k + 1)
					copy(g[len(g)-k:], p[at:at+k])
				}
			}
			run := ngramRun(rows, tt.maxNgram, tt.maxDraft, tt.threshold)
			gpu, host := runBoth(t, run)
			sameBits(t, "draft_out", gpu.DraftOut, host.DraftOut)
			judge(t, run, gpu, host, nil)
		})
	}
}

// randomIDs returns n tokens drawn uniformly from [0, alphabet).
func randomIDs(rng *rand.Rand, n, alphabet int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(rng.IntN(alphabet))
	}
	return ids
}
