// Package e2e drives sampviz serve in a real browser: Debian's chromium,
// headless, through chromedp. It runs the real pipeline (CPU backend) on a
// dump it writes, as a person would: upload on the home page, watch the rows
// stream in, open a failing row, paste its URL into another tab.
//
// The test measures the page's main-thread tasks, which other tests running
// beside it on the same cores would stretch, so it runs alone: `make
// browser-test` (part of `make test`) sets SAMPVIZ_BROWSER_TEST=1, and
// without it the test skips. Without chromium it skips too, unless
// SAMPVIZ_REQUIRE_BROWSER=1 (CI) makes that a failure. Screenshots go to
// $SAMPVIZ_SCREENSHOTS when set, else to the test's temporary directory; the
// test logs where.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// findBrowser returns the browser to drive, skipping (or failing in CI)
// when there is none.
func findBrowser(t *testing.T) string {
	t.Helper()
	if os.Getenv("SAMPVIZ_BROWSER_TEST") != "1" {
		t.Skip("the browser test runs alone: make browser-test (it times the page's main thread, which tests running beside it would distort)")
	}
	for _, p := range []string{os.Getenv("SAMPVIZ_CHROMIUM"), chromiumPath} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	msg := "no browser at " + chromiumPath + " (make browser-deps installs Debian's chromium)"
	if os.Getenv("SAMPVIZ_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; SAMPVIZ_REQUIRE_BROWSER=1 makes this a failure")
	}
	t.Skip(msg)
	return ""
}

// slowRunner delays every judged row, so that rows stream in over seconds
// as they do for a big dump on a GPU, and the page's budget is measured
// while they arrive.
type slowRunner struct {
	web.Runner
	delay time.Duration
}

func (s slowRunner) Execute(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
	return s.Runner.Execute(ctx, job, slowSink{sink, s.delay})
}

type slowSink struct {
	session.Sink
	delay time.Duration
}

func (s slowSink) Row(u session.RowUpdate) {
	time.Sleep(s.delay)
	s.Sink.Row(u)
}

