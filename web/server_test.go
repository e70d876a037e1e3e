package web_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/net/html"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/webtest"
)

var _ web.Runner = (*webtest.Runner)(nil)

// env is a server on a data directory with the fake pipeline.
type env struct {
	t    *testing.T
	dir  string
	srv  *web.Server
	ts   *httptest.Server
	pipe *webtest.Pipeline
	fake *webtest.Runner
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv starts a server; tweak may change the config and the fake.
func newEnv(t *testing.T, tweak func(*web.Config, *webtest.Pipeline)) *env {
	t.Helper()
	fake, pipe := webtest.NewPipeline()
	e := &env{t: t, dir: t.TempDir(), pipe: pipe, fake: fake}
	cfg := web.Config{DataDir: e.dir, Runner: fake, Log: quietLog()}
	if tweak != nil {
		tweak(&cfg, pipe)
	}
	e.start(cfg)
	return e
}

func (e *env) start(cfg web.Config) {
	e.t.Helper()
	srv, err := web.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewServer(srv.Handler())
	e.t.Cleanup(e.stop)
}

// stop closes the server (idempotent).
func (e *env) stop() {
	if e.srv == nil {
		return
	}
	e.srv.Close()
	e.ts.Close()
	e.srv = nil
}

// randomDump returns a fake dump with fresh random failing rows.
func randomDump(rows, vocab int) webtest.Dump {
	d := webtest.Dump{Rows: rows, Vocab: vocab}
	for r := 0; r < rows; r++ {
		if rand.IntN(5) == 0 {
			d.Fail = append(d.Fail, r)
		}
	}
	if len(d.Fail) == 0 {
		d.Fail = []int{rand.IntN(rows)}
	}
	return d
}

func multipartBody(t *testing.T, field, name string, content []byte) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if field != "" {
		fw, err := mw.CreateFormFile(field, name)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(content)
	} else {
		mw.WriteField("note", "no file here")
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

// runJSON is what the tests read of GET /api/runs/{id}.
type runJSON struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	FileName string `json:"file_name"`
	State    string `json:"state"`
	Message  string `json:"message"`
	Parent   string `json:"parent"`
	Backend  string `json:"backend"`
	Params   struct {
		Temperature *float64 `json:"temperature"`
	} `json:"params"`
	Verdict *struct {
		Pass       bool `json:"pass"`
		FailedRows int  `json:"failed_rows"`
		Rows       int  `json:"rows"`
	} `json:"verdict"`
	Tolerances *engine.Tolerances `json:"tolerances"`
	ReportJSON string             `json:"report_json"`
}

func (e *env) do(method, path string, body io.Reader, header ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func readAll(t *testing.T, res *http.Response) []byte {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode[T any](t *testing.T, res *http.Response) T {
	t.Helper()
	var v T
	b := readAll(t, res)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// uploadRaw PUTs a dump the way `curl -T` does and returns the new run.
func (e *env) uploadRaw(content []byte) runJSON {
	e.t.Helper()
	res := e.do("PUT", "/api/runs", bytes.NewReader(content))
	if res.StatusCode != http.StatusCreated {
		e.t.Fatalf("PUT /api/runs: %s: %s", res.Status, readAll(e.t, res))
	}
	return decode[runJSON](e.t, res)
}

// wait polls a run until its judgement is finished.
func (e *env) wait(id string, query string) runJSON {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res := e.do("GET", "/api/runs/"+id+query, nil)
		if res.StatusCode != http.StatusOK {
			e.t.Fatalf("GET run %s: %s: %s", id, res.Status, readAll(e.t, res))
		}
		r := decode[runJSON](e.t, res)
		if r.State == "done" || r.State == "failed" {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s still %s after 20s", id, r.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshot lists the data directory's stored files (dumps, runs, index
// excluded) so a test can check that nothing was touched.
func snapshot(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.HasPrefix(filepath.Base(p), "index.sqlite") {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = info.Size()
		return nil
	})
	return files
}

// byTestID returns the text of the first element with data-testid=id, and
// whether there is one.
func byTestID(t *testing.T, page []byte, id string) (string, bool) {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var found *html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if found != nil {
			return
		}
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "data-testid" && a.Val == id {
					found = n
					return
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if found == nil {
		return "", false
	}
	var sb strings.Builder
	var text func(*html.Node)
	text = func(n *html.Node) {
		if n.Type == html.TextNode {
			sb.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			text(c)
		}
	}
	text(found)
	return strings.Join(strings.Fields(sb.String()), " "), true
}

func TestUploadKinds(t *testing.T) {
	e := newEnv(t, nil)
	dump := randomDump(6+rand.IntN(10), 64+rand.IntN(64))
	content := dump.Bytes()
	tests := []struct {
		name     string
		request  func() *http.Response
		wantName string
	}{
		{"multipart from the page's script", func() *http.Response {
			body, ct := multipartBody(t, "dump", "logits.safetensors", content)
			return e.do("POST", "/api/runs", body, "Content-Type", ct)
		}, "logits.safetensors"},
		{"raw POST body with a name", func() *http.Response {
			return e.do("POST", "/api/runs?name=raw.safetensors", bytes.NewReader(content), "Content-Type", "application/octet-stream")
		}, "raw.safetensors"},
		{"curl -T to /api/runs", func() *http.Response {
			return e.do("PUT", "/api/runs", bytes.NewReader(content))
		}, "upload.safetensors"},
		{"curl -T to /api/runs/", func() *http.Response {
			return e.do("PUT", "/api/runs/mine.safetensors", bytes.NewReader(content))
		}, "mine.safetensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.request()
			if res.StatusCode != http.StatusCreated {
				t.Fatalf("status %s: %s", res.Status, readAll(t, res))
			}
			loc := res.Header.Get("Location")
			r := decode[runJSON](t, res)
			if loc != "/runs/"+r.ID || r.URL != loc {
				t.Errorf("Location %q, url %q; want /runs/%s", loc, r.URL, r.ID)
			}
			if r.FileName != tt.wantName {
				t.Errorf("file name %q, want %q", r.FileName, tt.wantName)
			}
			done := e.wait(r.ID, "")
			if done.State != "done" || done.Verdict == nil || done.Verdict.Pass || done.Verdict.FailedRows != len(dump.Fail) || done.Verdict.Rows != dump.Rows {
				t.Errorf("finished run = %+v, want done with %d of %d rows failing", done, len(dump.Fail), dump.Rows)
			}
			page := readAll(t, e.do("GET", r.URL, nil))
			if v, ok := byTestID(t, page, "verdict"); !ok || !strings.Contains(v, "FAIL") {
				t.Errorf("run page verdict = %q, want a FAIL sentence", v)
			}
		})
	}
	// The page's own form (no script) redirects to the new run.
	body, ct := multipartBody(t, "dump", "form.safetensors", content)
	res := e.do("POST", "/runs", body, "Content-Type", ct)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/runs/") {
		t.Fatalf("form upload: %s to %q, want 303 to the run", res.Status, res.Header.Get("Location"))
	}
	res.Body.Close()
	// Identical uploads share one stored dump.
	dumps, _ := os.ReadDir(filepath.Join(e.dir, "dumps"))
	if len(dumps) != 1 {
		t.Errorf("%d stored dumps for one content, want 1", len(dumps))
	}
}

func TestBadUploads(t *testing.T) {
	const limit = 4096
	e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) { c.MaxUpload = limit })
	good := randomDump(4, 32)
	first := e.uploadRaw(good.Bytes())
	e.wait(first.ID, "")
	before := snapshot(t, e.dir)
	whole := randomDump(5, 40).Bytes()
	tests := []struct {
		name     string
		file     string
		content  []byte
		noFile   bool
		status   int
		sentence string // a part of the one sentence the page shows
	}{
		{"not a dump", "notes.txt", []byte("these are my notes, not logits " + fmt.Sprint(rand.Int())), false, 400, "notes.txt: the first 8 bytes"},
		{"a dump's name, without logits", "x.safetensors", webtest.Dump{Rows: 2, Vocab: 2}.Bytes()[1:], false, 400, "x.safetensors: the first 8 bytes"},
		{"truncated", "cut.safetensors", whole[:len(whole)/2], false, 400, "cut.safetensors: truncated"},
		{"over the size limit", "huge.safetensors", webtest.Dump{Rows: 2, Vocab: 2, Pad: strings.Repeat("x", 2*limit)}.Bytes(), false, 413, "larger than this server's upload limit of 4 KiB"},
		{"inconsistent shapes", "shape.safetensors", webtest.Dump{Rows: 3, Vocab: 0}.Bytes(), false, 400, "tensor logits: shape [3, 0]"},
		{"empty", "empty.safetensors", nil, false, 400, "empty.safetensors: the file is empty (0 bytes), not a dump"},
		{"form without a file", "", nil, true, 400, "The form carried no file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			field := "dump"
			if tt.noFile {
				field = ""
			}
			// The page's form: the home page again, with the sentence.
			body, ct := multipartBody(t, field, tt.file, tt.content)
			res := e.do("POST", "/runs", body, "Content-Type", ct)
			page := readAll(t, res)
			if res.StatusCode != tt.status {
				t.Errorf("form: status %d, want %d", res.StatusCode, tt.status)
			}
			msg, ok := byTestID(t, page, "upload-error")
			if !ok || !strings.Contains(msg, tt.sentence) {
				t.Errorf("form: upload-error = %q, want it to contain %q", msg, tt.sentence)
			}
			if strings.Count(strings.TrimSuffix(msg, "."), ". ") > 0 {
				t.Errorf("form: %q is more than one sentence", msg)
			}
			// The API: the same sentence as JSON.
			body, ct = multipartBody(t, field, tt.file, tt.content)
			res = e.do("POST", "/api/runs", body, "Content-Type", ct)
			got := decode[map[string]string](t, res)
			if res.StatusCode != tt.status || !strings.Contains(got["error"], tt.sentence) {
				t.Errorf("api: %d %q, want %d and %q", res.StatusCode, got["error"], tt.status, tt.sentence)
			}
		})
	}
	if after := snapshot(t, e.dir); !equalFiles(before, after) {
		t.Errorf("bad uploads touched the data directory:\nbefore %v\nafter  %v", before, after)
	}
	// The server keeps serving, and the first run is still there.
	if res := e.do("GET", "/api/runs/"+first.ID, nil); res.StatusCode != http.StatusOK {
		t.Errorf("after bad uploads, GET the first run: %s", res.Status)
	}
	again := e.uploadRaw(randomDump(3, 16).Bytes())
	if r := e.wait(again.ID, ""); r.State != "done" {
		t.Errorf("a good upload after bad ones ended %s", r.State)
	}
}

func equalFiles(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestQueueFullAnswers429(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) {
		c.Queue = 2
		p.Gate = gate
	})
	// One run is taken by the executor (and held at the gate); two wait.
	var ids []string
	ids = append(ids, e.uploadRaw(randomDump(2, 8).Bytes()).ID)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := decode[runJSON](t, e.do("GET", "/api/runs/"+ids[0], nil))
		if r.State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("first run never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ids = append(ids, e.uploadRaw(randomDump(2, 8).Bytes()).ID, e.uploadRaw(randomDump(2, 8).Bytes()).ID)
	before := snapshot(t, e.dir)
	res := e.do("PUT", "/api/runs", bytes.NewReader(randomDump(2, 8).Bytes()))
	got := decode[map[string]string](t, res)
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth upload: %s, want 429", res.Status)
	}
	if ra := res.Header.Get("Retry-After"); ra == "" {
		t.Error("429 without Retry-After")
	}
	if !strings.Contains(got["error"], "busy") {
		t.Errorf("429 says %q", got["error"])
	}
	if after := snapshot(t, e.dir); !equalFiles(before, after) {
		t.Errorf("a refused upload stored files: %v -> %v", before, after)
	}
	page := readAll(t, e.do("GET", "/runs/"+ids[2], nil))
	if v, _ := byTestID(t, page, "verdict"); !strings.Contains(v, "ahead") {
		t.Errorf("third run's verdict line = %q, want its place in the queue", v)
	}
	close(gate)
	for _, id := range ids {
		if r := e.wait(id, ""); r.State != "done" {
			t.Errorf("run %s ended %s (%s)", id, r.State, r.Message)
		}
	}
}

