package e2e

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/sampviz/sampviz/web"
)

// serve starts a sampviz server on cfg (a fresh data directory and a quiet
// log when cfg leaves them empty) behind an httptest server; both stop when
// the test ends.
func serve(t *testing.T, cfg web.Config) *httptest.Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts
}
