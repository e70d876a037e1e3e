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
	if w.j.ngramRows != nil {
		w.judgeFastDeployDraft(p, r, rep)
		return
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

// judgeFastDeployDraft judges row r of an ngram_match output under
// FastDeploy's rules: seq_lens_this_time_out, when given, equals the
// reference's; the draft columns the reference writes (from its offset, as
// many as it drafts) hold its tokens. The other columns are not judged:
// FastDeploy leaves them as they were.
func (w *worker) judgeFastDeployDraft(p *plan, r int, rep *engine.RowReport) {
	if r >= len(w.j.ngramRows) {
		return
	}
	nr := w.j.ngramRows[r]
	if sl := p.out.SeqLensThisTime; sl != nil {
		if got := sl.Int(r); got != nr.SeqLen {
			what := fmt.Sprintf("drafts %d tokens", nr.SeqLen-int64(nr.Offset))
			if nr.Why != "" {
				what = "drafts nothing: " + nr.Why
			}
			rep.AddFinding(violation(engine.RuleExact, int(got), "row %d: seq_lens_this_time %d, but FastDeploy's rule gives %d (the row %s; budget left %d, limit %d)", r, got, nr.SeqLen, what, nr.Budget, nr.Limit))
			return
		}
	}
	t := p.out.DraftOut
	width := t.Dim(1)
	for k, want := range nr.Draft {
		j := nr.Offset + k
		if j >= width {
			break
		}
		if got := t.Int(r*width + j); got != want {
			rep.AddFinding(violation(engine.RuleExact, int(got), "row %d: draft_out[%d] is %d, but FastDeploy's rule drafts %s from column %d", r, j, got, fmt.Sprint(nr.Draft), nr.Offset))
			return
		}
	}
}
