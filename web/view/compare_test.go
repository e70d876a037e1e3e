package view

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
)

func fptr(x float64) *engine.Float { f := engine.Float(x); return &f }
func iptr(n int) *int              { return &n }
func tok(n int64) *int64           { return &n }

// comparedReport is a report of two token outputs that declare one seed
// and part on rows 1 and 3, over 6 rows of which 4 and 5 are padding, one
// output writing into padded row 4; and a logits gate output.
func comparedReport(rng *rand.Rand) *engine.Report {
	rows := 6
	eager := engine.OutputReport{Name: "tokens@eager", External: true, Kind: "tokens", Pass: true}
	graph := engine.OutputReport{Name: "tokens@graph", External: true, Kind: "tokens"}
	for r := 0; r < rows; r++ {
		a := int64(rng.IntN(32000))
		ea := engine.RowReport{Row: r, Pass: true, Token: tok(a), Padding: r >= 4}
		gb := engine.RowReport{Row: r, Pass: true, Token: tok(a), Padding: r >= 4}
		switch r {
		case 1, 3:
			b := a + 1 + int64(rng.IntN(100))
			gb.Token = tok(b)
			gb.AddFinding(engine.Finding{Rule: engine.RuleAgreement, Severity: engine.Violation, Token: int(b),
				Message: "row " + string(rune('0'+r)) + ": tokens@graph drew another token"})
		case 4:
			gb.AddFinding(engine.Finding{Rule: engine.RulePadding, Severity: engine.Violation, Token: -1, Message: "row 4 is padding, but tokens@graph holds something other than its fill -1 there"})
		}
		eager.Rows = append(eager.Rows, ea)
		graph.Rows = append(graph.Rows, gb)
	}
	graph.FailedRows = 3
	gate := engine.OutputReport{Name: "logits@graph", External: true, Kind: "logits", Pass: true,
		Gate: &engine.GateStats{MeanKL: engine.Float(rng.Float64() * 1e-4), MaxKL: 3e-4, MaxKLRow: 2,
			Flips: []engine.Flip{{Row: 2, Token: 7, RefToken: 9, Margin: 0.0625, Fragile: true}}, Fragile: 1}}
	for r := 0; r < rows; r++ {
		gate.Rows = append(gate.Rows, engine.RowReport{Row: r, Pass: true, Padding: r >= 4})
	}
	return &engine.Report{
		Rows: rows, Outputs: []engine.OutputReport{eager, graph, gate}, Padding: []int{4, 5},
		Modes: []engine.ModeTable{{Kind: "tokens", Lines: []engine.ModeLine{
			{Output: "tokens@eager", External: true, Pass: true, Rows: 4, Mismatches: iptr(0), Against: []engine.ModeDiff{{Output: "tokens@graph", Differ: iptr(2), Row: 1}}},
			{Output: "tokens@graph", External: true, Rows: 4, FailedRows: 3, Mismatches: iptr(0), Against: []engine.ModeDiff{{Output: "tokens@eager", Differ: iptr(2), Row: 1}}},
		}, Summary: "tokens@eager passes; tokens@graph (3 of 4 rows) fails"}},
		Agreement: []engine.Agreement{{Kind: "tokens", A: "tokens@eager", B: "tokens@graph", Rule: "same_draws", Compared: 4, Agree: 2, FirstRow: 1, FirstDraw: 0, MaxRow: -1, MaxToken: -1,
			Message: "tokens@eager and tokens@graph draw the same tokens on 2 of 4 rows compared"}},
	}
}

