package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/view"
	"github.com/sampviz/sampviz/web/webtest"
)

// jsonScript returns the content of the page's JSON script element id.
func jsonScript(t *testing.T, page []byte, id string) []byte {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script id="` + id + `" type="application/json">(.*?)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no JSON script %q", id)
	}
	return m[1]
}

// chartKinds decodes per-output chart options and returns each output's
// chart names with their series' data counts.
func chartKinds(t *testing.T, raw json.RawMessage) []map[string]int {
	t.Helper()
	var outs []map[string]struct {
		Series []struct {
			Data []any `json:"data"`
		} `json:"series"`
	}
	if err := json.Unmarshal(raw, &outs); err != nil {
		t.Fatalf("charts: %v", err)
	}
	var res []map[string]int
	for _, o := range outs {
		m := map[string]int{}
		for k, c := range o {
			for _, s := range c.Series {
				m[k] += len(s.Data)
			}
		}
		res = append(res, m)
	}
	return res
}

func TestStatisticalViewsWithFakes(t *testing.T) {
	e := newEnv(t, nil)
	rows := 6 + rand.IntN(10)
	k := 2 + rand.IntN(4)
	sample := webtest.Dump{Op: "sample", Rows: rows, Vocab: 50 + rand.IntN(50), Fail: []int{rand.IntN(rows)}}
	spec := webtest.Dump{Op: "spec_verify", Rows: rows, Vocab: 50 + rand.IntN(50), K: k, Fail: []int{rand.IntN(rows)}}
	sr := e.uploadRaw(sample.Bytes())
	pr := e.uploadRaw(spec.Bytes())
	e.wait(sr.ID, "")
	e.wait(pr.ID, "")

	t.Run("run pages", func(t *testing.T) {
		tests := []struct {
			name   string
			id     string
			charts []string // chart ids shown before any options
			hidden []string
			stats  string
			kinds  []string // charts the final update carries
		}{
			{"sample", sr.ID, nil, []string{"chart-hist", "chart-heat", "chart-accept"}, fmt.Sprintf("%d draws per row", webtest.FakeDraws), []string{"pvalue"}},
			{"spec_verify", pr.ID, nil, []string{"chart-hist", "chart-heat"}, fmt.Sprintf("%d trials per row", webtest.FakeTrials), []string{"pvalue", "accept", "emitted"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				page := readAll(t, e.do("GET", "/runs/"+tt.id, nil))
				if got, ok := byTestID(t, page, "stats-line"); !ok || !strings.Contains(got, tt.stats) {
					t.Errorf("stats line = %q, want it to say %q", got, tt.stats)
				}
				for _, id := range tt.hidden {
					if !regexp.MustCompile(`data-testid="` + id + `" hidden`).Match(page) {
						t.Errorf("%s is shown on a %s run", id, tt.name)
					}
				}
				var final struct {
					Charts  json.RawMessage `json:"charts"`
					Summary *view.Summary   `json:"summary"`
				}
				if err := json.Unmarshal(finalUpdate(t, e, tt.id, ""), &final); err != nil {
					t.Fatal(err)
				}
				charts := chartKinds(t, final.Charts)
				if len(charts) != 1 {
					t.Fatalf("%d outputs' charts", len(charts))
				}
				for _, kind := range tt.kinds {
					if charts[0][kind] == 0 {
						t.Errorf("chart %s missing or empty: %v", kind, charts[0])
					}
				}
				if _, ok := charts[0]["worst"]; ok {
					t.Error("a statistical output draws the worst-error chart")
				}
				if final.Summary == nil || !strings.Contains(final.Summary.StatsLine, tt.stats) {
					t.Errorf("summary stats line %q", final.Summary.StatsLine)
				}
			})
		}
	})

	t.Run("row pages", func(t *testing.T) {
		tests := []struct {
			name    string
			path    string
			testIDs map[string]string
			scripts []string
		}{
			{"sample row", fmt.Sprintf("/runs/%s/rows/%d", sr.ID, sample.Fail[0]), map[string]string{
				"samples-line":  fmt.Sprintf("drew this row %d times", webtest.FakeDraws),
				"fit":           fmt.Sprintf("Goodness of fit of %d draws", webtest.FakeDraws),
				"chart-samples": "",
			}, []string{"row-charts"}},
			{"sample row, log scale", fmt.Sprintf("/runs/%s/rows/0?log=1", sr.ID), map[string]string{"log-toggle": "linear scale"}, []string{"row-charts"}},
			{"spec row", fmt.Sprintf("/runs/%s/rows/%d", pr.ID, spec.Fail[0]), map[string]string{
				"laws-table":       "a_i = min(1, p/q)",
				"spec-stats":       fmt.Sprintf("%d trials", webtest.FakeTrials),
				"teach-link":       "Teach",
				"trace-title":      fmt.Sprintf("Trial 0 of %d, position 0 of %d", webtest.FakeTraceTrials, k),
				"trace-step":       "u·q(x) < p(x)?",
				"trace-say":        "The draft proposed token",
				"chart-row-accept": "",
			}, []string{"row-charts", "row-trace"}},
			{"spec row, a step in the URL", fmt.Sprintf("/runs/%s/rows/0?trial=2&step=%d", pr.ID, k), map[string]string{
				"trace-title": fmt.Sprintf("Trial 2 of %d, position %d: the bonus", webtest.FakeTraceTrials, k),
			}, []string{"row-trace"}},
			{"spec row, a step out of range", fmt.Sprintf("/runs/%s/rows/0?trial=99&step=-4", pr.ID), map[string]string{
				"trace-title": fmt.Sprintf("Trial %d of %d, position 0", webtest.FakeTraceTrials-1, webtest.FakeTraceTrials),
			}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := e.do("GET", tt.path, nil)
				page := readAll(t, res)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("status %s", res.Status)
				}
				for id, want := range tt.testIDs {
					if got, ok := byTestID(t, page, id); !ok || !strings.Contains(got, want) {
						t.Errorf("%s = %q (found %v), want it to contain %q", id, got, ok, want)
					}
				}
				for _, id := range tt.scripts {
					var v any
					if err := json.Unmarshal(jsonScript(t, page, id), &v); err != nil {
						t.Errorf("%s is not JSON: %v", id, err)
					}
				}
			})
		}
		// The trace's steps: every step of every traced trial, each with its
		// own URL, and a chart per position.
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/1", pr.ID), nil))
		var tr struct {
			Trials, Steps, Index int
			Items                []struct {
				Trial, Position int
				Cells           []string
				URL             string
				Outcome         string
			}
			Charts []map[string]any
		}
		if err := json.Unmarshal(jsonScript(t, page, "row-trace"), &tr); err != nil {
			t.Fatal(err)
		}
		if tr.Trials != webtest.FakeTraceTrials || tr.Steps != k+1 || len(tr.Items) != tr.Trials*tr.Steps || len(tr.Charts) != k+1 {
			t.Fatalf("trace: %d trials of %d steps, %d items, %d charts", tr.Trials, tr.Steps, len(tr.Items), len(tr.Charts))
		}
		for i, it := range tr.Items {
			if it.Trial*tr.Steps+it.Position != i || len(it.Cells) != 8 || !strings.Contains(it.URL, fmt.Sprintf("trial=%d", it.Trial)) || !strings.Contains(it.URL, fmt.Sprintf("step=%d", it.Position)) {
				t.Errorf("item %d = %+v", i, it)
			}
		}
	})

	t.Run("teach", func(t *testing.T) {
		base := fmt.Sprintf("/runs/%s/rows/1/teach", pr.ID)
		// A sample run has the sampler's lesson (teachsample_test.go); a
		// softmax run has none.
		xr := e.uploadRaw(webtest.Dump{Rows: 2, Vocab: 20}.Bytes())
		tests := []struct {
			name    string
			path    string
			status  int
			testIDs map[string]string
		}{
			{"defaults", base, 200, map[string]string{"teach-counter": "No steps yet", "teach-definition": "q = normalise((1 − d)·p + d·q_row)", "teach-what": "Press Step"}},
			{"after steps", base + "?pos=1&distance=0.5&seed=3&step=40", 200, map[string]string{"teach-counter": "40 steps", "teach-what": "Step 40:", "teach-why": "Why min(1, p/q)"}},
			{"bad position", base + fmt.Sprintf("?pos=%d", k), 400, map[string]string{"error": "not a draft position"}},
			{"bad distance", base + "?distance=2", 400, map[string]string{"error": "Distance must be in [0, 1]"}},
			{"too many steps", base + fmt.Sprintf("?step=%d", lesson.MaxSteps+1), 400, map[string]string{"error": "Step must be in"}},
			{"not a spec or sample run", fmt.Sprintf("/runs/%s/rows/0/teach", xr.ID), 404, map[string]string{"error": "not spec_verify, spec_tree_verify or sample"}},
			{"no such row", fmt.Sprintf("/runs/%s/rows/%d/teach", pr.ID, rows), 404, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := e.do("GET", tt.path, nil)
				page := readAll(t, res)
				if res.StatusCode != tt.status {
					t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, page)
				}
				for id, want := range tt.testIDs {
					if got, ok := byTestID(t, page, id); !ok || !strings.Contains(got, want) {
						t.Errorf("%s = %q, want it to contain %q", id, got, want)
					}
				}
			})
		}
		// The API answers the same state as JSON, with links to the next.
		type view struct {
			URL      string `json:"url"`
			StepURL  string `json:"step_url"`
			RunURL   string `json:"run_url"`
			Steps    int    `json:"steps"`
			Counter  string `json:"counter"`
			Controls struct {
				Distance string `json:"distance"`
				Seed     string `json:"seed"`
			} `json:"controls"`
			Last   []struct{ Step string }    `json:"last"`
			Charts map[string]json.RawMessage `json:"charts"`
		}
		v := decode[view](t, e.do("GET", "/api"+base+"?distance=0.25&seed=9&step=17", nil))
		if v.Steps != 17 || v.Controls.Distance != "0.25" || v.Controls.Seed != "9" || len(v.Last) == 0 || v.Last[0].Step != "17" || len(v.Charts) != 2 {
			t.Errorf("teach API = %+v", v)
		}
		u, err := url.Parse(v.StepURL)
		if err != nil || u.Query().Get("step") != "18" || u.Query().Get("distance") != "0.25" || u.Query().Get("seed") != "9" {
			t.Errorf("step link %q", v.StepURL)
		}
		if u, _ := url.Parse(v.RunURL); u.Query().Get("step") != "117" {
			t.Errorf("run link %q", v.RunURL)
		}
		// A pasted link gives the same state.
		again := decode[view](t, e.do("GET", "/api"+v.URL, nil))
		if again.Counter != v.Counter || again.URL != v.URL {
			t.Errorf("the page's own URL gives %q, want %q", again.Counter, v.Counter)
		}
		if res := e.do("GET", "/api"+base+"?top_p=0", nil); res.StatusCode != 400 {
			t.Errorf("top_p=0: %s", res.Status)
		} else if msg := decode[map[string]string](t, res)["error"]; !strings.HasPrefix(msg, "Top-p must be in (0, 1]") {
			t.Errorf("error %q", msg)
		}
	})
}

