package web_test

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/webtest"
)

// An upload answers its run with the page's absolute URL (`link`), so
// `curl -T` prints a link a terminal opens.
func TestUploadAnswersAnAbsoluteLink(t *testing.T) {
	e := newEnv(t, nil)
	res := e.do("PUT", "/api/runs", bytes.NewReader(randomDump(3, 8).Bytes()))
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s", res.Status)
	}
	r := decode[struct {
		ID   string `json:"id"`
		URL  string `json:"url"`
		Link string `json:"link"`
	}](t, res)
	if r.URL != "/runs/"+r.ID || r.Link != e.ts.URL+"/runs/"+r.ID {
		t.Errorf("url %q, link %q; want /runs/%s and %s/runs/%s", r.URL, r.Link, r.ID, e.ts.URL, r.ID)
	}
	e.wait(r.ID, "")
}

// report.json naming a re-judgement that is under way waits for it rather
// than answering 409 as if the run had not finished.
func TestReportWaitsForItsRejudgement(t *testing.T) {
	e := newEnv(t, func(_ *web.Config, p *webtest.Pipeline) { p.RowDelay = 20 * time.Millisecond })
	dump := randomDump(10, 16)
	r := e.uploadRaw(dump.Bytes())
	e.wait(r.ID, "")
	q := url.Values{"satol": {"0.1"}, "srtol": {"0"}, "natol": {"0.1"}, "nrtol": {"0"}, "pvalue": {"0.001"}}
	res := e.do("POST", "/api/runs/"+r.ID+"/judgements?"+q.Encode(), nil)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("judge: %s %s", res.Status, readAll(t, res))
	}
	res.Body.Close()
	for _, path := range []string{"/api/runs/" + r.ID + "/report.json?", "/api/runs/" + r.ID + "/report.csv?"} {
		res = e.do("GET", path+q.Encode(), nil)
		body := readAll(t, res)
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s while the re-judgement runs: %s %s", path, res.Status, body)
		}
	}
}
