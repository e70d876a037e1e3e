package web

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// The run page has a drift table: each float output's mean, P99 and max
// error against each reference, with a link to the row of the greatest,
// found among the rows (a NaN row and a masked row have no drift).
func TestRunPageDriftTable(t *testing.T) {
	const vocab = 100
	maxErr := engine.Float(1e-6 * (1 + rand.Float64()))
	drift := func(ref string, max engine.Float, at int) *engine.Drift {
		return &engine.Drift{Reference: ref, Tolerance: engine.Tolerance{Atol: 1e-5, Rtol: 1.3e-6}, Elements: vocab,
			Abs: engine.ErrorStats{Max: max, Mean: max / 10, P99: max / 2, Index: at}}
	}
	rows := []engine.RowReport{
		{Row: 0, Pass: true, Strict: drift("strict", maxErr/3, 4), Native: drift("native", maxErr/4, 4)},
		{Row: 1, Pass: false}, // NaN in the input: no drift
		{Row: 2, Pass: false}, // masked
		{Row: 3, Pass: true, Strict: drift("strict", maxErr, 17), Native: drift("native", maxErr/2, 9)},
	}
	ours := engine.OutputReport{Name: "cpu", Kind: "probs", Rows: rows,
		Strict: &engine.Drift{Reference: "strict", Elements: 2 * vocab, Abs: engine.ErrorStats{Max: maxErr, Mean: maxErr / 7, P99: maxErr / 3, Index: 3*vocab + 17}},
		Native: &engine.Drift{Reference: "native", Elements: 2 * vocab, Abs: engine.ErrorStats{Max: maxErr / 2, Mean: maxErr / 9, P99: maxErr / 5, Index: 3*vocab + 9}}}
	nan := engine.OutputReport{Name: "probs", External: true, Kind: "probs", Rows: []engine.RowReport{
		{Row: 0, Strict: drift("strict", 1e-3, 2)}, {Row: 3, Strict: drift("strict", engine.Float(math.NaN()), 5)}},
		Strict: &engine.Drift{Reference: "strict", Abs: engine.ErrorStats{Max: engine.Float(math.NaN()), Index: 3*vocab + 5}}}
	rep := &engine.Report{Op: engine.OpSoftmax, Rows: 4, Vocab: vocab, Outputs: []engine.OutputReport{ours, nan}}
	d := view.RunPage{Run: store.Run{ID: "aaaaaaaaaa"}, Summary: view.Summarize(rep)}
	var b bytes.Buffer
	if err := compareSections(d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" && hasTestID(n, "drift-line") {
			var cells []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode {
					cells = append(cells, strings.Join(strings.Fields(nodeText(c)), " "))
				}
			}
			lines = append(lines, cells)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if len(lines) != 3 {
		t.Fatalf("%d drift lines, want 3 (ours strict and native, the dump's strict): %v", len(lines), lines)
	}
	want := [][]string{
		{"cpu kernel (ours)", "strict", engine.FormatSig(float64(maxErr/7), 4), engine.FormatSig(float64(maxErr/3), 4), engine.FormatSig(float64(maxErr), 4), "row 3, token 17"},
		{"cpu kernel (ours)", "native", engine.FormatSig(float64(maxErr/9), 4), engine.FormatSig(float64(maxErr/5), 4), engine.FormatSig(float64(maxErr/2), 4), "row 3, token 9"},
		{"probs (from the dump)", "strict", "", "", "NaN", "row 3, token 5"},
	}
	for i, w := range want {
		got := lines[i]
		if !strings.HasPrefix(got[0], w[0]) || got[1] != w[1] || (w[2] != "" && (got[3] != w[2] || got[4] != w[3])) || got[5] != w[4] || got[6] != w[5] {
			t.Errorf("line %d = %q, want output %s, reference %s, mean %s, P99 %s, max %s at %s", i, got, w[0], w[1], w[2], w[3], w[4], w[5])
		}
	}
}

func hasTestID(n *html.Node, id string) bool {
	for _, a := range n.Attr {
		if a.Key == "data-testid" && a.Val == id {
			return true
		}
	}
	return false
}

func nodeText(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var sb strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		sb.WriteString(nodeText(c))
	}
	return sb.String()
}
