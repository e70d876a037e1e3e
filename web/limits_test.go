package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/live"
	"github.com/sampviz/sampviz/web/webtest"
)

// newEnvPrepared is newEnv with prepare called on the server and its
// http.Server before they serve anything (the hooks of export_test.go,
// the timeouts of sampviz serve).
func newEnvPrepared(t *testing.T, tweak func(*web.Config, *webtest.Pipeline), prepare func(*env, *http.Server)) *env {
	t.Helper()
	fake, pipe := webtest.NewPipeline()
	e := &env{t: t, dir: t.TempDir(), pipe: pipe, fake: fake}
	cfg := web.Config{DataDir: e.dir, Runner: fake, Log: quietLog()}
	if tweak != nil {
		tweak(&cfg, pipe)
	}
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewUnstartedServer(srv.Handler())
	prepare(e, e.ts.Config)
	e.ts.Start()
	t.Cleanup(e.stop)
	return e
}

// waitFor polls cond until it returns "", and fails with what it last
// returned after 5 s.
func waitFor(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitState polls run id until its state is want.
func (e *env) waitState(id, want string) runJSON {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := decode[runJSON](e.t, e.do("GET", "/api/runs/"+id, nil))
		if r.State == want {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s after 5s, want %s", id, r.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listIDs returns the ids of the stored runs, sorted.
func (e *env) listIDs() []string {
	e.t.Helper()
	list := decode[struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}](e.t, e.do("GET", "/api/runs?limit=500", nil))
	var ids []string
	for _, r := range list.Runs {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// waitIDs polls until the stored runs are exactly want.
func (e *env) waitIDs(want []string) {
	e.t.Helper()
	want = slices.Sorted(slices.Values(want))
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := e.listIDs()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("stored runs %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// entries lists the names in a folder of the data directory.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// rawRequest opens a connection to the server and sends a request's head
// announcing a body of length bytes; the test sends the body itself.
func rawRequest(t *testing.T, e *env, method, path, contentType string, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", e.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", method, path, e.hostPort(), contentType, length)
	return conn
}

// readRaw reads the answer to a raw request, waiting at most wait.
func readRaw(conn net.Conn, wait time.Duration) (*http.Response, []byte, error) {
	conn.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// An upload whose body arrives slower than the minimum rate is cut with
// 408 and a sentence that says so, whether it is silent after its head,
// dribbles from its first byte or after a quick start, as a raw body or as
// the page's form; nothing of it is kept. An upload faster than the rate
// passes and is answered, though it lasts more than one window and more
// than the server's ReadTimeout and WriteTimeout; so does one whose runner
// takes more than a window after its body is in.
func TestSlowUploadIsCutWith408(t *testing.T) {
	t.Parallel()
	const rate, window = 64 << 10, 300 * time.Millisecond
	e := newEnvPrepared(t, func(c *web.Config, _ *webtest.Pipeline) {
		c.MinUploadRate, c.UploadWindow = rate, window
		// A runner that honours its context, and takes more than a window
		// to admit this one.
		f := c.Runner.(*webtest.Runner)
		f.AdmitFunc = func(ctx context.Context, job session.Job) (*session.DumpInfo, error) {
			if job.FileName == "slow-admit.safetensors" {
				select {
				case <-time.After(window + 100*time.Millisecond):
				case <-ctx.Done():
					return nil, fmt.Errorf("admit %s: %w", job.FileName, ctx.Err())
				}
			}
			return f.Inspect(ctx, job.DumpPath, job.FileName)
		}
	}, func(_ *env, hs *http.Server) {
		// As sampviz serve sets them, shorter than the uploads.
		hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout = time.Second, window, window
	})
	dump := randomDump(4, 16).Bytes()
	form, formType := multipartBody(t, "dump", "slow.safetensors", dump)
	partHead := bytes.Index(form.Bytes(), []byte("\r\n\r\n")) + 4
	fast := webtest.Dump{Rows: 2, Vocab: 4, Pad: strings.Repeat("f", 96<<10)}.Bytes()
	sentence := fmt.Sprintf("arrived slower than 64 KiB a second over %s", window)
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		quick       int           // bytes sent at once
		chunk       int           // then this many bytes...
		every       time.Duration // ...this often (0: nothing more)
		status      int
		page        bool // the answer is the home page with the sentence
	}{
		{"silent after its head", "PUT", "/api/runs/slow.safetensors", "application/octet-stream", dump, 0, 0, 0, 408, false},
		{"a byte every 50 ms from the first", "PUT", "/api/runs/slow.safetensors", "application/octet-stream", dump, 0, 1, 50 * time.Millisecond, 408, false},
		{"a quick start, then a byte every 50 ms", "PUT", "/api/runs/slow.safetensors", "application/octet-stream", dump, 32, 1, 50 * time.Millisecond, 408, false},
		{"the page's form, a byte every 50 ms", "POST", "/runs", formType, form.Bytes(), 0, 1, 50 * time.Millisecond, 408, true},
		{"the page's form, its file's head quick, then a byte every 50 ms", "POST", "/runs", formType, form.Bytes(), partHead + 16, 1, 50 * time.Millisecond, 408, true},
		{"faster than the rate over several windows", "PUT", "/api/runs/fast.safetensors", "application/octet-stream", fast, 0, 8 << 10, 40 * time.Millisecond, 201, false},
		{"quick, then more than a window to admit", "PUT", "/api/runs/slow-admit.safetensors", "application/octet-stream", dump, len(dump), 0, 0, 201, false},
	}
	// The uploads go at once, each on its own connection, and are judged
	// when all have been answered.
	type answer struct {
		res  *http.Response
		body []byte
		err  error
		took time.Duration
	}
	answers := make([]answer, len(tests))
	var wg sync.WaitGroup
	for i, tt := range tests {
		conn := rawRequest(t, e, tt.method, tt.path, tt.contentType, len(tt.body))
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			conn.Write(tt.body[:tt.quick])
			done := make(chan struct{})
			defer close(done)
			if tt.every > 0 {
				go func() {
					tick := time.NewTicker(tt.every)
					defer tick.Stop()
					for i := tt.quick; i < len(tt.body); i += tt.chunk {
						select {
						case <-done:
							return
						case <-tick.C:
						}
						if _, err := conn.Write(tt.body[i:min(i+tt.chunk, len(tt.body))]); err != nil {
							return
						}
					}
				}()
			}
			a := &answers[i]
			a.res, a.body, a.err = readRaw(conn, 5*time.Second)
			a.took = time.Since(start)
		}()
	}
	wg.Wait()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := answers[i]
			if a.err != nil {
				t.Fatalf("no answer: %v", a.err)
			}
			if a.res.StatusCode != tt.status {
				t.Fatalf("status %s after %v, want %d: %s", a.res.Status, a.took, tt.status, a.body)
			}
			if tt.status != 408 {
				return
			}
			// Cut at the end of the first window, not when the body ends.
			if a.took > window+time.Second {
				t.Errorf("cut after %v, want about %v", a.took, window)
			}
			msg := string(a.body)
			if tt.page {
				msg, _ = byTestID(t, a.body, "upload-error")
			} else {
				var v struct{ Error string }
				json.Unmarshal(a.body, &v)
				msg = v.Error
			}
			if !strings.Contains(msg, sentence) {
				t.Errorf("408 says %q, want %q", msg, sentence)
			}
		})
	}
	// Only the uploads that passed left a run; the slow ones left no file
	// behind.
	var names []string
	for _, id := range e.listIDs() {
		names = append(names, decode[runJSON](t, e.do("GET", "/api/runs/"+id, nil)).FileName)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"fast.safetensors", "slow-admit.safetensors"}) {
		t.Errorf("stored runs of %v, want the two that passed", names)
	}
	if tmp := entries(t, filepath.Join(e.dir, "tmp")); len(tmp) != 0 {
		t.Errorf("cut uploads left %v in tmp", tmp)
	}
}