func TestRestartKeepsRuns(t *testing.T) {
	e := newEnv(t, nil)
	dump := randomDump(8, 50)
	r := e.uploadRaw(dump.Bytes())
	done := e.wait(r.ID, "")
	report := readAll(t, e.do("GET", done.ReportJSON, nil))
	cfg := web.Config{DataDir: e.dir, Runner: e.fake, Log: quietLog()}
	e.stop()
	e.start(cfg)

	again := decode[runJSON](t, e.do("GET", "/api/runs/"+r.ID, nil))
	if again.State != "done" || again.Verdict == nil || again.Verdict.FailedRows != len(dump.Fail) {
		t.Fatalf("after restart: %+v", again)
	}
	if got := readAll(t, e.do("GET", done.ReportJSON, nil)); !bytes.Equal(got, report) {
		t.Error("report.json changed across the restart")
	}
	page := readAll(t, e.do("GET", "/", nil))
	if v, _ := byTestID(t, page, "recent-runs"); !strings.Contains(v, "upload.safetensors") {
		t.Errorf("recent runs after restart = %q", v)
	}
	st := watch(t, e, r.ID, "")
	if !st.final || len(st.rows) != 2*dump.Rows || st.summary == nil {
		t.Errorf("websocket after restart: final %v, %d rows, summary %v", st.final, len(st.rows), st.summary != nil)
	}
}

