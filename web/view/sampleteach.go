package view

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// The sampler teaching mode's words: one draw of a sample row (the row's
// own logits, temperature, filters and seed), made by the inverse CDF, the
// sort-free rejection sampler or the Gumbel-max race, step by step. The
// session computes the draw (engine/lesson TeachSample); this file says
// it. Every step is in the view, so the page script steps through them
// without asking the server again; another method, draw or seed is fetched
// from the teach API.

// SampleTeachView is the sampler teaching page in the terms it shows; the
// page renders it and the teach API returns it as JSON for the page script.
type SampleTeachView struct {
	Run  store.Run        `json:"-"`
	Info session.DumpInfo `json:"-"`
	Row  int              `json:"row"`
	// Method is the sampler taught, Name its name in words; Draw and Seed
	// name the draw, Draws bounds it.
	Method string `json:"method"`
	Name   string `json:"name"`
	Draw   int    `json:"draw"`
	Seed   string `json:"seed"`
	Draws  int    `json:"draws"`
	// URL is this state's page, API its JSON, RowURL the row page;
	// PrevDraw and NextDraw the neighbouring draws' pages; Methods the
	// same draw by every method.
	URL      string       `json:"url"`
	API      string       `json:"api"`
	RowURL   string       `json:"row_url"`
	PrevDraw string       `json:"prev_draw_url"`
	NextDraw string       `json:"next_draw_url"`
	Methods  []MethodLink `json:"methods"`
	Intro    string       `json:"intro"`
	Params   string       `json:"params"`
	Outcome  string       `json:"outcome"`
	// Kernel says how the draw compares with our kernels' stored draw;
	// Match is "same", "differs" or "none" (nothing stored to compare).
	Kernel string `json:"kernel"`
	Match  string `json:"match"`
	// Index is the step shown (an index into Items), Total the steps.
	Index int               `json:"index"`
	Total int               `json:"total"`
	Items []SampleTeachItem `json:"items"`
	// Header and Table are the method's table (the rounds, or the tokens
	// with their noise); each step shows its first Rows rows.
	Header []string   `json:"header"`
	Table  [][]string `json:"table"`
	// Classes mark the table's rows: "emitted", "rejected", "winner" or
	// "" (one per row of Table).
	Classes []string `json:"classes"`
	// Why are the page's explanations, a paragraph each.
	Why []string `json:"why"`
	// Invalid says why nothing can be taught here.
	Invalid string `json:"invalid,omitempty"`
}