// Sixteen clients that send the head of an upload and then nothing hold no
// place in a queue of two: while all sixteen bodies are being received,
// another client's upload gets 201 within a second, and its run is judged;
// the sixteen are then cut with 408.
func TestSlowUploadsDelayNoOne(t *testing.T) {
	const window, slow = time.Second, 16
	e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) {
		c.MinUploadRate, c.UploadWindow, c.Queue = 64<<10, window, 2
	})
	dump := randomDump(3, 8).Bytes()
	conns := make([]net.Conn, slow)
	for i := range conns {
		conns[i] = rawRequest(t, e, "PUT", fmt.Sprintf("/api/runs/slow-%d.safetensors", i), "application/octet-stream", len(dump))
		conns[i].Write(dump[:16])
	}
	// Each body is being received once its temporary file exists.
	deadline := time.Now().Add(window / 2)
	for n := 0; n < slow; n = len(entries(t, filepath.Join(e.dir, "tmp"))) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d slow uploads are being received", n, slow)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	res := e.do("PUT", "/api/runs/quick.safetensors", bytes.NewReader(randomDump(3, 8).Bytes()))
	took := time.Since(start)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("upload beside %d slow ones: %s: %s", slow, res.Status, readAll(t, res))
	}
	if took > time.Second {
		t.Errorf("upload beside %d slow ones took %v, want less than a second", slow, took)
	}
	if r := e.wait(decode[runJSON](t, res).ID, ""); r.State != "done" {
		t.Errorf("its run ended %s", r.State)
	}
	for i, conn := range conns {
		res, body, err := readRaw(conn, window+5*time.Second)
		if err != nil || res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("slow upload %d: %v %v %s, want 408", i, res.Status, err, body)
		}
	}
	if ids := e.listIDs(); len(ids) != 1 {
		t.Errorf("%d runs stored, want the quick upload's only", len(ids))
	}
}