// Runs that were running or queued when the server stopped are queued
// again when it starts, and finish.
func TestInterruptedRunsRunAgainOnRestart(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(_ *web.Config, p *webtest.Pipeline) { p.Gate = gate })
	held := e.uploadRaw(randomDump(3, 8).Bytes())
	for decode[runJSON](t, e.do("GET", "/api/runs/"+held.ID, nil)).State != "running" {
		time.Sleep(10 * time.Millisecond)
	}
	var waiting []string
	for range 3 {
		waiting = append(waiting, e.uploadRaw(randomDump(2+rand.IntN(4), 8).Bytes()).ID)
	}
	cfg := web.Config{DataDir: e.dir, Runner: e.fake, Log: quietLog()}
	e.stop() // cancels the held run
	e.pipe.Gate = nil
	e.start(cfg)
	for _, id := range append([]string{held.ID}, waiting...) {
		if got := e.wait(id, ""); got.State != "done" {
			t.Errorf("run %s after restart: %s %q, want done", id, got.State, got.Message)
		}
	}
}

// watched is what one websocket client saw.
type watched struct {
	rows     map[[2]int]bool
	charts   int
	final    bool
	summary  map[string]any
	messages int
}

type message struct {
	Rows []struct {
		O int `json:"o"`
		R int `json:"r"`
	} `json:"rows"`
	Summary map[string]any `json:"summary"`
	Final   bool           `json:"final"`
}