func TestSummarizeComparison(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	rep := comparedReport(rng)
	s := Summarize(rep)
	if !reflect.DeepEqual(s.Padding, []int{4, 5}) {
		t.Errorf("padding %v, want [4 5]", s.Padding)
	}
	if len(s.Modes) != 1 || len(s.Agreement) != 1 {
		t.Fatalf("%d mode tables and %d pairs, want 1 and 1", len(s.Modes), len(s.Agreement))
	}
	ag := s.Agreement[0]
	var parted []int
	for _, p := range ag.Parted {
		parted = append(parted, p.Row)
		a, b := rep.Outputs[0].Rows[p.Row].Token, rep.Outputs[1].Rows[p.Row].Token
		if p.A == nil || p.B == nil || *p.A != *a || *p.B != *b {
			t.Errorf("row %d: tokens %s and %s, want %d and %d", p.Row, TokenText(p.A), TokenText(p.B), *a, *b)
		}
		if !strings.Contains(p.Say, "drew another token") {
			t.Errorf("row %d says %q", p.Row, p.Say)
		}
	}
	if !reflect.DeepEqual(parted, []int{1, 3}) {
		t.Errorf("parted rows %v, want [1 3]", parted)
	}
	if len(s.PaddingFindings) != 1 || s.PaddingFindings[0].Row != 4 || s.PaddingFindings[0].Output != "tokens@graph" {
		t.Errorf("padding findings %+v", s.PaddingFindings)
	}
	for _, o := range s.Outputs {
		if o.Rows != 4 {
			t.Errorf("%s counts %d rows, want the 4 real ones", o.Name, o.Rows)
		}
	}
	if gs := Gates(s); len(gs) != 1 || gs[0].Output != "logits@graph" || !gs[0].Pass {
		t.Errorf("gates %+v", gs)
	}
	if !HasComparison(s) {
		t.Error("no comparison found")
	}
	if got := PaddingLine(s); !strings.HasPrefix(got, "Rows 4 and 5 of the 6 lanes are padding") {
		t.Errorf("padding line %q", got)
	}
	if got := PaddingVerdict(s); got != "tokens@graph breaks the padding rule on 1 row." {
		t.Errorf("padding verdict %q", got)
	}
	if HasComparison(Summarize(&engine.Report{Rows: 2, Pass: true})) {
		t.Error("a report with one output has a comparison")
	}
}

func TestPassSentenceCountsRealRows(t *testing.T) {
	rep := &engine.Report{Rows: 8, Pass: true, Padding: []int{6, 7}, Outputs: []engine.OutputReport{{Name: "cpu", Kind: "probs", Pass: true}}}
	for r := 0; r < 8; r++ {
		rep.Outputs[0].Rows = append(rep.Outputs[0].Rows, engine.RowReport{Row: r, Pass: true, Padding: r >= 6})
	}
	want := "PASS: every output matches the float64 reference within tolerance on all 6 real rows, and holds its fill in the 2 padded lanes."
	if got := Summarize(rep).Sentence; got != want {
		t.Errorf("sentence\n got %q\nwant %q", got, want)
	}
}

