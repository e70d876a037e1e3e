package web_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/webtest"
)

// hostPort is the server's host and port, as its own pages' Origin and
// Host name them ("127.0.0.1:PORT").
func (e *env) hostPort() string { return strings.TrimPrefix(e.ts.URL, "http://") }

// port is the server's port.
func (e *env) port() string { return e.hostPort()[strings.LastIndex(e.hostPort(), ":")+1:] }

// send is do with the request's Host set to host ("" keeps the server's
// address), as a browser sends it when a page's name points at the server.
func (e *env) send(method, path string, body io.Reader, host string, header ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
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

// scenarioEnv is a server with one built-in scenario, "demo", and a
// finished run.
func scenarioEnv(t *testing.T, tweak func(*web.Config, *webtest.Pipeline)) (*env, runJSON) {
	t.Helper()
	scenario := randomDump(3, 8).Bytes()
	e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) {
		c.Scenarios = []web.Scenario{{Name: "demo", Title: "demo", Summary: "a demo", FileName: "demo.safetensors",
			Open: func() (fs.File, error) { return memFile(scenario), nil }}}
		if tweak != nil {
			tweak(c, p)
		}
	})
	r := e.uploadRaw(randomDump(4, 16).Bytes())
	return e, e.wait(r.ID, "")
}

// change is a request that changes state, as the server's page or a script
// sends it.
type change struct {
	name   string
	method string
	path   string // {id} is the run it acts on
	body   func(t *testing.T) (contentType string, body []byte)
	// fresh: the request removes its run, so each one gets a run of its own.
	fresh bool
	// ok is the status when the request is allowed.
	ok int
}

// newTolerances are tolerances no run is judged with until a test asks.
var newTolerances = url.Values{"satol": {"0.01"}, "srtol": {"0"}, "natol": {"0.01"}, "nrtol": {"0"}, "pvalue": {"0.001"}}

// changes lists every route of routes.go that changes state.
func changes() []change {
	dump := func(t *testing.T) (string, []byte) {
		return "application/octet-stream", randomDump(3, 8).Bytes()
	}
	form := func(v url.Values) func(*testing.T) (string, []byte) {
		return func(*testing.T) (string, []byte) {
			return "application/x-www-form-urlencoded", []byte(v.Encode())
		}
	}
	jsonBody := func(s string) func(*testing.T) (string, []byte) {
		return func(*testing.T) (string, []byte) { return "application/json", []byte(s) }
	}
	multipartDump := func(t *testing.T) (string, []byte) {
		body, ct := multipartBody(t, "dump", "page.safetensors", randomDump(3, 8).Bytes())
		return ct, body.Bytes()
	}
	none := func(*testing.T) (string, []byte) { return "", nil }
	return []change{
		{"upload by the page's script", "POST", "/api/runs", multipartDump, false, http.StatusCreated},
		{"upload as curl -T", "PUT", "/api/runs", dump, false, http.StatusCreated},
		{"upload as curl -T with a name", "PUT", "/api/runs/named.safetensors", dump, false, http.StatusCreated},
		{"upload by the page's form", "POST", "/runs", multipartDump, false, http.StatusSeeOther},
		{"open a scenario", "POST", "/scenarios/demo", none, false, http.StatusSeeOther},
		{"rerun from the page", "POST", "/runs/{id}/rerun", form(url.Values{"temperature": {"0.5"}}), false, http.StatusSeeOther},
		{"rerun by the API", "POST", "/api/runs/{id}/rerun", jsonBody(`{"top_k": 3}`), false, http.StatusCreated},
		{"judge again from the page", "POST", "/runs/{id}/judgements", form(newTolerances), false, http.StatusSeeOther},
		{"judge again by the API", "POST", "/api/runs/{id}/judgements", form(newTolerances), false, http.StatusAccepted},
		{"cancel from the page", "POST", "/runs/{id}/cancel", none, false, http.StatusSeeOther},
		{"cancel by the API", "POST", "/api/runs/{id}/cancel", none, false, http.StatusOK},
		{"delete from the page", "POST", "/runs/{id}/delete", none, true, http.StatusSeeOther},
		{"delete by the API", "DELETE", "/api/runs/{id}", none, true, http.StatusNoContent},
	}
}

