package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// staticFiles are the page's CSS, its script and the vendored ECharts
// (see static/README.md for where echarts.min.js comes from).
//
//go:embed static
var staticFiles embed.FS

// staticHandler serves /static/ from the embedded files.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the folder
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The files change only with the binary; an hour saves reloads
		// without hiding an upgrade for long.
		// The files are named in the pages; a folder lists nothing.
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// faviconHandler serves /favicon.ico, which browsers ask for on every page,
// from the embedded static/favicon.ico.
func faviconHandler() http.Handler {
	ico, err := staticFiles.ReadFile("static/favicon.ico")
	if err != nil {
		panic(err) // embedded with the binary
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/x-icon")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Write(ico)
	})
}
