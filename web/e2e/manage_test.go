package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
)

// TestBrowserCancelDeleteJudgeAndForeignPages drives, as a person does, the
// run page's Cancel, Delete and "Judge again" buttons, and visits a page of
// another site that tries to upload to the server, to delete a run and to
// read its list: the server must do nothing for that page.
func TestBrowserCancelDeleteJudgeAndForeignPages(t *testing.T) {
	browser := findBrowser(t)
	ts := serve(t, web.Config{
		Runner: slowRunner{session.New(cpu.New()), 20 * time.Millisecond},
	})
	ctx, stop := startBrowser(t, browser)
	defer stop()

	var lastDump string // the dump upload sent last
	upload := func(rows int) string {
		t.Helper()
		lastDump = writeDump(t, rows, 512, []int{rand.IntN(rows)})
		body, err := os.Open(lastDump)
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		res, err := http.Post(ts.URL+"/api/runs?name=manage.safetensors", "application/octet-stream", body)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var run struct{ ID, Error string }
		if err := json.NewDecoder(res.Body).Decode(&run); err != nil || res.StatusCode != http.StatusCreated {
			t.Fatalf("upload: %s %v %s", res.Status, err, run.Error)
		}
		return run.ID
	}
	state := func(id string) string {
		t.Helper()
		res, err := http.Get(ts.URL + "/api/runs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode == http.StatusNotFound {
			return "gone"
		}
		var run struct{ State string }
		json.NewDecoder(res.Body).Decode(&run)
		return run.State
	}

	// 1. Cancel a run while its rows stream in: it stops within a second
	// and the page says so.
	long := upload(400) // 400 rows at 20 ms: 8 s
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+long)); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `document.querySelectorAll('#rows-body tr').length > 0`, 20*time.Second); err != nil {
		t.Fatalf("no rows streamed before the cancel: %v", err)
	}
	clicked := time.Now()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="cancel"]`))); err != nil {
		t.Fatal(err)
	}
	for state(long) != "cancelled" {
		if time.Since(clicked) > time.Second {
			t.Fatalf("the run is still %s a second after Cancel", state(long))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := waitFor(ctx, `document.getElementById('verdict-sentence').textContent.indexOf('cancelled') >= 0`, 10*time.Second); err != nil {
		t.Errorf("the page does not say the run was cancelled: %q", evalString(t, ctx, `document.getElementById('verdict-sentence').textContent`))
	}
	if n := evalInt(t, ctx, `document.querySelectorAll('[data-testid="cancel"]').length`); n != 0 {
		t.Error("a cancelled run still offers Cancel")
	}
	screenshot(t, ctx, "run-cancelled")

	// 2. Judge a finished run again with tighter tolerances, from its form.
	short := upload(6)
	// A row whose filters keep one token has probability exactly 1 there
	// and 0 elsewhere in f32 and in float64: no tolerance fails it. Every
	// other row differs from the reference somewhere.
	wantFail := rowsDiffering(t, lastDump)
	for state(short) != "done" {
		time.Sleep(20 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+short)); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `document.getElementById('verdict').classList.contains('fail')`, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	before := evalString(t, ctx, `document.getElementById('verdict-sentence').textContent`)
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#rejudge-form input[name="satol"]`), "1e-15"),
		chromedp.SetValue(chromedp.CSS(`#rejudge-form input[name="natol"]`), "1e-15"),
		chromedp.SetValue(chromedp.CSS(`#rejudge-form input[name="srtol"]`), "0"),
		chromedp.SetValue(chromedp.CSS(`#rejudge-form input[name="nrtol"]`), "0"),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#rejudge-form button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
	if q := evalString(t, ctx, `location.search`); !strings.Contains(q, "satol=1e-15") {
		t.Errorf("judging again opened %q, want the run with its tolerances in the URL", q)
	}
	if _, err := waitFor(ctx, fmt.Sprintf(`(function () {
		var s = document.getElementById('verdict-sentence').textContent;
		return /fails %d of 6 rows/.test(s) && s;
	})()`, wantFail), 20*time.Second); err != nil {
		t.Errorf("judged again with atol 1e-15: %q (before: %q), want %d of 6 rows failing (every row that keeps more than one token, and the planted one)", evalString(t, ctx, `document.getElementById('verdict-sentence').textContent`), before, wantFail)
	}
	screenshot(t, ctx, "run-judged-again")

	// 3. Delete it: the home page opens and the run and its files are gone.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/runs/"+short)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`[data-testid="delete"]`))); err != nil {
		t.Fatal(err)
	}
	if p := evalString(t, ctx, `location.pathname`); p != "/" {
		t.Errorf("Delete opened %s, want the home page", p)
	}
	if s := state(short); s != "gone" {
		t.Errorf("the deleted run answers %s", s)
	}
	if strings.Contains(evalString(t, ctx, `document.body.textContent`), short) {
		t.Error("the home page still lists the deleted run")
	}
	screenshot(t, ctx, "home-after-delete")

	// 4. A page of another site tries: a form post of a dump, a text/plain
	// fetch (no preflight), a DELETE, and a cross-origin read. The server
	// must change nothing and the page must read nothing.
	runsBefore := listRuns(t, ts.URL)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>evil</title>
