package web_test

import (
	"bytes"
	"net/http"
	"testing"
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
