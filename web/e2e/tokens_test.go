package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
)

// byteLevel is a byte-level BPE tokenizer.json as GPT-2's (Ġ is a space,
// Ċ a newline) that defines ids 0 to defined-1.
func byteLevel(defined int) string {
	pieces := []string{"Ġthe", "Ċ", "hello", "Ġ", "ĉ", "Ã©", "Ġand", "x"}
	vocab := map[string]int{}
	for i := range min(defined, len(pieces)) {
		vocab[pieces[i]] = i
	}
	b, _ := json.Marshal(map[string]any{
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}},
		"decoder": map[string]any{"type": "ByteLevel"},
	})
	return string(b)
}

// TestUploadWithTokenizer sends a dump with a tokenizer.json beside it, as
// the home page's form does, to a server on the real session: the run says
// where its token text comes from, the row API names every token it shows,
// a rerun keeps the tokenizer, a tokenizer that leaves ids undefined gets a
// notice, and one that is not a tokenizer is refused with one sentence
// naming it.
func TestUploadWithTokenizer(t *testing.T) {
	ts := serve(t, web.Config{
		Runner: session.New(cpu.New()),
	})

	logits := []float32{4, 1, 3, 0, -1, 2, 0.5, -2, 1, 4, 0, 2, 3, -1, 0, 1}
	var d bytes.Buffer
	if err := dump.WriteSafetensors(&d, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{2, 8}, logits)}, map[string]string{"op": "softmax"}); err != nil {
		t.Fatal(err)
	}
	post := func(path, tokenizer string) (int, map[string]any) {
		t.Helper()
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("dump", "tiny.safetensors")
		fw.Write(d.Bytes())
		if tokenizer != "" {
			tw, _ := mw.CreateFormFile("tokenizer", "tokenizer.json")
			io.WriteString(tw, tokenizer)
		}
		mw.Close()
		res, err := http.Post(ts.URL+path, mw.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	get := func(path string, v any) {
		t.Helper()
		res, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, res.Status)
		}
		json.NewDecoder(res.Body).Decode(v)
	}
	type run struct {
		ID, State string
		Info      session.DumpInfo
	}
	wait := func(id string) run {
		t.Helper()
		var r run
		for r.State != "done" && r.State != "failed" {
			get("/api/runs/"+id, &r)
		}
		return r
	}
	rowText := func(id string) map[string]string {
		t.Helper()
		var row struct {
			Detail struct {
				Text map[string]string `json:"text"`
			} `json:"detail"`
		}
		get("/api/runs/"+id+"/rows/0", &row)
		return row.Detail.Text
	}

	tests := []struct {
		name      string
		tokenizer string
		status    int
		text      map[string]string // what row 0 names (nil: no text)
		notice    string
		refusal   string
	}{
		{"no tokenizer: bare ids", "", 201, nil, "", ""},
		{"every id defined", byteLevel(8), 201, map[string]string{"0": "␣the", "1": "↵", "5": "é", "6": "␣and"}, "", ""},
		{"ids past the tokenizer", byteLevel(5), 201, map[string]string{"0": "␣the", "3": "␣"}, "does not define 3 of the 8 token ids", ""},
		{"not a tokenizer", `{"model": 3}`, 400, nil, "", "tokenizer.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := post("/api/runs", tt.tokenizer)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, out)
			}
			if tt.refusal != "" {
				msg, _ := out["error"].(string)
				if !strings.HasPrefix(msg, tt.refusal+": ") || strings.Count(strings.TrimSuffix(msg, "."), ". ") > 0 {
					t.Errorf("refusal %q, want one sentence naming %s", msg, tt.refusal)
				}
				return
			}
			id := out["id"].(string)
			r := wait(id)
			if (r.Info.Tokenizer != "") != (tt.text != nil) {
				t.Errorf("the run says its token text comes from %q", r.Info.Tokenizer)
			}
			if tt.notice != "" && !strings.Contains(strings.Join(r.Info.Notices, " "), tt.notice) {
				t.Errorf("notices %q lack %q", r.Info.Notices, tt.notice)
			}
			got := rowText(id)
			for k, v := range tt.text {
				if got[k] != v {
					t.Errorf("row 0 names token %s %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if tt.text == nil && got != nil {
				t.Errorf("without a tokenizer the row names tokens: %v", got)
			}
			if tt.text == nil {
				return
			}
			// A rerun keeps the tokenizer.
			res, err := http.Post(ts.URL+"/api/runs/"+id+"/rerun", "application/json", strings.NewReader(`{"temperature": 0.5}`))
			if err != nil {
				t.Fatal(err)
			}
			var again run
			json.NewDecoder(res.Body).Decode(&again)
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				t.Fatalf("rerun: %s", res.Status)
			}
			wait(again.ID)
			if g := rowText(again.ID); g["0"] != "␣the" {
				t.Errorf("the rerun lost its tokenizer: %v", g)
			}
		})
	}
}

