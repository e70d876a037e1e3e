package live

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
	"github.com/sampviz/sampviz/web/webtest"
)

// A finished topic written to stream.json and read back shows the same:
// its status, rows, failing rows, summary and charts.
func TestTopicFromStream(t *testing.T) {
	rows, vocab, k, trials := 20+rand.IntN(100), 100+rand.IntN(1000), 1+rand.IntN(6), 50+rand.IntN(500)
	tol := engine.Tolerances{PValue: 1e-6}
	tests := []struct {
		name string
		outs []engine.OutputInfo
		row  func(o, r int) session.RowUpdate
	}{
		{"probabilities", []engine.OutputInfo{{Name: "cpu", Kind: "probs"}, {Name: "probs", External: true, Kind: "probs"}},
			func(o, r int) session.RowUpdate { return webtest.RandomUpdate(o, r, vocab) }},
		{"speculative trials and p-values", []engine.OutputInfo{{Name: "cpu", Kind: "spec", Tolerances: &tol}, {Name: "samples", External: true, Kind: "samples"}},
			func(o, r int) session.RowUpdate {
				pv := math.Pow(10, -12*rand.Float64())
				rep := engine.RowReport{Row: r, Pass: pv > tol.PValue, PValue: &pv}
				if o == 0 {
					rep.Spec = webtest.RandomSpecStats(k, trials)
				}
				return session.RowUpdate{Output: o, Report: rep}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTopic("r", "", rows, vocab, view.Status{State: store.Running})
			tp.Outputs(tt.outs)
			rep := &engine.Report{Rows: rows, Tolerances: tol}
			for _, o := range tt.outs {
				rep.Outputs = append(rep.Outputs, engine.OutputReport{Name: o.Name, External: o.External, Kind: o.Kind})
			}
			for r := range rows {
				for o := range tt.outs {
					u := tt.row(o, r)
					tp.Row(u)
					rep.Outputs[o].Rows = append(rep.Outputs[o].Rows, u.Report)
				}
			}
			tp.finish(view.Summarize(rep))
			b, err := json.Marshal(tp.toStored())
			if err != nil {
				t.Fatal(err)
			}
			var s stored
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			back := topicFromStored("r", "", s)
			_, st := tp.Snapshot()
			_, backSt := back.Snapshot()
			if backSt != st {
				t.Errorf("status %+v, want %+v", backSt, st)
			}
			if got, want := back.FailingRows(), tp.FailingRows(); !slices.Equal(got, want) {
				t.Errorf("failing rows %v, want %v", got, want)
			}
			if back.Final() == nil || back.Final().Sentence != tp.Final().Sentence {
				t.Errorf("summary %+v, want %+v", back.Final(), tp.Final())
			}
			got, _, _ := back.chartsJSONFor(true)
			want, _, _ := tp.chartsJSONFor(true)
			if string(got) != string(want) {
				t.Error("the restored topic draws other charts")
			}
		})
	}
}
