package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/sampviz/sampviz/web/view"
)

// tokenCookie carries the token after a ?token= link was opened once.
const tokenCookie = "sampviz_token"

// CheckListen refuses an address that other machines can reach unless a
// token guards it or insecure says the person accepts an open server. Its
// error is one sentence for the terminal.
func CheckListen(addr, token string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q is not host:port: %w", addr, err)
	}
	if Loopback(host) || token != "" || insecure {
		return nil
	}
	return fmt.Errorf("--listen %s can be reached from other machines: give --token SECRET (sent as 'Authorization: Bearer SECRET' or ?token=SECRET), or --insecure to serve without one", addr)
}

// Loopback reports whether host (a name or an address) only reaches this
// machine.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// errBadToken is what a request without the right token is told.
var errBadToken = errors.New("this sampviz server needs its token: open the link with ?token=... that its owner gave you, or send 'Authorization: Bearer TOKEN'")

// requireToken lets a request through when it carries the token: as a
// bearer token, as ?token= (which also sets a cookie, so the pages' own
// links and websocket work after), or in that cookie. Comparisons take the
// same time whatever the guess.
func (s *Server) requireToken(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.cfg.Token))
	ok := func(got string) bool {
		if got == "" {
			return false
		}
		g := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(g[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") && ok(strings.TrimPrefix(auth, "Bearer ")) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query().Get("token"); q != "" && ok(q) {
			http.SetCookie(w, &http.Cookie{
				Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
			})
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(tokenCookie); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Info("refused request without token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="sampviz"`)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": view.Sentence(errBadToken.Error())})
			return
		}
		http.Error(w, view.Sentence(errBadToken.Error()), http.StatusUnauthorized)
	})
}