// lockedBuffer is a log's output that handlers write from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An upload to a full disk (the temporary file is /dev/full) answers 507
// with "the server's disk is full", not a 400 blaming the client, from the
// API, the page's form and a scenario; the server logs it at ERROR, every
// stored run stays readable, and uploads work again once there is room.
func TestFullDiskAnswers507(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	var full atomic.Bool
	links := t.TempDir()
	var logs lockedBuffer
	scenario := randomDump(3, 8).Bytes()
	e := newEnvPrepared(t, func(c *web.Config, _ *webtest.Pipeline) {
		c.Log = slog.New(slog.NewTextHandler(&logs, nil))
		c.Scenarios = []web.Scenario{{Name: "demo", Title: "demo", FileName: "demo.safetensors",
			Open: func() (fs.File, error) { return memFile(scenario), nil }}}
	}, func(e *env, _ *http.Server) {
		var n atomic.Int64
		e.srv.WrapTempFile(func(next func(string) (*os.File, error)) func(string) (*os.File, error) {
			return func(pattern string) (*os.File, error) {
				if !full.Load() {
					return next(pattern)
				}
				// A link, so that removing the failed upload removes the
				// link and never the device.
				link := filepath.Join(links, strings.Replace(pattern, "*", fmt.Sprint(n.Add(1)), 1))
				if err := os.Symlink("/dev/full", link); err != nil {
					return nil, err
				}
				return os.OpenFile(link, os.O_WRONLY, 0)
			}
		})
	})
	stored := e.uploadRaw(randomDump(5, 16).Bytes())
	e.wait(stored.ID, "")
	report := readAll(t, e.do("GET", stored.ReportJSON, nil))
	before := snapshot(t, e.dir)

	full.Store(true)
	body, ct := multipartBody(t, "dump", "form.safetensors", randomDump(3, 8).Bytes())
	tests := []struct {
		name    string
		request func() *http.Response
		message func(t *testing.T, body []byte) string
	}{
		{"API", func() *http.Response {
			return e.do("PUT", "/api/runs", bytes.NewReader(randomDump(3, 8).Bytes()))
		}, func(t *testing.T, b []byte) string {
			var v struct{ Error string }
			json.Unmarshal(b, &v)
			return v.Error
		}},
		{"page's form", func() *http.Response {
			return e.do("POST", "/runs", bytes.NewReader(body.Bytes()), "Content-Type", ct)
		}, func(t *testing.T, b []byte) string { s, _ := byTestID(t, b, "upload-error"); return s }},
		{"scenario", func() *http.Response {
			return e.do("POST", "/scenarios/demo", nil)
		}, func(t *testing.T, b []byte) string { s, _ := byTestID(t, b, "error"); return s }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.request()
			b := readAll(t, res)
			if res.StatusCode != http.StatusInsufficientStorage {
				t.Fatalf("status %s, want 507: %s", res.Status, b)
			}
			if msg := tt.message(t, b); msg != live.DiskFull || !strings.Contains(msg, "server's disk is full") {
				t.Errorf("507 says %q, want %q", msg, live.DiskFull)
			}
		})
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "status=507") {
		t.Errorf("a full disk was not logged at ERROR:\n%s", logs.String())
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("/dev/full is gone: %v", err)
	}
	if left := entries(t, links); len(left) != 0 {
		t.Errorf("failed uploads left %v", left)
	}
	// Every stored run is intact and readable.
	if after := snapshot(t, e.dir); !equalFiles(before, after) {
		t.Errorf("the data directory changed: %v -> %v", before, after)
	}
	res := e.do("GET", stored.ReportJSON, nil)
	if got := readAll(t, res); res.StatusCode != http.StatusOK || !bytes.Equal(got, report) {
		t.Errorf("stored report after a full disk: %s", res.Status)
	}
	if ids := e.listIDs(); !slices.Equal(ids, []string{stored.ID}) {
		t.Errorf("stored runs %v, want only %s", ids, stored.ID)
	}
	full.Store(false)
	if r := e.wait(e.uploadRaw(randomDump(3, 8).Bytes()).ID, ""); r.State != "done" {
		t.Errorf("an upload once there is room ended %s", r.State)
	}
}

// rawStream reads every message of a run's websocket to its close.
func rawStream(t *testing.T, e *env, id string) []byte {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(wsURL(e, id, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var all []byte
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			return all
		}
		all = append(all, b...)
	}
}