// MethodLink is one method's page for the same draw.
type MethodLink struct {
	Method string `json:"method"`
	Name   string `json:"name"`
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// SampleTeachItem is one step of a draw.
type SampleTeachItem struct {
	// Step counts from 1.
	Step  int    `json:"step"`
	Title string `json:"title"`
	What  string `json:"what"`
	// Rows is how many rows of the table the step shows.
	Rows int `json:"rows"`
	// Chart draws the step; Marks pin its token on the chart's series
	// "p"; Line, when set, is a horizontal line at that height (the
	// inverse CDF's target).
	Chart map[string]any `json:"chart"`
	Marks []TraceMark    `json:"marks"`
	// URL is the page showing this step.
	URL string `json:"url"`
}

// SampleMethods are the methods the sampler teaching mode steps through,
// in the order the page offers them.
var SampleMethods = []engine.SampleMethod{engine.SampleRejection, engine.SampleGumbel, engine.SampleInverseCDF}

// MethodName names a sampler in words.
func MethodName(m engine.SampleMethod) string {
	switch m {
	case engine.SampleRejection:
		return "sort-free rejection sampling"
	case engine.SampleGumbel:
		return "the Gumbel-max race"
	}
	return "the inverse CDF"
}

// NewSampleTeachView puts one draw into words and charts, showing step
// index (from 0; clamped into range). url(step) gives the page of step
// step (from 0) of this draw.
func NewSampleTeachView(st *lesson.SampleState, index int, url func(step int) string) *SampleTeachView {
	v := &SampleTeachView{
		Row: st.Row, Method: string(st.Method), Name: MethodName(st.Method), Draw: st.Draw, Seed: strconv.FormatUint(st.Seed, 10),
		Draws: lesson.MaxDraw - 1, Invalid: st.Invalid, Items: []SampleTeachItem{}, Header: []string{}, Table: [][]string{}, Classes: []string{},
	}
	names := Tokens(st.Text)
	v.Params = sampleParams(st)
	v.Kernel, v.Match = kernelWords(st, names)
	switch st.Method {
	case engine.SampleRejection:
		v.Intro = rejectionIntro
		v.Why = rejectionWhy(st)
	case engine.SampleGumbel:
		v.Intro = gumbelIntro
		v.Why = gumbelWhy(st)
	default:
		v.Intro = cdfIntro
		v.Why = cdfWhy()
	}
	if st.Invalid != "" {
		return v
	}
	switch st.Method {
	case engine.SampleRejection:
		rejectionItems(v, st, names)
	case engine.SampleGumbel:
		gumbelItems(v, st, names)
	default:
		cdfItems(v, st, names)
	}
	v.Items = append(v.Items, SampleTeachItem{
		Title: "The token", What: resultWords(st, names) + " " + v.Kernel, Rows: len(v.Table),
		Chart: distChart(st, names, "The token drawn, on the distribution it follows"), Marks: pinToken(st, st.Token, "drawn", colorPass, true),
	})
	for i := range v.Items {
		v.Items[i].Step = i + 1
		v.Items[i].URL = url(i)
		v.Items[i].Title = fmt.Sprintf("Step %d of %d: %s", i+1, len(v.Items), v.Items[i].Title)
		if v.Items[i].Marks == nil {
			v.Items[i].Marks = []TraceMark{}
		}
	}
	v.Total = len(v.Items)
	v.Index = min(max(index, 0), len(v.Items)-1)
	v.Outcome = outcomeWords(st, names)
	return v
}

const rejectionIntro = "Top-k and top-p ask for the most probable tokens, which seems to need a sort of the whole row. " +
	"The sort-free rejection sampler never sorts: it draws a candidate from the whole row by inverse CDF and keeps it if the filters keep it. " +
	"If they do not, every token at least as improbable as the candidate is ruled out with it: the candidate becomes the pivot, and the next round " +
	"draws again from the tokens more probable than the pivot only. Since the filters keep a set of most probable tokens, the kept tokens are " +
	"never ruled out, and the rounds shrink toward them until one is drawn."

const gumbelIntro = "The Gumbel-max trick draws from softmax(x/T) without summing it: give every token independent noise " +
	"g = −log(−log u), with u uniform, and take the token whose z + g is largest, where z = (x − m)/T is its scaled logit. " +
	"The same race, seen another way: every token starts an exponential clock E = −log u and arrives at time E / exp(z); " +
	"the first to arrive wins, and a token of weight w arrives first with probability w / Σw. Tokens the filters drop are not in the race."

const cdfIntro = "The inverse CDF lays the kept tokens end to end in index order, each as long as its weight, draws one uniform point " +
	"along the whole length, and emits the token the point lands in. The kernels do it in fixed point (each weight times 2^40, truncated) " +
	"so that the sum is exact in any order of addition, and the CPU and the GPU land on the same token."

// sampleParams says the row's parameters as the kernels read them.
func sampleParams(st *lesson.SampleState) string {
	parts := []string{"T = " + engine.FormatParam(st.Temperature)}
	if st.TopK > 0 && st.TopK < st.Vocab {
		parts = append(parts, "top-k "+strconv.Itoa(st.TopK))
	}
	if st.TopP < 1 {
		parts = append(parts, "top-p "+engine.FormatParam(st.TopP))
	}
	if st.MinP > 0 {
		parts = append(parts, "min-p "+engine.FormatParam(st.MinP))
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "Row %d: %s of %s", st.Row, strings.Join(parts, ", "), Plural(st.Vocab, "token"))
	if st.Filtered {
		fmt.Fprintf(b, "; the filters (%s", st.Order)
		if st.TopK > 0 && st.TopK < st.Vocab {
			fmt.Fprintf(b, ", ties %s", st.Ties)
		}
		if st.TemperatureLast {
			b.WriteString(", decided at T = 1")
		}
		fmt.Fprintf(b, ") keep %s holding %s of the mass", Plural(st.Kept, "token"), engine.FormatPercent(float64(st.KeptMass)))
	} else {
		b.WriteString("; no filter is on")
	}
	fmt.Fprintf(b, ". Draw %d of seed %d, offset %d: Philox counter (offset + block, row %d, draw %d).", st.Draw, st.Seed, st.Offset, st.Row, st.Draw)
	return b.String()
}

// findToken returns the lesson's token t (ok false when it is not shown).
func findToken(st *lesson.SampleState, t int) (lesson.SampleToken, int, bool) {
	for i, tk := range st.Tokens {
		if tk.Token == t {
			return tk, i, true
		}
	}
	return lesson.SampleToken{}, -1, false
}

// kernelWords compares the draw with our kernels' stored one.
func kernelWords(st *lesson.SampleState, names Tokens) (string, string) {
	if st.Invalid != "" {
		return "", "none"
	}
	if k := st.Kernel; k != nil {
		where := fmt.Sprintf("its %s output, row %d", k.Output, st.Row)
		if k.Output == "samples" {
			where = fmt.Sprintf("its samples output, row %d, draw %d", st.Row, st.Draw)
		}
		if k.Token == st.Token {
			return fmt.Sprintf("Our %s kernel made this same draw when the run ran (%s): token %s, the same token.", k.Backend, where, names.Label(int64(k.Token))), "same"
		}
		return fmt.Sprintf("Our %s kernel made this draw when the run ran (%s) and wrote token %s, not %s: the kernel and its specification disagree.",
			k.Backend, where, names.Label(int64(k.Token)), names.Label(int64(st.Token))), "differs"
	}
	twin := map[engine.SampleMethod]string{engine.SampleRejection: "cpu.SampleRejection", engine.SampleGumbel: "cpu.SampleGumbel"}[st.Method]
	if twin == "" {
		twin = "cpu.SampleInverseCDF"
	}
	why := ""
	switch {
	case st.Seed != st.RowSeed:
		why = fmt.Sprintf("The run drew with the row's seed %d, not %d, so it stored no draw of this seed", st.RowSeed, st.Seed)
	case st.Method != st.RunMethod && st.Method != engine.SampleInverseCDF:
		why = fmt.Sprintf("The run drew the row's token with %s, so it stored no %s draw (rerun it with method %s to have the kernels make this one)", MethodName(st.RunMethod), st.Method, st.Method)
	case st.Draw > 0 && st.RunCounted:
		why = fmt.Sprintf("The run counted its %d draws a row per token on the device and kept no single draw (keep_draws 1 keeps them), so it has no draw %d to show", st.RunDraws, st.Draw)
	case st.Draw > 0 && st.RunDraws == 0:
		why = fmt.Sprintf("The run stored one token per row (draw 0) and no many-draws samples, so it has no draw %d", st.Draw)
	case st.Draw > 0 && st.Method != engine.SampleInverseCDF:
		why = fmt.Sprintf("The run's many-draws samples are inverse-CDF draws, so it stored no %s draw %d", st.Method, st.Draw)
	case st.Draw > 0 && st.Draw >= st.RunDraws:
		why = fmt.Sprintf("The run stored draws 0 to %d of the row, not draw %d", st.RunDraws-1, st.Draw)
	default:
		why = "The run's kernels have not stored their outputs yet, so there is no stored draw to compare with"
	}
	return why + fmt.Sprintf("; engine/cpu's %s, which the kernels match token for token, draws %s for this (seed, offset, row, draw).", twin, names.Label(int64(st.Token))), "none"
}

// resultWords says the token the draw emits and the probability it had.
func resultWords(st *lesson.SampleState, names Tokens) string {
	tk, _, _ := findToken(st, st.Token)
	b := &strings.Builder{}
	fmt.Fprintf(b, "The draw emits token %s", names.Label(int64(st.Token)))
	if st.Filtered {
		fmt.Fprintf(b, ", which the filtered distribution gives %s (%s before the filters, rank %d of the row)", engine.FormatSig(float64(tk.Q), 3), engine.FormatSig(float64(tk.P), 3), tk.Rank+1)
	} else {
		fmt.Fprintf(b, ", which the distribution gives %s (rank %d of the row)", engine.FormatSig(float64(tk.Q), 3), tk.Rank+1)
	}
	switch st.Method {
	case engine.SampleRejection:
		fmt.Fprintf(b, ", after %s.", Plural(len(st.Rounds), "round"))
	case engine.SampleGumbel:
		b.WriteString(", the winner of the race.")
	default:
		b.WriteString(".")
	}
	return b.String()
}

// outcomeWords says what the whole draw did, in one sentence.
func outcomeWords(st *lesson.SampleState, names Tokens) string {
	switch st.Method {
	case engine.SampleRejection:
		return fmt.Sprintf("Draw %d with seed %d: %s, then token %s.", st.Draw, st.Seed, roundsSummary(st, names), names.Label(int64(st.Token)))
	case engine.SampleGumbel:
		return fmt.Sprintf("Draw %d with seed %d: token %s wins the race over %s.", st.Draw, st.Seed, names.Label(int64(st.Token)), Plural(st.Kept, "kept token"))
	}
	return fmt.Sprintf("Draw %d with seed %d: u = %s lands in token %s.", st.Draw, st.Seed, engine.FormatSig(float64(st.CDF.U), 6), names.Label(int64(st.Token)))
}

// roundsSummary says how many rounds rejected.
func roundsSummary(st *lesson.SampleState, names Tokens) string {
	n := len(st.Rounds)
	if n <= 1 {
		return "round 0 draws a token the filters keep"
	}
	var rej []string
	for _, rd := range st.Rounds[:n-1] {
		rej = append(rej, names.Label(int64(rd.Candidate)))
	}
	return fmt.Sprintf("%s reject %s", Plural(n-1, "round"), strings.Join(rej, ", "))
}

// ---- rejection -------------------------------------------------------------

// RejectionHeader names the rounds table's columns.
var RejectionHeader = []string{"round", "pivot (threshold)", "candidates", "their share of the mass", "mass the filters drop: P(reject)", "u", "candidate c", "rank of c", "kept?", "verdict"}

func rejectionItems(v *SampleTeachView, st *lesson.SampleState, names Tokens) {
	v.Header = RejectionHeader
	v.Items = append(v.Items, SampleTeachItem{
		Title: "The distribution and the filters",
		What:  filterWords(st, names) + " The rejection sampler will not sort the row to find them: it draws and tests.",
		Chart: distChart(st, names, "The row's distribution: the tokens the filters keep and drop"),
	})
	for i, rd := range st.Rounds {
		pivot := "none: every token"
		if rd.PivotToken >= 0 {
			pivot = fmt.Sprintf("above %s (w %s)", names.Label(int64(rd.PivotToken)), engine.FormatSig(float64(rd.PivotW), 3))
			if st.Ties == engine.TiesLowestIndex {
				pivot = fmt.Sprintf("before %s (w %s)", names.Label(int64(rd.PivotToken)), engine.FormatSig(float64(rd.PivotW), 3))
			}
		}
		verdict, kept := "rejected", "no"
		if rd.Accepted {
			verdict, kept = "emitted", "yes"
		}
		cand, rank := "", ""
		if rd.Candidate >= 0 {
			cand, rank = names.Label(int64(rd.Candidate)), strconv.Itoa(rd.CandRank+1)
		}
		v.Table = append(v.Table, []string{strconv.Itoa(rd.Round), pivot, strconv.Itoa(rd.Candidates), engine.FormatPercent(float64(rd.Mass)),
			engine.FormatPercent(float64(rd.Outside)), engine.FormatSig(float64(rd.U), 6), cand, rank, kept, verdict})
		v.Classes = append(v.Classes, verdict)
		title := fmt.Sprintf("Round %d", rd.Round)
		if rd.Accepted {
			title += ": the candidate is kept"
		} else {
			title += ": the candidate is dropped"
		}
		v.Items = append(v.Items, SampleTeachItem{
			Title: title, What: roundWords(st, i, names), Rows: i + 1,
			Chart: roundChart(st, i, names),
			Marks: pinToken(st, rd.Candidate, "c", map[bool]string{true: colorPass, false: colorFail}[rd.Accepted], false),
		})
	}
}

// filterWords says what the filters keep.
func filterWords(st *lesson.SampleState, names Tokens) string {
	if !st.Filtered {
		return fmt.Sprintf("No filter is on: every one of the %s of positive weight may be drawn, each with its share of the mass.", Plural(st.Positive, "token"))
	}
	var on []string
	if st.TopK > 0 && st.TopK < st.Vocab {
		on = append(on, fmt.Sprintf("top-k keeps the %d most probable", st.TopK))
	}
	if st.TopP < 1 {
		on = append(on, fmt.Sprintf("top-p the smallest head holding %s of the mass", engine.FormatPercent(st.TopP)))
	}
	if st.MinP > 0 {
		on = append(on, fmt.Sprintf("min-p those at least %s times the most probable", engine.FormatParam(st.MinP)))
	}
	return fmt.Sprintf("The filters (%s) keep %s of the row's %d of positive weight, %s of its mass; the draw must follow the kept tokens' weights renormalised "+
		"(the blue bars: q), and give the dropped ones (grey) nothing.", strings.Join(on, "; "), Plural(st.Kept, "token"), st.Positive, engine.FormatPercent(float64(st.KeptMass)))
}

// roundWords says what round i of a rejection lesson does.
func roundWords(st *lesson.SampleState, i int, names Tokens) string {
	rd := st.Rounds[i]
	b := &strings.Builder{}
	if rd.PivotToken < 0 {
		fmt.Fprintf(b, "Round 0 draws from the whole row: all %s of positive weight are candidates. ", Plural(rd.Candidates, "token"))
	} else {
		above := "weight above " + engine.FormatSig(float64(rd.PivotW), 3)
		if st.Ties == engine.TiesLowestIndex {
			above += ", or equal to it at a lower index, as the lowest_index tie rule orders them"
		}
		fmt.Fprintf(b, "The last round's candidate %s is the pivot: the candidates are now the tokens more probable than it (%s), %s holding %s of the row's mass. ",
			names.Label(int64(rd.PivotToken)), above, Plural(rd.Candidates, "token"), engine.FormatPercent(float64(rd.Mass)))
	}
	fmt.Fprintf(b, "Of their mass the filters drop %s, so this round rejects with probability %s. ", engine.FormatPercent(float64(rd.Outside)), engine.FormatSig(float64(rd.Outside), 3))
	if rd.Candidate < 0 {
		b.WriteString("No candidate has weight left, so the sampler gives up and writes -1.")
		return b.String()
	}
	fmt.Fprintf(b, "Block %d of the stream gives u = %s; the target u·S = %s of S = %s (fixed point) lands in candidate %s, rank %d of the row, weight %s. ",
		rd.Round, engine.FormatSig(float64(rd.U), 6), strconv.FormatUint(rd.Target, 10), strconv.FormatUint(rd.Total, 10), names.Label(int64(rd.Candidate)), rd.CandRank+1, engine.FormatSig(float64(rd.CandW), 3))
	if rd.Accepted {
		fmt.Fprintf(b, "The filters keep it: token %s is emitted.", names.Label(int64(rd.Candidate)))
	} else {
		fmt.Fprintf(b, "The filters drop it: rejected. Every kept token is more probable than it, so none is lost by ruling out %s and every token as improbable; the next round draws again among the rest.",
			names.Label(int64(rd.Candidate)))
	}
	return b.String()
}

// rejectionWhy explains the rejection sampler.
func rejectionWhy(st *lesson.SampleState) []string {
	why := []string{
		"Why the token follows the filtered distribution: each round draws a candidate in proportion to its weight among the candidates. " +
			"Given that it is kept, it is a kept token drawn in proportion to its weight, which is the filtered distribution renormalised. " +
			"Given that it is dropped, the round starts over on a smaller set that still holds every kept token, so the next round is the same " +
			"question again. The rounds' rejections never bias the kept tokens against each other.",
		"Why it is fast: a round reads the row once and needs no sort, and each rejection removes the candidate and every token below it. " +
			"A candidate drawn by weight has a uniform share of the candidates' mass above it, so each rejection cuts the candidates' mass by a " +
			"factor of e on average (in logarithm): the rounds a draw needs grow with the logarithm of how little mass the filters keep, not with " +
			"the length of the row.",
	}
	if len(st.Rounds) > 0 {
		p := 1.0
		for _, rd := range st.Rounds[:len(st.Rounds)-1] {
			p *= float64(rd.Outside)
		}
		kept := math.Max(float64(st.KeptMass), 1e-300)
		why = append(why, fmt.Sprintf("On this draw: round 0 rejects with probability %s (the mass outside the filters), and the filters keep K = %s of the mass, "+
			"so a draw takes about 1 + ln(1/K) = %s rounds on average. This draw's %s in a row had probability %s.",
			engine.FormatSig(float64(st.Rounds[0].Outside), 3), engine.FormatPercent(kept), engine.FormatSig(1+math.Log(1/kept), 2), Plural(len(st.Rounds)-1, "rejection"), engine.FormatSig(p, 3)))
	}
	return why
}

// roundChart draws round i: the shown tokens in the sampler's order, the
// candidates coloured by whether the filters keep them, the others grey,
// and the rest of the row pooled in one bar.
func roundChart(st *lesson.SampleState, i int, names Tokens) map[string]any {
	rd := st.Rounds[i]
	cand := func(tk lesson.SampleToken) bool {
		if rd.PivotToken < 0 {
			return tk.P > 0
		}
		if st.Ties == engine.TiesLowestIndex {
			return float64(tk.W) > float64(rd.PivotW) || (float64(tk.W) == float64(rd.PivotW) && tk.Token < rd.PivotToken)
		}
		return float64(tk.W) > float64(rd.PivotW)
	}
	n := len(st.Tokens)
	xs := make([]string, n+1)
	keptC, dropC, out := make([]opts.BarData, n+1), make([]opts.BarData, n+1), make([]opts.BarData, n+1)
	var shownKept, shownDrop float64
	for j, tk := range st.Tokens {
		xs[j] = names.Axis(int64(tk.Token))
		k, d, o := 0.0, 0.0, 0.0
		switch {
		case cand(tk) && tk.Kept:
			k = float64(tk.P)
			shownKept += k
		case cand(tk):
			d = float64(tk.P)
			shownDrop += d
		default:
			o = float64(tk.P)
		}
		keptC[j], dropC[j], out[j] = opts.BarData{Value: k}, opts.BarData{Value: d}, opts.BarData{Value: o}
	}
	restKept := math.Max(float64(rd.Mass)*(1-float64(rd.Outside))-shownKept, 0)
	restDrop := math.Max(float64(rd.Mass)*float64(rd.Outside)-shownDrop, 0)
	xs[n] = fmt.Sprintf("%d others", st.Rest)
	keptC[n], dropC[n] = opts.BarData{Value: restKept}, opts.BarData{Value: restDrop}
	out[n] = opts.BarData{Value: math.Max(float64(st.RestMass)-restKept-restDrop, 0)}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: fmt.Sprintf("Round %d: the candidates (%s of the mass) and the candidate drawn", rd.Round, engine.FormatPercent(float64(rd.Mass)))}, true, "axis",
		opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "90"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable first; the last bar pools the rest of the row", NameLocation: "middle", NameGap: 35}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "share of the row's mass", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	c.AddSeries("candidates the filters keep", keptC, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}), charts.WithBarChartOpts(opts.BarChart{Stack: "mass"}))
	c.AddSeries("candidates the filters drop", dropC, charts.WithSeriesId("dropped"), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}), charts.WithBarChartOpts(opts.BarChart{Stack: "mass"}))
	c.AddSeries("ruled out by earlier rounds", out, charts.WithSeriesId("out"), charts.WithItemStyleOpts(opts.ItemStyle{Color: "#ced4da"}), charts.WithBarChartOpts(opts.BarChart{Stack: "mass"}))
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// ---- Gumbel ----------------------------------------------------------------

