package view

import (
	"fmt"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
)

// A finished judgement's verdict in the terms the pages use, with the
// sentences that say it.

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
	// Gate is a logits_gate output's KL and top-1 flips.
	Gate *engine.GateStats `json:"gate,omitempty"`
	// InputRows counts the failing rows that fail on their input (NaN or
	// masked logits), not on the output.
	InputRows int `json:"input_rows,omitempty"`
	// Logprobs says what a logprobs output was judged as: raw or
	// processed, every token's or a top-N.
	Logprobs *engine.LogprobsInfo `json:"logprobs,omitempty"`
	// Line says the output's verdict in one sentence (OutputLine).
	Line string `json:"line"`
	// Power is the smallest bias a samples output's draws catch.
	Power *engine.Power `json:"power,omitempty"`
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
	// ToleranceFields are the tolerances as the pages' form fields and URLs
	// write them (satol, srtol, natol, nrtol, pvalue), so a page script
	// fills a field with the text the server would ("1e-05", never
	// "0.00001").
	ToleranceFields map[string]string `json:"tolerance_fields,omitempty"`
	// StatsLine says the statistics of the outputs judged statistically
	// ("" when none was).
	StatsLine string `json:"stats_line,omitempty"`
	// Padding lists the padded lanes, PaddingFindings every output's
	// padding violations (compare.go).
	Padding         []int            `json:"padding,omitempty"`
	PaddingFindings []PaddingFinding `json:"padding_findings,omitempty"`
	// Modes are the report's mode tables, Agreement its pairs of outputs
	// of one kind.
	Modes     []engine.ModeTable `json:"modes,omitempty"`
	Agreement []Agreement        `json:"agreement,omitempty"`
	// Drift is each float output's error over the run against each
	// reference: mean, P99 and max (drift.go).
	Drift []RunDrift `json:"drift,omitempty"`
	// Matches are the verdicts of every semantics preset of a run judged
	// with semantics any, Semantics the preset whose judgement the rest of
	// the summary is (semantics.go).
	Semantics engine.Semantics        `json:"semantics,omitempty"`
	Matches   []engine.SemanticsMatch `json:"matches,omitempty"`
}

// Summarize turns a report into its Summary.
func Summarize(rep *engine.Report) *Summary {
	s := &Summary{Pass: rep.Pass, Rows: rep.Rows, Tolerances: rep.Tolerances, Device: rep.Device, Notices: rep.Notices}
	failed := make([]bool, rep.Rows)
	s.Rules = map[string]int{}
	for _, o := range rep.Outputs {
		ov := OutputVerdict{
			OutputInfo: engine.OutputInfo{Name: o.Name, External: o.External, Kind: o.Kind},
			Pass:       o.Pass, FailedRows: o.FailedRows, Rows: realRows(o), Notes: o.Notes, Violations: o.Violations, Timing: o.Timing,
			Spec: o.Spec, Gate: o.Gate, Logprobs: o.Logprobs, Power: o.Power,
		}
		ov.Draws, ov.Trials = statCounts(o)
		for _, r := range o.Rows {
			if !r.Pass && r.InvalidInput {
				ov.InputRows++
			}
		}
		ov.Line = OutputLine(ov)
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
	s.comparison(rep)
	s.Drift = driftLines(rep)
	s.Verdict = store.Verdict{Pass: s.Pass, FailedRows: s.FailedRows, Rows: s.Rows}
	s.Sentence = verdictSentence(s)
	var dev engine.Device
	if s.Device != nil {
		dev = *s.Device
	}
	s.TimeLine = TimingLine(s, dev)
	s.TolerancesLine = ToleranceText(s.Tolerances)
	s.ToleranceFields = map[string]string{}
	for k, v := range ToleranceValues(&s.Tolerances) {
		s.ToleranceFields[k] = v[0]
	}
	var lines []string
	for _, o := range s.Outputs {
		if o.StatsLine != "" {
			lines = append(lines, o.StatsLine)
		}
	}
	s.StatsLine = strings.Join(lines, " ")
	return s
}

// realRows counts an output's rows that are not padding.
func realRows(o engine.OutputReport) int {
	n := 0
	for _, r := range o.Rows {
		if !r.Padding {
			n++
		}
	}
	return n
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
			parts = append(parts, fmt.Sprintf("mean acceptance length %s against %s in theory", engine.FormatSig(float64(sp.MeanAcceptanceLength), 4), engine.FormatSig(float64(sp.TheoryMeanAcceptanceLength), 4)))
		}
	case o.Draws > 0:
		parts = append(parts, fmt.Sprintf("%d draws per row", o.Draws))
	default:
		return ""
	}
	if threshold > 0 {
		parts = append(parts, fmt.Sprintf("rows fail a statistical test below p = %s", engine.FormatFloat(threshold)))
	}
	if pw := o.Power; pw != nil {
		parts = append(parts, fmt.Sprintf("any bias of total variation %s or more is caught %.0f times in 100 in every row (row %d is the least sensitive)",
			engine.FormatSig(float64(pw.TV), 2), 100*float64(pw.Probability), pw.Row))
		if g := pw.Gain(); g != "" {
			parts = append(parts, g)
		}
	}
	return o.Label() + ": " + strings.Join(parts, "; ") + "."
}