// A run that fails on an error naming a server path (a file in the data
// directory, the data directory itself, the stored dump) shows the cause
// without the path on every face: the API, the list, the run page, the
// report's refusal and the websocket; a full disk shows live.DiskFull. An
// upload the runner cannot inspect for a reason naming its temporary file
// answers a sentence without it.
func TestMessagesNameNoServerPath(t *testing.T) {
	t.Parallel()
	faults := map[string]func(job session.Job, dataDir string) error{
		"a file in the data directory": func(job session.Job, _ string) error {
			return fmt.Errorf("write outputs: %w", &fs.PathError{Op: "open", Path: job.OutputsPath, Err: syscall.EACCES})
		},
		"the data directory itself": func(_ session.Job, dataDir string) error {
			return fmt.Errorf("prepare: %w", &fs.PathError{Op: "mkdir", Path: dataDir, Err: syscall.EROFS})
		},
		"the stored dump": func(job session.Job, _ string) error {
			return fmt.Errorf("read %s: %w", job.DumpPath, io.ErrUnexpectedEOF)
		},
		"a full disk": func(job session.Job, _ string) error {
			return fmt.Errorf("write report: %w", &fs.PathError{Op: "write", Path: job.OutputsPath + ".tmp", Err: syscall.ENOSPC})
		},
	}
	e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) {
		dataDir := c.DataDir
		f := c.Runner.(*webtest.Runner)
		execute := f.ExecuteFunc
		f.ExecuteFunc = func(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
			var d webtest.Dump
			if b, err := os.ReadFile(job.DumpPath); err == nil {
				json.Unmarshal(b, &d)
			}
			if fault, ok := faults[d.Fault]; ok {
				return nil, fault(job, dataDir)
			}
			return execute(ctx, job, sink)
		}
		f.AdmitFunc = func(ctx context.Context, job session.Job) (*session.DumpInfo, error) {
			if job.FileName == "unreadable.safetensors" {
				return nil, fmt.Errorf("inspect: %w", &fs.PathError{Op: "open", Path: job.DumpPath, Err: syscall.EIO})
			}
			return f.Inspect(ctx, job.DumpPath, job.FileName)
		}
	})
	// The folder above the data directory is as much the server's.
	paths := []string{e.dir, filepath.Dir(e.dir)}
	tests := []struct {
		fault string
		want  string // the message contains it
	}{
		{"a file in the data directory", "permission denied"},
		{"the data directory itself", "read-only file system"},
		{"the stored dump", "unexpected EOF"},
		{"a full disk", live.DiskFull},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			r := e.uploadRaw(webtest.Dump{Rows: 2, Vocab: 4, Fault: tt.fault}.Bytes())
			got := e.wait(r.ID, "")
			if got.State != "failed" || !strings.Contains(got.Message, tt.want) {
				t.Errorf("run: %s %q, want failed with %q", got.State, got.Message, tt.want)
			}
			if tt.want == live.DiskFull && got.Message != live.DiskFull {
				t.Errorf("run says %q, want %q", got.Message, live.DiskFull)
			}
			faces := map[string][]byte{
				"API":       readAll(t, e.do("GET", "/api/runs/"+r.ID, nil)),
				"list":      readAll(t, e.do("GET", "/api/runs", nil)),
				"run page":  readAll(t, e.do("GET", "/runs/"+r.ID, nil)),
				"home page": readAll(t, e.do("GET", "/", nil)),
				"report":    readAll(t, e.do("GET", got.ReportJSON, nil)),
				"websocket": rawStream(t, e, r.ID),
			}
			for face, b := range faces {
				for _, p := range paths {
					if bytes.Contains(b, []byte(p)) {
						t.Errorf("%s names the server path %s: %s", face, p, b)
					}
				}
			}
		})
	}
	t.Run("an upload the runner cannot read", func(t *testing.T) {
		res := e.do("PUT", "/api/runs/unreadable.safetensors", bytes.NewReader(randomDump(2, 4).Bytes()))
		b := readAll(t, res)
		if res.StatusCode != http.StatusInternalServerError {
			t.Errorf("status %s, want 500", res.Status)
		}
		for _, p := range paths {
			if bytes.Contains(b, []byte(p)) {
				t.Errorf("the answer names the server path %s: %s", p, b)
			}
		}
	})
}