// GumbelHeader names the Gumbel table's columns.
var GumbelHeader = []string{"token", "rank", "logit x", "z = (x − m)/T", "u", "g = −log(−log u)", "z + g", "arrival −log(u)/e^z", "kept?"}

func gumbelItems(v *SampleTeachView, st *lesson.SampleState, names Tokens) {
	g := st.Gumbel
	v.Header = GumbelHeader
	for _, tk := range st.Tokens {
		row := []string{names.Label(int64(tk.Token)), strconv.Itoa(tk.Rank + 1), engine.FormatSig(float64(tk.Logit), 4), engine.FormatSig(float64(tk.Z), 4), engine.FormatSig(float64(tk.U), 3), "", "", "", "no"}
		if tk.Kept {
			row[5], row[6], row[7], row[8] = engine.FormatSig(float64(tk.G), 4), engine.FormatSig(float64(tk.Score), 4), engine.FormatSig(float64(tk.Time), 3), "yes"
		}
		v.Table = append(v.Table, row)
		v.Classes = append(v.Classes, map[bool]string{true: "winner", false: ""}[tk.Token == g.Winner])
	}
	winner, wi, _ := findToken(st, g.Winner)
	v.Items = append(v.Items, SampleTeachItem{
		Title: "The scaled logits",
		What: fmt.Sprintf("The race starts from the scaled logits z = (x − m)/T, with m = %s the row's largest logit and T = %s: the most probable token "+
			"has z = 0 and the rest are negative, z being the log of the token's weight. %s", engine.FormatSig(float64(g.Max), 4), engine.FormatParam(st.Temperature), keptRace(st)),
		Rows:  len(v.Table),
		Chart: gumbelChart(st, names, 0),
	}, SampleTeachItem{
		Title: "The noise",
		What: fmt.Sprintf("Each kept token i gets u_i from word i mod 4 of Philox block ⌊i/4⌋ (in (0, 1), never 0 or 1) and the noise g_i = −log(−log u_i), "+
			"in float32 as the kernels compute it. The noise is usually between −1 and 3 but has a long right tail, which is what lets an improbable token "+
			"win now and then. The winner got u = %s, g = %s.", engine.FormatSig(float64(winner.U), 3), engine.FormatSig(float64(winner.G), 4)),
		Rows:  len(v.Table),
		Chart: gumbelChart(st, names, 1),
	}, SampleTeachItem{
		Title: "The argmax of z + g",
		What:  gumbelArgmaxWords(st, names, winner),
		Rows:  len(v.Table),
		Chart: gumbelChart(st, names, 2),
		Marks: []TraceMark{{Name: "max", Coord: [2]any{wi, finiteOr(float64(winner.Score), false)}, Color: colorPass}},
	}, SampleTeachItem{
		Title: "The same draw as an exponential race",
		What:  raceWords(st, names, winner),
		Rows:  len(v.Table),
		Chart: raceChart(st, names),
		Marks: []TraceMark{{Name: "first", Coord: [2]any{wi, finiteOr(float64(winner.Time), false)}, Color: colorPass}},
	})
}

