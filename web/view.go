package web

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/engine/stats"
	"github.com/sampviz/sampviz/web/store"
)

// Status is where a judgement is, as the page shows it.
type Status struct {
	State store.State `json:"state"`
	// Message says why a run failed.
	Message string `json:"message,omitempty"`
	// Ahead counts the runs before this one in the queue (running included).
	Ahead int `json:"ahead,omitempty"`
	// Judged and Total count judged rows over all outputs.
	Judged int `json:"judged"`
	Total  int `json:"total"`
}

// RowSummary is one judged row of one output as the row table shows it.
type RowSummary struct {
	Output int  `json:"o"`
	Row    int  `json:"r"`
	Pass   bool `json:"pass"`
	// Worst is |output - reference| at the row's worst token (probability
	// outputs: the token furthest over what the tolerance allows), Allowed
	// what the tolerance allows there.
	Worst   *engine.Float `json:"worst,omitempty"`
	Allowed *engine.Float `json:"allowed,omitempty"`
	Matched string        `json:"matched,omitempty"`
	// Token and RefToken are set for single-token outputs.
	Token    *int64 `json:"token,omitempty"`
	RefToken *int64 `json:"ref_token,omitempty"`
	// PValue is the smallest p-value of the row's statistical tests.
	PValue *engine.Float `json:"p_value,omitempty"`
	// MAL and MALTheory are the mean acceptance length of the row's
	// speculative trials and its expected value.
	MAL       *engine.Float `json:"mal,omitempty"`
	MALTheory *engine.Float `json:"mal_theory,omitempty"`
	// Violations counts the row's violations; Say is the first of them, or
	// the first note of a passing row.
	Violations int    `json:"nv"`
	Say        string `json:"say,omitempty"`
}

// summarizeRow builds the table row of u.
func summarizeRow(u session.RowUpdate) RowSummary {
	rep := u.Report
	s := RowSummary{
		Output: u.Output, Row: rep.Row, Pass: rep.Pass, Matched: rep.Matched,
		Token: rep.Token, RefToken: rep.RefToken,
		Violations: len(rep.Violations),
	}
	if rep.PValue != nil {
		pv := engine.Float(*rep.PValue)
		s.PValue = &pv
	}
	if sp := rep.Spec; sp != nil && sp.Trials > 0 {
		m, th := sp.MeanAcceptanceLength, sp.TheoryMeanAcceptanceLength
		s.MAL, s.MALTheory = &m, &th
	}
	switch {
	case len(rep.Violations) > 0:
		s.Say = rep.Violations[0]
	case len(rep.Findings) > 0:
		s.Say = rep.Findings[0].Message
	}
	switch {
	case u.Errors != nil:
		w, a := u.Errors.Worst, u.Errors.Allowed
		s.Worst, s.Allowed = &w, &a
	case rep.Strict != nil:
		w := rep.Strict.Abs.Max
		s.Worst = &w
	}
	return s
}

// OutputVerdict is the final word on one output.
type OutputVerdict struct {
	engine.OutputInfo
	Pass       bool     `json:"pass"`
	FailedRows int      `json:"failed_rows"`
	Rows       int      `json:"rows"`
	Notes      []string `json:"notes,omitempty"`
	// Violations are the output's failures that belong to no single row.
	Violations []string       `json:"violations,omitempty"`
	Timing     *engine.Timing `json:"timing,omitempty"`
	// Spec pools the speculative statistics of every row.
	Spec *engine.SpecStats `json:"spec,omitempty"`
	// Draws is the number of draws per row of a samples output, Trials the
	// number of trials per row of a speculative one (0 when not judged
	// statistically).
	Draws  int `json:"draws,omitempty"`
	Trials int `json:"trials,omitempty"`
	// StatsLine says the output's statistics in words ("" for none).
	StatsLine string `json:"stats_line,omitempty"`
}