func wsURL(e *env, id, query string) string {
	return "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/runs/" + id + "/ws" + query
}

// watch reads a run's websocket to its end.
func watch(t *testing.T, e *env, id, query string) watched {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(wsURL(e, id, query), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w, err := readStream(conn)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func readStream(conn *websocket.Conn) (watched, error) {
	w := watched{rows: map[[2]int]bool{}}
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			if w.final && websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				return w, nil
			}
			return w, fmt.Errorf("after %d messages (final %v): %w", w.messages, w.final, err)
		}
		w.messages++
		// The server writes the chart options last; 50 readers decoding
		// them under -race would be the slowest part of the test, so they
		// are counted, not decoded (TestEncodeUpdate checks their JSON).
		if i := bytes.Index(b, []byte(`,"charts":`)); i >= 0 {
			w.charts++
			b = append(b[:i:i], '}')
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			return w, err
		}
		for _, r := range m.Rows {
			w.rows[[2]int{r.O, r.R}] = true
		}
		if m.Final {
			w.final, w.summary = true, m.Summary
		}
	}
}

func TestFiftyClientsGetTheFinalState(t *testing.T) {
	// 256 rows over about 1.3 s; clients join during the first 0.8 s. (The
	// browser test streams 512 rows; here the 50 readers decoding every
	// message under -race are the cost.)
	e := newEnv(t, func(_ *web.Config, p *webtest.Pipeline) { p.RowDelay = 5 * time.Millisecond })
	dump := randomDump(256, 64)
	r := e.uploadRaw(dump.Bytes())
	const clients = 50
	var wg sync.WaitGroup
	results := make([]watched, clients)
	errs := make([]error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Clients arrive while the run streams.
			time.Sleep(time.Duration(rand.IntN(800)) * time.Millisecond)
			conn, _, err := websocket.DefaultDialer.Dial(wsURL(e, r.ID, ""), nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close()
			results[i], errs[i] = readStream(conn)
		}(i)
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Errorf("client %d: %v", i, errs[i])
			continue
		}
		w := results[i]
		if !w.final || w.summary == nil || len(w.rows) != 2*dump.Rows || w.charts == 0 {
			t.Errorf("client %d: final %v, summary %v, %d of %d rows, %d chart updates", i, w.final, w.summary != nil, len(w.rows), 2*dump.Rows, w.charts)
		}
		if w.summary != nil && w.summary["pass"] != false {
			t.Errorf("client %d: summary pass = %v, want false", i, w.summary["pass"])
		}
	}
}

