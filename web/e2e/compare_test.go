package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
)

// TestBrowserComparisonScenarios opens the four comparison scenarios from
// the home page, as a person does, and checks that each shows its point:
// graph-vs-eager the agreement view with the three rows where the CUDA
// graph parts from eager, logits-gate the mode table and the gate with one
// real and one fragile flip, padded-batch the padded lanes greyed in the
// row table and left out of the charts, kernel-fix-diff the diff page with
// the rows the fix changed. Rows stream in slowly, so the comparison
// sections arrive with the final message on a page that watched the run.
// Issue 25's views too: logprobs-kinds opens on its mode table in nats with
// the note that names the other kind, and its row page draws every logprobs
// output against the reference; a dump uploaded with semantics any from
// the home page's form shows which engines its outputs follow.
func TestBrowserComparisonScenarios(t *testing.T) {
	browser := findBrowser(t)
	var scs []web.Scenario
	for _, s := range scenarios.Catalogue() {
		switch s.Name {
		case "graph-vs-eager", "logits-gate", "padded-batch", "kernel-fix-diff", "logprobs-kinds":
		default:
			continue
		}
		ws := web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
			Params: engine.Overrides{Draws: s.Overrides.Draws, Trials: s.Overrides.Trials}}
		if s.Diff != nil {
			ws.AfterFileName, ws.OpenAfter = s.Diff.After, s.OpenAfter
		}
		scs = append(scs, ws)
	}
	if len(scs) != 5 {
		t.Fatalf("the catalogue holds %d of the 5 comparison scenarios", len(scs))
	}
	srv, err := web.New(web.Config{
		DataDir:   t.TempDir(),
		Runner:    slowRunner{session.New(cpu.New()), 60 * time.Millisecond},
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

	open := func(name string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`form[action="/scenarios/%s"] button`, name)))); err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
	}
	// streamed says whether the page opened before its run finished and
	// swapped the comparison in from the final message, without a reload.
	const markPage = `window.__page = window.__page || Math.random(); !!document.querySelector('#compare section:not([data-testid="compare-wait"])')`
	// viewShot saves what the window shows: the section the scenario
	// opened on, scrolled into view.
	viewShot := func(t *testing.T, name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		saveScreenshot(t, name, png)
	}
	inView := func(t *testing.T, id string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function () { var el = document.querySelector('[data-testid="`+id+`"]'); return el ? String(Math.round(el.getBoundingClientRect().top)) : 'missing at ' + location.href + ' ' + document.readyState; })()`))
		if err != nil {
			t.Fatal(err)
		}
		var top int
		if _, err := fmt.Sscan(v, &top); err != nil {
			t.Errorf("%s: %s", id, v)
			return false
		}
		t.Logf("%s is %d px from the top of the window", id, top)
		return top >= -5 && top < 200
	}

	t.Run("graph-vs-eager", func(t *testing.T) {
		open("graph-vs-eager")
		if _, err := waitFor(ctx, `/[?&]agree=1/.test(location.search) && document.readyState === 'complete'`, 30*time.Second); err != nil {
			t.Fatalf("did not open the agreement view: %v (at %s)", err, evalString(t, ctx, `location.href`))
		}
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](markPage))
		if err != nil {
			t.Fatal(err)
		}
		page := evalString(t, ctx, `String(window.__page)`)
		if _, err := waitFor(ctx, `document.querySelector('[data-testid="agreement"].focus') && document.querySelectorAll('#rows-body tr').length === 8`, 60*time.Second); err != nil {
			t.Fatalf("the agreement view did not come: %v", err)
		}
		if v {
			t.Log("the run had finished when the page opened: its sections were rendered with it")
		} else if again := evalString(t, ctx, `String(window.__page)`); again != page {
			t.Error("the page reloaded to show the comparison; it should swap it in from the final message")
		}
		parted := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="parted"] tbody tr')).map(function (tr) { return tr.cells[0].textContent; }).join(',')`)
		if parted != "1,4,6" {
			t.Errorf("rows where graph parts from eager: %q, want 1,4,6", parted)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="pair"]').textContent`); !strings.Contains(got, "5 of 8") {
			t.Errorf("the pair says %q", got)
		}
		if !inView(t, "agreement") {
			t.Error("the agreement view is not scrolled into view")
		}
		if n := evalInt(t, ctx, `document.querySelectorAll('#rows-body tr.fail').length`); n != 3 {
			t.Errorf("%d failing rows in the table, want 3", n)
		}
		viewShot(t, "graph-vs-eager-opens-on-agreement")
		screenshot(t, ctx, "graph-vs-eager-agreement")
	})

	t.Run("logits-gate", func(t *testing.T) {
		open("logits-gate")
		if _, err := waitFor(ctx, `/[?&]modes=1/.test(location.search) && document.querySelectorAll('[data-testid="mode-line"]').length === 4`, 60*time.Second); err != nil {
			t.Fatalf("the mode table did not come: %v", err)
		}
		if !inView(t, "modes") {
			t.Error("the mode table is not scrolled into view")
		}
		failing := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="mode-line"].fail')).map(function (tr) { return tr.cells[0].textContent; }).join(',')`)
		if failing != "logits@graph_pad9" {
			t.Errorf("failing modes %q, want logits@graph_pad9", failing)
		}
		flips := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="gate-flip"] .rule')).map(function (e) { return e.textContent; }).sort().join(',')`)
		if flips != "fragile,real" {
			t.Errorf("gate flips %q, want one fragile and one real", flips)
		}
		if _, err := waitFor(ctx, `!!(window.echarts && echarts.getInstanceByDom(document.querySelector('[data-testid="chart-worst"]')))`, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		checkChart(t, ctx, "chart-worst")
		viewShot(t, "logits-gate-opens-on-modes")
		screenshot(t, ctx, "logits-gate-modes")
	})

	t.Run("padded-batch", func(t *testing.T) {
		open("padded-batch")
		if _, err := waitFor(ctx, `/[?&]padding=1/.test(location.search) && document.querySelector('[data-testid="padding"].focus') && document.querySelectorAll('#rows-body tr').length === 8`, 60*time.Second); err != nil {
			t.Fatalf("the padded lanes did not come: %v", err)
		}
		pad := evalString(t, ctx, `Array.from(document.querySelectorAll('#rows-body tr.padding')).map(function (tr) { return tr.dataset.row; }).join(',')`)
		if pad != "6,7" {
			t.Errorf("padded rows in the table %q, want 6,7", pad)
		}
		if got := evalString(t, ctx, `document.querySelector('#rows-body tr[data-row="7"] .badge').textContent`); got != "padding" {
			t.Errorf("row 7 is labelled %q", got)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="padding-note"]').textContent`); !strings.Contains(got, "Rows 6 and 7") {
			t.Errorf("the verdict's padding line says %q", got)
		}
		if !inView(t, "padding") {
			t.Error("the padded lanes are not scrolled into view")
		}
		// The charts leave the padded lanes out: the worst-error chart
		// draws the six real rows of the output it shows.
		if _, err := waitFor(ctx, `window.echarts && echarts.getInstanceByDom(document.querySelector('[data-testid="chart-worst"]')) && echarts.getInstanceByDom(document.querySelector('[data-testid="chart-worst"]')).getOption().series.length > 0`, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		checkChart(t, ctx, "chart-worst")
		xs := evalString(t, ctx, `echarts.getInstanceByDom(document.querySelector('[data-testid="chart-worst"]')).getOption().series.filter(function (s) { return s.type === 'scatter'; }).map(function (s) { return s.data.map(function (p) { return p[0]; }).join(' '); }).join(' ')`)
		for _, x := range strings.Fields(xs) {
			if x == "6" || x == "7" {
				t.Errorf("the worst-error chart draws padded row %s (rows %q)", x, xs)
			}
		}
		viewShot(t, "padded-batch-opens-on-padding")
		screenshot(t, ctx, "padded-batch-padding")

		// Every output of a row on one chart, from the agreement view.
		href := evalString(t, ctx, `document.querySelector('[data-testid="pair-row-all"]').getAttribute('href')`)
		if !strings.Contains(href, "outputs=all") {
			t.Fatalf("the pair links %q", href)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+href)); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(ctx, `!!(window.echarts && document.querySelector('[data-testid="chart-probs"]') && echarts.getInstanceByDom(document.querySelector('[data-testid="chart-probs"]')))`, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		checkChart(t, ctx, "chart-probs")
		names := evalString(t, ctx, `echarts.getInstanceByDom(document.querySelector('[data-testid="chart-probs"]')).getOption().series.map(function (s) { return s.name; }).join('|')`)
		for _, o := range []string{"cpu", "probs@graph", "probs@shifted"} {
			if !strings.Contains(names, o) {
				t.Errorf("the row's chart lacks %s: %q", o, names)
			}
		}
		screenshot(t, ctx, "padded-batch-row-every-output")
	})

	t.Run("kernel-fix-diff", func(t *testing.T) {
		open("kernel-fix-diff")
		// The diff waits for both runs (a page that reloads itself), then
		// shows the comparison.
		if _, err := waitFor(ctx, `/\/diff\//.test(location.pathname) && document.querySelectorAll('[data-testid="diff-row"]').length > 0`, 90*time.Second); err != nil {
			t.Fatalf("the diff page did not come: %v (at %s: %s)", err, evalString(t, ctx, `location.href`), evalString(t, ctx, `document.body.innerText.slice(0, 300)`))
		}
		changes := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="diff-row"]')).map(function (tr) { return tr.dataset.row + ':' + tr.querySelector('[data-testid="diff-change"]').textContent.split(':')[0]; }).join(',')`)
		if changes != "2:fixed,5:fixed,7:broken" {
			t.Errorf("changed rows %q, want 2 and 5 fixed, 7 broken", changes)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="diff-summary"]').textContent`); !strings.Contains(got, "worse: row 7 of probs went from pass to fail") {
			t.Errorf("summary %q", got)
		}
		if _, err := waitFor(ctx, `!!(window.echarts && echarts.getInstanceByDom(document.querySelector('[data-testid="chart-drift"]')))`, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		checkChart(t, ctx, "chart-drift")
		screenshot(t, ctx, "kernel-fix-diff")

		// From the before run's page, "compare with" reaches the same diff.
		diffPath := evalString(t, ctx, `location.pathname`)
		before := strings.Split(diffPath, "/")[2]
		// Bounded, so that a navigation that never answers fails this step
		// with the page it was on rather than using up the whole test.
		step, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(step, chromedp.Navigate(ts.URL+"/runs/"+before)); err != nil {
			t.Fatalf("opening the before run: %v", err)
		}
		if _, err := waitFor(ctx, `!!document.querySelector('[data-testid="candidate"]')`, 20*time.Second); err != nil {
			t.Fatalf("the before run's page has no candidate link: %v (at %s)", err, evalString(t, ctx, `location.href`))
		}
		if _, err := chromedp.RunResponse(step, chromedp.Click(chromedp.CSS(`[data-testid="candidate"]`))); err != nil {
			t.Fatalf("compare with: %v (at %s)", err, evalString(t, ctx, `location.href`))
		}
		if got := evalString(t, ctx, `location.pathname`); got != diffPath {
			t.Errorf("compare with leads to %s, want %s", got, diffPath)
		}
	})

	t.Run("logprobs-kinds", func(t *testing.T) {
		open("logprobs-kinds")
		if _, err := waitFor(ctx, `/[?&]modes=1/.test(location.search) && document.querySelectorAll('[data-testid="mode-line"]').length === 4 && document.querySelector('[data-testid="output-note"]')`, 60*time.Second); err != nil {
			t.Fatalf("the mode table and the output's note did not come: %v", err)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="mode-table"] thead').textContent`); !strings.Contains(got, "mean |Δlogprob| (nats)") {
			t.Errorf("the mode table's head says %q", got)
		}
		failing := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="mode-line"].fail')).map(function (tr) { return tr.cells[0].textContent; }).join(',')`)
		if failing != "logprobs@temperature_twice,logprobs@v0_style" {
			t.Errorf("failing outputs %q", failing)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="output-note"]').textContent`); !strings.Contains(got, "are they processed?") {
			t.Errorf("the output's note says %q", got)
		}
		if !inView(t, "modes") {
			t.Error("the mode table is not scrolled into view")
		}
		viewShot(t, "logprobs-kinds-opens-on-modes")
		screenshot(t, ctx, "logprobs-kinds-run")

		// Row 2: greedy with filters; the processed top-20 holds −inf
		// where the filters drop a token.
		path := evalString(t, ctx, `location.pathname`)
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+path+"/rows/2")); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(ctx, `window.echarts && document.querySelectorAll('[data-testid="chart-logprobs"]').length === 4 && Array.from(document.querySelectorAll('[data-testid="chart-logprobs"]')).every(function (el) { return echarts.getInstanceByDom(el); })`, 30*time.Second); err != nil {
			t.Fatalf("the logprobs charts did not draw: %v", err)
		}
		checkChart(t, ctx, "chart-logprobs")
		series := evalString(t, ctx, `echarts.getInstanceByDom(document.querySelector('[data-testid="chart-logprobs"]')).getOption().series.map(function (s) { return s.name; }).join('|')`)
		if series != "reference (float64, processed)|logprobs@processed|−inf (or NaN, +Inf at 0) in the output|−inf in the reference (dropped)" {
			t.Errorf("the processed top-20's chart draws %q", series)
		}
		note := evalString(t, ctx, `(document.querySelector('[data-output="logprobs@v0_style"] [data-testid="logprobs-note"]') || {}).textContent || ''`)
		if !strings.Contains(note, "set logprobs_kind (or logprobs_kind@v0_style) to processed") {
			t.Errorf("the v0_style section's note says %q", note)
		}
		screenshotOf(t, ctx, `[data-output="logprobs@v0_style"]`, "logprobs-kinds-row-v0-style")
		screenshot(t, ctx, "logprobs-kinds-row")
	})

	t.Run("semantics-any", func(t *testing.T) {
		var dump []byte
		for _, sc := range scenarios.Catalogue() {
			if sc.Name == "top-k-then-top-p" {
				var err error
				if dump, err = sc.DumpBytes(); err != nil {
					t.Fatal(err)
				}
			}
		}
		path := filepath.Join(t.TempDir(), "which-engine.safetensors")
		if err := os.WriteFile(path, dump, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dropzone"]`)),
			chromedp.SetValue(chromedp.CSS(`#semantics-input`), "any"),
			chromedp.SetUploadFiles(chromedp.CSS(`#dump-input`), []string{path})); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(ctx, `/\/runs\/[a-z2-7]{10}$/.test(location.pathname) && document.querySelectorAll('[data-testid="match"]').length === 6`, 60*time.Second); err != nil {
			t.Fatalf("the run page did not show the presets: %v (at %s)", err, evalString(t, ctx, `location.href`))
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="semantics-sentence"]').textContent`); got != "The outputs follow the semantics of SGLang (sglang) and TokenSpeed (tokenspeed): 2 of 6 presets pass." {
			t.Errorf("the panel says %q", got)
		}
		passing := evalString(t, ctx, `Array.from(document.querySelectorAll('[data-testid="match"].pass')).map(function (tr) { return tr.dataset.semantics; }).join(',')`)
		if passing != "sglang,tokenspeed" {
			t.Errorf("passing presets %q, want sglang,tokenspeed", passing)
		}
		if got := evalString(t, ctx, `document.querySelector('[data-testid="verdict-sentence"], #verdict-sentence').textContent`); !strings.HasPrefix(got, "PASS: the outputs follow sglang and tokenspeed") {
			t.Errorf("the verdict says %q", got)
		}
		screenshotOf(t, ctx, `[data-testid="semantics"]`, "semantics-any-panel")
		screenshot(t, ctx, "semantics-any-run")
		// A preset's first failure opens its row.
		href := evalString(t, ctx, `document.querySelector('[data-semantics="hf"] [data-testid="match-first"]').getAttribute('href')`)
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-semantics="hf"] [data-testid="match-first"]`))); err != nil {
			t.Fatal(err)
		}
		if got := evalString(t, ctx, `location.pathname`); got != href || !strings.Contains(href, "/rows/") {
			t.Errorf("the first failure opened %s, want its row %s", got, href)
		}
	})
}