// Summary is the final word on a judgement, in the terms the page uses.
type Summary struct {
	Pass bool `json:"pass"`
	// Sentence says the verdict in one line a person reads once.
	Sentence   string            `json:"sentence"`
	Rows       int               `json:"rows"`
	FailedRows int               `json:"failed_rows"`
	Outputs    []OutputVerdict   `json:"outputs"`
	Tolerances engine.Tolerances `json:"tolerances"`
	Device     *engine.Device    `json:"device,omitempty"`
	Notices    []string          `json:"notices,omitempty"`
	Timing     *engine.Timing    `json:"timing,omitempty"`
	Verdict    store.Verdict     `json:"verdict"`
	// Rules counts the violations of each rule over every output and row.
	Rules map[string]int `json:"rules,omitempty"`
	// TimeLine and TolerancesLine are the run header's lines, in words.
	TimeLine       string `json:"time_line"`
	TolerancesLine string `json:"tolerances_line"`
	// StatsLine says the statistics of the outputs judged statistically
	// ("" when none was).
	StatsLine string `json:"stats_line,omitempty"`
}

// summarize turns a report into its Summary.
func summarize(rep *engine.Report) *Summary {
	s := &Summary{Pass: rep.Pass, Rows: rep.Rows, Tolerances: rep.Tolerances, Device: rep.Device, Notices: rep.Notices}
	failed := make([]bool, rep.Rows)
	s.Rules = map[string]int{}
	for _, o := range rep.Outputs {
		ov := OutputVerdict{
			OutputInfo: engine.OutputInfo{Name: o.Name, External: o.External, Kind: o.Kind},
			Pass:       o.Pass, FailedRows: o.FailedRows, Rows: len(o.Rows), Notes: o.Notes, Violations: o.Violations, Timing: o.Timing,
			Spec: o.Spec,
		}
		ov.Draws, ov.Trials = statCounts(o)
		ov.StatsLine = statsLine(ov, rep.Tolerances.PValue)
		if !o.External && o.Timing != nil {
			s.Timing = o.Timing
		}
		for _, r := range o.Rows {
			if !r.Pass && r.Row >= 0 && r.Row < len(failed) {
				failed[r.Row] = true
			}
			for _, f := range r.Findings {
				if f.Severity == engine.Violation {
					s.Rules[string(f.Rule)]++
				}
			}
		}
		s.Outputs = append(s.Outputs, ov)
	}
	for _, f := range failed {
		if f {
			s.FailedRows++
		}
	}
	s.Verdict = store.Verdict{Pass: s.Pass, FailedRows: s.FailedRows, Rows: s.Rows}
	s.Sentence = verdictSentence(s)
	var dev engine.Device
	if s.Device != nil {
		dev = *s.Device
	}
	s.TimeLine = timingLine(s, dev)
	s.TolerancesLine = toleranceText(s.Tolerances)
	var lines []string
	for _, o := range s.Outputs {
		if o.StatsLine != "" {
			lines = append(lines, o.StatsLine)
		}
	}
	s.StatsLine = strings.Join(lines, " ")
	return s
}

// statCounts returns the draws per row of a samples output and the trials
// per row of a speculative one, from its first row judged statistically.
func statCounts(o engine.OutputReport) (draws, trials int) {
	for _, r := range o.Rows {
		if r.Fit != nil && draws == 0 {
			draws = r.Fit.Draws
		}
		if r.Spec != nil && trials == 0 {
			trials = r.Spec.Trials
		}
	}
	return draws, trials
}

// statsLine says an output's statistics in one sentence: how many draws or
// trials each row had, how many rows the statistical tests failed at the
// threshold, and for speculative outputs the mean acceptance length against
// theory.
func statsLine(o OutputVerdict, threshold float64) string {
	var parts []string
	switch {
	case o.Trials > 0:
		parts = append(parts, fmt.Sprintf("%d trials per row", o.Trials))
		if sp := o.Spec; sp != nil && sp.Trials > 0 {
			parts = append(parts, fmt.Sprintf("mean acceptance length %s against %s in theory", shortFloat(float64(sp.MeanAcceptanceLength)), shortFloat(float64(sp.TheoryMeanAcceptanceLength))))
		}
	case o.Draws > 0:
		parts = append(parts, fmt.Sprintf("%d draws per row", o.Draws))
	default:
		return ""
	}
	if threshold > 0 {
		parts = append(parts, fmt.Sprintf("rows fail a statistical test below p = %s", engine.FormatFloat(threshold)))
	}
	return o.Label() + ": " + strings.Join(parts, "; ") + "."
}

