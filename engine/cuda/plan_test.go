package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestAllFast checks the SV_ALL_FAST hint against the fast path's rule
// (csrc/fast_layout.cuh fast_eligible): every row must qualify.
func TestAllFast(t *testing.T) {
	const vocab = 1000
	row := func(temp float32, k int32, p float32) *rowParams {
		return &rowParams{temperature: []float32{0.7, temp}, topK: []int32{50, k}, topP: []float32{0.9, p}}
	}
	tests := []struct {
		name  string
		rp    *rowParams
		order engine.FilterOrder
		want  bool
	}{
		{"top-k and top-p", row(1, 256, 0.95), engine.TopKFirst, true},
		{"greedy row", row(0, 50, 1), engine.TopKFirst, false},
		{"no top-k", row(1, 0, 0.9), engine.TopKFirst, false},
		{"top-k over the fast path's 256", row(1, 257, 1), engine.TopKFirst, false},
		{"top-k of the whole vocabulary", row(1, vocab, 1), engine.TopKFirst, false},
		{"joint with top-p", row(1, 50, 0.9), engine.Joint, false},
		{"joint without top-p anywhere", &rowParams{temperature: []float32{1}, topK: []int32{50}, topP: []float32{1}}, engine.Joint, true},
		{"no rows", &rowParams{}, engine.TopKFirst, false},
	}
	for _, tc := range tests {
		if got := allFast(tc.rp, tc.order, vocab); got != tc.want {
			t.Errorf("%s: allFast = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTreeUnsupported checks that a draft tree is refused with
// engine.ErrUnsupported and a sentence that names the way out.
func TestTreeUnsupported(t *testing.T) {
	_, err := buildPlan(&engine.Run{Op: engine.OpSpecTreeVerify})
	if !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "--backend cpu") {
		t.Errorf("buildPlan: %v, want ErrUnsupported naming --backend cpu", err)
	}
}