func TestModeCells(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	mean, p99, max := rng.Float64()*1e-3, rng.Float64()*1e-2, 1+rng.Float64()*9
	logits := engine.ModeTable{Kind: "logits", Metric: "logit", Lines: []engine.ModeLine{
		{Output: "logits@bs1", External: true, Pass: true, Rows: 8, Mean: fptr(mean), P99: fptr(p99), Max: fptr(p99), KL: fptr(1e-5), RealFlips: iptr(0), FragileFlips: iptr(1),
			Against: []engine.ModeDiff{{Output: "logits@pad9", Max: fptr(max), Row: 3}}},
		{Output: "logits@pad9", External: true, Rows: 8, FailedRows: 1, Mean: fptr(mean), P99: fptr(p99), Max: fptr(max), KL: fptr(0.02), RealFlips: iptr(1), FragileFlips: iptr(0),
			Against: []engine.ModeDiff{{Output: "logits@bs1", Max: fptr(max), Row: 3}}},
	}}
	probs := engine.ModeTable{Kind: "probs", Metric: "abs", Lines: []engine.ModeLine{
		{Output: "cpu", Pass: true, Rows: 6, Mean: fptr(mean), P99: fptr(p99), Max: fptr(max), Against: []engine.ModeDiff{{Output: "probs@graph", Max: fptr(max), Row: 5}}},
		{Output: "probs@graph", External: true, Pass: true, Rows: 6, Mean: fptr(mean), P99: fptr(p99), Max: fptr(max), Against: []engine.ModeDiff{{Output: "cpu", Max: fptr(max), Row: 5}}},
	}}
	tokens := engine.ModeTable{Kind: "tokens", Lines: []engine.ModeLine{
		{Output: "tokens@a", External: true, Pass: true, Rows: 4, Mismatches: iptr(0), Against: []engine.ModeDiff{{Output: "tokens@b", Differ: iptr(0), Row: -1}}},
		{Output: "tokens@b", External: true, Pass: true, Rows: 4, Mismatches: iptr(0), Against: []engine.ModeDiff{{Output: "tokens@a", Differ: iptr(0), Row: -1}}},
	}}
	link := func(r int) string { return "/rows/" + string(rune('0'+r)) }
	tests := []struct {
		name    string
		t       engine.ModeTable
		head    []string
		line    int
		cells   []string
		against []string
		href    string // the first link of the line's differences
	}{
		{"logits gate", logits, []string{"output", "verdict", "rows failing", "mean |Δlogit|", "P99", "max", "mean KL", "top-1 flips real / fragile"},
			1, []string{"logits@pad9", "FAIL", "1 of 8", engine.FormatSig(float64(mean), 4), engine.FormatSig(float64(p99), 4), engine.FormatSig(float64(max), 4), "0.02", "1 / 0"},
			[]string{"@pad9", engine.FormatSig(float64(max), 4) + " (row 3)", "—"}, "/rows/3"},
		{"probabilities, ours named", probs, []string{"output", "verdict", "rows failing", "mean |error|", "P99", "max"},
			0, []string{"cpu (ours)", "pass", "0 of 6", engine.FormatSig(float64(mean), 4), engine.FormatSig(float64(p99), 4), engine.FormatSig(float64(max), 4)},
			[]string{"cpu", "—", engine.FormatSig(float64(max), 4) + " (row 5)"}, "/rows/5"},
		{"tokens that agree", tokens, []string{"output", "verdict", "rows failing", "mismatches"},
			0, []string{"tokens@a", "pass", "0 of 4", "0"}, []string{"@a", "—", "same on every row"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ModeHead(tt.t); !reflect.DeepEqual(got, tt.head) {
				t.Errorf("head (-got +want)\n-%q\n+%q", got, tt.head)
			}
			text := func(cells []ModeCell) []string {
				var out []string
				for _, c := range cells {
					out = append(out, c.Text)
				}
				return out
			}
			if got := text(ModeCells(tt.t, tt.t.Lines[tt.line])); !reflect.DeepEqual(got, tt.cells) {
				t.Errorf("cells (-got +want)\n-%q\n+%q", got, tt.cells)
			}
			against := AgainstCells(tt.t, tt.t.Lines[tt.line], link)
			if got := text(against); !reflect.DeepEqual(got, tt.against) {
				t.Errorf("differences (-got +want)\n-%q\n+%q", got, tt.against)
			}
			href := ""
			for _, c := range against {
				if href == "" {
					href = c.Href
				}
			}
			if href != tt.href {
				t.Errorf("link %q, want %q", href, tt.href)
			}
			if n, m := len(AgainstHead(tt.t)), len(against); n != m {
				t.Errorf("%d headers for %d cells of differences", n, m)
			}
		})
	}
}