// observe is what a refused request must leave as it was: every run and
// its state, the stored files (temporary ones included), whether the run
// id is judged with newTolerances, and the work the pipeline did.
func observe(t *testing.T, e *env, id string) string {
	t.Helper()
	var b strings.Builder
	list := decode[struct {
		Runs []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"runs"`
	}](t, e.do("GET", "/api/runs?limit=500", nil))
	for _, r := range list.Runs {
		fmt.Fprintf(&b, "run %s %s\n", r.ID, r.State)
	}
	files := snapshot(t, e.dir)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "file %s %d\n", name, files[name])
	}
	res := e.do("GET", "/api/runs/"+id+"?"+newTolerances.Encode(), nil)
	res.Body.Close()
	fmt.Fprintf(&b, "judged with new tolerances: %d\n", res.StatusCode)
	fmt.Fprintf(&b, "executed %d, re-judged %d\n", e.pipe.Executed(), e.pipe.Rejudged())
	return b.String()
}

// Every request that changes state and that a browser says came from a page
// of another site (by Origin or Sec-Fetch-Site), including a "simple"
// text/plain POST that needs no preflight, is refused with 403 and a
// sentence, and leaves every run, file and judgement as it was: every
// route from another site, and every kind of other site on an upload and
// a delete.
func TestForeignPagesChangeNothing(t *testing.T) {
	t.Parallel()
	e, r := scenarioEnv(t, nil)
	self := "http://" + e.hostPort()
	foreign := []struct {
		name   string
		header []string
		// everyRoute: tried on every route; the others on an upload and
		// a delete (one guard serves them all).
		everyRoute bool
	}{
		{"another site's Origin", []string{"Origin", "https://evil.example"}, true},
		{"a cross-site fetch without Origin", []string{"Sec-Fetch-Site", "cross-site"}, true},
		{"a simple text/plain request", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}, true},
		{"a sibling site", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://other.localhost:" + e.port()}, false},
		{"an opaque origin", []string{"Origin", "null"}, false},
		{"this host on another port", []string{"Origin", "http://127.0.0.1:1"}, false},
		{"this host and port over https", []string{"Origin", "https://" + e.hostPort()}, false},
		{"this origin, but a cross-site fetch", []string{"Origin", self, "Sec-Fetch-Site", "cross-site"}, false},
	}
	before := observe(t, e, r.ID)
	for _, c := range changes() {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range foreign {
				if !f.everyRoute && c.name != "upload by the page's script" && c.name != "delete by the API" {
					continue
				}
				ct, body := c.body(t)
				header := append([]string{"Content-Type", ct}, f.header...) // a later Content-Type wins
				res := e.do(c.method, strings.ReplaceAll(c.path, "{id}", r.ID), bytes.NewReader(body), header...)
				msg := readAll(t, res)
				if res.StatusCode != http.StatusForbidden {
					t.Errorf("%s: status %s, want 403: %s", f.name, res.Status, msg)
					continue
				}
				if !bytes.Contains(msg, []byte("takes changes only from its own pages")) {
					t.Errorf("%s: 403 says %q, want the sentence about pages of other sites", f.name, msg)
				}
			}
			if after := observe(t, e, r.ID); after != before {
				t.Errorf("refused requests changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// The same requests pass when they come from the server's own pages (its
// scheme, host and port as Origin; Sec-Fetch-Site same-origin or none) or
// from a client that is not a browser and sends neither header: every
// route from the server's page, and every kind of own request on one
// route.
func TestOwnPagesChange(t *testing.T) {
	t.Parallel()
	// What the requests queue stays queued (the pipeline's gate never
	// opens after the first run): the answers are what this test reads.
	gate := make(chan struct{}, 1)
	gate <- struct{}{}
	e, r := scenarioEnv(t, func(c *web.Config, p *webtest.Pipeline) { c.Queue, p.Gate = 1000, gate })
	self := "http://" + e.hostPort()
	page := []string{"Origin", self, "Sec-Fetch-Site", "same-origin"}
	pass := func(t *testing.T, c change, host string, header []string) {
		t.Helper()
		id := r.ID
		if c.fresh {
			id = e.uploadRaw(randomDump(2, 8).Bytes()).ID
		}
		ct, body := c.body(t)
		res := e.send(c.method, strings.ReplaceAll(c.path, "{id}", id), bytes.NewReader(body), host, append([]string{"Content-Type", ct}, header...)...)
		msg := readAll(t, res)
		if res.StatusCode != c.ok {
			t.Fatalf("status %s, want %d: %s", res.Status, c.ok, msg)
		}
		if c.fresh {
			if res := e.do("GET", "/api/runs/"+id, nil); res.StatusCode != http.StatusNotFound {
				t.Errorf("deleted run answers %s, want 404", res.Status)
			}
		}
	}
	for _, c := range changes() {
		t.Run(c.name, func(t *testing.T) { pass(t, c, "", page) })
	}
	own := []struct {
		name   string
		host   string
		header []string
	}{
		{"not a browser (curl)", "", nil},
		{"Origin without Sec-Fetch-Site (an older browser)", "", []string{"Origin", self}},
		{"typed in the address bar", "", []string{"Sec-Fetch-Site", "none"}},
		{"the page opened as localhost", "localhost:" + e.port(), []string{"Origin", "http://localhost:" + e.port(), "Sec-Fetch-Site", "same-origin"}},
	}
	for _, c := range changes() {
		if c.name != "cancel by the API" && c.name != "delete by the API" {
			continue
		}
		for _, o := range own {
			t.Run(c.name+"/"+o.name, func(t *testing.T) { pass(t, c, o.host, o.header) })
		}
	}
}

// A request whose Host is a name the server does not answer to (a page of
// a DNS-rebinding site that points its own name at 127.0.0.1) reads
// nothing: 403 on the API, the report, the pages, the static files and the
// websocket handshake, even with an Origin that matches that Host. The
// server's own names (localhost, loopback and other IP literals, the listen
// address, Config.AllowHosts) pass.
func TestRebindingHostIsRefused(t *testing.T) {
	t.Parallel()
	e, r := scenarioEnv(t, func(c *web.Config, _ *webtest.Pipeline) {
		c.Listen = "sampviz.lan:8080"
		c.AllowHosts = []string{"sampviz.internal"}
	})
	port := e.port()
	hosts := []struct {
		host string
		ok   bool
	}{
		{"evil.example:" + port, false},
		{"evil.example", false},
		{"127.0.0.1.nip.io:" + port, false},
		{"localhost.evil.example:" + port, false},
		{"sampviz.internal.evil.example:" + port, false},
		{"localhost:" + port, true},
		{"LOCALHOST:" + port, true},
		{"app.localhost:" + port, true},
		{"127.0.0.1:" + port, true},
		{"[::1]:" + port, true},
		{"sampviz.lan:" + port, true},
		{"sampviz.internal:" + port, true},
		{"Sampviz.Internal:" + port, true},
	}
	reads := []string{"/api/runs", "/api/runs/" + r.ID, r.ReportJSON, "/runs/" + r.ID, "/", "/static/sampviz.js"}
	for _, h := range hosts {
		t.Run(h.host, func(t *testing.T) {
			want := http.StatusForbidden
			if h.ok {
				want = http.StatusOK
			}
			for _, path := range reads {
				res := e.send("GET", path, nil, h.host)
				body := readAll(t, res)
				if res.StatusCode != want {
					t.Errorf("GET %s: status %s, want %d", path, res.Status, want)
				}
				if !h.ok && bytes.Contains(body, []byte(r.ID)) {
					t.Errorf("GET %s: the refusal names run %s", path, r.ID)
				}
			}
			// Nor may it change anything.
			res := e.send("POST", "/api/runs/"+r.ID+"/cancel", nil, h.host)
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("POST cancel: status %s, want %d", res.Status, want)
			}
			// The websocket, with the Origin a page of that name sends.
			header := http.Header{"Host": {h.host}, "Origin": {"http://" + h.host}}
			conn, resp, err := websocket.DefaultDialer.Dial(wsURL(e, r.ID, ""), header)
			if h.ok {
				if err != nil {
					t.Fatalf("websocket refused: %v", err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("websocket answered 101")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("websocket handshake: %v, want 403", resp)
			}
		})
	}
}

// The websocket compares the whole origin: this server's host and port
// over another scheme, or under another of its names, is another site.
func TestWebsocketOriginScheme(t *testing.T) {
	t.Parallel()
	e, r := scenarioEnv(t, nil)
	tests := []struct {
		name   string
		origin string
		ok     bool
	}{
		{"this page over http", "http://" + e.hostPort(), true},
		{"this host and port over https", "https://" + e.hostPort(), false},
		{"this port under another name of the server", "http://localhost:" + e.port(), false},
		{"ws scheme", "ws://" + e.hostPort(), false},
		{"not a URL", "127.0.0.1:" + e.port(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, resp, err := websocket.DefaultDialer.Dial(wsURL(e, r.ID, ""), http.Header{"Origin": {tt.origin}})
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