func TestStuckClientNeitherSlowsRunNorLeaks(t *testing.T) {
	e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) {
		c.Socket = web.SocketTimings{WriteWait: 300 * time.Millisecond, PongWait: 600 * time.Millisecond}
		p.RowDelay = time.Millisecond
	})
	// Warm up, so the goroutine baseline includes what the server keeps.
	warm := e.uploadRaw(randomDump(4, 8).Bytes())
	e.wait(warm.ID, "")
	watch(t, e, warm.ID, "")
	time.Sleep(100 * time.Millisecond)
	baseline := runtime.NumGoroutine()

	// The same big run twice (chart and row messages of about a megabyte in
	// all): once alone, once with a client that connects and never reads a
	// byte through a 4 KiB receive buffer.
	dump := randomDump(1024, 256)
	timed := func(stuck bool) (time.Duration, string) {
		r := e.uploadRaw(dump.Bytes())
		if stuck {
			d := &websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetReadBuffer(4096)
				}
				return c, err
			}}
			raw, _, err := d.Dial(wsURL(e, r.ID, ""), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { raw.Close() })
		}
		start := time.Now()
		done := e.wait(r.ID, "")
		if done.State != "done" {
			t.Fatalf("run ended %s: %s", done.State, done.Message)
		}
		return time.Since(start), r.ID
	}
	alone, _ := timed(false)
	withStuck, id := timed(true)
	t.Logf("run alone %v, with a stuck client %v", alone, withStuck)
	// A run that waited for the stuck client would wait writeWait per
	// message it could not deliver.
	if withStuck > 2*alone+time.Second {
		t.Errorf("run took %v with a stuck client, %v alone", withStuck, alone)
	}
	// A reading client still gets everything.
	if w := watch(t, e, id, ""); !w.final || len(w.rows) != 2*dump.Rows {
		t.Errorf("reading client: final %v, %d rows", w.final, len(w.rows))
	}
	// The stuck connection is dropped (write deadline or missing pongs) and
	// its goroutines end.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines, baseline %d:\n%s", runtime.NumGoroutine(), baseline, buf[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestKernelFaultFailsOnlyThatRun(t *testing.T) {
	e := newEnv(t, nil)
	msg := fmt.Sprintf("cuda: illegal memory access in softmax_kernel (launch %d)", rand.IntN(1000))
	r := e.uploadRaw(webtest.Dump{Rows: 4, Vocab: 8, Fault: msg}.Bytes())
	got := e.wait(r.ID, "")
	if got.State != "failed" || got.Message != msg {
		t.Errorf("faulted run: %s %q, want failed %q", got.State, got.Message, msg)
	}
	page := readAll(t, e.do("GET", "/runs/"+r.ID, nil))
	if v, _ := byTestID(t, page, "verdict"); !strings.Contains(v, msg) {
		t.Errorf("run page verdict = %q, want the kernel's message", v)
	}
	st := watch(t, e, r.ID, "")
	if !st.final {
		t.Error("websocket of a failed run never sent a final message")
	}
	next := e.uploadRaw(randomDump(3, 8).Bytes())
	if got := e.wait(next.ID, ""); got.State != "done" {
		t.Errorf("the run after a fault ended %s", got.State)
	}
}

func TestRejudgeWithToleranceInURL(t *testing.T) {
	e := newEnv(t, nil)
	dump := randomDump(10, 32)
	r := e.uploadRaw(dump.Bytes())
	e.wait(r.ID, "")
	tests := []struct {
		name        string
		query       url.Values
		status      int
		wantFailing int // -1: don't check
	}{
		{"looser tolerances pass everything", url.Values{"satol": {"0.1"}, "srtol": {"0"}, "natol": {"0.1"}, "nrtol": {"0"}, "pvalue": {"0.001"}}, 200, 0},
		{"tighter tolerances fail everything", url.Values{"satol": {"1e-12"}, "srtol": {"0"}, "natol": {"1e-12"}, "nrtol": {"0"}, "pvalue": {"0.001"}}, 200, dump.Rows},
		{"the run's own tolerances are its own judgement", toleranceQuery(webtest.DefaultTolerances), 200, len(dump.Fail)},
		{"some but not all", url.Values{"satol": {"0.1"}}, 400, -1},
		{"not a number", url.Values{"satol": {"x"}, "srtol": {"0"}, "natol": {"0"}, "nrtol": {"0"}, "pvalue": {"0.1"}}, 400, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := "?" + tt.query.Encode()
			own := tt.wantFailing == len(dump.Fail)
			if !own && tt.status == 200 {
				// A GET of tolerances not judged yet asks for the POST and starts nothing.
				before := e.pipe.Rejudged()
				prompt := readAll(t, e.do("GET", "/runs/"+r.ID+q, nil))
				if v, ok := byTestID(t, prompt, "judge-prompt"); !ok || !strings.Contains(v, "has not been judged") {
					t.Errorf("GET of new tolerances: no prompt to judge, got %q", v)
				}
				if res := e.do("GET", "/api/runs/"+r.ID+q, nil); res.StatusCode != 404 {
					t.Errorf("API GET of new tolerances: status %d, want 404", res.StatusCode)
				}
				time.Sleep(20 * time.Millisecond)
				if e.pipe.Rejudged() != before {
					t.Error("a GET judged again")
				}
			}
			res := e.do("POST", "/runs/"+r.ID+"/judgements", strings.NewReader(tt.query.Encode()), "Content-Type", "application/x-www-form-urlencoded")
			page := readAll(t, res)
			wantStatus := tt.status
			if wantStatus == 200 {
				wantStatus = http.StatusSeeOther
			}
			if res.StatusCode != wantStatus {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, wantStatus, page)
			}
			if tt.wantFailing < 0 {
				return
			}
			if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/runs/"+r.ID+"?") {
				t.Errorf("redirect to %q, want the run page with the tolerances", loc)
			}
			got := e.wait(r.ID, q)
			if got.Verdict == nil || got.Verdict.FailedRows != tt.wantFailing {
				t.Errorf("verdict %+v, want %d failing rows", got.Verdict, tt.wantFailing)
			}
			// A pasted link opens the same judgement: no new work.
			before := e.pipe.Rejudged()
			readAll(t, e.do("GET", "/runs/"+r.ID+q, nil))
			if e.pipe.Rejudged() != before {
				t.Error("opening the same URL again judged again")
			}
			rep := decode[engine.Report](t, e.do("GET", got.ReportJSON, nil))
			want, _ := url.ParseQuery(tt.query.Encode())
			if toleranceQuery(rep.Tolerances).Encode() != want.Encode() {
				t.Errorf("report tolerances %+v, want %v", rep.Tolerances, tt.query)
			}
			st := watch(t, e, r.ID, q)
			if !st.final || len(st.rows) != 2*dump.Rows {
				t.Errorf("websocket: final %v, %d rows", st.final, len(st.rows))
			}
		})
	}
	if n := e.pipe.Executed(); n != 1 {
		t.Errorf("kernels ran %d times, want once: re-judging must not rerun them", n)
	}
}