<form id="f" method="post" action="%[1]s/runs" enctype="multipart/form-data"><input type="hidden" name="file" value="x"></form>
<script>
window.tries = {};
fetch('%[1]s/api/runs?name=bomb.npz', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: 'PK\u0003\u0004 not really'})
  .then(function () { window.tries.post = 'sent'; }, function (e) { window.tries.post = 'error ' + e; });
fetch('%[1]s/api/runs/%[2]s', {method: 'DELETE'}).then(function (r) { window.tries.del = 'read ' + r.status; }, function (e) { window.tries.del = 'blocked'; });
fetch('%[1]s/api/runs').then(function (r) { return r.text(); }).then(function (t) { window.tries.read = t; }, function (e) { window.tries.read = 'blocked'; });
</script>`, ts.URL, long)
	}))
	defer evil.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, `window.tries && window.tries.post && window.tries.del && window.tries.read && true`, 20*time.Second); err != nil {
		t.Fatalf("the foreign page's requests did not settle: %v", err)
	}
	if got := evalString(t, ctx, `window.tries.read`); got != "blocked" {
		t.Errorf("a foreign page read the run list: %.80q", got)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Submit(chromedp.CSS(`#f`))); err != nil {
		t.Fatal(err)
	}
	if body := evalString(t, ctx, `document.body.textContent`); !strings.Contains(body, "takes changes only from its own pages") {
		t.Errorf("the foreign form's post got %.200q, want the 403 sentence", body)
	}
	if after := listRuns(t, ts.URL); after != runsBefore {
		t.Errorf("a foreign page changed the runs: %d before, %d after", runsBefore, after)
	}
	if s := state(long); s != "cancelled" {
		t.Errorf("after the foreign page's DELETE the run is %s, want it kept (cancelled)", s)
	}
	screenshot(t, ctx, "foreign-page-refused")

	// 5. The same server under a rebinding name: nothing is served.
	u, _ := url.Parse(ts.URL)
	req, _ := http.NewRequest("GET", ts.URL+"/api/runs", nil)
	req.Host = "rebind.example:" + u.Port()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a rebinding Host got %s, want 403", res.Status)
	}
}

// listRuns returns how many runs the server lists.
func listRuns(t *testing.T, base string) int {
	t.Helper()
	res, err := http.Get(base + "/api/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var l struct{ Runs []json.RawMessage }
	if err := json.NewDecoder(res.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return len(l.Runs)
}

// rowsDiffering counts the rows of a writeDump file whose probs output
// cannot equal the float64 reference to 1e-15: the planted row, and every
// row whose filters keep more than one token (engine/cpu's f32
// probabilities are then rounded); a row that keeps one token is exact.
func rowsDiffering(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, out := cpuRun(t, filepath.Base(path), data)
	rows, vocab := out.Probs.Shape[0], out.Probs.Shape[1]
	if err := f.Load("probs"); err != nil {
		t.Fatal(err)
	}
	given := f.Tensor("probs")
	n := 0
	for r := 0; r < rows; r++ {
		kept, planted := 0, false
		for i := r * vocab; i < (r+1)*vocab; i++ {
			if out.Probs.Float(i) != 0 {
				kept++
			}
			if given.Float(i) != out.Probs.Float(i) {
				planted = true
			}
		}
		if kept > 1 || planted {
			n++
		}
	}
	return n
}
