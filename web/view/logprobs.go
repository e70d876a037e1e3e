package view

import (
	"fmt"
	"math"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
)

// The row page's logprobs sections: each logprobs output's values on the
// row beside the reference log-softmax of the kind it was judged as
// (explain.LogprobsDetail), what that kind is, and what the judge said.

// LogprobsSection is one logprobs output on the row page.
type LogprobsSection struct {
	Detail explain.LogprobsDetail
	// Chart is the key of its chart in the row page's charts.
	Chart string
	// Report is the output's report of the row (nil before it is judged),
	// Notes the output's notes over every row (the other kind's note).
	Report *engine.RowReport
	Notes  []string
}

// LogprobsSections pairs every logprobs output of the row's detail with
// its report and notes (notes by output name).
func LogprobsSections(d *RowPage, notes map[string][]string) []LogprobsSection {
	if d.Detail == nil {
		return nil
	}
	var ss []LogprobsSection
	for i, l := range d.Detail.Logprobs {
		s := LogprobsSection{Detail: l, Chart: fmt.Sprintf("logprobs-%d", i), Notes: notes[l.Name]}
		for j, o := range d.Outputs {
			if o.Name == l.Name && j < len(d.Reports) {
				s.Report = d.Reports[j]
			}
		}
		ss = append(ss, s)
	}
	return ss
}

// LogprobsKindLine says what the output's kind means on this row (the
// distribution its reference is the log of) and what it holds; temperature
// is the row's own.
func LogprobsKindLine(l explain.LogprobsDetail, temperature float64) string {
	held := "It holds every token's."
	if l.TopN > 0 {
		held = fmt.Sprintf("It holds the top %d, with their token ids.", l.TopN)
	}
	if l.LogprobsKind == engine.LogprobsProcessed {
		how := fmt.Sprintf("the logits at temperature %s", engine.FormatParam(l.Temperature))
		if float32(temperature) == 0 {
			how = "the logits at temperature 1 (a greedy row: vLLM divides it by 1)"
		}
		if l.Filtered {
			how += ", then the row's filters, −inf where one drops a token"
		}
		return fmt.Sprintf("Processed logprobs: the log of the distribution the sampler draws from, %s; %s kept. %s",
			how, Plural(l.Kept, "token"), held)
	}
	return "Raw logprobs: log_softmax(logits) at temperature 1, before temperature and filters (vLLM's default, raw_logprobs). " + held
}

// LogprobRank writes a token's rank by reference logprob, "—" for a token
// the reference drops.
func LogprobRank(t explain.LogprobToken) string {
	if math.IsInf(float64(t.Ref), -1) {
		return "—"
	}
	return fmt.Sprint(t.Rank)
}

// LogprobAllowed writes the error allowed at a token, "—" where the
// reference drops it (only −inf passes there).
func LogprobAllowed(t explain.LogprobToken) string {
	if math.IsInf(float64(t.Ref), -1) {
		return "—"
	}
	return engine.FormatSig(float64(t.Allowed), 4)
}

// logprobsAxis is where −inf is drawn: below the least finite value shown.
func logprobsAxis(l explain.LogprobsDetail) float64 {
	lo := 0.0
	for _, t := range l.Tokens {
		if r := float64(t.Ref); !math.IsInf(r, 0) && r == r {
			lo = min(lo, r)
		}
		if t.Value != nil {
			if v := float64(*t.Value); !math.IsInf(v, 0) && v == v {
				lo = min(lo, v)
			}
		}
	}
	return math.Floor(lo) - 2
}

