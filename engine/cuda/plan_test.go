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

// TestResolveParamsChains: the kernels serve every preset's chain but
// min_p_first and temperature last, which they refuse in a sentence that
// names the cpu backend, where the batch needs them; where the data cannot
// tell them from a chain the kernels have, they run. Ties any reaches the
// kernels as lowest_index.
func TestResolveParamsChains(t *testing.T) {
	const vocab = 100
	need := engine.NeedTemperature | engine.NeedFilters | engine.NeedSeeds
	tests := []struct {
		name      string
		s         engine.Semantics
		temp      float64
		minP      float64
		refuse    string // "" when the kernels run it
		wantFlags int
	}{
		{"hf", engine.SemanticsHF, 0.7, 0.1, "", flagHasFilters},
		{"flashinfer", engine.SemanticsFlashInfer, 0.7, 0.1, "", flagHasFilters},
		{"sglang with min-p", engine.SemanticsSGLang, 0.7, 0.1, "", flagHasFilters},
		{"sglang without min-p", engine.SemanticsSGLang, 0.7, 0, "", flagHasFilters | flagJoint},
		{"tokenspeed", engine.SemanticsTokenSpeed, 0.7, 0.1, "", flagHasFilters | flagJoint},
		{"vllm with min-p", engine.SemanticsVLLM, 0.7, 0.1, "filter_order min_p_first (min-p before top-p, the vllm semantics) has no CUDA kernel; the cpu backend serves it (--backend cpu)", 0},
		{"vllm without min-p", engine.SemanticsVLLM, 0.7, 0, "", flagHasFilters},
		{"llamacpp", engine.SemanticsLlamaCpp, 0.7, 0, "temperature_order last (filters before the temperature, the llamacpp semantics) has no CUDA kernel", 0},
		{"llamacpp at T = 1", engine.SemanticsLlamaCpp, 1, 0.1, "", flagHasFilters | flagLowestIndex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := engine.Params{
				Temperature: []float64{tc.temp}, TopK: []int{20}, TopP: []float64{0.9}, MinP: []float64{tc.minP},
				Seed: []uint64{1}, Offset: []uint64{0},
			}
			if _, err := tc.s.Preset().Apply(&p, func(string) string { return "" }); err != nil {
				t.Fatal(err)
			}
			rp, err := resolveParams(&p, 1, vocab, need)
			if tc.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refuse) || !errors.Is(err, engine.ErrUnsupported) {
					t.Fatalf("error %v, want ErrUnsupported saying %q", err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rp.flags &^ flagAllFast; got != tc.wantFlags {
				t.Errorf("flags %#x, want %#x", got, tc.wantFlags)
			}
		})
	}
}