func TestGateWords(t *testing.T) {
	gs := []Gate{
		{Output: "logits@bs1", Pass: true, Stats: &engine.GateStats{}},
		{Output: "logits@pad5", Pass: true, Stats: &engine.GateStats{Flips: []engine.Flip{{Row: 6, Token: 1, RefToken: 2, Margin: 0.0625, Fragile: true}}, Fragile: 1}},
		{Output: "logits@pad9", Pass: false, Stats: &engine.GateStats{Flips: []engine.Flip{{Row: 3, Token: 18000, RefToken: 31681, Margin: 8.97}}, Real: 1}},
	}
	if got, want := GateSentence(gs), "logits@bs1 and logits@pad5 pass the gate; logits@pad9 fails."; got != want {
		t.Errorf("sentence %q, want %q", got, want)
	}
	if got := FlipLine(gs[2].Stats.Flips[0]); !strings.Contains(got, "row 3: top-1 token 18000 where the golden's is 31681") || !strings.Contains(got, "real flip") {
		t.Errorf("flip line %q", got)
	}
	if got := GateLine(gs[1]); !strings.Contains(got, "1 flip of the top-1 token (0 real, 1 fragile)") {
		t.Errorf("gate line %q", got)
	}
}

func TestShownProbs(t *testing.T) {
	probs := func(names ...string) *explain.RowDetail {
		d := &explain.RowDetail{}
		for _, n := range names {
			d.Probs = append(d.Probs, engine.OutputInfo{Name: n, External: n != "cpu", Kind: "probs"})
		}
		return d
	}
	outs := func(d *explain.RowDetail) []engine.OutputInfo { return d.Probs }
	reps := func(pass ...bool) []*engine.RowReport {
		var r []*engine.RowReport
		for _, p := range pass {
			r = append(r, &engine.RowReport{Pass: p})
		}
		return r
	}
	three := probs("cpu", "probs@graph", "probs@shifted")
	tests := []struct {
		name string
		d    *explain.RowDetail
		reps []*engine.RowReport
		all  bool
		want []int
	}{
		{"two are always drawn", probs("cpu", "probs"), reps(true, false), false, []int{0, 1}},
		{"ours and the failing one", three, reps(true, true, false), false, []int{0, 2}},
		{"all passing: the first two", three, reps(true, true, true), false, []int{0, 1}},
		{"every output when asked", three, reps(true, true, false), true, []int{0, 1, 2}},
		{"no ours: the failing ones", probs("probs@a", "probs@b", "probs@c", "probs@d"), reps(true, false, true, false), false, []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShownProbs(tt.d, outs(tt.d), tt.reps, tt.all); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("shown %v, want %v", got, tt.want)
			}
		})
	}
	d := &RowPage{Detail: three}
	if got := ShownLine(d, []int{0, 2}); !strings.Contains(got, "1 more output is not drawn: probs@graph") {
		t.Errorf("shown line %q", got)
	}
	m := RowCharts(&explain.RowDetail{Probs: three.Probs, Tokens: []explain.TokenDetail{{Token: 1, Ref: 0.5, Values: []engine.Float{0.5, 0.5, 0.4}}}}, nil, false, []int{0, 2})
	if n := seriesCount(t, m["error"]); n != 2+2 {
		t.Errorf("the error chart draws %d series, want 2 outputs and the 2 bounds", n)
	}
}

func seriesCount(t *testing.T, chart any) int {
	t.Helper()
	m, ok := chart.(map[string]any)
	if !ok {
		t.Fatalf("chart is %T", chart)
	}
	s, ok := m["series"].([]any)
	if !ok {
		rv := reflect.ValueOf(m["series"])
		return rv.Len()
	}
	return len(s)
}

