package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/webtest"
)

// comparisonScenarios are the four scenarios of issue 23, as the server
// lists them.
func comparisonScenarios(t *testing.T) []web.Scenario {
	t.Helper()
	var out []web.Scenario
	for _, s := range scenarios.Catalogue() {
		switch s.Name {
		case "graph-vs-eager", "logits-gate", "padded-batch", "kernel-fix-diff":
		default:
			continue
		}
		ws := web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
			Params: engine.Overrides{Draws: s.Overrides.Draws, Trials: s.Overrides.Trials}}
		if s.Diff != nil {
			ws.AfterFileName, ws.OpenAfter = s.Diff.After, s.OpenAfter
		}
		out = append(out, ws)
	}
	if len(out) != 4 {
		t.Fatalf("the catalogue holds %d of the 4 comparison scenarios", len(out))
	}
	return out
}

// elements returns every element with data-testid=id.
func elements(t *testing.T, page []byte, id string) []*html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var found []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && attr(n, "data-testid") == id {
			found = append(found, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return found
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	var sb strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			sb.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(sb.String()), " ")
}

// openScenario opens a scenario as the home page's button does and returns
// where it leads.
func (e *env) openScenario(name string) string {
	e.t.Helper()
	res := e.do("POST", "/scenarios/"+name, nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("open scenario %s: %s", name, res.Status)
	}
	return res.Header.Get("Location")
}

// runIDs finds the run ids of a run page's or a diff page's path.
var runIDs = regexp.MustCompile(`/(?:runs|diff)/([a-z2-7]{10})`)

// page GETs a page and returns its body, failing unless the status is want.
func (e *env) page(path string, want int) []byte {
	e.t.Helper()
	res := e.do("GET", path, nil)
	b := readAll(e.t, res)
	if res.StatusCode != want {
		e.t.Fatalf("GET %s: %s, want %d: %s", path, res.Status, want, b)
	}
	return b
}

