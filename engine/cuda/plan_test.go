package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
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

// TestTopPOnly checks the SV_TOP_P_ONLY hint: no row may have top-k or
// min-p on.
func TestTopPOnly(t *testing.T) {
	const vocab = 1000
	rows := func(k int32, minP float32) *rowParams {
		return &rowParams{
			temperature: []float32{0.7, 1}, topK: []int32{0, k}, topP: []float32{0.9, 1}, minP: []float32{0, minP},
		}
	}
	tests := []struct {
		name string
		rp   *rowParams
		want bool
	}{
		{"top-p alone", rows(0, 0), true},
		{"top-k of the whole vocabulary (off)", rows(vocab, 0), true},
		{"a row with top-k", rows(50, 0), false},
		{"a row with min-p", rows(0, 0.05), false},
		{"no rows", &rowParams{}, true},
	}
	for _, tc := range tests {
		if got := topPOnly(tc.rp, vocab); got != tc.want {
			t.Errorf("%s: topPOnly = %v, want %v", tc.name, got, tc.want)
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

// TestNgramFastDeployPlan: FastDeploy's ngram rules plan for
// csrc/ngram_fastdeploy.cu with every per-row array resolved (DUMPS.md's
// defaults where the dump has none) and FastDeploy's output layout;
// sampviz's own rule still plans for csrc/ngram.cu; a state engine/cpu
// refuses is refused, and one the kernel cannot take is ErrUnsupported (the
// session falls back to engine/cpu).
func TestNgramFastDeployPlan(t *testing.T) {
	ints := func(name string, v ...int64) *engine.Tensor {
		return engine.FromInts(name, engine.I64, []int{len(v)}, v)
	}
	base := func(sem engine.NgramSemantics) *engine.Run {
		return &engine.Run{
			Op:          engine.OpNgramMatch,
			InputIDs:    engine.FromInts("input_ids", engine.I64, []int{2, 4}, []int64{5, 6, 7, 8, 1, 2, 3, 4}),
			InputIDsLen: ints("input_ids_len", 4, 3),
			PreIDs:      engine.FromInts("pre_ids", engine.I64, []int{2, 3}, []int64{6, 7, 0, 2, 9, 9}),
			StepIdx:     ints("step_idx", 1, 2),
			Params:      engine.Params{MaxNgramSize: 3, MaxDraftTokens: 2, Threshold: 128, NgramSemantics: sem, MinNgramSize: 2},
		}
	}
	type arrays struct{ enc, dec, now, draftNum, decCap []int64 }
	tests := []struct {
		name    string
		sem     engine.NgramSemantics
		edit    func(*engine.Run)
		minN    int
		want    arrays // the per-row arrays the kernel gets
		refuse  string // an error saying this
		unsupp  bool   // and ErrUnsupported
		widthFD int    // draft_out's columns
	}{
		{name: "sampviz", sem: engine.NgramSampviz},
		{name: "fastdeploy, defaults", sem: engine.NgramFastDeploy, minN: 1, widthFD: 3,
			want: arrays{[]int64{0, 0}, []int64{1, 1}, []int64{0, 0}, []int64{2, 2}, []int64{engine.NoDecCap, engine.NoDecCap}}},
		{name: "fastdeploy, state", sem: engine.NgramFastDeploy, minN: 1, widthFD: 3,
			edit: func(r *engine.Run) {
				r.SeqLensEncoder, r.SeqLensDecoder = ints("seq_lens_encoder", 7, 0), ints("seq_lens_decoder", 0, 4)
				r.SeqLensThisTime, r.MaxDecLen, r.DraftTokenNum = ints("seq_lens_this_time", 7, 1), ints("max_dec_len", 9, 3), ints("draft_token_num", 1, 0)
				r.StepIdx = ints("step_idx", 99, 2) // row 0 is an encoder row: its step is never read
			},
			want: arrays{[]int64{7, 0}, []int64{0, 4}, []int64{7, 1}, []int64{1, 0}, []int64{9, 3}}},
		{name: "hybrid", sem: engine.NgramFastDeployHybrid, minN: 2, widthFD: 3,
			edit: func(r *engine.Run) { r.SeqLensThisTime = ints("seq_lens_this_time", 3, 0) },
			want: arrays{[]int64{0, 0}, []int64{1, 1}, []int64{3, 0}, []int64{2, 2}, []int64{engine.NoDecCap, engine.NoDecCap}}},
		{name: "hybrid, MTP tokens past the buffer", sem: engine.NgramFastDeployHybrid,
			edit:   func(r *engine.Run) { r.SeqLensThisTime = ints("seq_lens_this_time", 4, 0) },
			refuse: "row 0: FastDeploy state"},
		{name: "draft_token_num past max_draft_tokens", sem: engine.NgramFastDeploy,
			edit:   func(r *engine.Run) { r.DraftTokenNum = ints("draft_token_num", 3, 0) },
			refuse: "row 0: FastDeploy state"},
		{name: "current token outside pre_ids", sem: engine.NgramFastDeploy,
			edit:   func(r *engine.Run) { r.StepIdx = ints("step_idx", 1, 3) },
			refuse: "row 1: step_idx 3 or input_ids_len 3 outside pre_ids [2, 3]", unsupp: true},
		{name: "a length past int32", sem: engine.NgramFastDeploy,
			edit:   func(r *engine.Run) { r.SeqLensDecoder = ints("seq_lens_decoder", 1, 1<<33) },
			refuse: "does not fit the kernel's int32 lengths", unsupp: true},
		{name: "a state of the wrong shape", sem: engine.NgramFastDeployHybrid,
			edit:   func(r *engine.Run) { r.SeqLensThisTime = ints("seq_lens_this_time", 1, 1, 1) },
			refuse: "seq_lens_this_time has shape [3], want [2]", unsupp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := base(tt.sem)
			if tt.edit != nil {
				tt.edit(run)
			}
			p, err := buildPlan(run)
			if tt.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refuse) || errors.Is(err, engine.ErrUnsupported) != tt.unsupp {
					t.Fatalf("error %v, want one saying %q (ErrUnsupported: %v)", err, tt.refuse, tt.unsupp)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.sem == engine.NgramSampviz {
				if p.req.FastDeploy || p.req.Out["draft_out"].Bytes != 4*2*2 {
					t.Errorf("sampviz's rule planned %+v, want csrc/ngram.cu's [2, 2] draft_out", p.req)
				}
				return
			}
			if !p.req.FastDeploy || p.req.Hybrid != (tt.sem == engine.NgramFastDeployHybrid) || p.req.MinNgram != tt.minN || p.req.Threshold != 128 {
				t.Errorf("request %+v, want fastdeploy, hybrid %v, min_ngram %d, threshold 128", p.req, tt.sem == engine.NgramFastDeployHybrid, tt.minN)
			}
			shm := make([]byte, p.size)
			for _, w := range p.writes {
				w.writeTo(shm)
			}
			read := func(name string, size int) []int64 {
				s, ok := p.req.In[name]
				if !ok {
					t.Fatalf("no input %s", name)
				}
				var v []int64
				for off := s.Off; off < s.Off+s.Bytes; off += int64(size) {
					if size == 4 {
						v = append(v, int64(int32(binary.LittleEndian.Uint32(shm[off:]))))
					} else {
						v = append(v, int64(binary.LittleEndian.Uint64(shm[off:])))
					}
				}
				return v
			}
			got := arrays{read("seq_lens_encoder", 4), read("seq_lens_decoder", 4), read("seq_lens_this_time", 4), read("draft_token_num", 4), read("max_dec_len", 8)}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("per-row arrays %+v, want %+v", got, tt.want)
			}
			for i := range p.size { // what the kernel writes
				shm[i] = 0
			}
			out := p.decode(shm)
			if out.DraftOut.ShapeString() != fmt.Sprintf("[2, %d]", tt.widthFD) || out.SeqLensThisTime.ShapeString() != "[2]" {
				t.Errorf("outputs draft_out %s, seq_lens_this_time_out %s, want [2, %d] and [2]", out.DraftOut.ShapeString(), out.SeqLensThisTime.ShapeString(), tt.widthFD)
			}
			if p.req.Out["draft_out"].Poison != poisonDraft || p.req.Out["seq_lens_this_time_out"].Poison != poisonToken {
				t.Errorf("outputs %+v are not poisoned", p.req.Out)
			}
		})
	}
}