// keptRace says which tokens race.
func keptRace(st *lesson.SampleState) string {
	if !st.Filtered {
		return fmt.Sprintf("No filter is on: all %s race.", Plural(st.Vocab, "token"))
	}
	return fmt.Sprintf("The filters keep %s (%s of the mass); only they race, the dropped ones (shown without noise) sit out.", Plural(st.Kept, "token"), engine.FormatPercent(float64(st.KeptMass)))
}

func gumbelArgmaxWords(st *lesson.SampleState, names Tokens, winner lesson.SampleToken) string {
	g := st.Gumbel
	b := &strings.Builder{}
	fmt.Fprintf(b, "The score of each racer is z + g in float32; the first index of the largest score wins. Token %s scores %s = %s + %s",
		names.Label(int64(g.Winner)), engine.FormatSig(float64(winner.Score), 4), engine.FormatSig(float64(winner.Z), 4), engine.FormatSig(float64(winner.G), 4))
	if winner.Rank == 0 {
		b.WriteString(", and it is also the most probable token: its head start held.")
	} else {
		fmt.Fprintf(b, ", although it is only rank %d by probability: its noise made up the gap of %s to the head.", winner.Rank+1, engine.FormatSig(-float64(winner.Z), 4))
	}
	if g.RunnerUp >= 0 {
		fmt.Fprintf(b, " The runner-up, token %s, scores %s, %s behind.", names.Label(int64(g.RunnerUp)), engine.FormatSig(float64(g.RunnerUpScore), 4), engine.FormatSig(float64(g.WinnerScore-g.RunnerUpScore), 4))
	}
	fmt.Fprintf(b, " A token wins with probability exactly its share of the kept mass: %s wins %s of such races.", names.Label(int64(g.Winner)), engine.FormatSig(float64(winner.Q), 3))
	return b.String()
}

