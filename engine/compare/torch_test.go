package compare

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// TestTorchDumps judges outputs that PyTorch itself computed, the way people
// compute them (testdata/torch/make_dumps.py wrote these files with torch
// 2.11 and safetensors 0.8): softmax of bf16, fp16 and fp32 logits at up to
// 151936 tokens and temperatures down to 1e-4, bf16 division that only the
// native reference explains, Hugging Face's top-k/top-p/min-p warpers,
// torch.argmax over tied bf16 logits, and torch.multinomial draws. None may
// raise a false alarm; the dump with planted faults must fail on exactly
// their rows.
func TestTorchDumps(t *testing.T) {
	tests := []struct {
		file    string
		failing []int // rows the dump's output must fail
		native  bool  // some row passes only against the native reference
	}{
		{"softmax_bf16_f32.safetensors", nil, false},
		{"softmax_bf16_native.safetensors", nil, true},
		{"softmax_fp16.safetensors", nil, false},
		{"softmax_fp32_151936.safetensors", nil, false},
		{"renorm_hf_bf16.safetensors", nil, false},
		{"argmax_bf16.safetensors", nil, false},
		{"multinomial_bf16.safetensors", nil, false},
		// Row 1: a NaN logit; row 3: its second most probable token dropped;
		// row 4: a token top-k removes given mass; row 6: scaled by 1.05.
		{"renorm_faults_bf16.safetensors", []int{1, 3, 4, 6}, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			run, f, err := dump.Load(filepath.Join("testdata", "torch", tt.file), engine.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			outs := ExternalOutputs(run)
			if len(outs) != 1 {
				t.Fatalf("%d external outputs, want 1", len(outs))
			}
			rep, err := Judge(context.Background(), run, outs, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Outputs[0]
			got := failedRows(o)
			if !slices.Equal(got, tt.failing) && !(len(got) == 0 && len(tt.failing) == 0) {
				for _, r := range o.Rows {
					for _, v := range r.Violations {
						t.Log(v)
					}
				}
				t.Errorf("%s (%s) fails rows %v, want %v", o.Name, o.Kind, got, tt.failing)
			}
			if tt.native && !slices.ContainsFunc(o.Rows, func(r engine.RowReport) bool { return r.Matched == "native" }) {
				t.Errorf("no row matched the native reference; bf16 division at T = 0.01 should need it")
			}
			if len(o.Violations) > 0 {
				t.Errorf("run-level violations: %v", o.Violations)
			}
		})
	}
}

// TestTorchGraphDump judges a real torch sampler (vLLM's random sampling)
// run eagerly and replayed from a CUDA graph with the same seed, written on
// a GPU by testdata/torch/make_graph_dump.py: sampviz must say of each mode
// what torch.equal said against eager (the dump's metadata agree_graph and
// agree_graph_stale), and the draws of eager and of the reseeded graph must
// follow the reference distribution. On an H100 with torch 2.11 the
// reseeded graph draws eager's tokens, and the graph replayed without
// reseeding draws one token over and over on each row.
func TestTorchGraphDump(t *testing.T) {
	path := filepath.Join("testdata", "torch", "graph_eager.safetensors")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is absent: run make_graph_dump.py on a machine with a CUDA GPU and commit what it writes", path)
	}
	run, f, err := dump.Load(path, engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := Judge(context.Background(), run, ExternalOutputs(run), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"graph", "graph_stale"} {
		want := run.Meta["agree_"+mode] == "true"
		for _, kind := range []string{"tokens", "samples"} {
			found := false
			for _, ag := range rep.Agreement {
				if ag.A != kind+"@eager" || ag.B != kind+"@"+mode {
					continue
				}
				found = true
				if ag.Rule != "same_draws" || ag.Pass != want {
					t.Errorf("%s: %s (pass %t), but torch.equal says %t", ag.B, ag.Message, ag.Pass, want)
				}
			}
			if !found {
				t.Errorf("no agreement of %s@eager and %s@%s", kind, kind, mode)
			}
		}
	}
	for _, o := range rep.Outputs {
		if (o.Name == "samples@eager" || o.Name == "samples@graph") && !o.Pass {
			t.Errorf("%s fails: torch's sampler should follow the reference (%v)", o.Name, failedRows(o))
		}
	}
}