// logprobsChart draws a logprobs output's values on the row's tokens
// against the reference's, in nats: the reference as bars, the output as
// markers, −inf on either side as markers of their own at the floor, and
// a top-N's missing tokens left out.
func logprobsChart(l explain.LogprobsDetail, text Tokens) map[string]any {
	floor := logprobsAxis(l)
	xs := make([]string, len(l.Tokens))
	ref := make([]opts.BarData, len(l.Tokens))
	out := make([]opts.LineData, len(l.Tokens))
	refInf := make([]opts.LineData, len(l.Tokens))
	outInf := make([]opts.LineData, len(l.Tokens))
	var anyRefInf, anyOutInf bool
	for i, t := range l.Tokens {
		xs[i] = text.Axis(int64(t.Token))
		ref[i], out[i] = opts.BarData{Value: "-"}, opts.LineData{Value: "-"}
		refInf[i], outInf[i] = opts.LineData{Value: "-"}, opts.LineData{Value: "-"}
		if r := float64(t.Ref); math.IsInf(r, -1) {
			refInf[i] = opts.LineData{Value: floor}
			anyRefInf = true
		} else {
			ref[i] = opts.BarData{Value: r}
		}
		if t.Value == nil {
			continue
		}
		switch v := float64(*t.Value); {
		case math.IsInf(v, -1):
			outInf[i] = opts.LineData{Value: floor}
			anyOutInf = true
		case v != v || math.IsInf(v, 1):
			outInf[i] = opts.LineData{Value: 0}
			anyOutInf = true
		default:
			out[i] = opts.LineData{Value: v}
		}
	}
	title := fmt.Sprintf("Top %d tokens: logprobs against the reference", len(l.Tokens))
	if l.TopN > 0 {
		title = fmt.Sprintf("The output's top %d against the reference", l.TopN)
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title, Subtitle: l.Label()}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token id, as the output lists them", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "logprob (nats)", NameLocation: "middle", NameGap: 45, Min: floor, Max: 0}),
	)...)
	c.AddSeries(fmt.Sprintf("reference (float64, %s)", l.LogprobsKind), ref, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
	m := charts.NewLine()
	m.AddSeries(l.Name, out,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "circle", SymbolSize: 9}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}),
		charts.WithLineStyleOpts(opts.LineStyle{Opacity: opts.Float(0)}))
	if anyOutInf {
		m.AddSeries("−inf (or NaN, +Inf at 0) in the output", outInf,
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "triangle", SymbolSize: 11}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: colorFail}),
			charts.WithLineStyleOpts(opts.LineStyle{Opacity: opts.Float(0)}))
	}
	if anyRefInf {
		m.AddSeries("−inf in the reference (dropped)", refInf,
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "rect", SymbolSize: 9}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}),
			charts.WithLineStyleOpts(opts.LineStyle{Opacity: opts.Float(0)}))
	}
	c.Overlap(m)
	c.Validate()
	return c.JSON()
}

// LogprobText writes a logprob for the token table: −inf spelled out,
// "—" for a token a top-N does not hold.
func LogprobText(v *engine.Float) string {
	if v == nil {
		return "—"
	}
	x := float64(*v)
	switch {
	case math.IsInf(x, -1):
		return "−inf"
	case math.IsInf(x, 1):
		return "+inf"
	case x != x:
		return "NaN"
	}
	return engine.FormatSig(x, 4)
}

// LogprobErr writes |output − reference| of one token, "" where there is
// none to measure, and whether it breaks what the tolerance allows there.
func LogprobErr(t explain.LogprobToken) (string, bool) {
	if t.Value == nil {
		return "", false
	}
	v, r := float64(*t.Value), float64(t.Ref)
	switch {
	case math.IsInf(v, -1) && math.IsInf(r, -1):
		return "0", false
	case math.IsInf(v, 0) || math.IsInf(r, 0) || v != v:
		return "support", true
	}
	e := math.Abs(v - r)
	return engine.FormatSig(float64(e), 4), e > float64(t.Allowed)
}

// LogprobEntry writes a token's place in a top-N ("" for every token's
// logprobs), or says the top-N leaves it out.
func LogprobEntry(l explain.LogprobsDetail, t explain.LogprobToken) string {
	if l.TopN == 0 {
		return ""
	}
	if t.Entry < 0 {
		return "left out"
	}
	return fmt.Sprint(t.Entry + 1)
}

// LogprobsNoteWords keeps an output's notes that speak of its kind (the
// note that names the other kind when it would pass) first.
func LogprobsNoteWords(notes []string) []string {
	var first, rest []string
	for _, n := range notes {
		if strings.Contains(n, "logprobs_kind") {
			first = append(first, n)
		} else {
			rest = append(rest, n)
		}
	}
	return append(first, rest...)
}

// LogprobsToleranceLine says how a run's logprobs outputs are judged: on
// the log scale, with the judge's logprob table (session.LogprobTolerances) unless the
// judgement names its own tolerances (tol).
func LogprobsToleranceLine(tol *engine.Tolerances) string {
	if tol != nil {
		return "on the log scale, in nats, with the tolerances above; each row's atol adds 2^-22·max|logit/T| (docs/SEMANTICS.md, \"Logprobs\")."
	}
	table := session.LogprobTolerances()
	var parts []string
	for _, r := range table {
		rtol := engine.FormatFloat(r.Tolerance.Rtol)
		if e := math.Log2(r.Tolerance.Rtol); e == math.Round(e) {
			rtol = fmt.Sprintf("2^%d", int(e))
		}
		parts = append(parts, fmt.Sprintf("%s rtol %s", r.DType, rtol))
	}
	atol := table[0].Tolerance.Atol
	return fmt.Sprintf("on the log scale, in nats, with a table of their own by the output's dtype: atol %s plus 2^-22·max|logit/T| of the row; %s (docs/SEMANTICS.md, \"Logprobs\").",
		engine.FormatFloat(atol), strings.Join(parts, ", "))
}