func raceWords(st *lesson.SampleState, names Tokens, winner lesson.SampleToken) string {
	g := st.Gumbel
	b := &strings.Builder{}
	fmt.Fprintf(b, "Turn the scores around: token i arrives at time −log(u_i)/e^{z_i}, an exponential clock that runs faster "+
		"the heavier the token. The largest z + g is the earliest arrival, since z + g = −log(arrival). Token %s arrives first, at %s.",
		names.Label(int64(g.Winner)), engine.FormatSig(float64(winner.Time), 3))
	if g.RaceWinner != g.Winner {
		fmt.Fprintf(b, " (In float64 the race's first arrival is token %s: the two scores tie in float32, where the kernels decide, and the lower index wins.)", names.Label(int64(g.RaceWinner)))
	}
	b.WriteString(" The minimum of independent exponential clocks is the one of rate w_i with probability w_i/Σw: the race is the distribution.")
	return b.String()
}

// gumbelWhy explains the Gumbel-max trick.
func gumbelWhy(st *lesson.SampleState) []string {
	return []string{
		"Why it follows softmax: with E_i = −log u_i independent exponentials, the token with the largest z_i + g_i is the one with the smallest " +
			"E_i·e^{−z_i}, and the smallest of independent exponentials of rates w_i = e^{z_i} falls on token i with probability w_i/Σ_j w_j. " +
			"No normalisation is ever computed: the race needs one pass and an argmax, which is why kernels like it for large vocabularies.",
		"What it costs: one uniform and two logarithms per token instead of one uniform per row, and the noise must be independent for every " +
			"token, row and draw: here Philox's counter (offset + ⌊i/4⌋, row, draw) gives each token its own word. A sampler that reuses the noise " +
			"across rows or draws makes them agree far more often than chance, which the judge's seed checks catch.",
	}
}