// Cancel stops a queued run and a running one (held at the pipeline's
// gate) within a second, from the API and from the run page's button;
// the queue goes on with the next run. Cancelling a finished run changes
// nothing and answers 200 with how it ended (manage.go); an unknown run
// answers 404.
func TestCancel(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(_ *web.Config, p *webtest.Pipeline) { p.Gate = gate })
	cancel := func(path string, want int, header ...string) *http.Response {
		t.Helper()
		start := time.Now()
		res := e.do("POST", path, nil, header...)
		if took := time.Since(start); took > time.Second {
			t.Errorf("POST %s took %v, want less than a second", path, took)
		}
		if res.StatusCode != want {
			t.Fatalf("POST %s: %s, want %d: %s", path, res.Status, want, readAll(t, res))
		}
		return res
	}
	a := e.uploadRaw(randomDump(3, 8).Bytes())
	e.waitState(a.ID, "running")
	b := e.uploadRaw(randomDump(3, 8).Bytes())
	c := e.uploadRaw(randomDump(3, 8).Bytes())

	// A queued run, by the API.
	got := decode[runJSON](t, cancel("/api/runs/"+b.ID+"/cancel", http.StatusOK))
	if got.State != "cancelled" || got.Message != live.Cancelled {
		t.Errorf("cancelled queued run: %s %q", got.State, got.Message)
	}
	if s := e.waitState(a.ID, "running"); s.State != "running" {
		t.Errorf("the running run is %s", s.State)
	}
	if s := decode[runJSON](t, e.do("GET", "/api/runs/"+c.ID, nil)); s.State != "queued" {
		t.Errorf("the run queued after it is %s", s.State)
	}

	// The running run, by the API: the next one starts.
	got = decode[runJSON](t, cancel("/api/runs/"+a.ID+"/cancel", http.StatusOK))
	if got.State != "cancelled" || got.Message != live.Cancelled {
		t.Errorf("cancelled running run: %s %q", got.State, got.Message)
	}
	e.waitState(c.ID, "running")

	// The running run, by the page's button.
	res := cancel("/runs/"+c.ID+"/cancel", http.StatusSeeOther, "Origin", "http://"+e.hostPort(), "Sec-Fetch-Site", "same-origin")
	res.Body.Close()
	if loc := res.Header.Get("Location"); loc != "/runs/"+c.ID {
		t.Errorf("page cancel goes to %q, want the run page", loc)
	}
	if s := decode[runJSON](t, e.do("GET", "/api/runs/"+c.ID, nil)); s.State != "cancelled" {
		t.Errorf("run cancelled from its page is %s", s.State)
	}
	page := readAll(t, e.do("GET", "/runs/"+c.ID, nil))
	if v, _ := byTestID(t, page, "verdict"); !strings.Contains(v, live.Cancelled) {
		t.Errorf("run page of a cancelled run says %q", v)
	}
	if w := watch(t, e, b.ID, ""); !w.final {
		t.Error("the websocket of a cancelled run never sent its final state")
	}

	// A finished run stays as it ended.
	close(gate)
	d := e.wait(e.uploadRaw(randomDump(3, 8).Bytes()).ID, "")
	got = decode[runJSON](t, cancel("/api/runs/"+d.ID+"/cancel", http.StatusOK))
	if got.State != "done" || got.Verdict == nil || *got.Verdict != *d.Verdict {
		t.Errorf("cancel of a finished run: %s %+v, want done %+v", got.State, got.Verdict, d.Verdict)
	}
	cancel("/api/runs/aaaaaaaaaa/cancel", http.StatusNotFound).Body.Close()
	if n := e.pipe.Executed(); n != 1 {
		t.Errorf("%d runs executed, want only the one never cancelled", n)
	}
}

