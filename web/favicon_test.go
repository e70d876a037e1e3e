package web_test

import (
	"bytes"
	"net/http"
	"testing"
)

// Browsers ask every server for /favicon.ico: it answers with the
// embedded icon, and the pages name it.
func TestFavicon(t *testing.T) {
	e := newEnv(t, nil)
	res := e.do("GET", "/favicon.ico", nil)
	body := readAll(t, res)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/x-icon" || !bytes.HasPrefix(body, []byte{0, 0, 1, 0}) {
		t.Errorf("/favicon.ico: %s, %s, %d bytes", res.Status, res.Header.Get("Content-Type"), len(body))
	}
	if page := readAll(t, e.do("GET", "/", nil)); !bytes.Contains(page, []byte(`<link rel="icon" href="/favicon.ico">`)) {
		t.Error("the home page does not name its icon")
	}
}
