package web

import (
	"net/http"
	"strconv"
)

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

// logError logs err as its status deserves (server faults as errors,
// refusals with a cause as information) and returns what the client sees.
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
