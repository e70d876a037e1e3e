package compare

import (
	"context"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestJudgeFastDeployDraft: under FastDeploy's rules the judge reads
// seq_lens_this_time_out and the draft columns from the reference's
// offset, says which in its sentence, and leaves the other columns alone.
func TestJudgeFastDeployDraft(t *testing.T) {
	ints := func(name string, shape []int, v ...int64) *engine.Tensor {
		return engine.FromInts(name, engine.I64, shape, v)
	}
	// Three decoding rows, each able to draft [3 4 5 6]; threshold 8: row 0
	// drafts 4, rows 1 and 2 reach threshold - 1 with the reserved tokens.
	run := &engine.Run{
		Source: "test", Op: engine.OpNgramMatch,
		InputIDs:    ints("input_ids", []int{3, 9}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9),
		InputIDsLen: ints("input_ids_len", []int{3}, 9, 9, 9),
		PreIDs:      ints("pre_ids", []int{3, 2}, 0, 2, 0, 2, 0, 2),
		StepIdx:     ints("step_idx", []int{3}, 1, 1, 1),
		Params:      engine.Params{MaxNgramSize: 3, MinNgramSize: 1, MaxDraftTokens: 4, Threshold: 8, NgramSemantics: engine.NgramFastDeploy},
	}
	const stale = 77
	tests := []struct {
		name    string
		draft   []int64
		lens    []int64
		failing map[int]string
	}{
		{"FastDeploy's output, stale columns left as they were", []int64{2, 3, 4, 5, 6, 2, stale, stale, stale, stale, 2, stale, stale, stale, stale}, []int64{5, 1, 1}, nil},
		{"a budget without the reservation", []int64{2, 3, 4, 5, 6, 2, 3, 4, stale, stale, 2, stale, stale, stale, stale}, []int64{5, 3, 1},
			map[int]string{1: "row 1: seq_lens_this_time 3, but FastDeploy's rule gives 1 (the row drafts nothing: the threshold is spent"}},
		{"a wrong token in the draft", []int64{2, 3, 9, 5, 6, 2, stale, stale, stale, stale, 2, stale, stale, stale, stale}, []int64{5, 1, 1},
			map[int]string{0: "row 0: draft_out[2] is 9, but FastDeploy's rule drafts [3 4 5 6] from column 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &engine.Output{Name: "draft_out", External: true,
				DraftOut: ints("draft_out", []int{3, 5}, tt.draft...), SeqLensThisTime: ints("seq_lens_this_time_out", []int{3}, tt.lens...)}
			rep, err := Judge(context.Background(), run, []*engine.Output{out}, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rep.Outputs[0].Rows {
				want, fails := tt.failing[row.Row]
				if row.Pass == fails {
					t.Errorf("row %d: pass %v, want %v (%q)", row.Row, row.Pass, !fails, row.Violations)
				}
				if fails && (len(row.Violations) != 1 || !strings.Contains(row.Violations[0], want)) {
					t.Errorf("row %d: violations %q, want one saying %q", row.Row, row.Violations, want)
				}
			}
		})
	}
}