// verdictSentence says a summary in one line: what failed, where, and why.
func verdictSentence(s *Summary) string {
	if s.Pass {
		return fmt.Sprintf("PASS: every output matches the float64 reference within tolerance on all %d rows.", s.Rows)
	}
	var failing []string
	for _, o := range s.Outputs {
		if !o.Pass {
			f := fmt.Sprintf("%s fails %d of %d rows", o.Label(), o.FailedRows, o.Rows)
			if len(o.Violations) > 0 {
				f += " and, over all rows together, " + o.Violations[0]
			}
			failing = append(failing, f)
		}
	}
	why := ""
	if len(s.Rules) > 0 {
		why = " Rules broken: " + ruleList(s.Rules) + "."
	}
	return fmt.Sprintf("FAIL: %s.%s", strings.Join(failing, "; "), why)
}

var ruleWords = map[string]string{
	string(engine.RuleTolerance):  "values outside tolerance",
	string(engine.RuleNaN):        "NaN",
	string(engine.RuleInf):        "Inf",
	string(engine.RuleMasked):     "fully masked rows",
	string(engine.RuleRowSum):     "rows that do not sum to 1",
	string(engine.RuleSupport):    "tokens kept by one side and dropped by the other",
	string(engine.RuleTokenRange): "token ids out of range",
	string(engine.RuleToken):      "wrong tokens",
	string(engine.RuleFragile):    "near-ties",
	string(engine.RuleBoundary):   "filter-boundary ties",
	string(engine.RuleStructure):  "speculative output layout",
	string(engine.RuleFit):        "draws that do not fit the distribution",
	string(engine.RuleAcceptance): "acceptance rates off theory",
	string(engine.RuleExact):      "drafts that differ",
}

// ruleList names the broken rules with their counts, most frequent first.
func ruleList(rules map[string]int) string {
	type rc struct {
		rule string
		n    int
	}
	var list []rc
	for r, n := range rules {
		list = append(list, rc{r, n})
	}
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && (list[j].n > list[j-1].n || list[j].n == list[j-1].n && list[j].rule < list[j-1].rule); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	parts := make([]string, len(list))
	for i, x := range list {
		w := ruleWords[x.rule]
		if w == "" {
			w = x.rule
		}
		parts[i] = fmt.Sprintf("%s (%d)", w, x.n)
	}
	return strings.Join(parts, ", ")
}

// chartData accumulates what the run page's charts draw, per output.
type chartData struct {
	// Rows is the batch size, RowGroup the rows per heatmap line.
	Rows     int
	RowGroup int
	Outputs  []outputChartAcc
}

// outputChartAcc is what one output's charts draw.
type outputChartAcc struct {
	// Worst and Allowed are indexed by row; NaN until the row is judged and
	// for outputs without elementwise errors, +Inf for NaN or Inf errors.
	Worst   []float64
	Allowed []float64
	Pass    []int8 // 0 unjudged, 1 pass, -1 fail
	Hist    [session.HistBins]int
	// Heat holds the worst error/allowed ratio per heatmap line and bucket.
	Heat    [][session.HeatBuckets]float64
	HasHeat bool
	// PValue is indexed by row: the row's smallest p-value, NaN until the
	// row is judged and for rows not judged statistically.
	PValue    []float64
	HasPValue bool
	// Spec pools the speculative counts of the rows judged so far.
	Spec *specPool
}