func TestUploadAndRerunTakeDrawsAndTrials(t *testing.T) {
	e := newEnv(t, nil)
	d := webtest.Dump{Op: "spec_verify", Rows: 3, Vocab: 20, K: 2}
	tests := []struct {
		name   string
		query  string
		status int
		params string
	}{
		{"trials", "?trials=500", 201, `"trials":500`},
		{"draws and seed", "?draws=2000&seed=4", 201, `"draws":2000`},
		{"too many trials", fmt.Sprintf("?trials=%d", engine.MaxTrials+1), 400, ""},
		{"negative draws", "?draws=-1", 400, ""},
		{"unknown backend", "?backend=tpu", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("PUT", "/api/runs"+tt.query, bytes.NewReader(d.Bytes()))
			body := readAll(t, res)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, body)
			}
			if tt.params != "" && !strings.Contains(string(bytes.ReplaceAll(body, []byte(" "), nil)), tt.params) {
				t.Errorf("run %s does not carry %s", body, tt.params)
			}
		})
	}
	r := e.uploadRaw(d.Bytes())
	e.wait(r.ID, "")
	res := e.do("POST", "/api/runs/"+r.ID+"/rerun", strings.NewReader(`{"trials": 300}`), "Content-Type", "application/json")
	body := readAll(t, res)
	if res.StatusCode != 201 || !strings.Contains(string(bytes.ReplaceAll(body, []byte(" "), nil)), `"trials":300`) {
		t.Errorf("rerun with trials: %s: %s", res.Status, body)
	}
}

