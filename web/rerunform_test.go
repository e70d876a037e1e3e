package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sampviz/sampviz/engine"
)

// The rerun form has a field for every run parameter the command line
// has (the parameter table), a select for each choice; a rerun from it
// with the Gumbel sampler, a filter order, a tie rule and n-gram settings
// keeps them.
func TestRerunFormHasEveryParameter(t *testing.T) {
	e := newEnv(t, nil)
	r := e.uploadRaw(randomDump(4, 16).Bytes())
	e.wait(r.ID, "")
	page := e.page("/runs/"+r.ID, http.StatusOK)
	form := elements(t, page, "rerun-form")
	if len(form) != 1 {
		t.Fatalf("%d rerun forms", len(form))
	}
	fields := map[string]*html.Node{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "input" || n.Data == "select") {
			fields[attr(n, "name")] = n
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(form[0])
	for _, p := range engine.ParamTable() {
		f, ok := fields[p.Name]
		if !ok {
			t.Errorf("no field %s (%s) in the rerun form", p.Name, p.Usage)
			continue
		}
		if p.Kind == engine.KindChoice {
			var opts []string
			for c := f.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "option" {
					opts = append(opts, attr(c, "value"))
				}
			}
			if f.Data != "select" || strings.Join(opts, ",") != ","+strings.Join(p.Choices, ",") {
				t.Errorf("%s: a %s with options %q, want a select of %q", p.Name, f.Data, opts, p.Choices)
			}
		}
	}
	form2 := url.Values{"method": {"gumbel"}, "filter_order": {"joint"}, "top_k_ties": {"lowest_index"}, "max_ngram_size": {"4"}, "draws": {"500"}}
	res := e.do("POST", "/runs/"+r.ID+"/rerun", strings.NewReader(form2.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("rerun: %s", res.Status)
	}
	id := strings.TrimPrefix(res.Header.Get("Location"), "/runs/")
	e.wait(id, "")
	got := decode[struct {
		Params engine.Overrides `json:"params"`
	}](t, e.do("GET", "/api/runs/"+id, nil))
	for name, want := range map[string]string{"method": "gumbel", "filter_order": "joint", "top_k_ties": "lowest_index", "max_ngram_size": "4", "draws": "500"} {
		if v, _ := got.Params.Get(name); v != want {
			t.Errorf("rerun's %s = %q, want %q", name, v, want)
		}
	}
	// The new run's form shows them.
	page = e.page("/runs/"+id, http.StatusOK)
	if !strings.Contains(string(page), `<option value="gumbel" selected>`) {
		t.Error("the rerun's form does not show its method")
	}
}
