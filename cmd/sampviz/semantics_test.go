package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
)

// engineDump writes a renorm dump of fresh random logits whose probs the
// CPU backend made under the preset made, with temperatures below 1, a
// small top-k, top-p and min-p on every row, drawn again until made's chain
// keeps other tokens than every other preset's; scale multiplies the most
// probable token's probability (1: as made).
func engineDump(t *testing.T, made engine.Semantics, scale float64, meta map[string]string) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for range 20 {
		if path, ok := engineDumpFrom(t, rng, made, scale, meta); ok {
			return path
		}
	}
	t.Fatalf("20 draws of data never parted %s's chain from the others", made)
	return ""
}

// engineDumpFrom is one draw of engineDump; false when some other preset's
// chain keeps what made's does on it (hf and flashinfer always agree, so
// for either only vllm, llamacpp and tokenspeed must differ).
func engineDumpFrom(t *testing.T, rng *rand.Rand, made engine.Semantics, scale float64, meta map[string]string) (string, bool) {
	t.Helper()
	const rows, vocab = 6, 400
	logits := make([]float64, rows*vocab)
	for i := range logits {
		logits[i] = float64(float32(1.2 * rng.NormFloat64()))
	}
	temp, topK, topP, minP := make([]float64, rows), make([]int64, rows), make([]float64, rows), make([]float64, rows)
	for r := range rows {
		temp[r], topK[r], topP[r], minP[r] = 0.45+0.2*rng.Float64(), int64(12+rng.IntN(12)), 0.6+0.25*rng.Float64(), 0.04+0.08*rng.Float64()
	}
	tensors := []*engine.Tensor{
		engine.FromFloat64s("logits", engine.F32, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temp),
		engine.FromInts("top_k", engine.I64, []int{rows}, topK),
		engine.FromFloat64s("top_p", engine.F32, []int{rows}, topP),
		engine.FromFloat64s("min_p", engine.F32, []int{rows}, minP),
	}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": "renorm"}); err != nil {
		t.Fatal(err)
	}
	under := func(s engine.Semantics) *engine.Tensor {
		f, err := dump.Parse("made.safetensors", buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		run, err := dump.BuildRun(f, engine.Overrides{Semantics: &s})
		if err != nil {
			t.Fatal(err)
		}
		out, err := cpu.New().Run(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		return out.Probs
	}
	probs := under(made)
	for _, p := range engine.Presets() {
		same := p.Name == made || made == engine.SemanticsHF && p.Name == engine.SemanticsFlashInfer ||
			made == engine.SemanticsHF && p.Name == engine.SemanticsSGLang // min-p is on
		if !same && bytes.Equal(under(p.Name).Data, probs.Data) {
			return "", false
		}
	}
	for r := range rows {
		best := r * vocab
		for j := r * vocab; j < (r+1)*vocab; j++ {
			if probs.Float(j) > probs.Float(best) {
				best = j
			}
		}
		probs.SetFloat(best, probs.Float(best)*scale)
	}
	if meta == nil {
		meta = map[string]string{}
	}
	meta["op"] = "renorm"
	return writeDump(t, t.TempDir(), "engine.safetensors", meta, append(tensors, probs)...), true
}

// TestCheckSemanticsAny: `check --semantics any` names the presets an
// output follows, in text and JSON, and exits 0 when one does, 1 when none
// does.
func TestCheckSemanticsAny(t *testing.T) {
	vllm := engineDump(t, engine.SemanticsVLLM, 1, nil)
	t.Run("json", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := runCheck([]string{"--semantics", "any", "--json", vllm}, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d, want %d; stderr %s", code, exitOK, stderr.String())
		}
		var rep engine.Report
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		var pass []string
		for _, m := range rep.Matches {
			if m.Pass {
				pass = append(pass, string(m.Semantics))
			}
		}
		if strings.Join(pass, " ") != "vllm" || rep.Semantics != engine.SemanticsVLLM || !rep.Pass || len(rep.Matches) != 6 {
			t.Errorf("matches %v, judged under %q, pass %v", pass, rep.Semantics, rep.Pass)
		}
		if len(rep.Outputs) != 1 || !rep.Outputs[0].External {
			t.Errorf("outputs %+v: --semantics any judges the dump's outputs alone", rep.Outputs)
		}
	})
	t.Run("text", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := runCheck([]string{"--semantics", "any", vllm}, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d; stderr %s", code, stderr.String())
		}
		for _, want := range []string{"semantics: the dump's outputs judged under each engine's filter chain",
			"vllm        vLLM", "below: the judgement under vllm (the first that passes)",
			"PASS: the outputs follow vllm (1 of 6 presets)."} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("the report lacks %q:\n%s", want, stdout.String())
			}
		}
	})
	t.Run("none", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		bad := engineDump(t, engine.SemanticsHF, 0.9, nil)
		if code := runCheck([]string{"--semantics", "any", bad}, &stdout, &stderr); code != exitViolated {
			t.Fatalf("exit %d, want %d; stderr %s", code, exitViolated, stderr.String())
		}
		if !strings.Contains(stdout.String(), "FAIL: the outputs follow none of the 6 presets.") {
			t.Errorf("report:\n%s", stdout.String())
		}
	})
	t.Run("a preset judges as its chain", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := runCheck([]string{"--semantics", "vllm", "--backend", "cpu", vllm}, &stdout, &stderr); code != exitOK {
			t.Errorf("--semantics vllm: exit %d; %s%s", code, stdout.String(), stderr.String())
		}
		stdout.Reset()
		if code := runCheck([]string{"--semantics", "hf", "--backend", "cpu", vllm}, &stdout, &stderr); code != exitViolated {
			t.Errorf("--semantics hf on vLLM's output: exit %d, want %d", code, exitViolated)
		}
	})
}

// TestCheckSemanticsRefusals: a semantics that names no preset, and a
// preset beside a filter_order of its own, end with exit 2 and one
// sentence naming the file and the rule.
func TestCheckSemanticsRefusals(t *testing.T) {
	tests := []struct {
		name string
		meta map[string]string
		args []string
		want string
	}{
		{"metadata names no preset", map[string]string{"semantics": "ollama"}, nil,
			`engine.safetensors: metadata "semantics": semantics must be hf, vllm, sglang, flashinfer, llamacpp, tokenspeed or any, not "ollama"`},
		{"metadata preset against filter_order", map[string]string{"semantics": "vllm", "filter_order": "joint"}, nil,
			"engine.safetensors: semantics vllm means filter_order min_p_first, but the metadata sets filter_order joint: give one or the other"},
		{"flag preset against metadata", map[string]string{"top_k_ties": "lowest_index"}, []string{"--semantics", "sglang"},
			"engine.safetensors: semantics sglang means top_k_ties keep, but the metadata sets top_k_ties lowest_index: give one or the other"},
		{"flag names no preset", nil, []string{"--semantics", "trt"},
			`semantics must be hf, vllm, sglang, flashinfer, llamacpp, tokenspeed or any, not "trt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := engineDump(t, engine.SemanticsHF, 1, tt.meta)
			var stdout, stderr bytes.Buffer
			if code := runCheck(append(append([]string{"--backend", "cpu"}, tt.args...), path), &stdout, &stderr); code != exitUnusable {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUnusable, stderr.String())
			}
			msg := stderr.String()
			if !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") != 1 {
				t.Errorf("stderr %q, want one line saying %q", msg, tt.want)
			}
		})
	}
}