// TestStatisticsOfRealRuns runs sample and spec_verify dumps through the
// real pipeline on the CPU backend.
func TestStatisticsOfRealRuns(t *testing.T) {
	e := newRealEnv(t)
	rows, k, v := 4, 3, 64+rand.IntN(64)
	const nanRow = 3
	specPath := writeSpecDump(t, rows, k, v, nanRow)
	samplePath := writeSampleDump(t, rows, v)

	spec := e.uploadQuery(readFile(t, specPath), "?trials=300")
	sample := e.uploadQuery(readFile(t, samplePath), "?draws=4000")
	if got := e.wait(spec.ID, ""); got.State != "done" {
		t.Fatalf("spec run %s: %s", got.State, got.Message)
	}
	if got := e.wait(sample.ID, ""); got.State != "done" {
		t.Fatalf("sample run %s: %s", got.State, got.Message)
	}

	t.Run("run pages", func(t *testing.T) {
		tests := []struct {
			name  string
			id    string
			kinds []string
			stats string
		}{
			{"sample", sample.ID, []string{"pvalue"}, "4000 draws per row"},
			{"spec_verify", spec.ID, []string{"pvalue", "accept", "emitted"}, "300 trials per row; mean acceptance length"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var final struct {
					Charts  json.RawMessage `json:"charts"`
					Summary *view.Summary   `json:"summary"`
				}
				if err := json.Unmarshal(finalUpdate(t, e, tt.id, ""), &final); err != nil {
					t.Fatal(err)
				}
				charts := chartKinds(t, final.Charts)
				for _, kind := range tt.kinds {
					if charts[0][kind] == 0 {
						t.Errorf("chart %s missing or empty: %v", kind, charts[0])
					}
				}
				if final.Summary == nil || !strings.Contains(final.Summary.StatsLine, tt.stats) {
					t.Errorf("stats line %q, want %q", final.Summary.StatsLine, tt.stats)
				}
				page := readAll(t, e.do("GET", "/runs/"+tt.id, nil))
				if got, _ := byTestID(t, page, "stats-line"); !strings.Contains(got, tt.stats) {
					t.Errorf("run header says %q", got)
				}
			})
		}
	})

	type rowAPI struct {
		Detail *explain.RowDetail `json:"detail"`
	}
	t.Run("sample row", func(t *testing.T) {
		got := decode[rowAPI](t, e.do("GET", fmt.Sprintf("/api/runs/%s/rows/1", sample.ID), nil))
		sd := got.Detail.Samples
		if sd == nil || len(sd.Draws) != 1 || sd.Draws[0] != 4000 {
			t.Fatalf("samples = %+v", sd)
		}
		n := sd.Other.Observed[0] + sd.OutOfRange[0]
		for _, tk := range sd.Tokens {
			n += tk.Observed[0]
			if tk.Ref == 0 {
				t.Errorf("our sampler drew token %d, which has no reference mass", tk.Token)
			}
		}
		if n != 4000 {
			t.Errorf("%d draws in the histogram, want 4000", n)
		}
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/1", sample.ID), nil))
		if got, _ := byTestID(t, page, "fit"); !strings.HasPrefix(got, "Goodness of fit of 4000 draws") {
			t.Errorf("fit line %q", got)
		}
		var charts map[string]json.RawMessage
		if err := json.Unmarshal(jsonScript(t, page, "row-charts"), &charts); err != nil || charts["samples"] == nil {
			t.Errorf("row charts %v: %v", keysOf(charts), err)
		}
	})

	t.Run("spec row and its trace", func(t *testing.T) {
		got := decode[rowAPI](t, e.do("GET", fmt.Sprintf("/api/runs/%s/rows/2", spec.ID), nil))
		sd := got.Detail.Spec
		if sd == nil || sd.Trace == nil || sd.Trace.Trials != 16 || sd.Trace.Steps != k+1 || len(sd.Positions) != k+1 {
			t.Fatalf("spec detail %+v", sd)
		}
		for _, steps := range sd.Trace.Step {
			for i, s := range steps[:k] {
				if s.Accepted != (float32(s.U*s.Q) < s.P) {
					t.Errorf("position %d: step %+v breaks the acceptance rule", i, s)
				}
			}
		}
		path := fmt.Sprintf("/runs/%s/rows/2?trial=5&step=1", spec.ID)
		page := readAll(t, e.do("GET", path, nil))
		if got, _ := byTestID(t, page, "spec-stats"); !strings.HasPrefix(got, "Speculative trials: 300 trials") {
			t.Errorf("spec stats line %q", got)
		}
		var charts map[string]json.RawMessage
		if err := json.Unmarshal(jsonScript(t, page, "row-charts"), &charts); err != nil || charts["accept"] == nil || charts["emitted"] == nil {
			t.Errorf("row charts %v: %v", keysOf(charts), err)
		}
		if got, _ := byTestID(t, page, "trace-title"); got != fmt.Sprintf("Trial 5 of 16, position 1 of %d", k) {
			t.Errorf("trace title %q", got)
		}
		s := sd.Trace.Step[5][1]
		var tr struct {
			Index int `json:"index"`
			Items []struct {
				Cells []string `json:"cells"`
			} `json:"items"`
		}
		if err := json.Unmarshal(jsonScript(t, page, "row-trace"), &tr); err != nil {
			t.Fatal(err)
		}
		if tr.Index != 5*(k+1)+1 || tr.Items[tr.Index].Cells[0] != fmt.Sprint(s.Draft) {
			t.Errorf("the step shown is %d with cells %v, want 5*(K+1)+1 with draft %d", tr.Index, tr.Items[tr.Index].Cells, s.Draft)
		}
		if got, _ := byTestID(t, page, "trace-say"); !strings.Contains(got, fmt.Sprint(s.Draft)) {
			t.Errorf("the step says %q, not naming draft %d", got, s.Draft)
		}
	})

	t.Run("a row without a distribution", func(t *testing.T) {
		res := e.do("GET", fmt.Sprintf("/api/runs/%s/rows/%d", spec.ID, nanRow), nil)
		b := readAll(t, res)
		var got rowAPI
		if err := json.Unmarshal(b, &got); err != nil || res.StatusCode != 200 {
			t.Fatalf("row API %s: %v", res.Status, err)
		}
		if got.Detail.Spec == nil || got.Detail.Spec.Positions[1].Invalid == "" || !bytes.Contains(b, []byte(`"NaN"`)) {
			t.Errorf("the NaN row's detail: %+v", got.Detail.Spec)
		}
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d?trial=0&step=1", spec.ID, nanRow), nil))
		for _, id := range []string{"row-charts", "row-trace"} {
			var v any
			if err := json.Unmarshal(jsonScript(t, page, id), &v); err != nil {
				t.Errorf("%s: %v", id, err)
			}
		}
		if say, _ := byTestID(t, page, "trace-say"); !strings.Contains(say, "no distribution") {
			t.Errorf("the NaN step says %q", say)
		}
		page = readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d/teach?pos=1", spec.ID, nanRow), nil))
		if msg, _ := byTestID(t, page, "teach-invalid"); !strings.Contains(msg, "no distribution") {
			t.Errorf("teaching on the NaN position says %q", msg)
		}
	})

	t.Run("teach on the real row", func(t *testing.T) {
		type view struct {
			Steps   int            `json:"steps"`
			Counter string         `json:"counter"`
			What    string         `json:"what"`
			Charts  map[string]any `json:"charts"`
			Invalid string         `json:"invalid"`
		}
		path := fmt.Sprintf("/api/runs/%s/rows/0/teach?pos=2&distance=0.8&seed=11&step=250", spec.ID)
		a := readAll(t, e.do("GET", path, nil))
		b := readAll(t, e.do("GET", path, nil))
		if !bytes.Equal(a, b) {
			t.Error("the same URL gave different steps")
		}
		var got view
		if err := json.Unmarshal(a, &got); err != nil {
			t.Fatal(err)
		}
		if got.Invalid != "" || got.Steps != 250 || !strings.HasPrefix(got.Counter, "250 steps:") || !strings.HasPrefix(got.What, "Step 250:") || len(got.Charts) != 2 {
			t.Errorf("teach = %+v", got)
		}
		page := readAll(t, e.do("GET", strings.TrimPrefix(path, "/api"), nil))
		if c, _ := byTestID(t, page, "teach-counter"); c != got.Counter {
			t.Errorf("the page says %q, the API %q", c, got.Counter)
		}
	})
}