// rowSpec is what the run page's charts keep of one row's speculative
// statistics (engine.SpecStats without its fits), in stream.json too.
type rowSpec struct {
	Trials        int            `json:"t"`
	Reached       []int          `json:"n"`
	Accepted      []int          `json:"a"`
	Theory        []engine.Float `json:"th"`
	Emitted       []int          `json:"e"`
	EmittedTheory []engine.Float `json:"et"`
	MAL           engine.Float   `json:"mal"`
	MALTheory     engine.Float   `json:"mal_th"`
}

// newRowSpec keeps the counts of s, or returns nil for no trials.
func newRowSpec(s *engine.SpecStats) *rowSpec {
	if s == nil || s.Trials <= 0 {
		return nil
	}
	r := &rowSpec{Trials: s.Trials, EmittedTheory: s.EmittedTheory, MAL: s.MeanAcceptanceLength, MALTheory: s.TheoryMeanAcceptanceLength}
	for _, p := range s.Positions {
		r.Reached = append(r.Reached, p.Reached)
		r.Accepted = append(r.Accepted, p.Accepted)
		r.Theory = append(r.Theory, p.Theory)
	}
	r.Emitted = append(r.Emitted, s.Emitted...)
	return r
}

// specPool sums the rows' speculative counts: acceptance by position among
// the trials that reached it, with the theory weighted by those trials, and
// the emitted lengths with the theory weighted by each row's trials.
type specPool struct {
	Trials        int
	Reached       []int
	Accepted      []int
	TheoryW       []float64
	Emitted       []int
	EmittedTheory []float64
	MALW          float64
	MALTheoryW    float64
}

func (p *specPool) add(r *rowSpec) {
	grow := func(n int) {
		for len(p.Reached) < n {
			p.Reached, p.Accepted, p.TheoryW = append(p.Reached, 0), append(p.Accepted, 0), append(p.TheoryW, 0)
		}
	}
	grow(len(r.Reached))
	for i := range r.Reached {
		p.Reached[i] += r.Reached[i]
		if i < len(r.Accepted) {
			p.Accepted[i] += r.Accepted[i]
		}
		if i < len(r.Theory) {
			p.TheoryW[i] += float64(r.Reached[i]) * float64(r.Theory[i])
		}
	}
	for len(p.Emitted) < max(len(r.Emitted), len(r.EmittedTheory)) {
		p.Emitted, p.EmittedTheory = append(p.Emitted, 0), append(p.EmittedTheory, 0)
	}
	for j, n := range r.Emitted {
		p.Emitted[j] += n
	}
	for j, th := range r.EmittedTheory {
		p.EmittedTheory[j] += float64(r.Trials) * float64(th)
	}
	p.Trials += r.Trials
	p.MALW += float64(r.Trials) * float64(r.MAL)
	p.MALTheoryW += float64(r.Trials) * float64(r.MALTheory)
}

// stats returns the pool as engine.SpecStats: rates with 95% Wilson
// intervals, theory as the trial-weighted mean of the rows' theories, and
// emitted-length theory as the expected share of trials.
func (p *specPool) stats() *engine.SpecStats {
	s := &engine.SpecStats{Trials: p.Trials}
	for i := range p.Reached {
		pr := engine.PositionRate{Position: i, Reached: p.Reached[i], Accepted: p.Accepted[i], Rate: engine.Float(math.NaN()), Theory: engine.Float(math.NaN()), PValue: engine.Float(math.NaN())}
		if n := p.Reached[i]; n > 0 {
			pr.Rate = engine.Float(float64(p.Accepted[i]) / float64(n))
			pr.Theory = engine.Float(p.TheoryW[i] / float64(n))
		}
		lo, hi := stats.Wilson(p.Accepted[i], p.Reached[i], stats.Z95)
		pr.Lo, pr.Hi = engine.Float(lo), engine.Float(hi)
		s.Positions = append(s.Positions, pr)
	}
	s.Emitted = append(s.Emitted, p.Emitted...)
	for _, w := range p.EmittedTheory {
		th := math.NaN()
		if p.Trials > 0 {
			th = w / float64(p.Trials)
		}
		s.EmittedTheory = append(s.EmittedTheory, engine.Float(th))
	}
	s.EmittedPValue = engine.Float(math.NaN())
	if p.Trials > 0 {
		s.MeanAcceptanceLength = engine.Float(p.MALW / float64(p.Trials))
		s.TheoryMeanAcceptanceLength = engine.Float(p.MALTheoryW / float64(p.Trials))
	}
	return s
}

