package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/view"
)

// newTreeEnv starts a server on the real pipeline (CPU backend) with the
// tree scenarios in its catalogue.
func newTreeEnv(t *testing.T) *env {
	t.Helper()
	var list []web.Scenario
	for _, s := range scenarios.Catalogue() {
		if strings.HasPrefix(s.Name, "tree-") {
			list = append(list, web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
				Params: engine.Overrides{Trials: s.Overrides.Trials}})
		}
	}
	e := &env{t: t, dir: t.TempDir()}
	e.start(web.Config{DataDir: e.dir, Runner: session.New(cpu.New()), Log: quietLog(), Scenarios: list})
	return e
}

// openJudgedScenario opens a scenario as its button on the home page does and
// returns its run once judged.
func (e *env) openJudgedScenario(name string) string {
	e.t.Helper()
	res := e.do("POST", "/scenarios/"+name, nil)
	res.Body.Close()
	m := regexp.MustCompile(`^/runs/([a-z0-9]+)`).FindStringSubmatch(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || m == nil {
		e.t.Fatalf("open %s: %s to %q", name, res.Status, res.Header.Get("Location"))
	}
	if got := e.wait(m[1], ""); got.State != "done" {
		e.t.Fatalf("scenario %s: %s %s", name, got.State, got.Message)
	}
	return m[1]
}

// rowTree reads the row page's tree script.
type rowTree struct {
	Color string `json:"color"`
	Chart struct {
		Series []struct {
			Data []struct {
				Node int    `json:"node"`
				Text string `json:"text"`
			} `json:"data"`
		} `json:"series"`
	} `json:"chart"`
	Modes map[string]view.TreeColors `json:"modes"`
	Trace *view.TreeTrace            `json:"trace"`
}

func TestTreeRowPages(t *testing.T) {
	e := newTreeEnv(t)
	wide := e.openJudgedScenario("tree-wide")
	relaxed := e.openJudgedScenario("tree-relaxed-thresholds")
	row := rand.IntN(8)

	api := decode[struct {
		Detail *explain.RowDetail `json:"detail"`
	}](t, e.do("GET", fmt.Sprintf("/api/runs/%s/rows/%d", wide, row), nil))
	tr := api.Detail.Tree.Trace
	if tr == nil || tr.Trials != 16 {
		t.Fatalf("no trace of 16 trials: %+v", api.Detail.Tree)
	}
	trial := rand.IntN(16)

	t.Run("the tree and its trace", func(t *testing.T) {
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d?trial=%d&step=1", wide, row, trial), nil))
		if got, _ := byTestID(t, page, "tree-summary"); !strings.HasPrefix(got, "A draft tree of 21 nodes, 2 levels deep, with one-hot drafts") {
			t.Errorf("summary %q", got)
		}
		if got, _ := byTestID(t, page, "tree-stats"); !strings.HasPrefix(got, "400 trials accepted") {
			t.Errorf("the verdict's tree line says %q", got)
		}
		var script rowTree
		if err := json.Unmarshal(jsonScript(t, page, "row-tree"), &script); err != nil {
			t.Fatal(err)
		}
		if n := len(script.Chart.Series[0].Data); n != 21 || len(script.Modes["accept"].Fill) != 21 || script.Color != "accept" {
			t.Errorf("the tree chart has %d nodes, %d fills, colouring %q", n, len(script.Modes["accept"].Fill), script.Color)
		}
		v := script.Trace
		it := v.Items[v.Index]
		if it.Trial != trial || it.Step != 1 {
			t.Fatalf("the page shows trial %d step %d, want %d and 1", it.Trial, it.Step, trial)
		}
		if got, _ := byTestID(t, page, "tree-trace-title"); got != it.Title || !strings.HasPrefix(got, fmt.Sprintf("Trial %d of 16, step 2 of ", trial)) {
			t.Errorf("title %q, item %q", got, it.Title)
		}
		if got, _ := byTestID(t, page, "tree-trace-say"); got != it.Say {
			t.Errorf("the step says %q, its item %q", got, it.Say)
		}
		// Each trial's walk ends on the path and tokens the kernel stored.
		for _, it := range v.Items {
			if it.Step != it.Steps-1 {
				continue
			}
			var path []int
			for _, n := range tr.Path[it.Trial] {
				if n >= 0 {
					path = append(path, int(n))
				}
			}
			if fmt.Sprint(it.Path) != fmt.Sprint(path) {
				t.Errorf("trial %d's walk ends on %v, the kernel's path is %v", it.Trial, it.Path, path)
			}
			last := tr.Tokens[it.Trial][len(path)-1]
			if it.Cells[len(it.Cells)-1] != fmt.Sprint(last) {
				t.Errorf("trial %d draws %q, the kernel %d", it.Trial, it.Cells[len(it.Cells)-1], last)
			}
		}
		if teach, ok := byTestID(t, page, "tree-teach-link"); !ok || teach == "" || !bytes.Contains(page, []byte(fmt.Sprintf(`teach?trial=%d"`, trial))) {
			t.Errorf("no teach link to trial %d", trial)
		}
		var charts map[string]json.RawMessage
		if err := json.Unmarshal(jsonScript(t, page, "row-charts"), &charts); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"tree-accept", "tree-depth", "tree-first"} {
			if charts[k] == nil {
				t.Errorf("no chart %s among %v", k, keysOf(charts))
			}
		}
		if got, _ := byTestID(t, page, "tree-node-table"); strings.Count(got, "of 400)") != 2*21 {
			t.Errorf("the node table does not give both outputs' reach of all 21 nodes: %q", got)
		}
		if got, _ := byTestID(t, page, "tree-first"); !strings.Contains(got, "which is the root's target itself") {
			t.Errorf("first token line %q", got)
		}
	})

	t.Run("the tree script", func(t *testing.T) {
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d", wide, row), nil))
		if !bytes.Contains(page, []byte(`<script src="/static/tree.js" defer></script>`)) {
			t.Error("the tree row does not load the tree script")
		}
		res := e.do("GET", "/static/tree.js", nil)
		if b := readAll(t, res); res.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("initRowTree")) {
			t.Errorf("/static/tree.js: %s", res.Status)
		}
	})

	t.Run("coloured by reach", func(t *testing.T) {
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d?color=reach", wide, row), nil))
		var script rowTree
		if err := json.Unmarshal(jsonScript(t, page, "row-tree"), &script); err != nil {
			t.Fatal(err)
		}
		if script.Color != "reach" || !regexp.MustCompile(`class="button active"[^>]*data-color="reach"`).Match(page) {
			t.Errorf("colouring %q", script.Color)
		}
		if u := script.Trace.Items[1].URL; !strings.Contains(u, "color=reach") {
			t.Errorf("a step's link %s forgets the colouring", u)
		}
	})

	t.Run("relaxed thresholds in words", func(t *testing.T) {
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d", relaxed, row), nil))
		got := regexp.MustCompile(`data-testid="tree-stats">([^<]*)<`).FindAllSubmatch(page, -1)
		if len(got) != 2 {
			t.Fatalf("%d tree lines, want one per output", len(got))
		}
		if s := string(got[1][1]); !strings.Contains(s, "% more)") || !strings.Contains(s, "past the") {
			t.Errorf("the relaxed engine's line says %q", s)
		}
	})

	t.Run("the tree teaching page", func(t *testing.T) {
		path := fmt.Sprintf("/runs/%s/rows/%d/teach?trial=%d&step=2", wide, row, trial)
		v := decode[view.TreeTeachView](t, e.do("GET", "/api"+path, nil))
		if v.Trial != trial || v.Index != 1 || len(v.Items) != v.Total || v.Invalid != "" || v.Tree == nil {
			t.Fatalf("lesson %+v", v)
		}
		// Trial t on the row's seed is the kernel's trial t: the same tests.
		page := readAll(t, e.do("GET", fmt.Sprintf("/runs/%s/rows/%d?trial=%d", wide, row, trial), nil))
		var script rowTree
		if err := json.Unmarshal(jsonScript(t, page, "row-tree"), &script); err != nil {
			t.Fatal(err)
		}
		var walk []view.TreeTraceItem
		for _, it := range script.Trace.Items {
			if it.Trial == trial {
				walk = append(walk, it)
			}
		}
		if len(walk) != len(v.Items) {
			t.Fatalf("the lesson has %d steps, the kernel's trial %d", len(v.Items), len(walk))
		}
		for i, it := range walk {
			// token x, u, r(x), q(x), a, and what was emitted.
			if got, want := v.Items[i].Cells[3:8], it.Cells[2:7]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("step %d: lesson %v, kernel %v", i+1, got, want)
			}
		}
		html := readAll(t, e.do("GET", path, nil))
		if got, _ := byTestID(t, html, "tree-teach-title"); got != v.Items[1].Title {
			t.Errorf("the page shows %q, the API %q", got, v.Items[1].Title)
		}
		if got, _ := byTestID(t, html, "tree-teach-outcome"); got != v.Outcome {
			t.Errorf("outcome %q", got)
		}
		var data view.TreeTeachView
		if err := json.Unmarshal(jsonScript(t, html, "tree-teach-data"), &data); err != nil || len(data.Items) != len(v.Items) {
			t.Errorf("the page's data: %v", err)
		}
		for _, bad := range []struct{ query, want string }{
			{"trial=-1", "Trial must be a whole number from 0 to 100000"},
			{"trial=x", "Trial must be a whole number"},
			{"step=0", "Step must be a whole number from 1"},
			{"seed=-4", "Seed must be a whole number"},
		} {
			res := e.do("GET", fmt.Sprintf("/api/runs/%s/rows/%d/teach?%s", wide, row, bad.query), nil)
			body := readAll(t, res)
			if res.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(bad.want)) {
				t.Errorf("%s: %s %s", bad.query, res.Status, body)
			}
		}
	})
}