// cpuRun parses the dump data (named name), builds its run and runs it on
// engine/cpu: the file (to load its other tensors) and engine/cpu's output.
func cpuRun(t *testing.T, name string, data []byte) (*dump.File, *engine.Output) {
	t.Helper()
	f, err := dump.Parse(name, data)
	if err != nil {
		t.Fatal(err)
	}
	run, err := dump.BuildRun(f, engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return f, out
}

// writeDump writes a renorm dump of rows x vocab BF16 logits with random
// per-row parameters and external probs from the CPU backend, moved off the
// reference on the rows in bad. It returns the file's path.
func writeDump(t *testing.T, rows, vocab int, bad []int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	temp, topP, minP := make([]float64, rows), make([]float64, rows), make([]float64, rows)
	topK := make([]int64, rows)
	for r := 0; r < rows; r++ {
		temp[r] = 0.6 + 0.8*rng.Float64()
		topK[r] = int64(20 + rng.IntN(200))
		topP[r] = 0.7 + 0.3*rng.Float64()
		minP[r] = 0.02 * rng.Float64()
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("logits", engine.BF16, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temp),
		engine.FromInts("top_k", engine.I64, []int{rows}, topK),
		engine.FromFloat64s("top_p", engine.F32, []int{rows}, topP),
		engine.FromFloat64s("min_p", engine.F32, []int{rows}, minP),
	}
	meta := map[string]string{"op": "renorm", "source": "sampviz browser test"}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	_, out := cpuRun(t, "e2e.safetensors", buf.Bytes())
	probs := &engine.Tensor{Name: "probs", DType: engine.F32, Shape: out.Probs.Shape, Data: append([]byte(nil), out.Probs.Data...)}
	for _, r := range bad {
		// A sum in the wrong order would be 1e-7 off; this is a real bug:
		// the most probable token loses 2% of its mass.
		best := r * vocab
		for i := r * vocab; i < (r+1)*vocab; i++ {
			if probs.Float(i) > probs.Float(best) {
				best = i
			}
		}
		probs.SetFloat(best, probs.Float(best)*0.98)
	}
	buf.Reset()
	if err := dump.WriteSafetensors(&buf, append(tensors, probs), meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "renorm-bf16.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// longTaskObserver records the duration of every main-thread task over 50 ms
// on every page, from the first script on.
const longTaskObserver = `
window.__longtasks = [];
try {
  new PerformanceObserver(function (list) {
    list.getEntries().forEach(function (e) { window.__longtasks.push([e.startTime, e.duration]); });
  }).observe({type: 'longtask', buffered: true});
} catch (e) { window.__longtasks = null; }
`

// chartDrew reports whether the chart in the element with data-testid id
// has series data and a canvas with drawn (not blank) pixels.
const chartDrew = `(function (id) {
  var el = document.querySelector('[data-testid="' + id + '"]');
  if (!el || !window.echarts) return 'no element or no echarts';
  var inst = echarts.getInstanceByDom(el);
  if (!inst) return 'no chart';
  var series = inst.getOption().series || [];
  var points = series.reduce(function (n, s) { return n + ((s.data && s.data.length) || 0); }, 0);
  // Every canvas layer: a progressive series (the heatmap's cells) draws on
  // a layer of its own above the axes'.
  var cs = el.querySelectorAll('canvas');
  if (!cs.length) return 'no canvas';
  var inked = 0, colored = 0, c = cs[0];
  cs.forEach(function (layer) {
    if (!layer.width || !layer.height) return;
    var d = layer.getContext('2d').getImageData(0, 0, layer.width, layer.height).data;
    for (var i = 0; i < d.length; i += 4) {
      if (d[i+3] > 0 && (d[i] < 235 || d[i+1] < 235 || d[i+2] < 235)) {
        inked++;
        if (Math.max(d[i], d[i+1], d[i+2]) - Math.min(d[i], d[i+1], d[i+2]) > 40) colored++;
      }
    }
  });
  return {points: points, inked: inked, colored: colored, width: c.width, height: c.height};
})`

type drawn struct {
	Points  int `json:"points"`
	Inked   int `json:"inked"`
	Colored int `json:"colored"`
	Width   int `json:"width"`
	Height  int `json:"height"`
}

// checkChart fails the test unless the chart drew data in colour.
func checkChart(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](chartDrew+"('"+id+"')"))
	if err != nil {
		t.Fatalf("chart %s: %v", id, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("chart %s: %v", id, v)
	}
	d := drawn{Points: int(m["points"].(float64)), Inked: int(m["inked"].(float64)), Colored: int(m["colored"].(float64))}
	// Axes and labels alone ink a few thousand grey pixels; series add colour.
	if d.Points == 0 || d.Inked < 2000 || d.Colored < 200 {
		t.Errorf("chart %s did not draw: %+v", id, d)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	saveScreenshot(t, name, png)
}

// saveScreenshot writes a screenshot where the test's screenshots go.
func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
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

// waitFor evaluates expr until it is truthy and returns its value. Unlike
// chromedp.Poll it survives navigations (an upload opens another page).
func waitFor(ctx context.Context, expr string, timeout time.Duration) (any, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		switch x := v.(type) {
		case nil:
		case bool:
			if x {
				return v, nil
			}
		case float64:
			if x != 0 {
				return v, nil
			}
		case string:
			if x != "" {
				return v, nil
			}
		default:
			return v, nil
		}
		if err != nil {
			last = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(25 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s was not true within %v (last error: %v)", expr, timeout, last)
}

func evalInt(t *testing.T, ctx context.Context, js string) int {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return int(v)
}

func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// budgetMs is the longest main-thread task a page may run.
const budgetMs = 200

// checkBudget fails the test if a main-thread task after the performance
// mark since (or after the page started, for "") ran over budgetMs, and logs
// the page's own timed steps.
func checkBudget(t *testing.T, ctx context.Context, since string) {
	t.Helper()
	tasks, err := chromedp.Run(ctx, chromedp.Evaluate[[][2]float64](`window.__longtasks || []`))
	if err != nil {
		t.Fatal(err)
	}
	open := 0.0
	if since != "" {
		open, err = chromedp.Run(ctx, chromedp.Evaluate[float64](`(performance.getEntriesByName('`+since+`')[0] || {startTime: 0}).startTime`))
		if err != nil || open == 0 {
			t.Fatalf("the page never marked %s: %v", since, err)
		}
	}
	var lt []float64
	worst, before := 0.0, 0.0
	for _, task := range tasks {
		if task[0] < open {
			before = math.Max(before, task[1])
			continue
		}
		lt = append(lt, math.Round(task[1]))
		worst = math.Max(worst, task[1])
	}
	t.Logf("long tasks after %q: %d, longest %.0f ms (before it: longest %.0f ms)", since, len(lt), worst, before)
	logSteps(t, ctx)
	if worst > budgetMs {
		t.Errorf("a main-thread task ran %.0f ms (budget %d ms); all long tasks: %v", worst, budgetMs, lt)
	}
}

// logSteps logs the page's own timed steps (its sampviz:NAME measures).
func logSteps(t *testing.T, ctx context.Context) {
	t.Helper()
	steps, err := chromedp.Run(ctx, chromedp.Evaluate[map[string][]float64](`(function () {
		var m = {};
		performance.getEntriesByType('measure').forEach(function (e) {
			if (e.name.indexOf('sampviz:') === 0) (m[e.name.slice(8)] = m[e.name.slice(8)] || []).push(Math.round(e.duration));
		});
		return m;
	})()`))
	if err != nil {
		return
	}
	for name, ds := range steps {
		longest := 0.0
		for _, d := range ds {
			longest = math.Max(longest, d)
		}
		t.Logf("page step %s: %d times, longest %.0f ms (%v)", name, len(ds), longest, ds)
	}
}

// startBrowser starts headless chromium with the long-task observer on
// every page, for at most three minutes.
func startBrowser(t *testing.T, browser string) (context.Context, func()) {
	t.Helper()
	// chromedp's defaults (headless, no first run, no background networking,
	// no sync, no timer throttling, ...) and what this closed machine needs.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	// The browser's whole life: a generous bound for a 2-core machine.
	deadline := time.AfterFunc(3*time.Minute, cancel)
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: longTaskObserver})
		return err
	})); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, func() { deadline.Stop(); cancel(); cancelAlloc() }
}