// gumbelChart draws the shown tokens' scaled logits (stage 0), with their
// noise (1), and the scores (2).
func gumbelChart(st *lesson.SampleState, names Tokens, stage int) map[string]any {
	n := len(st.Tokens)
	xs := make([]string, n)
	z, g, s := make([]opts.BarData, n), make([]opts.BarData, n), make([]opts.BarData, n)
	for i, tk := range st.Tokens {
		xs[i] = names.Axis(int64(tk.Token))
		z[i] = opts.BarData{Value: finiteOr(float64(tk.Z), false)}
		g[i], s[i] = opts.BarData{Value: "-"}, opts.BarData{Value: "-"}
		if tk.Kept {
			g[i] = opts.BarData{Value: finiteOr(float64(tk.G), false)}
			s[i] = opts.BarData{Value: finiteOr(float64(tk.Score), false)}
		} else {
			z[i] = opts.BarData{Value: finiteOr(float64(tk.Z), false), ItemStyle: &opts.ItemStyle{Color: "#ced4da"}}
		}
	}
	titles := []string{"The scaled logits z = (x − m)/T (grey: dropped by the filters)", "The noise g = −log(−log u) beside z", "The scores z + g: the largest wins"}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: titles[stage]}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "90"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable first, then the best scores", NameLocation: "middle", NameGap: 35}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "z, g and z + g", NameLocation: "middle", NameGap: 50}),
	)...)
	if stage == 2 {
		c.AddSeries("score z + g", s, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}))
		c.AddSeries("z", z, charts.WithSeriesId("z"), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef, Opacity: opts.Float(0.35)}))
	} else {
		c.AddSeries("z = (x − m)/T", z, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
		if stage == 1 {
			c.AddSeries("noise g", g, charts.WithSeriesId("g"), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorDraft}))
		}
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// raceChart draws the kept shown tokens' arrival times on a log axis.
func raceChart(st *lesson.SampleState, names Tokens) map[string]any {
	n := len(st.Tokens)
	xs := make([]string, n)
	tm := make([]opts.BarData, n)
	lo := math.Inf(1)
	for i, tk := range st.Tokens {
		xs[i] = names.Axis(int64(tk.Token))
		tm[i] = opts.BarData{Value: "-"}
		if t := float64(tk.Time); tk.Kept && t > 0 && finite(t) {
			tm[i] = opts.BarData{Value: t}
			lo = math.Min(lo, t)
		}
	}
	floor := 1e-3
	if finite(lo) {
		floor = math.Pow(10, math.Floor(math.Log10(lo))-1)
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Arrival times −log(u)/e^z: the first to arrive wins"}, false, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable first", NameLocation: "middle", NameGap: 35}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "arrival time (log scale)", NameLocation: "middle", NameGap: 50, Min: floor}),
	)...)
	c.AddSeries("arrival time", tm, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}))
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// ---- inverse CDF -----------------------------------------------------------