// verdictSentence says a summary in one line: what failed, where, and why.
func verdictSentence(s *Summary) string {
	if len(s.Matches) > 0 {
		return matchVerdict(s)
	}
	if s.Pass {
		if n := len(s.Padding); n > 0 {
			return fmt.Sprintf("PASS: every output matches the float64 reference within tolerance on all %d real rows, and holds its fill in the %s.", s.Rows-n, Plural(n, "padded lane"))
		}
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

// ruleWords name each rule in the verdict sentence.
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
	string(engine.RuleCounter):    "spec_emitted reporting the accepted counter",
	string(engine.RuleFit):        "draws that do not fit the distribution",
	string(engine.RuleAcceptance): "acceptance rates off theory",
	string(engine.RuleExact):      "drafts that differ",
	string(engine.RulePadding):    "padded lanes written into or real rows shifted",
	string(engine.RuleAgreement):  "draws that part from another mode's under the same seed",
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

// TimingLine says how long the kernels took and, on a GPU, the bandwidth
// they achieved against the copy bandwidth measured at start.
func TimingLine(sum *Summary, d engine.Device) string {
	switch {
	case sum == nil:
		return "Measured when the run finishes."
	case sum.Timing == nil && len(sum.Matches) > 0:
		return "No kernel ran: semantics any judges the dump's outputs under every preset."
	case sum.Timing == nil:
		return "No kernel ran: only the dump's outputs were judged."
	}
	t := sum.Timing
	if d.Backend == "cpu" {
		return fmt.Sprintf("%s on the CPU (wall time; the CPU backend has no kernel time or bandwidth to report).", Duration(t.Wall))
	}
	line := fmt.Sprintf("kernel %s", Duration(t.Kernel))
	if bw := t.Bandwidth(); bw > 0 {
		line += fmt.Sprintf(", %s achieved", Bandwidth(bw))
		if d.CopyBandwidth > 0 {
			line += fmt.Sprintf(" (%.0f%% of the %s copy bandwidth measured at start)", 100*bw/d.CopyBandwidth, Bandwidth(d.CopyBandwidth))
		}
	}
	if t.Wall > 0 {
		line += fmt.Sprintf("; %s with transfers", Duration(t.Wall))
	}
	return line + "."
}

// ToleranceText writes a judgement's tolerances in one line.
func ToleranceText(t engine.Tolerances) string {
	return fmt.Sprintf("strict atol %s, rtol %s; native atol %s, rtol %s; p-value %s",
		engine.FormatFloat(t.Strict.Atol), engine.FormatFloat(t.Strict.Rtol), engine.FormatFloat(t.Native.Atol), engine.FormatFloat(t.Native.Rtol), engine.FormatFloat(t.PValue))
}