func keysOf(m map[string]json.RawMessage) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// The p-value threshold reaches the chart from the output's tolerances.
func TestPValueThresholdLine(t *testing.T) {
	e := newEnv(t, nil)
	d := webtest.Dump{Op: "sample", Rows: 5, Vocab: 30, Fail: []int{2}}
	r := e.uploadRaw(d.Bytes())
	e.wait(r.ID, "")
	tol := webtest.DefaultTolerances
	tol.PValue = math.Pow(10, -2-float64(rand.IntN(3)))
	q := "?" + toleranceQuery(tol).Encode()
	readAll(t, e.do("POST", "/api/runs/"+r.ID+"/judgements", strings.NewReader(toleranceQuery(tol).Encode()), "Content-Type", "application/x-www-form-urlencoded"))
	e.wait(r.ID, q)
	if final := finalUpdate(t, e, r.ID, q); !bytes.Contains(final, []byte(`fails below p = `+fmt.Sprint(tol.PValue))) {
		t.Errorf("the p-value chart has no threshold line at %g", tol.PValue)
	}
}

// finalUpdate reads a finished run's websocket and returns its last
// message, which carries everything (charts included).
func finalUpdate(t *testing.T, e *env, id, query string) []byte {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(wsURL(e, id, query), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var last []byte
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure) && last != nil {
				return last
			}
			t.Fatalf("websocket: %v", err)
		}
		last = b
	}
}

