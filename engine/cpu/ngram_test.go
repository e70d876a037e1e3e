package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

func TestDraft(t *testing.T) {
	tests := []struct {
		name      string
		prompt    []int64
		generated []int64
		maxN      int
		limit     int
		want      []int64
	}{
		{"trigram in the prompt", []int64{5, 6, 7, 8, 9, 10}, []int64{1, 6, 7, 8}, 3, 2, []int64{9, 10}},
		{"leftmost match wins", []int64{7, 8, 1, 7, 8, 2}, []int64{4, 7, 8}, 3, 1, []int64{1}},
		{"longest n wins over a leftmost shorter match", []int64{8, 3, 6, 7, 8, 4}, []int64{6, 7, 8}, 3, 1, []int64{4}},
		{"falls back to shorter n", []int64{1, 2, 3, 9, 4}, []int64{5, 3, 9}, 3, 4, []int64{4}},
		{"draft cut at the prompt's end", []int64{1, 2, 3, 4}, []int64{2}, 3, 8, []int64{3, 4}},
		{"a match at the prompt's end is no match", []int64{1, 2, 3}, []int64{2, 3}, 2, 4, nil},
		{"prompt searched before generated tokens", []int64{9, 9, 4, 1}, []int64{4, 7, 4}, 1, 2, []int64{1}},
		{"generated tokens searched when the prompt has no match", []int64{1, 2}, []int64{5, 6, 7, 5, 6}, 2, 3, []int64{7, 5, 6}},
		{"generated search excludes the pattern itself", []int64{1}, []int64{3, 4, 5}, 3, 3, nil},
		{"n larger than the generated tokens is skipped", []int64{4, 8}, []int64{4}, 5, 2, []int64{8}},
		{"a longer n in the generated tokens beats a shorter n in the prompt", []int64{2, 3}, []int64{1, 2, 9, 1, 2}, 2, 1, []int64{9}},
		{"no generated tokens", []int64{1, 2, 3}, nil, 3, 4, nil},
		{"zero limit", []int64{1, 2, 3}, []int64{1}, 3, 0, nil},
		{"max n 0 proposes nothing", []int64{1, 2, 3}, []int64{1}, 0, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Draft(tt.prompt, tt.generated, tt.maxN, tt.limit); !slices.Equal(got, tt.want) {
				t.Errorf("Draft = %v, want %v", got, tt.want)
			}
		})
	}
}

// ngramRun builds an ngram_match run from ragged rows, padded with -7.
func ngramRun(prompts, generated [][]int64, dtype engine.DType, maxN, maxDraft, threshold int) *engine.Run {
	rows := len(prompts)
	pad := func(ids [][]int64) (*engine.Tensor, *engine.Tensor) {
		width := 1
		for _, r := range ids {
			width = max(width, len(r))
		}
		flat := make([]int64, rows*width)
		lens := make([]int64, rows)
		for r, row := range ids {
			for i := range width {
				flat[r*width+i] = -7
				if i < len(row) {
					flat[r*width+i] = row[i]
				}
			}
			lens[r] = int64(len(row))
		}
		return engine.FromInts("ids", dtype, []int{rows, width}, flat), engine.FromInts("len", dtype, []int{rows}, lens)
	}
	inputIDs, inputLen := pad(prompts)
	preIDs, stepIdx := pad(generated)
	return &engine.Run{
		Source: "test", Op: engine.OpNgramMatch,
		InputIDs: inputIDs, InputIDsLen: inputLen, PreIDs: preIDs, StepIdx: stepIdx,
		Params: engine.Params{MaxNgramSize: maxN, MaxDraftTokens: maxDraft, Threshold: threshold},
	}
}

func TestNgramMatchRun(t *testing.T) {
	prompts := [][]int64{
		{10, 11, 12, 13, 14, 15},
		{20, 21, 22, 23},
		{30, 31, 32, 33, 34},
		{40, 41},
	}
	generated := [][]int64{
		{11, 12},
		{},   // step_idx 0: nothing
		{32}, // budget may run out here
		{41, 50, 41},
	}
	tests := []struct {
		name      string
		threshold int
		want      [][]int64
	}{
		{"ample budget", 1024, [][]int64{{13, 14, 15}, {-1, -1, -1}, {33, 34, -1}, {50, 41, -1}}},
		{"budget shared in row order", 4, [][]int64{{13, 14, 15}, {-1, -1, -1}, {33, -1, -1}, {-1, -1, -1}}},
		{"budget exhausted by the first row", 3, [][]int64{{13, 14, 15}, {-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}},
		{"zero budget", 0, [][]int64{{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}},
	}
	for _, dtype := range []engine.DType{engine.I32, engine.I64} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s %s", dtype, tt.name), func(t *testing.T) {
				out := mustRun(t, ngramRun(prompts, generated, dtype, 3, 3, tt.threshold))
				if out.DraftOut.DType != engine.I32 || fmt.Sprint(out.DraftOut.Shape) != "[4 3]" {
					t.Fatalf("draft_out %s %v", out.DraftOut.DType, out.DraftOut.Shape)
				}
				got := out.DraftOut.Ints()
				for r, want := range tt.want {
					if row := got[r*3 : r*3+3]; !slices.Equal(row, want) {
						t.Errorf("row %d: %v, want %v", r, row, want)
					}
				}
			})
		}
	}
}

func TestNgramMatchRandomRowsFollowDraft(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	const rows = 20
	prompts := make([][]int64, rows)
	generated := make([][]int64, rows)
	for r := range rows {
		for range rng.IntN(40) {
			prompts[r] = append(prompts[r], int64(1+rng.IntN(6)))
		}
		for range rng.IntN(12) {
			generated[r] = append(generated[r], int64(1+rng.IntN(6)))
		}
	}
	out := mustRun(t, ngramRun(prompts, generated, engine.I64, 3, 5, 37))
	budget := 37
	got := out.DraftOut.Ints()
	for r := range rows {
		want := Draft(prompts[r], generated[r], 3, min(5, budget))
		budget -= len(want)
		for i := range 5 {
			w := int64(-1)
			if i < len(want) {
				w = want[i]
			}
			if got[r*5+i] != w {
				t.Fatalf("row %d: %v, want %v", r, got[r*5:r*5+5], want)
			}
		}
	}
}
