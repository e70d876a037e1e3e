package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
)

// screenshotOf saves the element sel as name.png beside the full-page
// screenshots.
func screenshotOf(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	dir := os.Getenv("SAMPVIZ_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// openFromHome opens scenario name with its button on the home page and
// waits for its row page's tree.
func openFromHome(t *testing.T, ctx context.Context, base, name string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`form[action="/scenarios/%s"] button`, name)))); err != nil {
		t.Fatal(err)
	}
	// The row page reloads itself once the run's kernels have finished.
	if _, err := waitFor(ctx, `/\/rows\/0/.test(location.pathname) && !!document.querySelector('[data-testid="chart-tree"] canvas')`, 90*time.Second); err != nil {
		t.Fatalf("%s did not open its row's tree: %v (at %s)", name, err, evalString(t, ctx, `location.href`))
	}
	return regexp.MustCompile(`/runs/([a-z2-7]{10})`).FindStringSubmatch(evalString(t, ctx, `location.pathname`))[1]
}

// treeStyle reads the tree chart's current highlight: how many edges are
// drawn as the path (width 4), and the fill of node n.
const treeStyle = `(function (n) {
  var c = echarts.getInstanceByDom(document.querySelector('[data-testid="chart-tree"]'));
  var s = c.getOption().series[0];
  var path = (s.links || []).filter(function (l) { return l.lineStyle && l.lineStyle.width === 4; }).length;
  var node = (s.data || []).filter(function (d) { return d.node === n; })[0];
  return {path: path, fill: node ? node.itemStyle.color : '', nodes: (s.data || []).length};
})`

type treeState struct {
	Path  int    `json:"path"`
	Fill  string `json:"fill"`
	Nodes int    `json:"nodes"`
}

