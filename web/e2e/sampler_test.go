package e2e

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
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

// TestBrowserSamplerTeach opens the seeded-determinism scenario from the
// home page as a person would, goes to its filtered row and into the
// sampler teaching mode from the row page's links: the rejection sampler's
// rounds stepped with the buttons and the arrow keys (the step in the URL,
// the rounds table growing, the candidate pinned on the chart), then the
// Gumbel-max race and the inverse CDF fetched without a reload, the latter
// ending on the token our kernel stored for the draw, and the next draw.
// It screenshots each method's page.
func TestBrowserSamplerTeach(t *testing.T) {
	browser := findBrowser(t)
	var scs []web.Scenario
	for _, s := range scenarios.Catalogue() {
		if s.Name == "seeded-determinism" {
			scs = append(scs, web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
				Params: engine.Overrides{Draws: s.Overrides.Draws}})
		}
	}
	if len(scs) != 1 {
		t.Fatal("the catalogue lacks the seeded-determinism scenario")
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

	// 1. Open the scenario; once its kernels have run, go to row 2 (T 0.7,
	// top-k 100, top-p 0.9) and follow its rejection sampler link.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`form[action="/scenarios/seeded-determinism"] button`))); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `/\/rows\/0/.test(location.pathname) && !!document.querySelector('[data-testid="chart-samples"] canvas')`, 90*time.Second); err != nil {
		t.Fatalf("the scenario did not open its row: %v (at %s)", err, evalString(t, ctx, `location.href`))
	}
	id := regexp.MustCompile(`/runs/([a-z2-7]{10})`).FindStringSubmatch(evalString(t, ctx, `location.pathname`))[1]
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/runs/%s/rows/2", ts.URL, id))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="sample-teach-link-rejection"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-sample-teach"] canvas`))); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, `performance.mark('sampviz:sample-teach-ready'); true`)

	// 2. The rejection sampler, round by round.
	step := text(t, ctx, "sample-teach-title")
	if !strings.HasPrefix(step, "Step 1 of ") || !strings.HasSuffix(step, "The distribution and the filters") {
		t.Errorf("the lesson starts at %q", step)
	}
	total := atoi(regexp.MustCompile(`of (\d+)`).FindStringSubmatch(step)[1])
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="sample-teach-next"]`))); err != nil {
		t.Fatal(err)
	}
	step = waitText(t, ctx, "sample-teach-title", step)
	if !strings.Contains(step, "Round 0") || !strings.Contains(text(t, ctx, "sample-teach-what"), "Round 0 draws from the whole row") {
		t.Errorf("step 2 is %q: %q", step, text(t, ctx, "sample-teach-what"))
	}
	if n := evalInt(t, ctx, `document.querySelectorAll('[data-testid="sample-teach-table"] tbody tr').length`); n != 1 {
		t.Errorf("the rounds table has %d rows at round 0", n)
	}
	if _, err := waitFor(ctx, `(echarts.getInstanceByDom(document.querySelector('[data-testid="chart-sample-teach"]')).getOption().series[0].markPoint || {data: []}).data.length > 0`, 5*time.Second); err != nil {
		t.Errorf("the candidate is not pinned on the round's chart: %v", err)
	}
	checkChart(t, ctx, "chart-sample-teach")
	screenshot(t, ctx, "sample-teach-rejection-round")
	for i := 3; i <= total; i++ {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
			t.Fatal(err)
		}
		step = waitText(t, ctx, "sample-teach-title", step)
	}
	if !strings.HasSuffix(step, "The token") {
		t.Errorf("the last step is %q", step)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, fmt.Sprintf("step=%d", total)) || !strings.Contains(u, "method=rejection") {
		t.Errorf("the step is not in the URL: %q", u)
	}
	if n := evalInt(t, ctx, `document.querySelectorAll('[data-testid="sample-teach-table"] tbody tr').length`); n != total-2 {
		t.Errorf("the rounds table has %d rows for %d steps", n, total)
	}
	if w := text(t, ctx, "sample-teach-what"); !strings.Contains(w, "The draw emits token") || !strings.Contains(w, "cpu.SampleRejection") {
		t.Errorf("the last step says %q", w)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "sample-teach-rejection")

	// 3. The Gumbel-max race of the same draw, without a reload.
	outcome := text(t, ctx, "sample-teach-outcome")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="sample-teach-method-gumbel"]`))); err != nil {
		t.Fatal(err)
	}
	if got := waitText(t, ctx, "sample-teach-outcome", outcome); !strings.Contains(got, "wins the race") {
		t.Errorf("the Gumbel lesson's outcome is %q", got)
	}
	for range 2 {
		step = text(t, ctx, "sample-teach-title")
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
			t.Fatal(err)
		}
		step = waitText(t, ctx, "sample-teach-title", step)
	}
	if !strings.HasSuffix(step, "The argmax of z + g") {
		t.Errorf("Gumbel's step 3 is %q", step)
	}
	if u := evalString(t, ctx, `location.search`); !strings.Contains(u, "method=gumbel") || !strings.Contains(u, "step=3") {
		t.Errorf("the Gumbel step is not in the URL: %q", u)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	checkChart(t, ctx, "chart-sample-teach")
	screenshot(t, ctx, "sample-teach-gumbel")

	// 4. The inverse CDF, the run's own method: it ends on our kernel's
	// stored token.
	outcome = text(t, ctx, "sample-teach-outcome")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="sample-teach-method-inverse_cdf"]`))); err != nil {
		t.Fatal(err)
	}
	if got := waitText(t, ctx, "sample-teach-outcome", outcome); !strings.Contains(got, "lands in token") {
		t.Errorf("the inverse CDF's outcome is %q", got)
	}
	if k := text(t, ctx, "sample-teach-kernel"); !strings.Contains(k, "the same token") {
		t.Errorf("the inverse CDF's draw 0 is not our kernel's: %q", k)
	}
	for range 2 {
		step = text(t, ctx, "sample-teach-title")
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
			t.Fatal(err)
		}
		step = waitText(t, ctx, "sample-teach-title", step)
	}
	if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	checkChart(t, ctx, "chart-sample-teach")
	screenshot(t, ctx, "sample-teach-inverse-cdf")

	// 5. The next draw: draw 1, still our kernel's (its sample 1).
	outcome = text(t, ctx, "sample-teach-outcome")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="sample-teach-next-draw"]`))); err != nil {
		t.Fatal(err)
	}
	if got := waitText(t, ctx, "sample-teach-outcome", outcome); !strings.HasPrefix(got, "Draw 1 with seed 42") {
		t.Errorf("the next draw says %q", got)
	}
	if k := text(t, ctx, "sample-teach-kernel"); !strings.Contains(k, "samples output, row 2, draw 1") || !strings.Contains(k, "the same token") {
		t.Errorf("draw 1 is not our kernel's sample 1: %q", k)
	}
	checkBudget(t, ctx, "sampviz:sample-teach-ready")
}
