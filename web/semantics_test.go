package web_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/web/webtest"
)

// semanticsDump writes a renorm dump of fresh random logits with top-k,
// top-p and min-p on and the CPU backend's probs, with meta.
func semanticsDump(t *testing.T, meta map[string]string) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	const rows, vocab = 3, 64
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, nil, []float64{0.5 + rng.Float64()/2}),
		engine.FromInts("top_k", engine.I64, nil, []int64{10}),
		engine.FromFloat64s("top_p", engine.F32, nil, []float64{0.8}),
		engine.FromFloat64s("min_p", engine.F32, nil, []float64{0.05}),
	}
	run, f, err := dump.Load(webtest.WriteDump(t, "in.safetensors", tensors, map[string]string{"op": "renorm"}), engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return readFile(t, webtest.WriteDump(t, "made.safetensors", append(tensors, out.Probs), meta))
}

// TestUploadSemantics: an upload whose semantics names no preset, or puts
// a preset beside a filter_order of its own, is refused with 400 and the
// sentence `sampviz check` prints; the parameter comes from the query too,
// and any judges the dump's output under every preset.
func TestUploadSemantics(t *testing.T) {
	e := newRealEnv(t)
	tests := []struct {
		name  string
		meta  map[string]string
		query string
		want  string
	}{
		{"metadata names no preset", map[string]string{"semantics": "ollama"}, "?name=mine.safetensors",
			`mine.safetensors: metadata "semantics": semantics must be hf, vllm, sglang, flashinfer, llamacpp, tokenspeed or any, not "ollama"`},
		{"a preset beside its own filter_order", map[string]string{"semantics": "vllm", "filter_order": "joint"}, "?name=mine.safetensors",
			"mine.safetensors: semantics vllm means filter_order min_p_first, but the metadata sets filter_order joint: give one or the other"},
		{"the query names no preset", nil, "?semantics=trt",
			`Semantics must be hf, vllm, sglang, flashinfer, llamacpp, tokenspeed or any, not "trt"`},
		{"the query's preset against the metadata", map[string]string{"temperature_order": "last"}, "?semantics=hf&name=mine.safetensors",
			"mine.safetensors: semantics hf means temperature_order first, but the metadata sets temperature_order last: give one or the other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("PUT", "/api/runs"+tt.query, bytes.NewReader(semanticsDump(t, tt.meta)))
			got := decode[map[string]string](t, res)
			if res.StatusCode != 400 || !strings.Contains(got["error"], tt.want) {
				t.Errorf("%d %q, want 400 and %q", res.StatusCode, got["error"], tt.want)
			}
		})
	}
	r := e.uploadQuery(semanticsDump(t, nil), "?semantics=any")
	if got := e.wait(r.ID, ""); got.State != "done" || got.Verdict == nil || !got.Verdict.Pass {
		t.Errorf("semantics any: %+v", got)
	}
}