// A tree dump uploaded with a tokenizer shows token text on the tree, in
// its tables and in the lesson.
func TestTreeTokenText(t *testing.T) {
	e := newTreeEnv(t)
	sc, _ := scenarios.Lookup("tree-sibling-bug")
	dump, err := sc.DumpBytes()
	if err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int{}
	for i := range 32 {
		vocab[fmt.Sprintf("w%02d", i)] = i
	}
	tok, _ := json.Marshal(map[string]any{"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}}})
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("dump", "tree.safetensors")
	fw.Write(dump)
	tw, _ := mw.CreateFormFile("tokenizer", "tokenizer.json")
	tw.Write(tok)
	mw.Close()
	res := e.do("POST", "/api/runs?trials=200", &body, "Content-Type", mw.FormDataContentType())
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s %s", res.Status, readAll(t, res))
	}
	run := decode[runJSON](t, res)
	e.wait(run.ID, "")

	page := readAll(t, e.do("GET", "/runs/"+run.ID+"/rows/1", nil))
	var script rowTree
	if err := json.Unmarshal(jsonScript(t, page, "row-tree"), &script); err != nil {
		t.Fatal(err)
	}
	for _, n := range script.Chart.Series[0].Data[1:] {
		if !regexp.MustCompile(`^w\d\d$`).MatchString(n.Text) {
			t.Errorf("node %d is labelled %q, not its text", n.Node, n.Text)
		}
	}
	if got, _ := byTestID(t, page, "tree-node-table"); !regexp.MustCompile(`\d+ ‹w\d\d›`).MatchString(got) {
		t.Errorf("the node table shows no token text: %q", got)
	}
	if say := script.Trace.Items[0].Say; !regexp.MustCompile(`token \d+ ‹w\d\d›`).MatchString(say) {
		t.Errorf("the trace says %q", say)
	}
	v := decode[view.TreeTeachView](t, e.do("GET", "/api/runs/"+run.ID+"/rows/1/teach", nil))
	if !regexp.MustCompile(`token \d+ ‹w\d\d›`).MatchString(v.Items[0].What) {
		t.Errorf("the lesson says %q", v.Items[0].What)
	}
}