func TestChartsLeavePaddingOut(t *testing.T) {
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "probs"}}
	c := NewChartData(4, outs)
	w := engine.Float(rand.Float64())
	for r := 0; r < 4; r++ {
		c.Add(RowSummary{Output: 0, Row: r, Pass: r != 3, Worst: &w, Padding: r >= 2, Violations: 1}, &session.RowErrors{Buckets: make([]engine.Float, session.HeatBuckets)}, nil)
	}
	o := c.outputs[0]
	for r, p := range o.Pass {
		if want := int8(0); r >= 2 && p != want {
			t.Errorf("padded row %d is drawn (%d)", r, p)
		}
		if r < 2 && p != 1 {
			t.Errorf("real row %d is not drawn", r)
		}
	}
	n := 0
	for _, h := range o.Hist {
		n += h
	}
	if n != 0 {
		t.Errorf("the histogram counts %d tokens of rows with no errors", n)
	}
}

func TestDiffWords(t *testing.T) {
	pr := func(rate, lo, hi float64) engine.PositionRate {
		return engine.PositionRate{Reached: 100, Rate: engine.Float(rate), Lo: engine.Float(lo), Hi: engine.Float(hi)}
	}
	tests := []struct {
		name string
		a, b engine.PositionRate
		want bool
	}{
		{"overlap", pr(0.5, 0.4, 0.6), pr(0.55, 0.45, 0.65), false},
		{"moved up", pr(0.3, 0.2, 0.4), pr(0.7, 0.6, 0.8), true},
		{"moved down", pr(0.7, 0.6, 0.8), pr(0.3, 0.2, 0.4), true},
		{"not reached", engine.PositionRate{}, pr(0.7, 0.6, 0.8), false},
	}
	for _, tt := range tests {
		if got := PositionsApart(diff.Position{A: tt.a, B: tt.b}); got != tt.want {
			t.Errorf("%s: apart %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDiffOutputAndRows(t *testing.T) {
	d := &diff.Diff{Outputs: []diff.Output{
		{Name: "cpu", PassA: true, PassB: true, Rows: []diff.Row{{Row: 0, PassA: true, PassB: true}, {Row: 1, PassA: true, PassB: true}}},
		{Name: "probs", External: true, Fixed: []int{1}, Broken: []int{0}, Rows: []diff.Row{{Row: 0, PassA: true, Change: "broken"}, {Row: 1, PassB: true, Change: "fixed"}, {Row: 2, PassA: true, PassB: true}}},
	}}
	if got := PickOutput(d, ""); got != 1 {
		t.Errorf("picked output %d, want the one whose rows changed (1)", got)
	}
	if got := PickOutput(d, "cpu"); got != 0 {
		t.Errorf("picked output %d for ?out=cpu", got)
	}
	if got := DiffRows(&d.Outputs[1], false); len(got) != 2 || got[0].Change != "broken" || got[1].Change != "fixed" {
		t.Errorf("changed rows %+v", got)
	}
	if got := DiffRows(&d.Outputs[1], true); len(got) != 3 {
		t.Errorf("%d rows listed with rows=all, want 3", len(got))
	}
	page := &DiffPage{Diff: d, Output: 1, AllRows: true}
	if got := DiffQuery(page, "rows", "").Encode(); got != "out=probs" {
		t.Errorf("query %q, want out=probs", got)
	}
	m := DiffCharts(&diff.Output{Name: "probs", Rows: []diff.Row{{Row: 0, DriftA: fptr(1e-3), DriftB: fptr(rand.Float64())}}})
	if _, ok := m["drift"]; !ok {
		t.Error("no drift chart for an output with drifts")
	}
	rate := rand.Float64()
	pos := diff.Position{A: engine.PositionRate{Reached: 10, Rate: engine.Float(rate), Lo: 0, Hi: 1, Theory: 0.5},
		B: engine.PositionRate{Reached: 10, Rate: engine.Float(rate), Lo: 0, Hi: 1, Theory: 0.5}}
	m = DiffCharts(&diff.Output{Name: "cpu", Kind: "spec", Positions: []diff.Position{pos, pos}})
	if _, ok := m["positions"]; !ok || len(m) != 1 {
		t.Errorf("charts %v, want the acceptance by position alone (different inputs have no rows)", chartNames(m))
	}
}

func chartNames(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	return k
}