// Delete removes a run with its folder, and its dump unless another run
// uses it; the run then answers 404 everywhere. A running or queued run
// is cancelled first and removed; the executor goes on. An unknown run
// answers 404.
func TestDelete(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(_ *web.Config, p *webtest.Pipeline) { p.Gate = gate })
	runDir := func(id string) string { return filepath.Join(e.dir, "runs", id) }
	gone := func(t *testing.T, id string) {
		t.Helper()
		for _, path := range []string{"/api/runs/" + id, "/api/runs/" + id + "/report.json", "/runs/" + id} {
			if res := e.do("GET", path, nil); res.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s of a deleted run: %s, want 404", path, res.Status)
			}
		}
		if _, err := os.Stat(runDir(id)); !os.IsNotExist(err) {
			t.Errorf("the deleted run's folder is still there (%v)", err)
		}
		if slices.Contains(e.listIDs(), id) {
			t.Error("the deleted run is still listed")
		}
	}
	del := func(t *testing.T, id string) {
		t.Helper()
		start := time.Now()
		res := e.do("DELETE", "/api/runs/"+id, nil)
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %s, want 204", res.Status)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("DELETE took %v", took)
		}
	}

	t.Run("running", func(t *testing.T) {
		r := e.uploadRaw(randomDump(3, 8).Bytes())
		e.waitState(r.ID, "running")
		del(t, r.ID)
		gone(t, r.ID)
	})
	t.Run("queued", func(t *testing.T) {
		held := e.uploadRaw(randomDump(3, 8).Bytes())
		e.waitState(held.ID, "running")
		r := e.uploadRaw(randomDump(3, 8).Bytes())
		del(t, r.ID)
		gone(t, r.ID)
		if s := decode[runJSON](t, e.do("GET", "/api/runs/"+held.ID, nil)); s.State != "running" {
			t.Errorf("the run ahead of it is %s", s.State)
		}
	})
	close(gate)
	t.Run("finished, with the only copy of its dump", func(t *testing.T) {
		dumps := entries(t, filepath.Join(e.dir, "dumps"))
		r := e.wait(e.uploadRaw(randomDump(4, 8).Bytes()).ID, "")
		if _, err := os.Stat(runDir(r.ID)); err != nil {
			t.Fatalf("a finished run has no folder: %v", err)
		}
		del(t, r.ID)
		gone(t, r.ID)
		if after := entries(t, filepath.Join(e.dir, "dumps")); !slices.Equal(after, dumps) {
			t.Errorf("dumps %v after the delete, want %v", after, dumps)
		}
	})
	t.Run("finished, sharing its dump", func(t *testing.T) {
		dump := randomDump(4, 8).Bytes()
		first := e.wait(e.uploadRaw(dump).ID, "")
		second := e.wait(e.uploadRaw(dump).ID, "")
		dumps := entries(t, filepath.Join(e.dir, "dumps"))
		del(t, first.ID)
		gone(t, first.ID)
		if after := entries(t, filepath.Join(e.dir, "dumps")); !slices.Equal(after, dumps) {
			t.Errorf("dumps %v after the delete, want %v: the other run uses it", after, dumps)
		}
		if res := e.do("GET", second.ReportJSON, nil); res.StatusCode != http.StatusOK {
			t.Errorf("the other run's report: %s", res.Status)
		}
	})
	t.Run("from the page", func(t *testing.T) {
		r := e.wait(e.uploadRaw(randomDump(3, 8).Bytes()).ID, "")
		res := e.do("POST", "/runs/"+r.ID+"/delete", nil, "Origin", "http://"+e.hostPort(), "Sec-Fetch-Site", "same-origin")
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Fatalf("page delete: %s to %q, want 303 to /", res.Status, res.Header.Get("Location"))
		}
		gone(t, r.ID)
	})
	t.Run("unknown", func(t *testing.T) {
		for _, id := range []string{"aaaaaaaaaa", "not-an-id"} {
			if res := e.do("DELETE", "/api/runs/"+id, nil); res.StatusCode != http.StatusNotFound {
				t.Errorf("DELETE %s: %s, want 404", id, res.Status)
			}
		}
	})
	// The executor went on after the deletes.
	if r := e.wait(e.uploadRaw(randomDump(3, 8).Bytes()).ID, ""); r.State != "done" {
		t.Errorf("a run after the deletes ended %s", r.State)
	}
}

