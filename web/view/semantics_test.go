package view

import (
	"math"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// matches makes the verdicts of the six presets: pass names the presets
// that pass, same maps a preset to the one it was judged with, and every
// failing preset fails 2 rows from row 3.
func matches(pass []engine.Semantics, same map[engine.Semantics]engine.Semantics) []engine.SemanticsMatch {
	var ms []engine.SemanticsMatch
	for _, p := range engine.Presets() {
		m := engine.SemanticsMatch{Semantics: p.Name, Engine: p.Engine, Chain: p.Chain, SameAs: same[p.Name], FirstRow: -1}
		if slices.Contains(pass, p.Name) {
			m.Pass = true
		} else {
			m.FailedRows, m.First, m.FirstRow = 2, "probs: row 3: 4 of 64 probabilities off", 3
		}
		ms = append(ms, m)
	}
	return ms
}

// TestMatchWords: the semantics panel's sentence, the verdict sentence and
// the panel's lines, for outputs that follow some presets, none, or a dump
// that cannot tell them apart.
func TestMatchWords(t *testing.T) {
	all := []engine.Semantics{"hf", "vllm", "sglang", "flashinfer", "llamacpp", "tokenspeed"}
	alike := map[engine.Semantics]engine.Semantics{"vllm": "hf", "sglang": "hf", "flashinfer": "hf", "llamacpp": "hf", "tokenspeed": "hf"}
	tests := []struct {
		name      string
		op        engine.Op
		ms        []engine.SemanticsMatch
		chosen    engine.Semantics
		sentence  string
		verdict   string
		failing   string // the panel's failures of vllm
		linkVLLM  bool
		sameFlash string
	}{
		{
			name: "two presets pass", op: engine.OpRenorm,
			ms:       matches([]engine.Semantics{"sglang", "tokenspeed"}, map[engine.Semantics]engine.Semantics{"flashinfer": "hf", "tokenspeed": "sglang"}),
			chosen:   "sglang",
			sentence: "The outputs follow the semantics of SGLang (sglang) and TokenSpeed (tokenspeed): 2 of 6 presets pass.",
			verdict:  "PASS: the outputs follow sglang and tokenspeed (2 of 6 semantics presets); below, the judgement under sglang.",
			failing:  "2 rows", linkVLLM: true, sameFlash: "the same parameters as hf on this dump: judged once, for both",
		},
		{
			name: "none passes", op: engine.OpRenorm, ms: matches(nil, nil), chosen: "hf",
			sentence: "No engine matches: the outputs follow none of the 6 presets' filter chains. The closest is Hugging Face transformers (hf), which fails 2 rows; the sections below are its judgement.",
			verdict:  "FAIL: the outputs follow none of the 6 semantics presets; below, the judgement under hf, the closest.",
			failing:  "2 rows", linkVLLM: true,
		},
		{
			name: "an op without filters", op: engine.OpArgmax, ms: matches(all, alike), chosen: "hf",
			sentence: "No engine can be named from this dump: every preset judges it alike, since op argmax and its parameters leave no room for the filter chain to differ; they pass under every one.",
			verdict:  "PASS: the outputs follow hf, vllm, sglang, flashinfer, llamacpp and tokenspeed (6 of 6 semantics presets); below, the judgement under hf.",
			failing:  "none", sameFlash: "the same parameters as hf on this dump: judged once, for both",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &engine.Report{Op: tt.op, Rows: 8, Semantics: tt.chosen, Matches: tt.ms}
			for _, m := range tt.ms {
				rep.Pass = rep.Pass || m.Pass
			}
			s := Summarize(rep)
			if got := MatchSentence(s, tt.op); got != tt.sentence {
				t.Errorf("sentence:\n got %q\nwant %q", got, tt.sentence)
			}
			if s.Sentence != tt.verdict {
				t.Errorf("verdict:\n got %q\nwant %q", s.Sentence, tt.verdict)
			}
			d := RunPage{Run: store.Run{ID: "abcdefghij"}, Summary: s, Info: session.DumpInfo{Op: tt.op}}
			lines := MatchLines(d)
			if len(lines) != 6 {
				t.Fatalf("%d lines, want 6", len(lines))
			}
			vllm, flash := lines[1], lines[3]
			if vllm.Failures != tt.failing || (vllm.Href == "/runs/abcdefghij/rows/3") != tt.linkVLLM {
				t.Errorf("vllm: failing %q, link %q", vllm.Failures, vllm.Href)
			}
			if flash.Same != tt.sameFlash {
				t.Errorf("flashinfer: %q, want %q", flash.Same, tt.sameFlash)
			}
			for _, l := range lines {
				if l.Shown != (l.Semantics == tt.chosen) {
					t.Errorf("%s shown %v", l.Semantics, l.Shown)
				}
			}
		})
	}
}

// TestLogprobsWords: a logprobs output's line, its mode table's head and
// the row page's cells.
func TestLogprobsWords(t *testing.T) {
	o := OutputVerdict{OutputInfo: engine.OutputInfo{Name: "logprobs@v0", External: true, Kind: "logprobs"}, FailedRows: 3, Rows: 8,
		Logprobs: &engine.LogprobsInfo{Kind: engine.LogprobsRaw, TopN: 20}}
	if got, want := OutputLine(o), "logprobs@v0 (from the dump), raw logprobs, top 20, fails 3 of 8 rows."; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := ModeHead(engine.ModeTable{Kind: "logprobs", Metric: "logprob"}); !slices.Equal(got, []string{"output", "verdict", "rows failing", "mean |Δlogprob| (nats)", "P99", "max"}) {
		t.Errorf("mode head %v", got)
	}
	f := func(x float64) *engine.Float { v := engine.Float(x); return &v }
	inf := math.Inf(-1)
	tests := []struct {
		name       string
		tok        explain.LogprobToken
		value, err string
		bad        bool
		rank       string
	}{
		{"within", explain.LogprobToken{Rank: 1, Ref: -1.5, Value: f(-1.50001), Allowed: 1e-4}, "-1.5", "1e-05", false, "1"},
		{"outside", explain.LogprobToken{Rank: 2, Ref: -1.5, Value: f(-1.2), Allowed: 1e-4}, "-1.2", "0.3", true, "2"},
		{"both -inf", explain.LogprobToken{Rank: 9, Ref: engine.Float(inf), Value: f(inf)}, "−inf", "0", false, "—"},
		{"-inf where the reference keeps it", explain.LogprobToken{Rank: 3, Ref: -2, Value: f(inf), Allowed: 1e-4}, "−inf", "support", true, "3"},
		{"not held", explain.LogprobToken{Rank: 4, Ref: -3, Entry: -1}, "—", "", false, "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, bad := LogprobErr(tt.tok)
			if v := LogprobText(tt.tok.Value); v != tt.value || e != tt.err || bad != tt.bad || LogprobRank(tt.tok) != tt.rank {
				t.Errorf("value %q, error %q (bad %v), rank %q; want %q, %q (%v), %q", v, e, bad, LogprobRank(tt.tok), tt.value, tt.err, tt.bad, tt.rank)
			}
		})
	}
}