func readTree(t *testing.T, ctx context.Context, node int) treeState {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[treeState](fmt.Sprintf("%s(%d)", treeStyle, node)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBrowserTreeRowsAndTeach opens the tree scenarios from the home page
// as a person would: the wide tree's row page, its trace stepped with the
// buttons and the arrow keys (the path highlighted on the tree, the step
// in the URL), the colouring switched to reach, the tree teaching page
// stepped through and moved to the next trial; then the relaxed-thresholds
// scenario, whose engine output the row page and the run page put in words.
func TestBrowserTreeRowsAndTeach(t *testing.T) {
	browser := findBrowser(t)
	var scs []web.Scenario
	for _, s := range scenarios.Catalogue() {
		if s.Name == "tree-wide" || s.Name == "tree-relaxed-thresholds" {
			scs = append(scs, web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
				Params: engine.Overrides{Trials: s.Overrides.Trials}})
		}
	}
	if len(scs) != 2 {
		t.Fatalf("the catalogue lacks the tree scenarios: %d found", len(scs))
	}
	srv, err := web.New(web.Config{
		DataDir:   t.TempDir(),
		Runner:    session.New(cpu.New()),
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Scenarios: scs,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close()
	ctx, stop := startBrowser(t, browser)
	defer stop()

	// 1. The wide tree's row page: the tree drawn, its charts, the trace.
	openFromHome(t, ctx, ts.URL, "tree-wide")
	if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"chart-tree", "chart-tree-node", "chart-tree-accept", "chart-tree-depth", "chart-tree-first"} {
		checkChart(t, ctx, id)
	}
	if st := readTree(t, ctx, 0); st.Nodes != 21 {
		t.Errorf("the tree chart has %d nodes, want 21", st.Nodes)
	}
	// The budget holds while a person steps through the trace.
	run(t, ctx, `performance.mark('sampviz:tree-ready'); true`)
	first := text(t, ctx, "tree-trace-title")
	if !strings.HasPrefix(first, "Trial 0 of 16, step 1 of ") || !strings.HasSuffix(first, "The root tests its first child") {
		t.Errorf("the trace starts at %q", first)
	}
	say0 := text(t, ctx, "tree-trace-say")
	if !strings.Contains(say0, "A first child is tested against its node's target itself") {
		t.Errorf("the first step says %q", say0)
	}
	// Step until the walk accepts a child: the path shows on the tree.
	title := first
	accepted := false
	for range 40 {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="tree-trace-next"]`))); err != nil {
			t.Fatal(err)
		}
		title = waitText(t, ctx, "tree-trace-title", title)
		if strings.Contains(text(t, ctx, "tree-trace-step"), "yes") {
			accepted = true
			break
		}
	}
	if !accepted {
		t.Fatal("no step of the first trials accepts a child")
	}
	if _, err := waitFor(ctx, treeStyle+`(0).path > 0`, 5*time.Second); err != nil {
		t.Errorf("an accepted step shows no path on the tree: %v", err)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "trial=") || !strings.Contains(u, "step=") {
		t.Errorf("the step is not in the URL: %q", u)
	}
	if _, err := waitFor(ctx, `(echarts.getInstanceByDom(document.querySelector('[data-testid="chart-tree-node"]')).getOption().series[0].markPoint || {data: []}).data.length > 0`, 5*time.Second); err != nil {
		t.Errorf("the tested token is not pinned on the node's chart: %v", err)
	}
	stepURL := evalString(t, ctx, `location.href`)
	stepTitle := title
	// The arrow keys step too.
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	right := waitText(t, ctx, "tree-trace-title", title)
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowLeft)); err != nil {
		t.Fatal(err)
	}
	if back := waitText(t, ctx, "tree-trace-title", right); back != stepTitle {
		t.Errorf("the left arrow went to %q, want %q", back, stepTitle)
	}
	checkBudget(t, ctx, "sampviz:tree-ready")
	// Screenshots resize the page, which redraws every chart: they come
	// after the budget is checked.
	screenshot(t, ctx, "tree-wide-row")
	screenshotOf(t, ctx, `[data-testid="tree"]`, "tree-wide-tree")
	// The step's URL, pasted, opens there (in another tab, whose drawing
	// would count against this page's budget: after it).
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(stepURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid="tree-trace-title"]`))); err != nil {
		t.Fatal(err)
	}
	if got := text(t, tab, "tree-trace-title"); got != stepTitle {
		t.Errorf("the pasted step URL opens %q, want %q", got, stepTitle)
	}
	cancelTab()

	// 2. Colour by reach: the fills change, the URL keeps it.
	before := readTree(t, ctx, 1).Fill
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="tree-color-reach"]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `location.search.indexOf('color=reach') >= 0`, 5*time.Second); err != nil {
		t.Errorf("the colouring is not in the URL: %q", evalString(t, ctx, `location.search`))
	}
	if after := readTree(t, ctx, 1).Fill; after == before {
		t.Errorf("node 1 is still filled %s when coloured by reach", after)
	}
	if got := evalString(t, ctx, `document.getElementById('tree-legend-title').textContent`); !strings.Contains(got, "log scale") {
		t.Errorf("the legend says %q", got)
	}
	screenshotOf(t, ctx, `[data-testid="tree"]`, "tree-wide-tree-reach")
	screenshotOf(t, ctx, `[data-testid="tree-laws"]`, "tree-wide-laws")

	// 3. The teaching page of the trial shown: step through its walk, then
	// the next trial, fetched without a reload.
	trial := regexp.MustCompile(`trial=(\d+)`).FindStringSubmatch(evalString(t, ctx, `location.search`))[1]
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="tree-teach-link"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-tree-teach"] canvas`))); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, `performance.mark('sampviz:tree-teach-ready'); true`)
	if got := evalString(t, ctx, `document.getElementById('tree-teach-trial').textContent`); got != trial {
		t.Errorf("the teaching page opened trial %s, the trace showed %s", got, trial)
	}
	step := text(t, ctx, "tree-teach-title")
	if !strings.HasPrefix(step, "Step 1 of ") {
		t.Errorf("the lesson starts at %q", step)
	}
	for i := 2; i <= 3; i++ {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="tree-teach-next"]`))); err != nil {
			t.Fatal(err)
		}
		step = waitText(t, ctx, "tree-teach-title", step)
		if !strings.HasPrefix(step, fmt.Sprintf("Step %d of ", i)) {
			t.Errorf("next went to %q", step)
		}
	}
	if n := evalInt(t, ctx, `document.querySelectorAll('[data-testid="tree-teach-steps"] tbody tr').length`); n != 3 {
		t.Errorf("the walk table has %d steps after step 3", n)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "step=3") || !strings.Contains(u, "trial="+trial) {
		t.Errorf("the lesson is not in the URL: %q", u)
	}
	checkChart(t, ctx, "chart-tree-teach")
	checkChart(t, ctx, "chart-tree-teach-tree")
	if w := text(t, ctx, "tree-teach-what"); !strings.Contains(w, "the walk tests its") && !strings.Contains(w, "draws") {
		t.Errorf("step 3 says %q", w)
	}
	checkBudget(t, ctx, "sampviz:tree-teach-ready")
	screenshot(t, ctx, "tree-teach")
	if err := chromedp.Do(ctx, chromedp.Sleep(time.Second)); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, `performance.mark('sampviz:tree-teach-stepped'); true`)
	// Back to the first step.
	for range 3 {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowLeft)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := waitFor(ctx, `/^Step 1 of /.test(document.querySelector('[data-testid="tree-teach-title"]').textContent)`, 5*time.Second); err != nil {
		t.Errorf("the left arrow does not go back to step 1: %v", err)
	}
	outcome := text(t, ctx, "tree-teach-outcome")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="tree-teach-next-trial"]`))); err != nil {
		t.Fatal(err)
	}
	if got := waitText(t, ctx, "tree-teach-outcome", outcome); !strings.HasPrefix(got, fmt.Sprintf("Trial %d with seed", atoi(trial)+1)) {
		t.Errorf("the next trial says %q", got)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, fmt.Sprintf("trial=%d", atoi(trial)+1)) || !strings.Contains(u, "step=1") {
		t.Errorf("the next trial is not in the URL: %q", u)
	}
	checkBudget(t, ctx, "sampviz:tree-teach-stepped")
	screenshot(t, ctx, "tree-teach-next-trial")

	// 4. Relaxed thresholds: the engine's output accepts more than the
	// lossless rule, in words on the row page and on the run page.
	id := openFromHome(t, ctx, ts.URL, "tree-relaxed-thresholds")
	lines := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="tree-stats"]')).map(function (e) { return e.textContent; }).join('\n')`)
	if !strings.Contains(lines, "% more)") || !strings.Contains(lines, "past the") {
		t.Errorf("the relaxed row's tree lines say %q", lines)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	checkChart(t, ctx, "chart-tree")
	screenshot(t, ctx, "tree-relaxed-row")
	screenshotOf(t, ctx, `[data-testid="row-verdict"]`, "tree-relaxed-verdict")
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+id)); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `document.getElementById('verdict').classList.contains('fail')`, 60*time.Second); err != nil {
		t.Fatalf("the relaxed run does not fail: %v", err)
	}
	if got := evalString(t, ctx, `document.getElementById('verdict-outputs').textContent`); !strings.Contains(got, "more tokens than the lossless rule") {
		t.Errorf("the run page's output card says %q", got)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(800*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "tree-relaxed-run")
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}
