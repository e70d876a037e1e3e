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
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
)

// The page stays light: a big run streams in at full speed (no slowRunner)
// while its page is open, and neither the page's main thread nor the run
// may suffer for it. SAMPVIZ_LIGHT_FULL=1 runs the shape of the issue, 512
// x 128256; the default is 512 x 32768, the same rows and stream at a
// quarter of the vocabulary, which `make test` can afford on two cores.
//
// The goals are no main-thread task over 100 ms and a run at most 1.2x as
// long with its page open. On the shared 2-core machine the judge fills
// both cores, so a task's wall time stretches with the load, and one run's
// time swings by more than 20% from the next: the test asserts the limits
// it meets reliably (docs/PERF.md, "The run page while rows stream"), and
// what the browser spends against what the server spends, which the load
// moves much less.
const (
	lightTaskMs      = 100 // goal
	lightTaskLimitMs = 300
	lightSlowdown    = 1.2 // goal
	// lightSlowdownLimit bounds the run's time with the page open over its
	// time without, over two runs of each: a bound for gross regressions
	// only, since a run's time on the shared machine swings by 2x.
	lightSlowdownLimit = 2.0
	// lightCPUShare bounds the browser's CPU (every chromium process) over
	// the server's (the judge's, mostly) while the page watches the run:
	// on two busy cores the run slows by about this much.
	lightCPUShare = 0.5
)

// longFrameObserver records, for every animation frame over 100 ms, what
// it spent on scripts (and which) and on style, layout and paint.
const longFrameObserver = `
window.__longframes = [];
try {
  new PerformanceObserver(function (list) {
    list.getEntries().forEach(function (e) {
      if (e.duration < 100) return;
      var s = (e.scripts || []).map(function (x) {
        return x.invoker + ' ' + Math.round(x.duration) + ' ms (' + (x.sourceURL || '').replace(/^.*\//, '') + ')';
      });
      window.__longframes.push(Math.round(e.startTime) + ': ' + Math.round(e.duration) + ' ms, render ' +
        (e.renderStart ? Math.round(e.startTime + e.duration - e.renderStart) : 0) + ' ms, style+layout ' +
        (e.styleAndLayoutStart ? Math.round(e.startTime + e.duration - e.styleAndLayoutStart) : 0) + ' ms; ' + s.join('; '));
    });
  }).observe({type: 'long-animation-frame', buffered: true});
} catch (e) { window.__longframes = ['no long-animation-frame: ' + e]; }
`

func lightShape() (rows, vocab int) {
	if os.Getenv("SAMPVIZ_LIGHT_FULL") == "1" {
		return 512, 128256
	}
	return 512, 32768
}

// writeSoftmaxDump writes what a user streams: bf16 logits with a
// temperature per row, and their kernel's bf16 probs (here the CPU
// backend's, rounded to bf16).
func writeSoftmaxDump(t *testing.T, rows, vocab int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	temp := make([]float64, rows)
	for r := range temp {
		temp[r] = 0.6 + 0.8*rng.Float64()
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("logits", engine.BF16, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temp),
	}
	meta := map[string]string{"op": "softmax", "source": "sampviz browser test (light)"}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	_, out := cpuRun(t, "light.safetensors", buf.Bytes())
	probs := make([]float32, rows*vocab)
	for i := range probs {
		probs[i] = float32(out.Probs.Float(i))
	}
	buf.Reset()
	if err := dump.WriteSafetensors(&buf, append(tensors, engine.FromFloat32s("probs", engine.BF16, []int{rows, vocab}, probs)), meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// loadAverage returns the first line of uptime, for the log beside each
// figure: the machine is shared.
func loadAverage() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "uptime: " + err.Error()
	}
	s := strings.TrimSpace(string(out))
	if i := strings.Index(s, "load average"); i >= 0 {
		return s[i:]
	}
	return s
}

