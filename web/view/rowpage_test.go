package view

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/web/store"
)

// The row page offers 20, 60 and 200 tokens, keeping the rest of its view
// in the links.
func TestTopLinks(t *testing.T) {
	d := &RowPage{Run: store.Run{ID: "aaaaaaaaaa"}, Row: 3, Top: 60, Log: true}
	got := TopLinks(d)
	if len(got) != 3 {
		t.Fatalf("%d links, want 3", len(got))
	}
	for i, n := range []int{20, 60, 200} {
		l := got[i]
		if l.N != n || l.Current != (n == 60) || !strings.Contains(l.Href, "/runs/aaaaaaaaaa/rows/3?") || !strings.Contains(l.Href, "log=1") {
			t.Errorf("link %d = %+v", i, l)
		}
		if n != DefaultTop && !strings.Contains(l.Href, "top="+itoa(n)) {
			t.Errorf("link %d = %q, want top=%d", i, l.Href, n)
		}
	}
	d.Top = 35
	if got := TopLinks(d); len(got) != 4 || got[1].N != 35 || !got[1].Current {
		t.Errorf("a count from the URL is not among the choices: %+v", got)
	}
}

// The CDF chart draws each output's own cut beside the reference's, and
// the sentence under it names an output that cuts elsewhere.
func TestCDFChartDrawsTheOutputsCut(t *testing.T) {
	d := &explain.RowDetail{Vocab: 100, TopK: 20, TopP: 0.8,
		Probs:  []engine.OutputInfo{{Name: "probs", External: true, Kind: "probs"}},
		Tokens: []explain.TokenDetail{{Token: 1, Rank: 1, Base: 0.5, Ref: 0.6, Class: "kept", Values: []engine.Float{0.6}}},
		CDF:    []explain.CDFPoint{{Rank: 1, Mass: 0.5}, {Rank: 100, Mass: 1}},
		Cuts: explain.Cuts{TopKRank: 20, TopPMass: 0.8, TopPRank: 12, Kept: 12,
			Outputs: []explain.OutputCut{{Name: "probs", Kept: 20, Rank: 20, Mass: 0.7}}},
	}
	b, err := json.Marshal(RowCharts(d, nil, false, nil)["cdf"])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "probs (from the dump) keeps 20 (its cut)") {
		t.Errorf("the CDF chart does not draw the output's cut: %s", b)
	}
	if line := CutsLine(d); !strings.Contains(line, "probs (from the dump) keeps 20") {
		t.Errorf("cuts line %q does not name the output's cut", line)
	}
}

// Bars on a log axis rise from the axis's floor: ECharts starts them at 1
// (hanging down to the value) unless the axis names a startValue.
func TestLogBarsRiseFromTheFloor(t *testing.T) {
	d := &explain.RowDetail{Vocab: 10, Probs: []engine.OutputInfo{{Name: "cpu", Kind: "probs"}},
		Tokens: []explain.TokenDetail{{Token: 1, Rank: 1, Base: 0.5, Ref: 0.5, Values: []engine.Float{0.5}}, {Token: 2, Rank: 2, Base: 1e-5, Ref: 1e-5, Values: []engine.Float{1e-5}}},
		CDF:    []explain.CDFPoint{{Rank: 1, Mass: 0.5}}}
	b, err := json.Marshal(RowCharts(d, nil, true, nil)["probs"])
	if err != nil {
		t.Fatal(err)
	}
	var opt struct {
		YAxis []struct {
			Type       string   `json:"type"`
			Min        *float64 `json:"min"`
			StartValue *float64 `json:"startValue"`
		} `json:"yAxis"`
	}
	if err := json.Unmarshal(b, &opt); err != nil {
		t.Fatal(err)
	}
	if len(opt.YAxis) != 1 || opt.YAxis[0].Type != "log" || opt.YAxis[0].StartValue == nil || opt.YAxis[0].Min == nil || *opt.YAxis[0].StartValue != *opt.YAxis[0].Min {
		t.Errorf("log y axis %s: want startValue at its min", b)
	}
}
