package live

import (
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
	"github.com/sampviz/sampviz/web/webtest"
)

// Rules applied once every row is judged (rows shifted by the padding)
// fail rows after they streamed: the final message carries them again, as
// the report says, and a row the session never streamed is added.
func TestSettleStreamsWhatTheReportChanged(t *testing.T) {
	rows, vocab := 4+rand.IntN(20), 50+rand.IntN(200)
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "probs"}, {Name: "probs@shifted", External: true, Kind: "probs"}}
	tp := newTopic("r", "", rows, vocab, view.Status{State: store.Running})
	tp.Outputs(outs)
	rep := &engine.Report{Rows: rows}
	for _, o := range outs {
		rep.Outputs = append(rep.Outputs, engine.OutputReport{Name: o.Name, External: o.External, Kind: o.Kind})
	}
	skipped := rows - 1 // never streamed
	changed := rand.IntN(rows - 1)
	var c Cursor
	for r := range rows {
		for o := range outs {
			u := webtest.RandomUpdate(o, r, vocab)
			u.Report.Pass, u.Report.Violations, u.Report.Findings = true, []string{}, nil
			if !(o == 1 && r == skipped) {
				tp.Row(u)
			}
			if o == 1 && (r == changed || r == skipped) {
				u.Report.AddFinding(engine.Finding{Rule: engine.RulePadding, Severity: engine.Violation, Token: -1, Message: "row: shifted by the padding"})
			}
			rep.Outputs[o].Rows = append(rep.Outputs[o].Rows, u.Report)
		}
	}
	tp.Next(&c, true)
	judged := tp.status.Judged
	tp.settle(rep)
	tp.finish(view.Summarize(rep))
	u, _ := tp.Next(&c, true)
	if u == nil || !u.Final {
		t.Fatal("no final update")
	}
	got := map[int]view.RowSummary{}
	for _, r := range u.Rows {
		if r.Output != 1 {
			t.Errorf("row %d of output %d streamed again, though the report did not change it", r.Row, r.Output)
		}
		got[r.Row] = r
	}
	for _, r := range []int{changed, skipped} {
		s, ok := got[r]
		if !ok || s.Pass || s.Violations != 1 || s.Say != "row: shifted by the padding" {
			t.Errorf("row %d in the final update: %+v (present %v), want it failing with its finding", r, s, ok)
		}
	}
	if len(got) != 2 {
		t.Errorf("the final update carries %d rows, want 2", len(got))
	}
	if tp.status.Judged != judged+1 {
		t.Errorf("judged %d after settling, want %d (the row never streamed)", tp.status.Judged, judged+1)
	}
	if rr := tp.RowReport(1, changed); rr == nil || rr.Pass {
		t.Errorf("the row page reads row %d as %+v", changed, rr)
	}
}