// timeRun uploads body through the JSON API, calls opened with the run's
// page URL, and returns the time from the upload's answer until the API
// says the run is done.
func timeRun(t *testing.T, base string, body []byte, opened func(url string)) time.Duration {
	t.Helper()
	res, err := http.Post(base+"/api/runs?name=light.safetensors", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	err = json.NewDecoder(res.Body).Decode(&run)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %v", res.StatusCode, err)
	}
	t0 := time.Now()
	if opened != nil {
		u := run.URL
		if strings.HasPrefix(u, "/") {
			u = base + u
		}
		opened(u)
	}
	for time.Since(t0) < 3*time.Minute {
		res, err := http.Get(base + "/api/runs/" + run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			State string `json:"state"`
		}
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch st.State {
		case "done":
			return time.Since(t0)
		case "failed", "cancelled":
			t.Fatalf("run %s %s", run.ID, st.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s not done within 3 minutes", run.ID)
	return 0
}

func TestBrowserPageStaysLight(t *testing.T) {
	browser := findBrowser(t)
	rows, vocab := lightShape()
	body := writeSoftmaxDump(t, rows, vocab)

	srv, err := web.New(web.Config{
		DataDir: t.TempDir(),
		Runner:  session.New(cpu.New()),
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
	// A blank page first, so that the browser's start is not timed.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}

	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: longFrameObserver})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	browserPID := 0
	if b := chromedp.FromContext(ctx).Browser; b != nil && b.Process() != nil {
		browserPID = b.Process().Pid
	}
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, performance.Enable, performance.EnableParams{})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	metrics := func() map[string]float64 {
		m := map[string]float64{}
		var res performance.GetMetricsResult
		err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			res, err = cdp.Call(ctx, tg, performance.GetMetrics, cdp.Empty{})
			return err
		}))
		if err != nil {
			t.Logf("performance metrics: %v", err)
			return m
		}
		for _, x := range res.Metrics {
			m[x.Name] = x.Value
		}
		return m
	}
	// cost runs f and logs what it cost: the run's time, this process's
	// CPU (server and judge) and the browser's.
	type costs struct{ wall, server, browser time.Duration }
	cost := func(what string, f func() time.Duration) costs {
		self, br := selfCPU(), treeCPU(browserPID)
		c := costs{wall: f()}
		c.server, c.browser = selfCPU()-self, treeCPU(browserPID)-br
		t.Logf("%d x %d, %s: %.2f s, server CPU %.2f s, browser CPU %.2f s (%s)", rows, vocab, what, c.wall.Seconds(),
			c.server.Seconds(), c.browser.Seconds(), loadAverage())
		return c
	}

	// Warm up: the first run pays for page faults and the Go heap's growth.
	cost("warm-up, no page open", func() time.Duration { return timeRun(t, ts.URL, body, nil) })
	// What the stream alone costs the server: a websocket reader that reads
	// and drops every message.
	cost("a websocket reader, no page", func() time.Duration {
		return timeRun(t, ts.URL, body, func(url string) { go drainSocket(t, ts.URL, url) })
	})

	// Back to back, alternating, so that the machine's other load falls on
	// both alike: no page, page, no page, page.
	var bare, watched costs
	var worst float64
	var over int
	for i := 0; i < 2; i++ {
		c := cost("no page open", func() time.Duration { return timeRun(t, ts.URL, body, nil) })
		bare.wall += c.wall

		c = cost("page open", func() time.Duration {
			return timeRun(t, ts.URL, body, func(url string) {
				if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
					t.Fatal(err)
				}
			})
		})
		watched.wall += c.wall
		watched.server += c.server
		watched.browser += c.browser
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(function () {
			var v = document.getElementById('verdict');
			return v.classList.contains('pass') || v.classList.contains('fail');
		})()`, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
			t.Fatalf("the page did not show the verdict: %v", err)
		}
		// Let the last table and chart frames run.
		if err := chromedp.Do(ctx, chromedp.Sleep(800*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if n := evalInt(t, ctx, `document.querySelectorAll('#rows-body tr').length`); n != rows {
			t.Errorf("%d rows in the table, want %d", n, rows)
		}

		// The renderer's counters, for this page's whole life.
		m := metrics()
		var parts []string
		for _, k := range []string{"TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "LayoutCount", "RecalcStyleCount"} {
			parts = append(parts, fmt.Sprintf("%s %.3g", k, m[k]))
		}
		t.Logf("the page's main thread: %s", strings.Join(parts, ", "))
		logSteps(t, ctx)
		frames, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__longframes || []`))
		if err == nil {
			for _, f := range frames {
				t.Logf("long frame: %s", f)
			}
		}

		// The tasks from the moment the websocket opened; loading the page
		// and its scripts comes before, and is logged apart.
		open, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(performance.getEntriesByName('sampviz:stream-open')[0] || {startTime: 0}).startTime`))
		if err != nil || open == 0 {
			t.Fatalf("the page never opened its websocket: %v", err)
		}
		tasks, err := chromedp.Run(ctx, chromedp.Evaluate[[][2]float64](`window.__longtasks || []`))
		if err != nil {
			t.Fatal(err)
		}
		n, longest, load := 0, 0.0, 0.0
		var all []float64
		for _, task := range tasks {
			if task[0] < open {
				load = math.Max(load, task[1])
				continue
			}
			all = append(all, math.Round(task[1]))
			longest = math.Max(longest, task[1])
			if task[1] > lightTaskMs {
				n++
			}
		}
		worst = math.Max(worst, longest)
		over += n
		t.Logf("%d x %d, page open: %d main-thread tasks over %d ms while rows streamed, longest %.0f ms, all over 50 ms: %v; loading the page: longest %.0f ms (%s)",
			rows, vocab, n, lightTaskMs, longest, all, load, loadAverage())
	}
	ratio := watched.wall.Seconds() / bare.wall.Seconds()
	share := watched.browser.Seconds() / watched.server.Seconds()
	t.Logf("%d x %d: with the page open the run took %.2fx as long (%.2f s against %.2f s over two runs each), the browser used %.2f s of CPU to the server's %.2f s (%.2f); %d tasks over %d ms, longest %.0f ms (%s)",
		rows, vocab, ratio, watched.wall.Seconds(), bare.wall.Seconds(), watched.browser.Seconds(), watched.server.Seconds(), share,
		over, lightTaskMs, worst, loadAverage())
	if worst > lightTaskLimitMs {
		t.Errorf("a main-thread task ran %.0f ms while rows streamed (limit %d ms, goal %d ms)", worst, lightTaskLimitMs, lightTaskMs)
	}
	if ratio > lightSlowdownLimit {
		t.Errorf("the run took %.2fx as long with its page open (limit %.1fx, goal %.1fx)", ratio, lightSlowdownLimit, lightSlowdown)
	}
	if share > lightCPUShare {
		t.Errorf("the page used %.2f s of CPU while the server used %.2f s (%.2f of it, limit %.2f)", watched.browser.Seconds(), watched.server.Seconds(), share, lightCPUShare)
	}
}

// drainSocket reads the websocket of the run page at pageURL until it
// closes, dropping every message.
func drainSocket(t *testing.T, base, pageURL string) {
	u := "ws" + strings.TrimPrefix(base, "http") + strings.TrimPrefix(pageURL, base) + "/ws"
	h := http.Header{"Origin": {base}}
	conn, _, err := websocket.DefaultDialer.Dial(u, h)
	if err != nil {
		t.Errorf("websocket %s: %v", u, err)
		return
	}
	defer conn.Close()
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
	}
}