// dirSize is the bytes the files under dir take.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// Retention keeps the newest Config.KeepRuns runs, with their folders and
// dumps; a run a websocket watches is kept however old; Config.MaxData
// removes the oldest runs until the data directory fits, at start and
// after each run.
func TestRetention(t *testing.T) {
	t.Parallel()
	t.Run("keep 3 of 6", func(t *testing.T) {
		e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) { c.KeepRuns = 3 })
		var ids []string
		for i := range 6 {
			ids = append(ids, e.wait(e.uploadRaw(randomDump(2+i, 8).Bytes()).ID, "").ID)
		}
		e.waitIDs(ids[3:])
		// The index goes first, then the files (store.Remove).
		waitFor(t, func() string {
			if got := entries(t, filepath.Join(e.dir, "runs")); !slices.Equal(got, slices.Sorted(slices.Values(ids[3:]))) {
				return fmt.Sprintf("run folders %v, want the newest three's", got)
			}
			if got := entries(t, filepath.Join(e.dir, "dumps")); len(got) != 3 {
				return fmt.Sprintf("%d dumps kept, want 3", len(got))
			}
			return ""
		})
	})
	t.Run("a watched run is kept", func(t *testing.T) {
		gate := make(chan struct{})
		e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) { c.KeepRuns, p.Gate = 3, gate })
		var ids []string
		for i := range 3 {
			r := e.uploadRaw(randomDump(2+i, 8).Bytes())
			gate <- struct{}{}
			ids = append(ids, e.wait(r.ID, "").ID)
		}
		// A page watches the oldest, before a fourth run puts the data
		// directory over its bound (the executor runs retention after
		// every task, so a watch that came later could come too late).
		conn, _, err := websocket.DefaultDialer.Dial(wsURL(e, ids[0], ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, _, err := conn.ReadMessage(); err != nil {
			t.Fatal(err)
		}
		// A fourth run, held running: four runs, three of them finished.
		held := e.uploadRaw(randomDump(3, 8).Bytes())
		e.waitState(held.ID, "running")
		e.srv.RetainNow()
		if got, want := e.listIDs(), slices.Sorted(slices.Values([]string{ids[0], ids[2], held.ID})); !slices.Equal(got, want) {
			t.Errorf("after retention runs %v, want %v: the watched oldest kept, the next one removed, the running one kept", got, want)
		}
		close(gate)
	})
	t.Run("a run whose page is open is kept after its socket closes", func(t *testing.T) {
		gate := make(chan struct{})
		e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) { c.KeepRuns, p.Gate = 3, gate })
		var ids []string
		for i := range 3 {
			r := e.uploadRaw(randomDump(2+i, 8).Bytes())
			gate <- struct{}{}
			ids = append(ids, e.wait(r.ID, "").ID)
		}
		// The page of the oldest, finished run, opened before a fourth run
		// puts the data directory over its bound: its socket sends
		// everything and closes, but the page stays open in the browser.
		readAll(t, e.do("GET", "/runs/"+ids[0], nil))
		if st := watch(t, e, ids[0], ""); !st.final {
			t.Fatal("the finished run's socket sent no final message")
		}
		held := e.uploadRaw(randomDump(3, 8).Bytes())
		e.waitState(held.ID, "running")
		e.srv.RetainNow()
		if got, want := e.listIDs(), slices.Sorted(slices.Values([]string{ids[0], ids[2], held.ID})); !slices.Equal(got, want) {
			t.Errorf("after retention runs %v, want %v: the run whose page is open kept", got, want)
		}
		close(gate)
	})
	t.Run("max data", func(t *testing.T) {
		e := newEnv(t, nil)
		const pad = 256 << 10
		upload := func(i int) string {
			d := webtest.Dump{Rows: 2, Vocab: 4, Pad: strings.Repeat(string(rune('a'+i)), pad)}
			return e.wait(e.uploadRaw(d.Bytes()).ID, "").ID
		}
		var ids []string
		for i := range 4 {
			ids = append(ids, upload(i))
		}
		cfg := web.Config{DataDir: e.dir, Runner: e.fake, Log: quietLog()}
		e.stop()
		runSize := func(id string) int64 { return dirSize(t, filepath.Join(e.dir, "runs", id)) + pad }
		// Room for all but the oldest two, and three quarters of a run to
		// spare for the index to grow.
		cfg.MaxData = dirSize(t, e.dir) - runSize(ids[0]) - runSize(ids[1]) + 3*pad/4
		e.start(cfg)
		e.waitIDs(ids[2:])
		if used := dirSize(t, e.dir); used > cfg.MaxData {
			t.Errorf("data directory holds %d bytes, over MaxData %d", used, cfg.MaxData)
		}
		// One more run of the same size makes the oldest left go.
		newest := upload(4)
		e.waitIDs([]string{ids[3], newest})
	})
}

// A built-in scenario opened again reuses its finished run (nothing is
// executed again); ?rerun=1, or the form's rerun field, runs it anew; once
// its runs are deleted it runs anew.
func TestScenarioReuse(t *testing.T) {
	t.Parallel()
	e, _ := scenarioEnv(t, nil)
	executed := e.pipe.Executed()
	open := func(query, form string) string {
		t.Helper()
		var body io.Reader
		header := []string{}
		if form != "" {
			body = strings.NewReader(form)
			header = []string{"Content-Type", "application/x-www-form-urlencoded"}
		}
		res := e.do("POST", "/scenarios/demo"+query, body, header...)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("open scenario: %s", res.Status)
		}
		id := strings.TrimPrefix(res.Header.Get("Location"), "/runs/")
		e.wait(id, "")
		return id
	}
	first := open("", "")
	tests := []struct {
		name     string
		query    string
		form     string
		want     func() string // the run it opens ("": a new one)
		executes int
	}{
		{"opened again", "", "", func() string { return first }, 0},
		{"rerun in the query", "?rerun=1", "", nil, 1},
		{"rerun in the form", "", "rerun=1", nil, 1},
	}
	runs := len(e.listIDs())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.pipe.Executed()
			id := open(tt.query, tt.form)
			if tt.want != nil && id != tt.want() {
				t.Errorf("opened run %s, want %s", id, tt.want())
			}
			if tt.want == nil && id == first {
				t.Errorf("opened the finished run %s, want a new one", id)
			}
			if got := e.pipe.Executed() - before; got != tt.executes {
				t.Errorf("%d runs executed, want %d", got, tt.executes)
			}
			runs += tt.executes
			if got := len(e.listIDs()); got != runs {
				t.Errorf("%d runs stored, want %d", got, runs)
			}
		})
	}
	// Once every run of it is deleted, it runs again.
	for _, id := range e.listIDs() {
		e.do("DELETE", "/api/runs/"+id, nil).Body.Close()
	}
	before := e.pipe.Executed()
	if id := open("", ""); id == first || e.pipe.Executed() != before+1 {
		t.Errorf("scenario after its runs were deleted: run %s, %d executed", id, e.pipe.Executed()-before)
	}
	if e.pipe.Executed() <= executed {
		t.Error("nothing was executed")
	}
}

