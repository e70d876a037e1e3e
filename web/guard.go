package web

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// guard refuses what a page of another site could make a browser send:
//
//   - every request whose Host is not one of this server's names (its
//     listen address, localhost, an IP address, or a name --allow-host
//     gave): a DNS-rebinding page that points its own name at 127.0.0.1
//     gets nothing, not even a read;
//   - every request that changes state (POST, PUT, PATCH, DELETE) that a
//     browser says came from elsewhere: a Sec-Fetch-Site other than
//     same-origin or none, or an Origin other than this server's own
//     (scheme, host and port).
//
// Clients that are not browsers (curl, the capture module) send neither
// header and pass; a token (requireToken) is what keeps other machines out.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowedHost(r.Host) {
			s.refuse(w, r, fmt.Sprintf("This sampviz server answers only to its own addresses, not %q; start it with --allow-host %s to add that name.", r.Host, hostOnly(r.Host)))
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !sameSite(r) {
				s.refuse(w, r, "This sampviz server takes changes only from its own pages; a page of another site cannot upload, rerun, cancel or delete here.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers 403 with msg, as JSON under /api/ and as text elsewhere.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	s.log.Info("refused request from elsewhere", "method", r.Method, "path", r.URL.Path, "host", r.Host,
		"origin", r.Header.Get("Origin"), "fetch_site", r.Header.Get("Sec-Fetch-Site"))
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": msg})
		return
	}
	http.Error(w, msg, http.StatusForbidden)
}

// hostOnly returns the host of a Host header, without its port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]")
	}
	return strings.Trim(hostport, "[]")
}

// allowedHost reports whether a request's Host names this server: an IP
// address (a rebinding needs a name), localhost, the listen address's host,
// or a name of Config.AllowHosts.
func (s *Server) allowedHost(hostport string) bool {
	h := strings.ToLower(hostOnly(hostport))
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if listen := strings.ToLower(hostOnly(s.cfg.Listen)); listen != "" && h == listen {
		return true
	}
	for _, a := range s.cfg.AllowHosts {
		if strings.EqualFold(h, a) {
			return true
		}
	}
	return false
}

// sameSite reports whether a browser says the request came from this
// server's own pages: Sec-Fetch-Site same-origin or none (typed in the
// address bar), and an Origin, when there is one, of this server's scheme,
// host and port. A request with neither header is not a browser's.
func sameSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	return sameOrigin(r)
}

// sameOrigin reports whether r's Origin header is this server's origin:
// the scheme it is served on, and the Host the request asked for. A request
// without Origin is not a browser's and passes.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null", or not a URL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}