func toleranceQuery(t engine.Tolerances) url.Values {
	f := func(v float64) string { return fmt.Sprint(v) }
	return url.Values{"satol": {f(t.Strict.Atol)}, "srtol": {f(t.Strict.Rtol)}, "natol": {f(t.Native.Atol)}, "nrtol": {f(t.Native.Rtol)}, "pvalue": {f(t.PValue)}}
}

func TestRowPageExplainsFailure(t *testing.T) {
	e := newEnv(t, nil)
	dump := randomDump(12, 40)
	r := e.uploadRaw(dump.Bytes())
	e.wait(r.ID, "")
	bad := dump.Fail[rand.IntN(len(dump.Fail))]
	tests := []struct {
		name   string
		path   string
		status int
		check  func(t *testing.T, page []byte)
	}{
		{"failing row", fmt.Sprintf("/runs/%s/rows/%d", r.ID, bad), 200, func(t *testing.T, page []byte) {
			v, _ := byTestID(t, page, "row-verdict")
			if !strings.Contains(v, fmt.Sprintf("row %d: 1 of %d probabilities off", bad, dump.Vocab)) || !strings.Contains(v, "fails") {
				t.Errorf("row verdict = %q", v)
			}
			if _, ok := byTestID(t, page, "chart-probs"); !ok {
				t.Error("no probability chart")
			}
			if _, ok := byTestID(t, page, "token-table"); !ok {
				t.Error("no token table")
			}
			if !bytes.Contains(page, []byte(`<script id="row-charts" type="application/json">`)) {
				t.Error("chart options are not in a JSON script element")
			}
		}},
		{"log scale toggle", fmt.Sprintf("/runs/%s/rows/%d?log=1", r.ID, bad), 200, func(t *testing.T, page []byte) {
			if v, _ := byTestID(t, page, "log-toggle"); v != "linear scale" {
				t.Errorf("log toggle says %q on the log view", v)
			}
		}},
		{"row out of range", fmt.Sprintf("/runs/%s/rows/%d", r.ID, dump.Rows), 404, func(t *testing.T, page []byte) {
			if v, _ := byTestID(t, page, "error"); !strings.Contains(v, fmt.Sprintf("rows 0 to %d", dump.Rows-1)) {
				t.Errorf("error = %q", v)
			}
		}},
		{"unknown run", "/runs/aaaaaaaaaa/rows/0", 404, nil},
		{"jump form without script", fmt.Sprintf("/runs/%s/rows?row=%d", r.ID, bad), 303, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("GET", tt.path, nil)
			page := readAll(t, res)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if tt.check != nil {
				tt.check(t, page)
			}
		})
	}
	type rowAPI struct {
		Row     int `json:"row"`
		Outputs []struct {
			Name   string            `json:"name"`
			Report *engine.RowReport `json:"report"`
		} `json:"outputs"`
		Detail *explain.RowDetail `json:"detail"`
	}
	got := decode[rowAPI](t, e.do("GET", fmt.Sprintf("/api/runs/%s/rows/%d", r.ID, bad), nil))
	if got.Row != bad || len(got.Outputs) != 2 || got.Outputs[1].Report == nil || got.Outputs[1].Report.Pass || got.Detail == nil || len(got.Detail.Tokens) == 0 {
		t.Errorf("row API = %+v", got)
	}
}