// /static/ serves the files the pages name and lists nothing.
func TestStaticListsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tests := []struct {
		path   string
		status int
		list   bool // the answer may not name the folder's files
	}{
		{"/static/", http.StatusNotFound, true},
		{"/static", 0, true},
		{"/static/./", 0, true},
		{"/static/nope.js", http.StatusNotFound, true},
		{"/static/sampviz.js", http.StatusOK, false},
		{"/static/sampviz.css", http.StatusOK, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := e.do("GET", tt.path, nil)
			body := readAll(t, res)
			if tt.status != 0 && res.StatusCode != tt.status {
				t.Errorf("status %s, want %d", res.Status, tt.status)
			}
			if tt.list && (res.StatusCode == http.StatusOK || bytes.Contains(body, []byte("sampviz.js")) || bytes.Contains(body, []byte("echarts"))) {
				t.Errorf("%s: %s lists the folder: %s", tt.path, res.Status, body)
			}
		})
	}
}

// The data directory is its owner's only (0700) and the run index 0600,
// both when the server creates them and when an older version left them
// readable by everyone.
func TestDataDirIsPrivate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
	}{
		{"a new data directory", func(*testing.T, string) {}},
		{"left readable by everyone", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "index.sqlite"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(filepath.Join(dir, "index.sqlite"), 0o644) // whatever the umask
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.prepare(t, dir)
			fake, _ := webtest.NewPipeline()
			srv, err := web.New(web.Config{DataDir: dir, Runner: fake, Log: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			mode := func(p string) fs.FileMode {
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				return info.Mode().Perm()
			}
			if m := mode(dir); m != 0o700 {
				t.Errorf("data directory mode %v, want 0700", m)
			}
			index := filepath.Join(dir, "index.sqlite")
			if m := mode(index); m != 0o600 {
				t.Errorf("index mode %v, want 0600", m)
			}
			for _, side := range []string{index + "-wal", index + "-shm"} {
				if info, err := os.Stat(side); err == nil && info.Mode().Perm() != 0o600 {
					t.Errorf("%s mode %v, want 0600", filepath.Base(side), info.Mode().Perm())
				}
			}
		})
	}
}

// A full queue answers 429 with a sentence that names its size, from every
// route that queues work, however many uploads are in flight.
func TestQueueFullSaysItsSize(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	defer close(gate)
	scenario := randomDump(3, 8).Bytes()
	e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) {
		c.Queue, p.Gate = 2, gate
		c.Scenarios = []web.Scenario{{Name: "demo", Title: "demo", FileName: "demo.safetensors",
			Open: func() (fs.File, error) { return memFile(scenario), nil }}}
	})
	// One run held running, two waiting: the queue is full.
	held := e.uploadRaw(randomDump(2, 8).Bytes())
	e.waitState(held.ID, "running")
	e.uploadRaw(randomDump(2, 8).Bytes())
	e.uploadRaw(randomDump(2, 8).Bytes())
	want := "its queue of 2 runs is full"
	tests := []struct {
		name    string
		request func() *http.Response
		api     bool
	}{
		{"upload by the API", func() *http.Response {
			return e.do("PUT", "/api/runs", bytes.NewReader(randomDump(2, 8).Bytes()))
		}, true},
		{"rerun by the API", func() *http.Response {
			return e.do("POST", "/api/runs/"+held.ID+"/rerun", strings.NewReader(`{"top_k": 2}`), "Content-Type", "application/json")
		}, true},
		{"scenario", func() *http.Response { return e.do("POST", "/scenarios/demo", nil) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.request()
			b := readAll(t, res)
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %s, want 429: %s", res.Status, b)
			}
			msg, _ := byTestID(t, b, "error")
			if tt.api {
				var v struct{ Error string }
				json.Unmarshal(b, &v)
				msg = v.Error
			}
			if !strings.Contains(msg, want) || strings.Contains(msg, "0 runs") {
				t.Errorf("429 says %q, want %q", msg, want)
			}
		})
	}
}
