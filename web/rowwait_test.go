package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/webtest"
)

// A row page opened before its run is judged says it is waiting (never a
// green pass) and listens to the run's websocket; once the run is judged it
// gives the verdict.
func TestRowPageWaitsForItsRun(t *testing.T) {
	e := newEnv(t, func(c *web.Config, p *webtest.Pipeline) {
		p.Gate = make(chan struct{})
	})
	dump := webtest.Dump{Rows: 4, Vocab: 16, Fail: []int{2}}
	r := e.uploadRaw(dump.Bytes())
	path := fmt.Sprintf("/runs/%s/rows/%d", r.ID, 0)
	page := e.page(path, http.StatusOK)
	v := elements(t, page, "row-verdict")
	if len(v) != 1 {
		t.Fatalf("%d row verdicts", len(v))
	}
	cls, text := attr(v[0], "class"), textOf(v[0])
	if strings.Contains(cls, "pass") || strings.Contains(text, "passes") || !strings.Contains(text, "waiting") {
		t.Errorf("row verdict before judging: class %q, %q; want waiting", cls, text)
	}
	if attr(v[0], "data-wait") != "/runs/"+r.ID+"/ws" {
		t.Errorf("the waiting verdict does not listen to the run's websocket: data-wait %q", attr(v[0], "data-wait"))
	}
	e.pipe.Gate <- struct{}{}
	e.wait(r.ID, "")
	page = e.page(path, http.StatusOK)
	v = elements(t, page, "row-verdict")
	if cls, text := attr(v[0], "class"), textOf(v[0]); !strings.Contains(cls, "pass") || !strings.Contains(text, "Row 0: passes") || attr(v[0], "data-wait") != "" {
		t.Errorf("row verdict after judging: class %q, %q, data-wait %q", cls, text, attr(v[0], "data-wait"))
	}
}