func TestRerun(t *testing.T) {
	e := newEnv(t, nil)
	r := e.uploadRaw(randomDump(5, 16).Bytes())
	e.wait(r.ID, "")
	temp := 0.25 + rand.Float64()
	tests := []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"new temperature", url.Values{"temperature": {fmt.Sprint(temp)}, "backend": {"cpu"}}, 303, ""},
		{"negative temperature", url.Values{"temperature": {"-1"}}, 400, "Temperature must be a finite number >= 0"},
		{"top-p out of range", url.Values{"top_p": {"1.5"}}, 400, "top_p must be in (0, 1]"},
		{"unknown backend", url.Values{"backend": {"tpu"}}, 400, `no "tpu" backend`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("POST", "/runs/"+r.ID+"/rerun", strings.NewReader(tt.form.Encode()), "Content-Type", "application/x-www-form-urlencoded")
			page := readAll(t, res)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, page)
			}
			if tt.status != 303 {
				if v, _ := byTestID(t, page, "error"); !strings.Contains(v, tt.want) {
					t.Errorf("error = %q, want %q", v, tt.want)
				}
				return
			}
			id := strings.TrimPrefix(res.Header.Get("Location"), "/runs/")
			got := e.wait(id, "")
			if got.Parent != r.ID || got.Params.Temperature == nil || *got.Params.Temperature != temp || got.State != "done" {
				t.Errorf("rerun = %+v, want parent %s and temperature %v", got, r.ID, temp)
			}
		})
	}
	res := e.do("POST", "/api/runs/"+r.ID+"/rerun", strings.NewReader(`{"top_k": 7}`), "Content-Type", "application/json")
	if res.StatusCode != http.StatusCreated {
		t.Errorf("JSON rerun: %s: %s", res.Status, readAll(t, res))
	}
}

func TestReportCSV(t *testing.T) {
	e := newEnv(t, nil)
	dump := randomDump(7, 16)
	r := e.uploadRaw(dump.Bytes())
	e.wait(r.ID, "")
	res := e.do("GET", "/api/runs/"+r.ID+"/report.csv", nil)
	body := string(readAll(t, res))
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("Content-Type %q", ct)
	}
	lines, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1+2*dump.Rows || strings.Join(lines[0][:5], ",") != "output,external,kind,row,pass" {
		t.Fatalf("%d lines, header %q", len(lines), lines[0])
	}
	fails := 0
	for _, l := range lines[1:] {
		if l[4] == "false" {
			fails++
			if l[0] != "probs" || l[len(l)-1] == "" {
				t.Errorf("failing line %q: want the external output with its violation", l)
			}
		}
	}
	if fails != len(dump.Fail) {
		t.Errorf("%d failing lines, want %d", fails, len(dump.Fail))
	}
	// Before a run finishes its report is a 409 with a sentence.
	gateEnv := newEnv(t, func(_ *web.Config, p *webtest.Pipeline) { p.Gate = make(chan struct{}) })
	g := gateEnv.uploadRaw(randomDump(2, 4).Bytes())
	res = gateEnv.do("GET", "/api/runs/"+g.ID+"/report.csv", nil)
	if got := decode[map[string]string](t, res); res.StatusCode != http.StatusConflict || !strings.Contains(got["error"], "has not finished") {
		t.Errorf("unfinished report: %d %q", res.StatusCode, got["error"])
	}
}

