package compare

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// judgeDraft judges row r of an ngram_match output: exact equality with the
// reference drafts, a missing column reading as -1.
func (w *worker) judgeDraft(p *plan, r int, rep *engine.RowReport) {
	var want []int64
	if r < len(w.j.ngram) {
		want = w.j.ngram[r]
	}
	t := p.out.DraftOut
	width := t.Dim(1)
	got := make([]int64, width)
	for j := range got {
		got[j] = t.Int(r*width + j)
	}
	at := func(s []int64, j int) int64 {
		if j < len(s) {
			return s[j]
		}
		return -1
	}
	for j := range max(width, len(want)) {
		if at(got, j) != at(want, j) {
			rep.AddFinding(violation(engine.RuleExact, int(at(got, j)), "row %d: draft %s differs from the reference %s at position %d", r, draftString(got), draftString(want), j))
			return
		}
	}
}

// draftString formats a draft without its -1 fill: "[5 9 11]".
func draftString(d []int64) string {
	n := len(d)
	for n > 0 && d[n-1] == -1 {
		n--
	}
	return fmt.Sprint(d[:n])
}