func TestBrowserUploadStreamAndDrillDown(t *testing.T) {
	browser := findBrowser(t)
	const rows, vocab = 512, 4096
	bad := map[int]bool{}
	for len(bad) < 12 {
		bad[rand.IntN(rows)] = true
	}
	var badRows []int
	for r := range bad {
		badRows = append(badRows, r)
	}
	path := writeDump(t, rows, vocab, badRows)

	srv, err := web.New(web.Config{
		DataDir: t.TempDir(),
		Runner:  slowRunner{session.New(cpu.New()), 4 * time.Millisecond},
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close()

	ctx, stop := startBrowser(t, browser)
	defer stop()

	// 1. The home page: the drop zone, in plain words.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dropzone"]`))); err != nil {
		t.Fatal(err)
	}
	if got := evalString(t, ctx, `document.querySelector('[data-testid="backend"]').textContent`); !strings.Contains(got, "CPU backend") {
		t.Errorf("header says %q, want it to say the CPU backend", got)
	}

	// A file that is not a dump gets one sentence on the page, naming it.
	notes := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notes, []byte(fmt.Sprintf("these are notes, not logits: %d\n", rand.Int())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS(`input[type=file]`), []string{notes})); err != nil {
		t.Fatal(err)
	}
	v, err := waitFor(ctx, `(function () {
		var e = document.querySelector('[data-testid="upload-error"]');
		return e && !e.hidden && e.textContent;
	})()`, 20*time.Second)
	if err != nil {
		t.Fatalf("a bad upload showed no error: %v", err)
	}
	if msg := v.(string); !strings.HasPrefix(msg, "notes.txt: ") || strings.Count(strings.TrimSuffix(msg, "."), ". ") > 0 {
		t.Errorf("bad upload says %q, want one sentence that names the file and says why it is not a dump", msg)
	}
	screenshot(t, ctx, "home-bad-upload")

	// 2. Upload through the file picker: the page script sends it and opens
	// the run.
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS(`input[type=file]`), []string{path})); err != nil {
		t.Fatal(err)
	}
	v, err = waitFor(ctx, `/\/runs\/[a-z2-7]{10}$/.test(location.pathname) && document.readyState === 'complete' && location.href`, 30*time.Second)
	if err != nil {
		t.Fatalf("upload did not open the run page: %v", err)
	}
	runURL := v.(string)
	t.Logf("run page: %s", runURL)

	// 3. Rows stream in: some appear before the run is over.
	v, err = waitFor(ctx, `(function () {
		var n = document.querySelectorAll('#rows-body tr').length;
		return n > 0 && !document.getElementById('verdict').classList.contains('pass') &&
			!document.getElementById('verdict').classList.contains('fail') ? n : 0;
	})()`, 60*time.Second)
	if err != nil {
		t.Fatalf("no rows appeared while the run went on: %v", err)
	}
	seen := v.(float64)
	t.Logf("%d rows on the page while the run streamed", int(seen))
	if int(seen) >= rows {
		t.Errorf("all %d rows arrived at once", rows)
	}
	screenshot(t, ctx, "run-streaming")

	// 4. The run ends with a FAIL verdict that names what failed.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('verdict').classList.contains('fail')`,
		chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		t.Fatalf("the run did not finish with a failing verdict: %v (verdict: %q)", err,
			evalString(t, ctx, `document.getElementById('verdict').textContent`))
	}
	// Let the last table and chart frames run.
	if err := chromedp.Do(ctx, chromedp.Sleep(800*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	verdict := evalString(t, ctx, `document.getElementById('verdict-sentence').textContent`)
	want := fmt.Sprintf("probs (from the dump) fails %d of %d rows", len(bad), rows)
	if !strings.Contains(verdict, want) {
		t.Errorf("verdict %q, want it to contain %q", verdict, want)
	}
	if n := evalInt(t, ctx, `document.querySelectorAll('#rows-body tr').length`); n != rows {
		t.Errorf("%d rows in the table, want %d", n, rows)
	}
	for _, id := range []string{"chart-worst", "chart-hist", "chart-heat"} {
		checkChart(t, ctx, id)
	}
	checkNumberLabels(t, ctx)
	// The budget: no main-thread task over 200 ms while 512 rows streamed,
	// from the moment the websocket opened (loading the page and its
	// scripts comes before).
	checkBudget(t, ctx, "sampviz:stream-open")
	screenshot(t, ctx, "run-finished")

	// 5. Filter to violations: only the failing rows stay, and the view is
	// in the URL.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="filter-failing"]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll('#rows-body tr').length === %d`, len(bad)),
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("filtering to violations: %d rows shown, want %d", evalInt(t, ctx, `document.querySelectorAll('#rows-body tr').length`), len(bad))
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "failing=1") {
		t.Errorf("the filter is not in the URL: %q", u)
	}

	// 6. Open the first failing row.
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#rows-body tr.fail a`))); err != nil {
		t.Fatal(err)
	}
	rowURL := evalString(t, ctx, `location.href`)
	m := regexp.MustCompile(`/rows/(\d+)`).FindStringSubmatch(rowURL)
	if m == nil {
		t.Fatalf("clicking a failing row opened %s", rowURL)
	}
	var row int
	fmt.Sscan(m[1], &row)
	if !bad[row] {
		t.Errorf("opened row %d, which is not one of the failing rows", row)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-probs"] canvas`))); err != nil {
		t.Fatal(err)
	}
	why := evalString(t, ctx, `document.querySelector('[data-testid="row-verdict"]').textContent`)
	if !strings.Contains(why, fmt.Sprintf("row %d:", row)) || !strings.Contains(why, "probs (from the dump): fails") {
		t.Errorf("the row page does not say why row %d failed: %q", row, why)
	}
	for _, id := range []string{"chart-probs", "chart-cdf", "chart-error"} {
		checkChart(t, ctx, id)
	}
	screenshot(t, ctx, "row")

	// 7. The log-scale toggle is a link: the view lives in the URL.
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="log-toggle"]`))); err != nil {
		t.Fatal(err)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "log=1") {
		t.Errorf("log scale is not in the URL: %q", u)
	}
	if got := evalString(t, ctx, `echarts.getInstanceByDom(document.querySelector('[data-testid="chart-probs"]')).getOption().yAxis[0].type`); got != "log" {
		t.Errorf("the log view's y axis is %q", got)
	}

	// 8. Paste the row's URL into another tab: the same view.
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(rowURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-probs"] canvas`))); err != nil {
		t.Fatal(err)
	}
	if again := evalString(t, tab, `document.querySelector('[data-testid="row-verdict"]').textContent`); again != why {
		t.Errorf("the pasted URL shows a different verdict:\n%q\nwant\n%q", again, why)
	}
	// And the run page with its filter.
	if err := chromedp.Do(tab, chromedp.Navigate(runURL+"?failing=1")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('filter-failing').checked && document.querySelectorAll('#rows-body tr').length === %d`, len(bad)),
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Errorf("the pasted run URL did not open the filtered view: %v", err)
	}
}

// writeSpecDump writes a spec_verify dump of rows rows with k draft
// positions over vocab tokens: BF16 target logits with per-row temperatures
// and top-p, draft tokens, and F32 draft probabilities, all fresh random.
func writeSpecDump(t *testing.T, rows, k, vocab int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	target := make([]float32, rows*(k+1)*vocab)
	for i := range target {
		target[i] = float32(rng.NormFloat64() * 2)
	}
	// Like a language model's rows: a few tokens well ahead of the rest.
	for at := 0; at < rows*(k+1); at++ {
		for range 5 {
			target[at*vocab+rng.IntN(vocab)] += float32(6 + 3*rng.Float64())
		}
	}
	drafts := make([]int64, rows*k)
	q := make([]float32, rows*k*vocab)
	for i := range drafts {
		// A draft model that roughly agrees with the target: its logits are
		// the target's at that position plus noise.
		r, pos := i/k, i%k
		w := make([]float64, vocab)
		sum := 0.0
		for j := range w {
			w[j] = math.Exp(float64(target[(r*(k+1)+pos)*vocab+j]) + rng.NormFloat64())
			sum += w[j]
		}
		u := rng.Float64() * sum
		drafts[i] = int64(vocab - 1)
		for j := range w {
			q[i*vocab+j] = float32(w[j] / sum)
			if u -= w[j]; u < 0 && drafts[i] == int64(vocab-1) {
				drafts[i] = int64(j)
			}
		}
	}
	temp, topP := make([]float64, rows), make([]float64, rows)
	for r := range rows {
		temp[r] = 0.7 + 0.6*rng.Float64()
		topP[r] = 0.85 + 0.15*rng.Float64()
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("target_logits", engine.BF16, []int{rows, k + 1, vocab}, target),
		engine.FromInts("draft_tokens", engine.I64, []int{rows, k}, drafts),
		engine.FromFloat32s("draft_probs", engine.F32, []int{rows, k, vocab}, q),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temp),
		engine.FromFloat64s("top_p", engine.F32, []int{rows}, topP),
	}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": "spec_verify", "source": "sampviz browser test"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spec-bf16.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// run evaluates js for its effect.
func run(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](js)); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
}

// writeSampleDump writes a sample dump of rows x vocab BF16 logits, peaked
// like a language model's, with random per-row temperatures and top-k.
func writeSampleDump(t *testing.T, rows, vocab int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	for r := range rows {
		for range 8 {
			logits[r*vocab+rng.IntN(vocab)] += float32(5 + 3*rng.Float64())
		}
	}
	temp, topK := make([]float64, rows), make([]int64, rows)
	for r := range rows {
		temp[r] = 0.6 + 0.8*rng.Float64()
		topK[r] = int64(20 + rng.IntN(100))
	}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, []*engine.Tensor{
		engine.FromFloat32s("logits", engine.BF16, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temp),
		engine.FromInts("top_k", engine.I64, []int{rows}, topK),
	}, map[string]string{"op": "sample", "source": "sampviz browser test"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sample-bf16.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// text returns the text of the element with data-testid id.
func text(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	return evalString(t, ctx, `(document.querySelector('[data-testid="`+id+`"]') || {textContent: ''}).textContent.trim()`)
}

// waitText waits until the element with data-testid id says something
// other than old, and returns it.
func waitText(t *testing.T, ctx context.Context, id, old string) string {
	t.Helper()
	v, err := waitFor(ctx, `(function () {
		var e = document.querySelector('[data-testid="`+id+`"]');
		var s = e ? e.textContent.trim() : '';
		return s !== `+fmt.Sprintf("%q", old)+` && s;
	})()`, 20*time.Second)
	if err != nil {
		t.Fatalf("%s still says %q: %v", id, old, err)
	}
	return v.(string)
}

func TestBrowserStatisticsTraceAndTeach(t *testing.T) {
	browser := findBrowser(t)
	const rows, k, vocab, trials = 96, 4, 4096, 400
	path := writeSpecDump(t, rows, k, vocab)

	srv, err := web.New(web.Config{
		DataDir: t.TempDir(),
		Runner:  slowRunner{session.New(cpu.New()), 15 * time.Millisecond},
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close()

	// Upload as curl would, with the trials in the query.
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/api/runs?trials=%d", ts.URL, trials), bytes.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&created); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s: %v", res.Status, err)
	}
	res.Body.Close()

	ctx, stop := startBrowser(t, browser)
	defer stop()

	// 1. The run page: p-values per row, acceptance by position and the
	// emitted lengths draw while the rows stream in, within the budget.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+created.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `document.getElementById('verdict').classList.contains('pass') || document.getElementById('verdict').classList.contains('fail')`, 90*time.Second); err != nil {
		t.Fatalf("the spec_verify run did not finish: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(800*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"chart-pvalue", "chart-accept", "chart-emitted"} {
		checkChart(t, ctx, id)
	}
	if h := evalString(t, ctx, `document.getElementById('rows-head').textContent`); !strings.Contains(h, "acceptance length (theory), p") {
		t.Errorf("row table head %q has no acceptance column", h)
	}
	if c := evalString(t, ctx, `document.querySelector('#rows-body tr td:nth-child(3)').textContent`); !regexp.MustCompile(`^(✗ )?[0-9.]+ \([0-9.]+\), p = `).MatchString(c) {
		t.Errorf("a row's acceptance cell says %q", c)
	}
	if s := text(t, ctx, "stats-line"); !strings.Contains(s, fmt.Sprintf("%d trials per row; mean acceptance length", trials)) {
		t.Errorf("stats line %q", s)
	}
	checkBudget(t, ctx, "sampviz:stream-open")
	screenshot(t, ctx, "spec-run")

	// 2. A row page: the trace, stepped with the next button and the arrow
	// keys, the step in the URL.
	row := rand.IntN(rows)
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/runs/%s/rows/%d", ts.URL, created.ID, row)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-position"] canvas`))); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, `performance.mark('sampviz:row-ready'); true`)
	first := text(t, ctx, "trace-title")
	if first != fmt.Sprintf("Trial 0 of 16, position 0 of %d", k) {
		t.Errorf("the trace starts at %q", first)
	}
	say0 := text(t, ctx, "trace-say")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="trace-next"]`))); err != nil {
		t.Fatal(err)
	}
	second := waitText(t, ctx, "trace-title", first)
	if second != fmt.Sprintf("Trial 0 of 16, position 1 of %d", k) {
		t.Errorf("next went to %q", second)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "trial=0") || !strings.Contains(u, "step=1") {
		t.Errorf("the step is not in the URL: %q", u)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	if third := waitText(t, ctx, "trace-title", second); third != fmt.Sprintf("Trial 0 of 16, position 2 of %d", k) {
		t.Errorf("the right arrow went to %q", third)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowLeft)); err != nil {
		t.Fatal(err)
	}
	if back := waitText(t, ctx, "trace-title", fmt.Sprintf("Trial 0 of 16, position 2 of %d", k)); back != second {
		t.Errorf("the left arrow went to %q, want %q", back, second)
	}
	if say := text(t, ctx, "trace-say"); say == say0 || say == "" {
		t.Errorf("the step's words did not change: %q", say)
	}
	checkChart(t, ctx, "chart-position")
	if n := evalInt(t, ctx, `(echarts.getInstanceByDom(document.querySelector('[data-testid="chart-position"]')).getOption().series[0].markPoint || {data: []}).data.length`); n == 0 {
		t.Error("the draft is not pinned on the position's chart")
	}
	checkChart(t, ctx, "chart-row-accept")
	checkBudget(t, ctx, "sampviz:row-ready")
	screenshot(t, ctx, "spec-row-trace")
	// The URL names the step: pasted, it opens there.
	stepURL := evalString(t, ctx, `location.href`)
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(stepURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid="trace-title"]`))); err != nil {
		t.Fatal(err)
	}
	if got := text(t, tab, "trace-title"); got != second {
		t.Errorf("the pasted step URL opens %q, want %q", got, second)
	}

	// 3. The teaching mode on this row: step, run 100 steps, move the
	// draft; the histogram grows and the words follow.
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="teach-link"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-teach-hist"] canvas`))); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, `performance.mark('sampviz:teach-ready'); true`)
	counter := text(t, ctx, "teach-counter")
	what := text(t, ctx, "teach-what")
	if counter != "No steps yet." {
		t.Errorf("the lesson starts with %q", counter)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="teach-step"]`))); err != nil {
		t.Fatal(err)
	}
	counter = waitText(t, ctx, "teach-counter", counter)
	if !strings.HasPrefix(counter, "1 step:") {
		t.Errorf("after one step the counter says %q", counter)
	}
	if w := text(t, ctx, "teach-what"); w == what || !strings.HasPrefix(w, "Step 1: the draft proposes token") {
		t.Errorf("after one step the text says %q", w)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="teach-run"]`))); err != nil {
		t.Fatal(err)
	}
	counter = waitText(t, ctx, "teach-counter", counter)
	if !strings.HasPrefix(counter, "101 steps:") {
		t.Errorf("after running 100 more the counter says %q", counter)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "step=101") {
		t.Errorf("the lesson is not in the URL: %q", u)
	}
	checkChart(t, ctx, "chart-teach-hist")
	checkChart(t, ctx, "chart-teach-tv")
	screenshot(t, ctx, "teach")
	// The draft moved onto the target: every proposal is accepted.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`[data-testid="teach-distance"]`), "0")); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, `document.querySelector('[data-testid="teach-distance"]').dispatchEvent(new Event('change', {bubbles: true}))`)
	if got := waitText(t, ctx, "teach-counter", counter); !strings.HasPrefix(got, "101 steps: 101 drafts accepted (100%)") {
		t.Errorf("with the draft on the target the counter says %q", got)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "distance=0") {
		t.Errorf("the distance is not in the URL: %q", u)
	}
	checkBudget(t, ctx, "sampviz:teach-ready")
	screenshot(t, ctx, "teach-distance-0")

	// 4. A sample run with many draws: p-values on the run page, and on a
	// row page the draws against the expected counts, on a log scale too.
	samplePath := writeSampleDump(t, 32, 2048)
	body, err = os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest("PUT", ts.URL+"/api/runs?draws=20000", bytes.NewReader(body))
	if res, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	var sample struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&sample); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s: %v", res.Status, err)
	}
	res.Body.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+sample.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `document.getElementById('verdict').classList.contains('pass') || document.getElementById('verdict').classList.contains('fail')`, 90*time.Second); err != nil {
		t.Fatalf("the sample run did not finish: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(800*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	checkChart(t, ctx, "chart-pvalue")
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+sample.ID+"/rows/5"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-samples"] canvas`))); err != nil {
		t.Fatal(err)
	}
	checkChart(t, ctx, "chart-samples")
	if line := text(t, ctx, "samples-line"); !strings.Contains(line, "drew this row 20000 times") {
		t.Errorf("samples line %q", line)
	}
	screenshot(t, ctx, "sample-row")
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="row-samples"] [data-testid="log-toggle"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-samples"] canvas`))); err != nil {
		t.Fatal(err)
	}
	if got := evalString(t, ctx, `echarts.getInstanceByDom(document.querySelector('[data-testid="chart-samples"]')).getOption().yAxis[0].type`); got != "log" {
		t.Errorf("the log view's sample histogram has a %q y axis", got)
	}
}