func TestTokenGuardsEverything(t *testing.T) {
	token := fmt.Sprintf("secret-%d", rand.Int())
	e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) { c.Token = token })
	tests := []struct {
		name   string
		path   string
		header []string
		status int
	}{
		{"page without token", "/", nil, 401},
		{"api without token", "/api/runs", nil, 401},
		{"static without token", "/static/sampviz.js", nil, 401},
		{"wrong bearer", "/api/runs", []string{"Authorization", "Bearer nope"}, 401},
		{"bearer", "/api/runs", []string{"Authorization", "Bearer " + token}, 200},
		{"query", "/?token=" + url.QueryEscape(token), nil, 200},
		{"cookie", "/", []string{"Cookie", "sampviz_token=" + token}, 200},
		{"wrong cookie", "/", []string{"Cookie", "sampviz_token=x" + token}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("GET", tt.path, nil, tt.header...)
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Errorf("status %d, want %d", res.StatusCode, tt.status)
			}
		})
	}
	res := e.do("GET", "/?token="+url.QueryEscape(token), nil)
	res.Body.Close()
	if c := res.Cookies(); len(c) != 1 || c[0].Value != token || !c[0].HttpOnly {
		t.Errorf("?token= set cookies %v, want one HttpOnly sampviz_token", c)
	}
	r := e.do("PUT", "/api/runs", bytes.NewReader(randomDump(2, 4).Bytes()), "Authorization", "Bearer "+token)
	run := decode[runJSON](t, r)
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL(e, run.ID, ""), nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("websocket without token: err %v", err)
	}
	conn, _, err := websocket.DefaultDialer.Dial(wsURL(e, run.ID, ""), http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatalf("websocket with token: %v", err)
	}
	if w, err := readStream(conn); err != nil || !w.final {
		t.Errorf("websocket with token: final %v, %v", w.final, err)
	}
	conn.Close()
}

func TestWebsocketOriginCheck(t *testing.T) {
	e := newEnv(t, nil)
	r := e.uploadRaw(randomDump(2, 4).Bytes())
	host := strings.TrimPrefix(e.ts.URL, "http://")
	tests := []struct {
		name   string
		origin string
		ok     bool
	}{
		{"no origin (not a browser)", "", true},
		{"this server's page", "http://" + host, true},
		{"another site", "https://evil.example", false},
		{"same host, other port", "http://127.0.0.1:1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			conn, resp, err := websocket.DefaultDialer.Dial(wsURL(e, r.ID, ""), h)
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("accepted")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("response %v, want 403", resp)
			}
		})
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr, token string
		insecure    bool
		ok          bool
	}{
		{"127.0.0.1:8080", "", false, true},
		{"localhost:8080", "", false, true},
		{"[::1]:8080", "", false, true},
		{"0.0.0.0:8080", "", false, false},
		{":8080", "", false, false},
		{"192.168.1.4:8080", "", false, false},
		{"0.0.0.0:8080", "s3cret", false, true},
		{"0.0.0.0:8080", "", true, true},
		{"no-port", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := web.CheckListen(tt.addr, tt.token, tt.insecure)
			if (err == nil) != tt.ok {
				t.Errorf("CheckListen(%q, %q, %v) = %v, want ok %v", tt.addr, tt.token, tt.insecure, err, tt.ok)
			}
		})
	}
}

func TestPagesRender(t *testing.T) {
	e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) {
		c.Scenarios = []web.Scenario{{Name: "softmax-bf16", Title: "bf16 softmax drift", Summary: "what bf16 rounding does", FileName: "s.safetensors",
			Open: func() (fs.File, error) { return memFile(randomDump(3, 8).Bytes()), nil }}}
	})
	tests := []struct {
		name    string
		path    string
		testIDs map[string]string // test id -> text it contains
	}{
		{"home", "/", map[string]string{"dropzone": "Drop a dump here", "backend": "CPU backend on Fake CPU", "scenarios": "bf16 softmax drift", "scenario-summary": "what bf16 rounding does"}},
		{"not found", "/nope", map[string]string{"error": "There is no page at /nope."}},
		{"static script", "/static/sampviz.js", nil},
		{"static echarts", "/static/echarts.min.js", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("GET", tt.path, nil)
			page := readAll(t, res)
			for id, want := range tt.testIDs {
				if got, ok := byTestID(t, page, id); !ok || !strings.Contains(got, want) {
					t.Errorf("%s = %q, want it to contain %q", id, got, want)
				}
			}
			if res.StatusCode != http.StatusOK && tt.name != "not found" {
				t.Errorf("status %s", res.Status)
			}
			if bytes.Contains(page, []byte(`src="http`)) || bytes.Contains(page, []byte(`href="http`)) {
				t.Error("page loads something from outside the server")
			}
		})
	}
	res := e.do("POST", "/scenarios/softmax-bf16", nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("open scenario: %s", res.Status)
	}
	id := strings.TrimPrefix(res.Header.Get("Location"), "/runs/")
	if got := e.wait(id, ""); got.State != "done" {
		t.Errorf("scenario run ended %s", got.State)
	}
}

// memFile is a scenario dump held in memory.
type memFileT struct{ *bytes.Reader }

func (memFileT) Stat() (fs.FileInfo, error) { return nil, fs.ErrInvalid }
func (memFileT) Close() error               { return nil }

func memFile(b []byte) fs.File { return memFileT{bytes.NewReader(b)} }
