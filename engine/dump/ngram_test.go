package dump

import (
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestFastDeployState: ngram_semantics chooses whose rule reads the
// FastDeploy state; the state a rule does not read is ignored with a
// notice, FastDeploy's draft buffer is max_draft_tokens + 1 wide, and bad
// state is refused naming the tensor.
func TestFastDeployState(t *testing.T) {
	base := func(extra ...*engine.Tensor) []*engine.Tensor {
		return append([]*engine.Tensor{
			engine.FromInts("input_ids", engine.I64, []int{2, 4}, []int64{1, 2, 3, 4, 1, 2, 3, 4}),
			engine.FromInts("input_ids_len", engine.I64, []int{2}, []int64{4, 4}),
			engine.FromInts("pre_ids", engine.I64, []int{2, 3}, []int64{9, 2, 0, 9, 2, 0}),
			engine.FromInts("step_idx", engine.I64, []int{2}, []int64{1, 1}),
		}, extra...)
	}
	enc := engine.FromInts("seq_lens_encoder", engine.I32, []int{2}, []int64{0, 3})
	num := engine.FromInts("draft_token_num", engine.I32, []int{2}, []int64{4, 2})
	this := engine.FromInts("seq_lens_this_time", engine.I32, []int{2}, []int64{1, 2})
	meta := func(sem string) map[string]string {
		return map[string]string{"ngram_semantics": sem, "max_draft_tokens": "4"}
	}
	tests := []struct {
		name    string
		meta    map[string]string
		tensors []*engine.Tensor
		notice  string // a notice the run must hold
		tensor  string // the tensor an error names ("" for none)
		words   []string
		check   func(t *testing.T, run *engine.Run)
	}{
		{
			name: "sampviz ignores the state", meta: map[string]string{"max_draft_tokens": "4"}, tensors: base(enc),
			notice: `ignored tensor "seq_lens_encoder": ngram_semantics sampviz does not read it`,
			check: func(t *testing.T, run *engine.Run) {
				if run.SeqLensEncoder != nil || run.Params.NgramSemantics != engine.NgramSampviz {
					t.Errorf("seq_lens_encoder %v, semantics %q", run.SeqLensEncoder, run.Params.NgramSemantics)
				}
			},
		},
		{
			name: "fastdeploy reads it, and a draft buffer of max_draft_tokens + 1", meta: meta("fastdeploy"),
			tensors: base(enc, num, engine.FromInts("draft_out", engine.I64, []int{2, 5}, make([]int64, 10))),
			check: func(t *testing.T, run *engine.Run) {
				if run.SeqLensEncoder == nil || run.DraftTokenNum == nil || run.FastDeployRow(1).ThisTime != 3 {
					t.Errorf("state %+v", run.FastDeployRow(1))
				}
			},
		},
		{
			name: "fastdeploy: draft_out of max_draft_tokens columns", meta: meta("fastdeploy"),
			tensors: base(engine.FromInts("draft_out", engine.I64, []int{2, 4}, make([]int64, 8))),
			tensor:  "draft_out", words: []string{"4 columns", "max_draft_tokens + 1 = 5", "set max_draft_tokens to 3"},
		},
		{
			name: "the hybrid ignores draft_token_num and encoder lengths", meta: meta("fastdeploy_hybrid"), tensors: base(enc, num, this),
			notice: `ignored tensor "draft_token_num": ngram_semantics fastdeploy_hybrid does not read it`,
			check: func(t *testing.T, run *engine.Run) {
				if run.SeqLensEncoder != nil || run.DraftTokenNum != nil || run.SeqLensThisTime == nil {
					t.Errorf("the hybrid kept %v %v, dropped %v", run.SeqLensEncoder, run.DraftTokenNum, run.SeqLensThisTime)
				}
			},
		},
		{
			name: "negative seq_lens_decoder", meta: meta("fastdeploy"),
			tensors: base(engine.FromInts("seq_lens_decoder", engine.I32, []int{2}, []int64{-1, 2})),
			tensor:  "seq_lens_decoder", words: []string{"row 0 is -1", "a non-negative int32"},
		},
		{
			name: "seq_lens_this_time of the wrong rows", meta: meta("fastdeploy_hybrid"),
			tensors: base(engine.FromInts("seq_lens_this_time", engine.I32, []int{1}, []int64{1})),
			tensor:  "seq_lens_this_time", words: []string{"shape [1]", "want [2]"},
		},
		{
			name: "an unknown ngram_semantics", meta: meta("vllm"), tensors: base(),
			words: []string{`metadata "ngram_semantics"`, "sampviz", "fastdeploy_hybrid"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := BuildRun(fileOf(tt.meta, tt.tensors...), engine.Overrides{})
			if len(tt.words) > 0 {
				checkError(t, err, "dump.safetensors", tt.tensor, tt.words...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.notice != "" && !strings.Contains(strings.Join(run.Notices, "\n"), tt.notice) {
				t.Errorf("notices %q, want one saying %q", run.Notices, tt.notice)
			}
			if tt.check != nil {
				tt.check(t, run)
			}
		})
	}
}
