package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
)

// TestBrowserWaitingDriftTopAndRerun opens a row before its run is judged
// (it says waiting, then shows its verdict on its own), the finished run's
// drift table and rerun form with every parameter, and a failing row with
// the top-N control and the output's own cut on the CDF.
func TestBrowserWaitingDriftTopAndRerun(t *testing.T) {
	browser := findBrowser(t)
	ts := serve(t, web.Config{Runner: slowRunner{session.New(cpu.New()), 40 * time.Millisecond}})
	ctx, stop := startBrowser(t, browser)
	defer stop()

	const rows = 40
	bad := rand.IntN(rows - 1)
	body, err := os.Open(writeDump(t, rows, 1024, []int{bad}))
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	res, err := http.Post(ts.URL+"/api/runs?name=views.safetensors", "application/octet-stream", body)
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ ID, Link, Error string }
	if err := json.NewDecoder(res.Body).Decode(&run); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s %v %s", res.Status, err, run.Error)
	}
	res.Body.Close()
	if run.Link != ts.URL+"/runs/"+run.ID {
		t.Errorf("the upload's link is %q", run.Link)
	}

	// 1. The last row, opened at once: waiting, not a green pass; the page
	// shows the verdict once the row is judged, without a reload by hand.
	last := fmt.Sprintf("%s/runs/%s/rows/%d", ts.URL, run.ID, rows-1)
	if err := chromedp.Do(ctx, chromedp.Navigate(last)); err != nil {
		t.Fatal(err)
	}
	verdict := `document.querySelector('[data-testid="row-verdict"]')`
	if cls := evalString(t, ctx, verdict+`.className`); strings.Contains(cls, "pass") || !strings.Contains(evalString(t, ctx, verdict+`.textContent`), "waiting") {
		t.Errorf("the row opened before judging: class %q, %q", cls, evalString(t, ctx, verdict+`.textContent`))
	}
	screenshot(t, ctx, "row-waiting")
	if _, err := waitFor(ctx, `(function () { var v = `+verdict+`; return v && /\b(pass|fail)\b/.test(v.className); })()`, 60*time.Second); err != nil {
		t.Fatalf("the waiting row never showed its verdict: %v", err)
	}

	// 2. The finished run: the drift table, and every parameter in the
	// rerun form.
	for {
		res, err := http.Get(ts.URL + "/api/runs/" + run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ State string }
		json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if st.State == "done" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+run.ID), chromedp.WaitVisible(chromedp.CSS(`[data-testid="drift-table"]`))); err != nil {
		t.Fatalf("no drift table: %v", err)
	}
	if n := evalInt(t, ctx, `document.querySelectorAll('[data-testid="drift-line"]').length`); n < 2 {
		t.Errorf("%d drift lines, want ours and the dump's", n)
	}
	for _, p := range engine.ParamTable() {
		if evalInt(t, ctx, `document.querySelectorAll('[data-testid="rerun-form"] [name="`+p.Name+`"]').length`) != 1 {
			t.Errorf("the rerun form has no field %s", p.Name)
		}
	}
	screenshot(t, ctx, "run-drift-and-rerun")

	// 3. The failing row with 60 tokens: the control, and the output's cut
	// drawn beside the reference's.
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/runs/%s/rows/%d", ts.URL, run.ID, bad)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="top-control"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="top-link"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="top-current"]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `document.querySelector('[data-testid="top-current"]').textContent === '60'`, 10*time.Second); err != nil {
		t.Errorf("the top control did not show 60 tokens: %v", err)
	}
	if _, err := waitFor(ctx, `(function () {
		var el = document.querySelector('[data-testid="chart-cdf"]');
		var c = el && window.echarts && echarts.getInstanceByDom(el);
		return c && (c.getOption().series || []).some(function (s) { return /its cut/.test(s.name); });
	})()`, 10*time.Second); err != nil {
		t.Errorf("the CDF chart draws no output's cut: %v", err)
	}
	checkChart(t, ctx, "chart-cdf")
	screenshot(t, ctx, "row-top-and-cuts")
}