// CDFHeader names the inverse CDF's token table's columns.
var CDFHeader = []string{"token", "rank", "logit x", "weight w", "p (before the filters)", "kept?", "q (what the draw follows)"}

func cdfItems(v *SampleTeachView, st *lesson.SampleState, names Tokens) {
	c := st.CDF
	v.Header = CDFHeader
	for _, tk := range st.Tokens {
		kept := "no"
		if tk.Kept {
			kept = "yes"
		}
		v.Table = append(v.Table, []string{names.Label(int64(tk.Token)), strconv.Itoa(tk.Rank + 1), engine.FormatSig(float64(tk.Logit), 4), engine.FormatSig(float64(tk.W), 3), engine.FormatSig(float64(tk.P), 3), kept, engine.FormatSig(float64(tk.Q), 3)})
		v.Classes = append(v.Classes, map[bool]string{true: "emitted", false: ""}[tk.Token == st.Token])
	}
	target := float64(c.Target) / float64(c.Total)
	v.Items = append(v.Items, SampleTeachItem{
		Title: "The distribution and the filters",
		What:  filterWords(st, names) + " In fixed point the kept weights sum to S = " + strconv.FormatUint(c.Total, 10) + ".",
		Rows:  len(v.Table),
		Chart: distChart(st, names, "The row's distribution: the tokens the filters keep and drop"),
	}, SampleTeachItem{
		Title: "The uniform and the target",
		What: fmt.Sprintf("Words 0 and 1 of Philox block 0 make one 64-bit uniform, u = %s. The target is t = ⌊u·S⌋ = %s, a fraction %s of the way along the kept "+
			"tokens laid end to end in index order (the line on the chart).", engine.FormatSig(float64(c.U), 6), strconv.FormatUint(c.Target, 10), engine.FormatSig(float64(target), 6)),
		Rows:  len(v.Table),
		Chart: cdfDrawChart(st, names, false),
	}, SampleTeachItem{
		Title: "The walk along the prefix sums",
		What: fmt.Sprintf("The first kept token whose prefix sum exceeds t is token %s: the sums before and with it are %s and %s of S, and t/S = %s lies between. "+
			"The kernels find it with a parallel scan; the CPU twin with a guide table and a binary search; both land here because the sums are exact integers.",
			names.Label(int64(st.Token)), engine.FormatSig(float64(c.Before)/float64(c.Total), 6), engine.FormatSig(float64(c.After)/float64(c.Total), 6), engine.FormatSig(float64(target), 6)),
		Rows:  len(v.Table),
		Chart: cdfDrawChart(st, names, true),
		Marks: []TraceMark{{Name: "token", Coord: [2]any{st.Token, float64(c.After) / float64(c.Total)}, Color: colorPass}},
	})
}

