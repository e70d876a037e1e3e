package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/a-h/templ"
)

// httpError is what a handler returns when it cannot answer: Msg is the one
// sentence the client sees, Err the wrapped cause that only the log gets.
type httpError struct {
	Status int
	Msg    string
	Err    error
	// RetryAfter, in seconds, is sent with 429 and 503.
	RetryAfter int
}

// Error says both what the client sees and the cause, for the log.
func (e *httpError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Msg, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Msg)
}

// Unwrap returns the cause.
func (e *httpError) Unwrap() error { return e.Err }

// internal wraps an unexpected error: the client reads a plain sentence.
func internal(err error) *httpError {
	return &httpError{Status: http.StatusInternalServerError, Msg: "Something went wrong inside sampviz; the server log has the details.", Err: err}
}

func notFound(msg string) *httpError {
	return &httpError{Status: http.StatusNotFound, Msg: msg}
}

func badRequest(msg string) *httpError {
	return &httpError{Status: http.StatusBadRequest, Msg: msg}
}

// asHTTPError turns any handler error into an httpError.
func asHTTPError(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	return internal(err)
}

// page adapts a page handler: an error becomes an error page with its one
// sentence, and its cause goes to the log.
func (s *Server) page(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		he := s.logError(r, err)
		if he.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(he.RetryAfter))
		}
		s.render(w, r, he.Status, errorPage(s.chrome(), he.Status, he.Msg))
	})
}

// api adapts a JSON handler: an error becomes {"error": sentence}.
func (s *Server) api(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		he := s.logError(r, err)
		if he.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(he.RetryAfter))
		}
		writeJSON(w, he.Status, map[string]string{"error": he.Msg})
	})
}

func (s *Server) logError(r *http.Request, err error) *httpError {
	he := asHTTPError(err)
	switch {
	case he.Status >= 500:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", he.Status, "err", err)
	case he.Err != nil:
		s.log.Info("request refused", "method", r.Method, "path", r.URL.Path, "status", he.Status, "msg", he.Msg, "err", he.Err)
	}
	return he
}

// render renders c into a buffer and only then writes it, so a component
// that fails never sends half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
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

// readJSON decodes the file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}