// newRealEnv starts a server on the real pipeline with the CPU backend.
func newRealEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.start(web.Config{DataDir: e.dir, Runner: session.New(cpu.New()), Log: quietLog()})
	return e
}

// uploadQuery PUTs a dump with a query (parameters) and returns the run.
func (e *env) uploadQuery(content []byte, query string) runJSON {
	e.t.Helper()
	res := e.do("PUT", "/api/runs"+query, bytes.NewReader(content))
	if res.StatusCode != http.StatusCreated {
		e.t.Fatalf("PUT /api/runs%s: %s: %s", query, res.Status, readAll(e.t, res))
	}
	return decode[runJSON](e.t, res)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeSpecDump writes a spec_verify dump with fresh random target logits,
// drafts and draft probabilities; row nanRow (when >= 0) has a NaN target
// logit at position 1.
func writeSpecDump(t *testing.T, rows, k, v, nanRow int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	target := make([]float32, rows*(k+1)*v)
	for i := range target {
		target[i] = float32(2 * rng.NormFloat64())
	}
	if nanRow >= 0 {
		target[(nanRow*(k+1)+1)*v+rng.IntN(v)] = float32(math.NaN())
	}
	drafts := make([]int64, rows*k)
	for i := range drafts {
		drafts[i] = int64(rng.IntN(v))
	}
	q := make([]float32, rows*k*v)
	for i := 0; i < rows*k; i++ {
		sum := 0.0
		for j := range v {
			w := math.Exp(2 * rng.NormFloat64())
			q[i*v+j] = float32(w)
			sum += w
		}
		for j := range v {
			q[i*v+j] = float32(float64(q[i*v+j]) / sum)
		}
	}
	return webtest.WriteDump(t, "spec.safetensors", []*engine.Tensor{
		engine.FromFloat32s("target_logits", engine.F32, []int{rows, k + 1, v}, target),
		engine.FromInts("draft_tokens", engine.I64, []int{rows, k}, drafts),
		engine.FromFloat32s("draft_probs", engine.F32, []int{rows, k, v}, q),
	}, map[string]string{"op": "spec_verify"})
}

// writeSampleDump writes a sample dump with fresh random logits and top-k.
func writeSampleDump(t *testing.T, rows, v int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, rows*v)
	for i := range logits {
		logits[i] = float32(2 * rng.NormFloat64())
	}
	return webtest.WriteDump(t, "sample.safetensors", []*engine.Tensor{
		engine.FromFloat32s("logits", engine.F32, []int{rows, v}, logits),
		engine.FromInts("top_k", engine.I64, []int{}, []int64{int64(10 + rng.IntN(20))}),
	}, map[string]string{"op": "sample"})
}
