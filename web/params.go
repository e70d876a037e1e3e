package web

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// parseRerun reads the rerun form: a field for each parameter of the
// parameter table (engine.Param, by name; empty fields keep the dump's
// values) and the backend. Values are checked against the table, in its
// words.
func (s *Server) parseRerun(form url.Values) (engine.Overrides, string, error) {
	var p engine.Overrides
	for _, param := range engine.ParamTable() {
		v := strings.TrimSpace(form.Get(param.Name))
		if v == "" {
			continue
		}
		if err := p.Set(param.Name, v); err != nil {
			return p, "", err
		}
	}
	backend := strings.TrimSpace(form.Get("backend"))
	if backend != "" {
		known := false
		var names []string
		for _, d := range s.runner.Backends() {
			names = append(names, d.Backend)
			known = known || d.Backend == backend
		}
		if !known {
			return p, "", fmt.Errorf("this server has no %q backend; it has %s", backend, strings.Join(names, " and "))
		}
	}
	return p, backend, nil
}