// checkNumberLabels checks the numbers the run page's script wrote itself
// against engine's formatter (issue 27: one formatter for the product): the
// worst-error chart's axis labels and the row table's error cells.
func checkNumberLabels(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, v := range []float64{1e-5, 0.0079123, 1234.5, 2.5e-7} {
		js := fmt.Sprintf(`echarts.getInstanceByDom(document.querySelector('[data-testid="chart-worst"]')).getOption().yAxis[0].axisLabel.formatter(%v)`, v)
		if got, want := evalString(t, ctx, js), engine.FormatSig(v, 3); got != want {
			t.Errorf("the worst-error chart labels %v %q, want %q as engine.FormatSig writes it", v, got, want)
		}
	}
	// A cell reads "0.0079 · 12× allowed": each number as FormatSig writes
	// one, never "7.90e-3" or "1.00e-05".
	cells := evalString(t, ctx, `[...document.querySelectorAll('#rows-body td')].map(td => td.textContent).filter(s => s.includes('× allowed')).join('\n')`)
	number := `(?:-?\d+(?:\.\d*[1-9])?|-?\d(?:\.\d*[1-9])?e[+-]\d{2,3}|NaN|[+-]Inf|Inf)`
	re := regexp.MustCompile(`^(?:✗ )?` + number + ` · ` + number + `× allowed$`)
	if cells == "" {
		t.Errorf("no error cells in the row table")
	}
	for _, c := range strings.Split(cells, "\n") {
		if c != "" && !re.MatchString(c) {
			t.Errorf("row table cell %q is not written as engine.FormatSig writes numbers", c)
		}
	}
}
