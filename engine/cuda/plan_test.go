package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
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

// tinyTree is a spec_tree_verify run of one row on the tree
//
//	0 ─┬─ 2 ─── 3
//	   └─ 1
//
// (node 2 is the root's first child, node 1 its sibling) and a padding
// node 4 the root does not reach, whose candidate lies outside the
// vocabulary.
func tinyTree() *engine.Run {
	const nodes, vocab = 5, 8
	return &engine.Run{
		Op:           engine.OpSpecTreeVerify,
		TargetLogits: engine.FromFloat64s("target_logits", engine.F32, []int{1, nodes, vocab}, make([]float64, nodes*vocab)),
		Candidates:   engine.FromInts("candidates", engine.I64, []int{1, nodes}, []int64{-1, 5, 6, 7, 99}),
		NextToken:    engine.FromInts("retrive_next_token", engine.I32, []int{1, nodes}, []int64{2, -1, 3, -1, -1}),
		NextSibling:  engine.FromInts("retrive_next_sibling", engine.I32, []int{1, nodes}, []int64{-1, -1, 1, -1, -1}),
		Params: engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0},
			Seed: []uint64{7}, Offset: []uint64{0}, Trials: 3},
	}
}

// TestTreePlan checks the tree as the kernel receives it (csrc/sampviz.h
// sv_spec_tree_verify): candidates with 0 at the root and the padding,
// each node's children in sibling order, each node's first child's token;
// and the launch's shape.
func TestTreePlan(t *testing.T) {
	p, err := buildPlan(tinyTree())
	if err != nil {
		t.Fatal(err)
	}
	if r := p.req; r.Rows != 1 || r.Nodes != 5 || r.Vocab != 8 || r.Width != 3 || r.Trials != 3 || r.TraceTrials != 3 {
		t.Errorf("request %+v, want 1 row, 5 nodes, 8 tokens, width 3, 3 trials traced", r)
	}
	var tree []int32
	for _, w := range p.writes {
		if w.off == p.req.In["tree"].Off {
			for i := 0; i+4 <= len(w.data); i += 4 {
				tree = append(tree, int32(binary.LittleEndian.Uint32(w.data[i:])))
			}
		}
	}
	want := []int32{
		0, 5, 6, 7, 0, // tokens
		0, 2, 2, 3, 3, // kid_start
		2, 0, 1, 0, 0, // kid_count
		2, 1, 3, 0, 0, // kids
		6, 0, 7, 0, // first
	}
	if fmt.Sprint(tree) != fmt.Sprint(want) {
		t.Errorf("tree buffer\n got %v\nwant %v", tree, want)
	}
}

// TestTreePlanErrors checks that the plan refuses what engine/cpu refuses,
// with the same message.
func TestTreePlanErrors(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(r *engine.Run)
	}{
		{"candidate outside the vocabulary", func(r *engine.Run) { r.Candidates.SetInt(3, 8) }},
		{"cycle", func(r *engine.Run) { r.NextSibling.SetInt(1, 2) }},
		{"child before its parent", func(r *engine.Run) { r.NextToken.SetInt(2, 1); r.NextSibling.SetInt(1, 3) }},
		{"draft probs of another shape", func(r *engine.Run) {
			r.DraftProbs = engine.NewTensor("draft_probs", engine.F32, 1, 4, 8)
		}},
		{"candidates of another shape", func(r *engine.Run) {
			r.Candidates = engine.FromInts("candidates", engine.I64, []int{1, 4}, []int64{0, 1, 2, 3})
		}},
		{"negative trials", func(r *engine.Run) { r.Params.Trials = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := tinyTree()
			tt.break_(run)
			_, gpuErr := buildPlan(run)
			_, cpuErr := cpu.New().Run(context.Background(), run)
			if gpuErr == nil || cpuErr == nil || gpuErr.Error() != cpuErr.Error() ||
				errors.Is(gpuErr, engine.ErrUnsupported) != errors.Is(cpuErr, engine.ErrUnsupported) {
				t.Errorf("plan: %v\n cpu: %v", gpuErr, cpuErr)
			}
		})
	}
}

// TestTreeWithoutKernel checks that a worker whose library has no tree
// kernel (the fake device stands for one built with SV_TREE=0) refuses
// spec_tree_verify with engine.ErrUnsupported and a sentence that names
// the way out.
func TestTreeWithoutKernel(t *testing.T) {
	b := openFake(t, 10*time.Second)
	_, err := b.Run(context.Background(), tinyTree())
	if !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "--backend cpu") || !strings.Contains(err.Error(), "SV_TREE=0") {
		t.Errorf("Run: %v, want ErrUnsupported naming --backend cpu and SV_TREE=0", err)
	}
}

// TestBenchTree checks the bench's trees against engine.ParseTree: valid
// links, and the depth and the count of nodes with two or more children
// that MinBytes counts.
func TestBenchTree(t *testing.T) {
	for _, c := range []struct{ nodes, topk int }{{64, 2}, {64, 4}, {1, 2}, {2, 3}, {85, 4}, {10, 1}} {
		tree, err := engine.ParseTree(benchTree(c.nodes, c.topk))
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		wide, reached := 0, 0
		for u := range c.nodes {
			if len(tree.Children[u]) >= 2 {
				wide++
			}
			if tree.Reached(u) {
				reached++
			}
		}
		if reached != c.nodes || tree.MaxDepth != benchTreeDepth(c.nodes, c.topk) || wide != benchTreeWide(c.nodes, c.topk) {
			t.Errorf("%+v: reached %d, depth %d (benchTreeDepth %d), wide %d (benchTreeWide %d)", c, reached,
				tree.MaxDepth, benchTreeDepth(c.nodes, c.topk), wide, benchTreeWide(c.nodes, c.topk))
		}
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

// TestNgramFastDeployRefused: FastDeploy's ngram rules have no kernel; the
// plan refuses them in one sentence that names the cpu backend, and
// sampviz's own rule still plans.
func TestNgramFastDeployRefused(t *testing.T) {
	for _, sem := range []engine.NgramSemantics{engine.NgramSampviz, engine.NgramFastDeploy, engine.NgramFastDeployHybrid} {
		t.Run(string(sem), func(t *testing.T) {
			run := &engine.Run{
				Op:          engine.OpNgramMatch,
				InputIDs:    engine.FromInts("input_ids", engine.I64, []int{1, 4}, []int64{5, 6, 7, 8}),
				InputIDsLen: engine.FromInts("input_ids_len", engine.I64, []int{1}, []int64{4}),
				PreIDs:      engine.FromInts("pre_ids", engine.I64, []int{1, 3}, []int64{6, 0, 0}),
				StepIdx:     engine.FromInts("step_idx", engine.I64, []int{1}, []int64{1}),
				Params:      engine.Params{MaxNgramSize: 3, MaxDraftTokens: 2, Threshold: 128, NgramSemantics: sem, MinNgramSize: 1},
			}
			_, err := buildPlan(run)
			if sem == engine.NgramSampviz {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := fmt.Sprintf("ngram_semantics %s (FastDeploy's threshold budget, seq_lens and draft layout) has no CUDA kernel; the cpu backend serves it (--backend cpu)", sem)
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, engine.ErrUnsupported) {
				t.Fatalf("error %v, want ErrUnsupported saying %q", err, want)
			}
		})
	}
}
