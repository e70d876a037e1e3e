package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/scenarios"
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

// scenarioDump returns the dump of the built-in scenario called name.
func scenarioDump(t *testing.T, name string) []byte {
	t.Helper()
	for _, sc := range scenarios.Catalogue() {
		if sc.Name == name {
			b, err := sc.DumpBytes()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no scenario %s", name)
	return nil
}

// TestSemanticsPanel judges dumps with semantics any on the real pipeline
// and reads the run page's "Which engine does this match?" panel: a line
// per preset with its engine, chain, verdict, failures, the preset it was
// judged with and its first failing row linked; the sentence that names
// the engines the outputs follow, says none does, or that the op leaves
// nothing to tell them apart. The summary of GET /api/runs/{id} and the
// websocket's final message carry the matches; a dump without outputs of
// its own is refused at upload in one sentence.
func TestSemanticsPanel(t *testing.T) {
	e := newRealEnv(t)
	tests := []struct {
		name     string
		dump     []byte
		pass     bool
		sentence string
		// passing are the presets that must pass, failing those that
		// must fail; same maps a preset to the one it was judged with.
		passing, failing []string
		same             map[string]string
	}{
		{
			name: "probs made in hf's order", dump: semanticsDump(t, nil), pass: true,
			sentence: "The outputs follow the semantics of Hugging Face transformers (hf), ",
			passing:  []string{"hf", "flashinfer", "sglang"}, failing: []string{"tokenspeed"},
			same: map[string]string{"flashinfer": "hf", "sglang": "hf"},
		},
		{
			name: "an engine that divides by the temperature twice", dump: scenarioDump(t, "logprobs-kinds"), pass: false,
			sentence: "No engine matches: the outputs follow none of the 6 presets' filter chains. The closest is Hugging Face transformers (hf), which fails 11 rows",
			failing:  []string{"hf", "vllm", "sglang", "flashinfer", "llamacpp", "tokenspeed"},
			same:     map[string]string{"flashinfer": "hf", "tokenspeed": "sglang"},
		},
		{
			name: "argmax has no filter chain", dump: scenarioDump(t, "greedy-batch"), pass: true,
			sentence: "No engine can be named from this dump: every preset judges it alike, since op argmax and its parameters leave no room for the filter chain to differ; they pass under every one.",
			passing:  []string{"hf", "vllm", "sglang", "flashinfer", "llamacpp", "tokenspeed"},
			same:     map[string]string{"vllm": "hf", "llamacpp": "hf", "tokenspeed": "hf"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.uploadQuery(tt.dump, "?semantics=any")
			if got := e.wait(r.ID, ""); got.State != "done" || got.Verdict == nil || got.Verdict.Pass != tt.pass {
				t.Fatalf("run: %+v, want done and pass %v", got, tt.pass)
			}
			page := e.page("/runs/"+r.ID, http.StatusOK)
			if s := elements(t, page, "semantics-sentence"); len(s) != 1 || !strings.HasPrefix(textOf(s[0]), tt.sentence) {
				t.Errorf("sentence %q, want it to begin %q", textOf(s[0]), tt.sentence)
			}
			lines := map[string]*html.Node{}
			var order []string
			for _, tr := range elements(t, page, "match") {
				lines[attr(tr, "data-semantics")] = tr
				order = append(order, attr(tr, "data-semantics"))
			}
			if want := []string{"hf", "vllm", "sglang", "flashinfer", "llamacpp", "tokenspeed"}; !slices.Equal(order, want) {
				t.Fatalf("the panel's presets %v, want %v", order, want)
			}
			verdict := func(p string) string {
				tr := lines[p]
				return textOf(within(tr, "match-verdict")[0]) + ", failing " + textOf(within(tr, "match-failing")[0])
			}
			for _, p := range tt.passing {
				if got := verdict(p); got != "pass, failing none" {
					t.Errorf("%s: %q, want a pass with no failures", p, got)
				}
			}
			for _, p := range tt.failing {
				tr := lines[p]
				if got := verdict(p); !strings.HasPrefix(got, "fail, failing ") || strings.HasSuffix(got, "none") {
					t.Errorf("%s: %q, want a failure", p, got)
				}
				first := within(tr, "match-first")
				if len(first) != 1 || !regexp.MustCompile(`^/runs/`+r.ID+`/rows/\d+$`).MatchString(attr(first[0], "href")) {
					t.Errorf("%s: the first failure does not link its row", p)
				}
			}
			for p, with := range tt.same {
				if s := within(lines[p], "same-as"); len(s) != 1 || !strings.Contains(textOf(s[0]), "as "+with+" on this dump") {
					t.Errorf("%s is not said to be judged with %s", p, with)
				}
			}
			// The API's summary and the final message carry the matches.
			var api struct {
				Summary struct {
					Semantics string                  `json:"semantics"`
					Matches   []engine.SemanticsMatch `json:"matches"`
				} `json:"summary"`
			}
			if err := json.Unmarshal(readAll(t, e.do("GET", "/api/runs/"+r.ID, nil)), &api); err != nil {
				t.Fatal(err)
			}
			var final struct {
				Summary struct {
					Matches []engine.SemanticsMatch `json:"matches"`
				} `json:"summary"`
			}
			if err := json.Unmarshal(finalUpdate(t, e, r.ID, ""), &final); err != nil {
				t.Fatal(err)
			}
			if len(api.Summary.Matches) != 6 || len(final.Summary.Matches) != 6 || api.Summary.Semantics == "" {
				t.Errorf("matches: %d in the API's summary (under %q), %d in the final message; want 6", len(api.Summary.Matches), api.Summary.Semantics, len(final.Summary.Matches))
			}
		})
	}

	t.Run("the row page under the preset shown", func(t *testing.T) {
		// The probs of top-k-then-top-p follow SGLang's joint chain, not
		// the dump's own (top-k first): its row page draws the reference
		// of the judgement it shows, under sglang.
		r := e.uploadQuery(scenarioDump(t, "top-k-then-top-p"), "?semantics=any")
		e.wait(r.ID, "")
		var row struct {
			Outputs []struct {
				Report struct {
					Pass bool `json:"pass"`
				} `json:"report"`
			} `json:"outputs"`
			Detail struct {
				Tokens []struct {
					Token   int            `json:"token"`
					Ref     engine.Float   `json:"ref"`
					Values  []engine.Float `json:"values"`
					Allowed engine.Float   `json:"allowed"`
				} `json:"tokens"`
			} `json:"detail"`
		}
		if err := json.Unmarshal(readAll(t, e.do("GET", "/api/runs/"+r.ID+"/rows/0?top=30", nil)), &row); err != nil {
			t.Fatal(err)
		}
		if len(row.Outputs) != 1 || !row.Outputs[0].Report.Pass || len(row.Detail.Tokens) != 30 {
			t.Fatalf("row 0: %d outputs, %d tokens; want the dump's probs passing, 30 tokens", len(row.Outputs), len(row.Detail.Tokens))
		}
		if got, _ := byTestID(t, e.page("/runs/"+r.ID+"/rows/0", http.StatusOK), "row-preset"); !strings.Contains(got, "this row is shown under sglang") {
			t.Errorf("the row page says %q", got)
		}
		for _, tok := range row.Detail.Tokens {
			if d := math.Abs(float64(tok.Values[0] - tok.Ref)); d > float64(tok.Allowed) {
				t.Errorf("token %d: the output's %v, the reference's %v: the row page's reference is not the passing preset's", tok.Token, tok.Values[0], tok.Ref)
			}
		}
	})

	t.Run("a dump without outputs of its own", func(t *testing.T) {
		res := e.do("PUT", "/api/runs?semantics=any&name=plain.safetensors", bytes.NewReader(scenarioDump(t, "softmax-fp32-32000")))
		got := decode[map[string]string](t, res)
		if want := "plain.safetensors: semantics any judges the dump's external outputs under every preset, and the dump holds none"; res.StatusCode != http.StatusBadRequest || !strings.Contains(got["error"], want) {
			t.Errorf("%d %q, want 400 and %q", res.StatusCode, got["error"], want)
		}
	})

	t.Run("the forms offer semantics", func(t *testing.T) {
		r := e.uploadQuery(semanticsDump(t, nil), "")
		e.wait(r.ID, "")
		for _, f := range []struct{ path, id string }{{"/", "upload-semantics"}, {"/runs/" + r.ID, "rerun-semantics"}} {
			sel := elements(t, e.page(f.path, http.StatusOK), f.id)
			if len(sel) != 1 {
				t.Fatalf("%s has no %s select", f.path, f.id)
			}
			var values []string
			for _, o := range findAll(sel[0], "option") {
				values = append(values, attr(o, "value"))
			}
			if want := []string{"", "hf", "vllm", "sglang", "flashinfer", "llamacpp", "tokenspeed", "any"}; !slices.Equal(values, want) {
				t.Errorf("%s offers %v, want %v", f.path, values, want)
			}
		}
		// The home page's form sent without its script carries semantics
		// as a field beside the file; a value that names no preset is
		// refused in the words of the query's.
		for _, tt := range []struct {
			value string
			want  int
		}{{"any", http.StatusSeeOther}, {"ollama", http.StatusBadRequest}} {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			fw, err := mw.CreateFormFile("dump", "form.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			fw.Write(semanticsDump(t, nil))
			mw.WriteField("semantics", tt.value)
			mw.Close()
			res := e.do("POST", "/runs", &buf, "Content-Type", mw.FormDataContentType())
			body := readAll(t, res)
			if res.StatusCode != tt.want {
				t.Fatalf("semantics=%s in the form: %s, want %d: %s", tt.value, res.Status, tt.want, body)
			}
			if tt.want != http.StatusSeeOther {
				if !strings.Contains(string(body), `Semantics must be hf, vllm, sglang, flashinfer, llamacpp, tokenspeed or any, not &#34;ollama&#34;`) {
					t.Errorf("semantics=%s in the form answers %s", tt.value, body)
				}
				continue
			}
			id := runIDs.FindStringSubmatch(res.Header.Get("Location"))
			e.wait(id[1], "")
			if p := elements(t, e.page("/runs/"+id[1], http.StatusOK), "matches"); len(p) != 1 {
				t.Error("the form's semantics any gives no panel")
			}
		}

		// The rerun form's any gives a run with the panel.
		res := e.do("POST", "/runs/"+r.ID+"/rerun", strings.NewReader("semantics=any"), "Content-Type", "application/x-www-form-urlencoded")
		res.Body.Close()
		id := runIDs.FindStringSubmatch(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || id == nil {
			t.Fatalf("rerun: %s to %q", res.Status, res.Header.Get("Location"))
		}
		e.wait(id[1], "")
		if p := elements(t, e.page("/runs/"+id[1], http.StatusOK), "matches"); len(p) != 1 {
			t.Error("the rerun with semantics any has no panel")
		}
	})
}