// TestBrowserRealModelTokenText opens the real-model scenarios from the
// home page, as a person does: the softmax row page and the speculative
// row page (p, q and the residual, the trace) show each token's text
// beside its id, on the charts' axes and in the tables.
func TestBrowserRealModelTokenText(t *testing.T) {
	browser := findBrowser(t)
	var scs []web.Scenario
	for _, s := range scenarios.Catalogue() {
		if s.Name == "real-softmax" || s.Name == "real-spec" {
			scs = append(scs, web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
				Params: engine.Overrides{Draws: s.Overrides.Draws, Trials: s.Overrides.Trials}})
		}
	}
	if len(scs) != 2 {
		t.Fatalf("the catalogue lacks the real-model scenarios: %d found", len(scs))
	}
	ts := serve(t, web.Config{
		Runner:    session.New(cpu.New()),
		Scenarios: scs,
	})
	ctx, stop := startBrowser(t, browser)
	defer stop()

	for i, sc := range scs {
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if first := evalString(t, ctx, `document.querySelector('[data-testid="scenarios"] button').textContent`); first != scs[0].Title {
				t.Errorf("the home page offers %q first, want the real model's %q", first, scs[0].Title)
			}
		}
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`form[action="/scenarios/%s"] button`, sc.Name)))); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(ctx, `/\/rows\/0/.test(location.pathname) && document.readyState === 'complete'`, 60*time.Second); err != nil {
			t.Fatalf("%s did not open its row: %v (at %s)", sc.Name, err, evalString(t, ctx, `location.href`))
		}
		if got := evalString(t, ctx, `(document.querySelector('[data-testid="tokenizer"]') || {}).textContent || ''`); got != "" {
			t.Errorf("%s: the row page names a tokenizer where the run page should: %q", sc.Name, got)
		}
		switch sc.Name {
		case "real-softmax":
			if _, err := waitFor(ctx, `document.querySelectorAll('[data-testid="token-text"]').length > 0`, 60*time.Second); err != nil {
				t.Fatalf("the real softmax row shows no token text: %v", err)
			}
			cells := evalInt(t, ctx, `Array.from(document.querySelectorAll('[data-testid="token-text"]')).filter(function (c) { return c.textContent.length > 0; }).length`)
			rows := evalInt(t, ctx, `document.querySelectorAll('[data-testid="token-table"] tbody tr').length`)
			if cells < rows {
				t.Errorf("%d of %d token rows show text", cells, rows)
			}
			axis := evalString(t, ctx, `echarts.getInstanceByDom(document.querySelector('[data-testid="chart-probs"]')).getOption().xAxis[0].data.slice(0, 5).join(' | ')`)
			if !strings.Contains(axis, "\n#") {
				t.Errorf("the probability chart's axis shows %q, want each token's text over its id", axis)
			}
			screenshot(t, ctx, "real-softmax-row-text")
		case "real-spec":
			if _, err := waitFor(ctx, `document.querySelector('[data-testid="laws-table"]') && /‹/.test(document.querySelector('[data-testid="laws-table"]').textContent)`, 90*time.Second); err != nil {
				t.Fatalf("the speculative row's laws show no draft text: %v", err)
			}
			if _, err := waitFor(ctx, `document.querySelector('[data-testid="trace-step"]') && /‹/.test(document.querySelector('[data-testid="trace-step"]').textContent)`, 90*time.Second); err != nil {
				t.Errorf("the trace step names no token text: %v", err)
			}
			screenshot(t, ctx, "real-spec-row-text")
		}
		// The run page names where the text comes from.
		id := regexp.MustCompile(`/runs/([a-z2-7]{10})`).FindStringSubmatch(evalString(t, ctx, `location.pathname`))[1]
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+id)); err != nil {
			t.Fatal(err)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="tokenizer"]').textContent`); !strings.Contains(got, "tokenizer metadata") {
			t.Errorf("%s's run page says its token text comes %q", sc.Name, got)
		}
	}
}
