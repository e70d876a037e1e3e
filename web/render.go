package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/a-h/templ"

	"github.com/sampviz/sampviz/web/view"
)

// render renders c into a buffer and only then writes it, so a component
// that fails never sends half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	// Not the request's context: net/http cancels it when reading the body
	// failed (a slow upload cut with 408), and that answer is a page too.
	if err := c.Render(context.WithoutCancel(r.Context()), &buf); err != nil {
		s.log.Error("render page", "path", r.URL.Path, "err", err)
		http.Error(w, "sampviz could not draw this page; the server log has the details.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// writeJSON marshals v before writing anything, like render.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, `{"error": "sampviz could not encode this answer."}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// chrome is what every page's frame shows.
func (s *Server) chrome() view.Chrome { return view.Chrome{Backends: s.runner.Backends()} }