// TestComparisonScenarios opens the four comparison scenarios on the real
// pipeline as a person would and checks that each opens on its point: the
// agreement view, the mode table and the gate, the padded lanes, and the
// diff page; that the sections come with the final websocket message and
// after a restart; and that the diff's refusals say one sentence.
func TestComparisonScenarios(t *testing.T) {
	dir := t.TempDir()
	e := &env{t: t, dir: dir}
	cfg := web.Config{DataDir: dir, Runner: session.New(cpu.New()), Log: quietLog(), Scenarios: comparisonScenarios(t)}
	e.start(cfg)

	// The before dump alone: its run's ?compare=after starts no work (a
	// GET) and offers to open the scenario instead.
	var pair scenarios.Scenario
	for _, sc := range scenarios.Catalogue() {
		if sc.Name == "kernel-fix-diff" {
			pair = sc
		}
	}
	beforeDump, err := pair.DumpBytes()
	if err != nil {
		t.Fatal(err)
	}
	first := e.uploadRaw(beforeDump)
	e.wait(first.ID, "")
	offer := e.page("/runs/"+first.ID+"?compare=after", http.StatusOK)
	if f := elements(t, offer, "open-pair"); len(f) != 1 {
		t.Error("?compare=after without an after run does not offer to open the scenario")
	}
	if got, _ := byTestID(t, offer, "scenario-pair"); !strings.Contains(got, "has no finished run on this server yet") {
		t.Errorf("the offer says %q", got)
	}

	loc := map[string]string{}
	ids := map[string]string{}
	for _, name := range []string{"graph-vs-eager", "logits-gate", "padded-batch", "kernel-fix-diff"} {
		loc[name] = e.openScenario(name)
		ids[name] = runIDs.FindStringSubmatch(loc[name])[1]
	}
	for name, l := range loc {
		for _, m := range runIDs.FindAllStringSubmatch(l, -1) {
			if got := e.wait(m[1], ""); got.State != "done" {
				t.Fatalf("%s: run %s ended %s: %s", name, m[1], got.State, got.Message)
			}
		}
	}

	t.Run("graph-vs-eager opens on the agreement", func(t *testing.T) {
		if want := "/runs/" + ids["graph-vs-eager"] + "?agree=1"; loc["graph-vs-eager"] != want {
			t.Errorf("opens %s, want %s", loc["graph-vs-eager"], want)
		}
		page := e.page(loc["graph-vs-eager"], http.StatusOK)
		sec := elements(t, page, "agreement")
		if len(sec) != 1 || !strings.Contains(attr(sec[0], "class"), "focus") {
			t.Fatalf("the agreement section is missing or not in focus: %d", len(sec))
		}
		pairs := elements(t, page, "pair")
		if len(pairs) != 1 || !strings.Contains(textOf(pairs[0]), "5 of 8") || !strings.Contains(textOf(pairs[0]), "row 1, draw 0") {
			t.Errorf("pairs: %d, first %q", len(pairs), textOf(pairs[0]))
		}
		details := elements(t, page, "pair-detail")
		if len(details) != 1 || attr(details[0], "open") == "" && !hasAttr(details[0], "open") {
			t.Error("the pair's rows are not open")
		}
		var parted []string
		for _, tb := range elements(t, page, "parted") {
			for _, tr := range findAll(tb, "tr")[1:] {
				parted = append(parted, textOf(findAll(tr, "td")[0]))
			}
		}
		if !slices.Equal(parted, []string{"1", "4", "6"}) {
			t.Errorf("rows where the modes part: %v, want 1, 4, 6", parted)
		}
		if s := elements(t, page, "mode-summary"); len(s) != 1 || !strings.Contains(textOf(s[0]), "tokens@graph (3 of 8 rows) fails") {
			t.Errorf("mode summary %v", s)
		}
	})

	t.Run("logits-gate opens on the modes", func(t *testing.T) {
		page := e.page(loc["logits-gate"], http.StatusOK)
		sec := elements(t, page, "modes")
		if len(sec) != 1 || !strings.Contains(attr(sec[0], "class"), "focus") {
			t.Fatal("the mode tables are missing or not in focus")
		}
		lines := elements(t, page, "mode-line")
		if len(lines) != 4 {
			t.Fatalf("%d mode lines, want 4", len(lines))
		}
		for _, l := range lines {
			txt := textOf(l)
			if strings.HasPrefix(txt, "logits@graph_pad9") != strings.Contains(txt, "FAIL") {
				t.Errorf("mode line %q: only graph_pad9 fails", txt)
			}
		}
		if g := elements(t, page, "gate-sentence"); len(g) != 1 || !strings.Contains(textOf(g[0]), "logits@graph_pad9 fails") {
			t.Errorf("gate sentence %v", g)
		}
		var classes []string
		for _, f := range elements(t, page, "gate-flip") {
			classes = append(classes, strings.Fields(textOf(f))[0])
		}
		slices.Sort(classes)
		if !slices.Equal(classes, []string{"fragile", "real"}) {
			t.Errorf("gate flips %v, want one fragile and one real", classes)
		}
	})

	t.Run("padded-batch opens on the padded lanes", func(t *testing.T) {
		page := e.page(loc["padded-batch"], http.StatusOK)
		sec := elements(t, page, "padding")
		if len(sec) != 1 || !strings.Contains(attr(sec[0], "class"), "focus") {
			t.Fatal("the padding section is missing or not in focus")
		}
		if l := elements(t, page, "padding-line"); len(l) != 1 || !strings.HasPrefix(textOf(l[0]), "Rows 6 and 7 of the 8 lanes are padding") {
			t.Errorf("padding line %v", l)
		}
		if n := elements(t, page, "padding-note"); len(n) != 1 {
			t.Error("the verdict does not say which rows are padding")
		}
		findings := elements(t, page, "padding-findings")
		if len(findings) != 1 || !strings.Contains(textOf(findings[0]), "Row 6 is padding, but probs@graph holds something other than its fill 0") {
			t.Errorf("padding findings %v", findings)
		}
		// The stream marks the padded rows; the charts leave them out.
		final := finalUpdate(t, e, ids["padded-batch"], "")
		var m struct {
			Rows []struct {
				O, R int
				Pad  bool
			} `json:"rows"`
			Summary struct {
				Padding []int `json:"padding"`
				Modes   []any `json:"modes"`
			} `json:"summary"`
			Charts []map[string]json.RawMessage `json:"charts"`
		}
		if err := json.Unmarshal(final, &m); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Summary.Padding, []int{6, 7}) || len(m.Summary.Modes) != 1 {
			t.Errorf("final summary: padding %v, %d mode tables", m.Summary.Padding, len(m.Summary.Modes))
		}
		for _, r := range m.Rows {
			if r.Pad != (r.R >= 6) {
				t.Errorf("output %d row %d marked padding %v", r.O, r.R, r.Pad)
			}
		}
		if heat := string(m.Charts[0]["heat"]); !strings.Contains(heat, `"row 5"`) {
			t.Errorf("no heatmap of the real rows: %.200s", heat)
		}
	})

	t.Run("kernel-fix-diff opens on the diff page", func(t *testing.T) {
		m := runIDs.FindAllStringSubmatch(loc["kernel-fix-diff"], -1)
		if len(m) != 2 || !strings.Contains(loc["kernel-fix-diff"], "/diff/") {
			t.Fatalf("opens %s, want /runs/A/diff/B", loc["kernel-fix-diff"])
		}
		a, b := m[0][1], m[1][1]
		page := e.page(loc["kernel-fix-diff"], http.StatusOK)
		changes := map[string]string{}
		for _, tr := range elements(t, page, "diff-row") {
			changes[attr(tr, "data-row")] = textOf(within(tr, "diff-change")[0])
		}
		want := map[string]string{"2": "fixed: fail → pass", "5": "fixed: fail → pass", "7": "broken: pass → fail"}
		if fmt.Sprint(changes) != fmt.Sprint(want) {
			t.Errorf("changed rows %v, want %v", changes, want)
		}
		if s := elements(t, page, "diff-summary"); len(s) != 1 || !strings.Contains(textOf(s[0]), "worse: row 7 of probs went from pass to fail") {
			t.Errorf("summary %v", s)
		}
		if len(elements(t, page, "chart-drift")) != 1 || len(elements(t, page, "mode-table")) != 2 {
			t.Error("no drift chart, or not both mode tables")
		}
		// The JSON is engine/diff's comparison.
		res := e.do("GET", "/api/runs/"+a+"/diff/"+b, nil)
		var dj struct {
			URL  string     `json:"url"`
			Diff *diff.Diff `json:"diff"`
		}
		if err := json.Unmarshal(readAll(t, res), &dj); err != nil || dj.Diff == nil {
			t.Fatalf("diff JSON: %v", err)
		}
		for _, o := range dj.Diff.Outputs {
			if o.Name == "probs" && (!slices.Equal(o.Fixed, []int{2, 5}) || !slices.Equal(o.Broken, []int{7})) {
				t.Errorf("probs fixed %v broken %v", o.Fixed, o.Broken)
			}
		}
		if !dj.Diff.Worse || dj.URL != "/runs/"+a+"/diff/"+b {
			t.Errorf("worse %v, url %s", dj.Diff.Worse, dj.URL)
		}
		// The before run's scenario view opens the same diff.
		res = e.do("GET", "/runs/"+a+"?compare=after", nil)
		res.Body.Close()
		if got := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || got != "/runs/"+a+"/diff/"+b {
			t.Errorf("?compare=after: %s to %q", res.Status, got)
		}
		// The run page offers the after run to compare with.
		cands := elements(t, e.page("/runs/"+a, http.StatusOK), "candidate")
		found := false
		for _, c := range cands {
			found = found || attr(c, "href") == "/runs/"+a+"/diff/"+b
		}
		if !found {
			t.Errorf("the before run's page does not offer the after run (%d candidates)", len(cands))
		}
	})

	t.Run("the row page draws every output", func(t *testing.T) {
		id := ids["padded-batch"]
		focus := e.page("/runs/"+id+"/rows/1", http.StatusOK)
		all := e.page("/runs/"+id+"/rows/1?outputs=all", http.StatusOK)
		count := func(page []byte) int {
			var charts map[string]struct {
				Series []json.RawMessage `json:"series"`
			}
			if err := json.Unmarshal(jsonScript(t, page, "row-charts"), &charts); err != nil {
				t.Fatal(err)
			}
			return len(charts["probs"].Series)
		}
		// The reference, the softmax before filters, and the outputs.
		if n := count(focus); n != 2+2 {
			t.Errorf("the row's chart draws %d series, want the reference, ours, the failing probs@shifted and the softmax line", n)
		}
		if n := count(all); n != 2+3 {
			t.Errorf("?outputs=all draws %d series, want every one of the 3 outputs", n)
		}
		if l := elements(t, focus, "outputs-toggle"); len(l) != 1 || !strings.Contains(attr(l[0], "href"), "outputs=all") {
			t.Error("no link to every output on one chart")
		}
	})

	t.Run("bad comparisons", func(t *testing.T) {
		a := runIDs.FindAllStringSubmatch(loc["kernel-fix-diff"], -1)[0][1]
		tests := []struct {
			name, path string
			status     int
			says       string
		}{
			{"two ops", "/api/runs/" + a + "/diff/" + ids["padded-batch"], http.StatusBadRequest, "is a run of op renorm and run " + ids["padded-batch"] + " (padded-batch.safetensors) one of op softmax: diff compares two runs of one op."},
			{"one run twice", "/api/runs/" + a + "/diff/" + a, http.StatusBadRequest, "A comparison needs two runs"},
			{"unknown run", "/api/runs/" + a + "/diff/aaaaaaaaaa", http.StatusNotFound, "There is no run aaaaaaaaaa on this server."},
			{"not a run id", "/api/runs/" + a + "/diff/x", http.StatusNotFound, "run ids are 10 letters and digits"},
			{"not a scenario pair", "/runs/" + ids["padded-batch"] + "?compare=after", http.StatusBadRequest, "is not the before run of one"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := e.do("GET", tt.path, nil)
				b := readAll(t, res)
				if res.StatusCode != tt.status || !strings.Contains(string(b), tt.says) {
					t.Errorf("%s: %s %s, want %d saying %q", tt.path, res.Status, b, tt.status, tt.says)
				}
			})
		}
	})

	// A restart reads the sections back from the stored stream.
	e.stop()
	e.start(cfg)
	if page := e.page(loc["logits-gate"], http.StatusOK); len(elements(t, page, "mode-line")) != 4 || len(elements(t, page, "gate-flip")) != 2 {
		t.Error("after a restart the run page lost its mode table or its gate")
	}
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// findAll returns n's descendants named tag.
func findAll(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// within returns n's descendants with data-testid=id.
func within(n *html.Node, id string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && attr(n, "data-testid") == id {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// TestDiffWithFakes checks the diff page's answers with the fake pipeline:
// a run that has not finished answers 409 with a page that waits for it, a
// failed run 409; a comparison is made once and kept; the run page offers
// the run it reran; the form goes to the diff, the older run first.
func TestDiffWithFakes(t *testing.T) {
	e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) {
		p.Gate = make(chan struct{})
	})
	before := webtest.Dump{Rows: 6, Vocab: 16, Fail: []int{1, 4}}
	after := webtest.Dump{Rows: 6, Vocab: 16, Fail: []int{4, 5}}
	a := e.uploadRaw(before.Bytes())
	e.pipe.Gate <- struct{}{}
	e.wait(a.ID, "")
	b := e.uploadRaw(after.Bytes())

	res := e.do("GET", "/runs/"+a.ID+"/diff/"+b.ID, nil)
	page := readAll(t, res)
	if res.StatusCode != http.StatusConflict {
		t.Fatalf("a waiting run: %s, want 409", res.Status)
	}
	w := elements(t, page, "diff-wait")
	if len(w) != 1 || attr(w[0], "data-wait") != "/runs/"+b.ID+"/ws" {
		t.Errorf("the page does not wait for run %s", b.ID)
	}
	if got, _ := byTestID(t, page, "error"); !strings.Contains(got, "Run "+b.ID+" has not finished") {
		t.Errorf("says %q", got)
	}
	res = e.do("GET", "/api/runs/"+a.ID+"/diff/"+b.ID, nil)
	if body := readAll(t, res); res.StatusCode != http.StatusConflict || !strings.Contains(string(body), "has not finished") {
		t.Errorf("API: %s %s", res.Status, body)
	}
	e.pipe.Gate <- struct{}{}
	e.wait(b.ID, "")

	page = e.page("/runs/"+a.ID+"/diff/"+b.ID, http.StatusOK)
	changes := map[string]string{}
	for _, tr := range elements(t, page, "diff-row") {
		changes[attr(tr, "data-row")] = textOf(within(tr, "diff-change")[0])
	}
	if want := map[string]string{"1": "fixed: fail → pass", "5": "broken: pass → fail"}; fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Errorf("changed rows %v, want %v", changes, want)
	}
	e.page("/runs/"+a.ID+"/diff/"+b.ID+"?rows=all", http.StatusOK)
	e.page("/api/runs/"+a.ID+"/diff/"+b.ID, http.StatusOK)
	if n := e.pipe.Diffed(); n != 1 {
		t.Errorf("three views of one comparison judged %d times, want once", n)
	}

	// The run page's form and list go to the diff, the older run as A.
	res = e.do("GET", "/runs/"+b.ID+"/diff?with="+a.ID, nil)
	res.Body.Close()
	if got := res.Header.Get("Location"); got != "/runs/"+a.ID+"/diff/"+b.ID {
		t.Errorf("compare with: to %q", got)
	}
	cands := elements(t, e.page("/runs/"+b.ID, http.StatusOK), "candidate")
	if len(cands) != 1 || attr(cands[0], "href") != "/runs/"+a.ID+"/diff/"+b.ID {
		t.Errorf("candidates %d", len(cands))
	}

	// A rerun's page links the comparison with the run it reran.
	res = e.do("POST", "/api/runs/"+b.ID+"/rerun", strings.NewReader(`{"temperature": 0.5}`), "Content-Type", "application/json")
	rerun := decode[runJSON](t, res)
	if p := elements(t, e.page("/runs/"+rerun.ID, http.StatusOK), "compare-parent"); len(p) != 1 || attr(p[0], "href") != "/runs/"+b.ID+"/diff/"+rerun.ID {
		t.Error("the rerun's page does not link the comparison with its parent")
	}
	e.pipe.Gate <- struct{}{}
	e.wait(rerun.ID, "")

	faulty := webtest.Dump{Rows: 2, Vocab: 8, Fault: "the kernel hit an illegal address"}
	failed := e.uploadRaw(faulty.Bytes())
	e.pipe.Gate <- struct{}{}
	e.wait(failed.ID, "")
	res = e.do("GET", "/api/runs/"+a.ID+"/diff/"+failed.ID, nil)
	if body := readAll(t, res); res.StatusCode != http.StatusConflict || !strings.Contains(string(body), "failed, so it has nothing to compare") {
		t.Errorf("a failed run: %s %s", res.Status, body)
	}
	spec := e.uploadRaw(webtest.Dump{Rows: 2, Vocab: 8, Op: "spec_verify", K: 2}.Bytes())
	res = e.do("GET", "/api/runs/"+a.ID+"/diff/"+spec.ID, nil)
	if body := readAll(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "diff compares two runs of one op") {
		t.Errorf("two ops: %s %s", res.Status, body)
	}
	e.pipe.Gate <- struct{}{}
	e.wait(spec.ID, "")
}