func newChartData(rows int, outs []engine.OutputInfo) *chartData {
	group := (rows + maxHeatLines - 1) / maxHeatLines
	if group < 1 {
		group = 1
	}
	c := &chartData{Rows: rows, RowGroup: group, Outputs: make([]outputChartAcc, len(outs))}
	for i := range c.Outputs {
		o := &c.Outputs[i]
		o.Worst = nanSlice(rows)
		o.Allowed = nanSlice(rows)
		o.Pass = make([]int8, rows)
		o.Heat = make([][session.HeatBuckets]float64, (rows+group-1)/group)
		o.PValue = nanSlice(rows)
	}
	return c
}

// clone returns a copy that later rows do not change.
func (c *chartData) clone() *chartData {
	if c == nil {
		return nil
	}
	d := &chartData{Rows: c.Rows, RowGroup: c.RowGroup, Outputs: make([]outputChartAcc, len(c.Outputs))}
	for i, o := range c.Outputs {
		d.Outputs[i] = outputChartAcc{
			Worst: append([]float64(nil), o.Worst...), Allowed: append([]float64(nil), o.Allowed...),
			Pass: append([]int8(nil), o.Pass...), Hist: o.Hist,
			Heat: append([][session.HeatBuckets]float64(nil), o.Heat...), HasHeat: o.HasHeat,
			PValue: append([]float64(nil), o.PValue...), HasPValue: o.HasPValue,
		}
		if o.Spec != nil {
			sp := *o.Spec
			sp.Reached, sp.Accepted, sp.TheoryW = slices.Clone(sp.Reached), slices.Clone(sp.Accepted), slices.Clone(sp.TheoryW)
			sp.Emitted, sp.EmittedTheory = slices.Clone(sp.Emitted), slices.Clone(sp.EmittedTheory)
			d.Outputs[i].Spec = &sp
		}
	}
	return d
}

// maxHeatLines bounds the heatmap's lines; more rows share a line.
const maxHeatLines = 48

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// add records one judged row.
func (c *chartData) add(row streamRow) {
	sum := row.RowSummary
	if sum.Output < 0 || sum.Output >= len(c.Outputs) || sum.Row < 0 || sum.Row >= c.Rows {
		return
	}
	o := &c.Outputs[sum.Output]
	r := sum.Row
	if sum.PValue != nil {
		o.PValue[r] = float64(*sum.PValue)
		o.HasPValue = true
	}
	if row.Spec != nil {
		if o.Spec == nil {
			o.Spec = &specPool{}
		}
		o.Spec.add(row.Spec)
	}
	o.Pass[r] = 1
	if !sum.Pass {
		o.Pass[r] = -1
	}
	if sum.Worst != nil {
		w := float64(*sum.Worst)
		if math.IsNaN(w) {
			w = math.Inf(1) // a NaN output: drawn with the infinite errors
		}
		o.Worst[r] = w
	}
	if sum.Allowed != nil {
		o.Allowed[r] = float64(*sum.Allowed)
	}
	if e := row.Errors; e != nil {
		for i, n := range e.Hist {
			o.Hist[i] += n
		}
		line := &o.Heat[r/c.RowGroup]
		for b, v := range e.Buckets {
			x := float64(v)
			if math.IsNaN(x) {
				x = math.Inf(1)
			}
			if b < session.HeatBuckets && x > line[b] {
				line[b] = x
			}
		}
		o.HasHeat = true
	}
}