func cdfWhy() []string {
	return []string{
		"Why it follows the distribution: a uniform point lands in a token's stretch with probability the stretch's length over the whole, " +
			"which is the token's weight over the kept weights: its renormalised probability. The index order is arbitrary and changes nothing.",
		"Why fixed point: in float32 the prefix sums depend on the order of addition, which differs between a loop and a GPU scan, so a point " +
			"near a boundary could land on different tokens on the CPU and the GPU. Weights times 2^40, truncated, sum exactly in any order; a " +
			"token lighter than 2^−40 of the most probable is never drawn, far below what a million draws can detect.",
		"It is the default (auto) and the only method of the many-draws mode: draws 0 to N−1 of a row are N inverse-CDF draws, each with its own Philox draw index.",
	}
}

// cdfDrawChart draws the prefix sums over the kept tokens in index order with
// the target, and the token drawn.
func cdfDrawChart(st *lesson.SampleState, names Tokens, drawn bool) map[string]any {
	c := st.CDF
	pts := make([]opts.LineData, len(c.Curve))
	for i, p := range c.Curve {
		pts[i] = opts.LineData{Value: []any{p.Token, float64(p.Cum)}}
	}
	target := float64(c.Target) / float64(c.Total)
	ch := charts.NewLine()
	title := "The prefix sums of the kept weights, in index order, and the target t/S"
	if drawn {
		title = fmt.Sprintf("t/S = %s lands in token %s", engine.FormatSig(float64(target), 6), names.Label(int64(st.Token)))
	}
	ch.SetGlobalOptions(append(frame(opts.Title{Title: title}, false, "axis", opts.Grid{Left: "70", Right: "30", Top: "50", Bottom: "60"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "token id", NameLocation: "middle", NameGap: 30, Min: 0, Max: st.Vocab - 1}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "prefix sum / S", NameLocation: "middle", NameGap: 50, Min: 0, Max: 1}),
	)...)
	ch.AddSeries("prefix sum", pts, charts.WithSeriesId(seriesP), charts.WithLineChartOpts(opts.LineChart{Step: "end", ShowSymbol: opts.Bool(false)}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}),
		charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: "t/S", YAxis: target}),
		charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"}, LineStyle: &opts.LineStyle{Color: colorAllowed, Type: "dashed"},
			Label: &opts.Label{Show: opts.Bool(true), Formatter: "t/S"}}))
	plainData(ch.MultiSeries)
	ch.Validate()
	return ch.JSON()
}

// ---- shared ----------------------------------------------------------------

// distChart draws the shown tokens' probabilities before the filters
// (grey for the dropped) and after them (q), with the rest pooled.
func distChart(st *lesson.SampleState, names Tokens, title string) map[string]any {
	n := len(st.Tokens)
	xs := make([]string, n+1)
	p, q := make([]opts.BarData, n+1), make([]opts.BarData, n+1)
	var restQ float64 = 1
	for i, tk := range st.Tokens {
		xs[i] = names.Axis(int64(tk.Token))
		p[i] = opts.BarData{Value: float64(tk.P)}
		if !tk.Kept {
			p[i].ItemStyle = &opts.ItemStyle{Color: "#ced4da"}
		}
		q[i] = opts.BarData{Value: float64(tk.Q)}
		restQ -= float64(tk.Q)
	}
	xs[n] = fmt.Sprintf("%d others", st.Rest)
	p[n], q[n] = opts.BarData{Value: float64(st.RestMass)}, opts.BarData{Value: math.Max(restQ, 0)}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "90"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable first; the last bar pools the rest of the row", NameLocation: "middle", NameGap: 35}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "probability", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	c.AddSeries("p: before the filters (grey: dropped)", p, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
	c.AddSeries("q: kept, renormalised", q, charts.WithSeriesId(seriesQ), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}))
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// pinToken pins token t on a chart of the shown tokens (distChart,
// roundChart), at its p, or at its q when byQ.
func pinToken(st *lesson.SampleState, t int, name, color string, byQ bool) []TraceMark {
	tk, i, ok := findToken(st, t)
	if !ok {
		return nil
	}
	h := float64(tk.P)
	if byQ {
		h = math.Max(float64(tk.Q), h)
	}
	return []TraceMark{{Name: name, Coord: [2]any{i, h}, Color: color}}
}
