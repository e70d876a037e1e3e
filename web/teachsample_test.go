package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/view"
)

// newSampleEnv starts a server on the real pipeline (CPU backend) with the
// sample scenarios seeded-determinism and mixed-batch in its catalogue.
func newSampleEnv(t *testing.T) *env {
	t.Helper()
	var list []web.Scenario
	for _, s := range scenarios.Catalogue() {
		if s.Name == "seeded-determinism" || s.Name == "mixed-batch" {
			list = append(list, web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
				Params: engine.Overrides{Draws: s.Overrides.Draws}})
		}
	}
	e := &env{t: t, dir: t.TempDir()}
	e.start(web.Config{DataDir: e.dir, Runner: session.New(cpu.New()), Log: quietLog(), Scenarios: list})
	return e
}

// The sampler teaching page of a sample scenario's filtered row, by every
// method: each step in words and a chart, ending on the token our kernel
// stored for the same draw where the run made it; the row page links to
// it; bad input is a 4xx with one sentence.
func TestSampleTeachPages(t *testing.T) {
	e := newSampleEnv(t)
	id := e.openJudgedScenario("seeded-determinism")
	const row = 2 // T 0.7, top-k 100, top-p 0.9
	base := fmt.Sprintf("/runs/%s/rows/%d", id, row)

	rowPage := readAll(t, e.do("GET", base, nil))
	for _, m := range view.SampleMethods {
		if !bytes.Contains(rowPage, []byte(`data-testid="sample-teach-link-`+string(m)+`"`)) ||
			!bytes.Contains(rowPage, []byte(base+"/teach?method="+string(m))) {
			t.Errorf("the row page has no link to the %s lesson", m)
		}
	}

	tests := []struct {
		method engine.SampleMethod
		draw   int
		match  string // the stored draw it meets
		first  string // the first step's title
	}{
		{engine.SampleInverseCDF, 0, "same", "The distribution and the filters"},
		{engine.SampleInverseCDF, 5, "same", "The distribution and the filters"},
		{engine.SampleRejection, 0, "none", "The distribution and the filters"},
		{engine.SampleRejection, 3, "none", "The distribution and the filters"},
		{engine.SampleGumbel, 0, "none", "The scaled logits"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s draw %d", tt.method, tt.draw), func(t *testing.T) {
			path := fmt.Sprintf("%s/teach?method=%s&draw=%d&step=2", base, tt.method, tt.draw)
			v := decode[view.SampleTeachView](t, e.do("GET", "/api"+path, nil))
			if v.Method != string(tt.method) || v.Draw != tt.draw || v.Index != 1 || v.Invalid != "" || len(v.Items) != v.Total || v.Total < 3 {
				t.Fatalf("lesson %+v", v)
			}
			if v.Match != tt.match {
				t.Errorf("match %q, want %q: %s", v.Match, tt.match, v.Kernel)
			}
			if got := v.Items[0].Title; !strings.HasSuffix(got, tt.first) {
				t.Errorf("step 1 is %q, want %q", got, tt.first)
			}
			last := v.Items[len(v.Items)-1]
			if !strings.HasSuffix(last.Title, "The token") || !strings.Contains(last.What, "The draw emits token") {
				t.Errorf("the last step says %q: %q", last.Title, last.What)
			}
			for i, it := range v.Items {
				if it.Step != i+1 || it.What == "" || it.Chart == nil || !strings.Contains(it.URL, fmt.Sprintf("step=%d", i+1)) {
					t.Errorf("step %d: %+v", i+1, it)
				}
			}
			if tt.method == engine.SampleRejection {
				if len(v.Table) != len(v.Items)-2 || v.Items[len(v.Items)-2].Rows != len(v.Table) {
					t.Errorf("%d rounds in the table for %d steps", len(v.Table), len(v.Items))
				}
				if verdict := v.Table[len(v.Table)-1][len(v.Header)-1]; verdict != "emitted" {
					t.Errorf("the last round's verdict is %q", verdict)
				}
			}
			if len(v.Methods) != 3 || v.PrevDraw == "" && tt.draw > 0 || v.NextDraw == "" {
				t.Errorf("links: methods %+v, previous %q, next %q", v.Methods, v.PrevDraw, v.NextDraw)
			}

			html := readAll(t, e.do("GET", path, nil))
			if got, _ := byTestID(t, html, "sample-teach-title"); got != v.Items[1].Title {
				t.Errorf("the page shows %q, the API %q", got, v.Items[1].Title)
			}
			if got, _ := byTestID(t, html, "sample-teach-kernel"); got != v.Kernel {
				t.Errorf("kernel %q", got)
			}
			var data view.SampleTeachView
			if err := json.Unmarshal(jsonScript(t, html, "sample-teach-data"), &data); err != nil || len(data.Items) != len(v.Items) {
				t.Errorf("the page's data: %v", err)
			}
			if !bytes.Contains(html, []byte(`<script src="/static/sampler.js"`)) {
				t.Error("the page does not load sampler.js")
			}
		})
	}

	// The lesson's token is our kernel's: draw 0 by the run's own method is
	// the stored token, draw d of the inverse CDF the stored sample d.
	t.Run("the kernel's draw", func(t *testing.T) {
		for r := range 4 {
			for _, d := range []int{0, 1, 255} {
				v := decode[view.SampleTeachView](t, e.do("GET", fmt.Sprintf("/api/runs/%s/rows/%d/teach?draw=%d", id, r, d), nil))
				if v.Method != string(engine.SampleInverseCDF) || v.Match != "same" {
					t.Errorf("row %d draw %d (%s): %s", r, d, v.Method, v.Kernel)
				}
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		mixed := e.openJudgedScenario("mixed-batch")
		for _, bad := range []struct {
			path   string
			status int
			want   string
		}{
			{fmt.Sprintf("/runs/%s/rows/4/teach", id), http.StatusNotFound, "There is no row 4: this run has rows 0 to 3."},
			{base + "/teach?method=beam", http.StatusBadRequest, "Method must be rejection, gumbel or inverse_cdf, not"},
			{base + "/teach?draw=-1", http.StatusBadRequest, "Draw must be a whole number from 0 to 999999"},
			{base + "/teach?draw=1000000000", http.StatusBadRequest, "Draw must be a whole number from 0 to 999999999"},
			{base + "/teach?step=0", http.StatusBadRequest, "Step must be a whole number from 1"},
			{base + "/teach?seed=x", http.StatusBadRequest, "Seed must be a whole number"},
			{fmt.Sprintf("/runs/%s/rows/0/teach?method=gumbel", mixed), http.StatusBadRequest, "Row 0 is greedy (temperature 0)"},
		} {
			for _, prefix := range []string{"/api", ""} {
				res := e.do("GET", prefix+bad.path, nil)
				body := readAll(t, res)
				if res.StatusCode != bad.status || !bytes.Contains(body, []byte(bad.want)) {
					t.Errorf("%s%s: %s %s", prefix, bad.path, res.Status, body)
				}
			}
		}
		// A sampled row of the mixed batch teaches; its greedy rows say so on
		// the row page instead of linking.
		v := decode[view.SampleTeachView](t, e.do("GET", fmt.Sprintf("/api/runs/%s/rows/1/teach?method=rejection", mixed), nil))
		if v.Invalid != "" || v.Total < 3 {
			t.Errorf("mixed-batch row 1: %+v", v)
		}
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/0", mixed), nil))
		if !bytes.Contains(page, []byte("This row is greedy")) || bytes.Contains(page, []byte("sample-teach-link-gumbel")) {
			t.Error("the greedy row's page does not say it has no sampler to teach")
		}
	})
}
