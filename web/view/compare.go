package view

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// The run page's comparison sections, from what the judge reported: the
// mode tables (one line per output of a kind), the agreement between every
// two outputs of a kind, the golden-logits gate, and the padded lanes. The
// judge decided every verdict and number here; this file only puts them in
// the page's words.

// Agreement is one pair of outputs compared, with the rows where a pair
// that must draw the same tokens parts (the agreement findings of B).
type Agreement struct {
	engine.Agreement
	Parted []PartedRow `json:"parted,omitempty"`
}

// PartedRow is one row where two outputs that declare the same seed and
// offset drew differently: each one's token (single-token outputs) and the
// judge's sentence.
type PartedRow struct {
	Row int    `json:"row"`
	A   *int64 `json:"a,omitempty"`
	B   *int64 `json:"b,omitempty"`
	Say string `json:"say"`
}

// PaddingFinding is one output's padding violation on one row: a padded
// lane written into, or real rows shifted by the padding.
type PaddingFinding struct {
	Output string `json:"output"`
	Row    int    `json:"row"`
	Say    string `json:"say"`
}

// maxParted bounds the rows listed for one pair; the rest are counted.
const maxParted = 64

// comparison fills s's comparison fields from rep.
func (s *Summary) comparison(rep *engine.Report) {
	s.Padding = rep.Padding
	s.Modes = rep.Modes
	s.Semantics, s.Matches = rep.Semantics, rep.Matches
	byName := map[string]*engine.OutputReport{}
	for i := range rep.Outputs {
		byName[rep.Outputs[i].Name] = &rep.Outputs[i]
	}
	for _, ag := range rep.Agreement {
		a := Agreement{Agreement: ag}
		oa, ob := byName[ag.A], byName[ag.B]
		if ob != nil {
			for i := range ob.Rows {
				rb := &ob.Rows[i]
				for _, f := range rb.Findings {
					if f.Rule != engine.RuleAgreement || len(a.Parted) >= maxParted {
						continue
					}
					p := PartedRow{Row: rb.Row, B: rb.Token, Say: f.Message}
					if ra := rowOf(oa, rb.Row); ra != nil {
						p.A = ra.Token
					}
					a.Parted = append(a.Parted, p)
					break
				}
			}
		}
		s.Agreement = append(s.Agreement, a)
	}
	for _, o := range rep.Outputs {
		for _, r := range o.Rows {
			for _, f := range r.Findings {
				if f.Rule == engine.RulePadding && f.Severity == engine.Violation {
					s.PaddingFindings = append(s.PaddingFindings, PaddingFinding{Output: o.Name, Row: r.Row, Say: f.Message})
				}
			}
		}
	}
}

// rowOf returns row r of o's report, or nil.
func rowOf(o *engine.OutputReport, r int) *engine.RowReport {
	if o == nil {
		return nil
	}
	if r >= 0 && r < len(o.Rows) && o.Rows[r].Row == r {
		return &o.Rows[r]
	}
	for i := range o.Rows {
		if o.Rows[i].Row == r {
			return &o.Rows[i]
		}
	}
	return nil
}

// HasComparison reports whether a summary has anything for the comparison
// sections: mode tables, pairs of outputs, a gate, padded lanes or the
// verdicts of the semantics presets.
func HasComparison(s *Summary) bool {
	return s != nil && (len(s.Modes) > 0 || len(s.Agreement) > 0 || len(s.Padding) > 0 || len(Gates(s)) > 0 || len(s.Matches) > 0)
}

// KindWords names an output kind for a section's title.
func KindWords(kind string) string {
	switch kind {
	case "probs":
		return "probabilities"
	case "logits":
		return "logits against the golden"
	case "logprobs":
		return "log probabilities"
	case "tokens":
		return "tokens"
	case "samples":
		return "draws"
	case "spec":
		return "speculative tokens"
	case "tree":
		return "tree paths"
	}
	return kind
}

// ModeHead is the header of a mode table: output, verdict, failing rows
// and the metric's columns.
func ModeHead(t engine.ModeTable) []string {
	h := []string{"output", "verdict", "rows failing"}
	switch t.Metric {
	case "logit":
		h = append(h, "mean |Δlogit|", "P99", "max", "mean KL", "top-1 flips real / fragile")
	case "abs":
		h = append(h, "mean |error|", "P99", "max")
	case "logprob":
		h = append(h, "mean |Δlogprob| (nats)", "P99", "max")
	default:
		h = append(h, "mismatches")
	}
	return h
}

// AgainstHead is the header of a mode table's differences: one column per
// output of the table.
func AgainstHead(t engine.ModeTable) []string {
	h := []string{""}
	for _, l := range t.Lines {
		h = append(h, ModeName(t, l.Output))
	}
	return h
}

// ModeName shortens an output's name in a table whose outputs all name
// one tensor's modes (logits@bs1_eager is bs1_eager there).
func ModeName(t engine.ModeTable, name string) string {
	tensor := ""
	for i, l := range t.Lines {
		tn, mode := engine.SplitName(l.Output)
		if mode == "" || i > 0 && tn != tensor {
			return name
		}
		tensor = tn
	}
	_, mode := engine.SplitName(name)
	return "@" + mode
}

// ModeCell is one cell of a mode table's line, with its CSS class.
type ModeCell struct {
	Text  string
	Class string
	// Href links the cell (a difference's row), "" for none.
	Href string
}

// ModeCells writes one line of a mode table as its cells, in ModeHead's
// order.
func ModeCells(t engine.ModeTable, l engine.ModeLine) []ModeCell {
	name := l.Output
	if !l.External {
		name += " (ours)"
	}
	cells := []ModeCell{{Text: name}}
	if l.Pass {
		cells = append(cells, ModeCell{Text: "pass", Class: "pass"})
	} else {
		cells = append(cells, ModeCell{Text: "FAIL", Class: "fail"})
	}
	failing := fmt.Sprintf("%d of %d", l.FailedRows, l.Rows)
	cells = append(cells, ModeCell{Text: failing, Class: failClass(l.FailedRows > 0)})
	opt := func(f *engine.Float) string {
		if f == nil {
			return "—"
		}
		return engine.FormatSig(float64(*f), 4)
	}
	switch t.Metric {
	case "logit", "abs", "logprob":
		cells = append(cells, ModeCell{Text: opt(l.Mean)}, ModeCell{Text: opt(l.P99)}, ModeCell{Text: opt(l.Max)})
		if t.Metric == "logit" {
			cells = append(cells, ModeCell{Text: opt(l.KL)})
			real, fragile := deref(l.RealFlips), deref(l.FragileFlips)
			cells = append(cells, ModeCell{Text: fmt.Sprintf("%d / %d", real, fragile), Class: failClass(real > 0)})
		}
	default:
		cells = append(cells, ModeCell{Text: strconv.Itoa(deref(l.Mismatches)), Class: failClass(deref(l.Mismatches) > 0)})
	}
	return cells
}

// AgainstCells writes one line of a mode table's differences: the output,
// then its greatest difference from each output of the table (AgainstHead's
// order). rowURL links a row of the run (a difference's row).
func AgainstCells(t engine.ModeTable, l engine.ModeLine, rowURL func(r int) string) []ModeCell {
	cells := []ModeCell{{Text: ModeName(t, l.Output)}}
	for _, other := range t.Lines {
		if other.Output == l.Output {
			cells = append(cells, ModeCell{Text: "—", Class: "muted"})
			continue
		}
		c := ModeCell{Text: "—", Class: "muted"}
		for _, d := range l.Against {
			if d.Output != other.Output {
				continue
			}
			switch {
			case d.Max != nil:
				c = ModeCell{Text: engine.FormatSig(float64(*d.Max), 4)}
				if d.Row >= 0 {
					c.Text += fmt.Sprintf(" (row %d)", d.Row)
					c.Href = rowURL(d.Row)
				}
			case d.Differ != nil:
				c = ModeCell{Text: Plural(*d.Differ, "row") + " differ", Class: failClass(*d.Differ > 0)}
				if *d.Differ == 0 {
					c.Text = "same on every row"
				} else if d.Row >= 0 {
					c.Text += fmt.Sprintf(", first row %d", d.Row)
					c.Href = rowURL(d.Row)
				}
			}
		}
		cells = append(cells, c)
	}
	return cells
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func failClass(bad bool) string {
	if bad {
		return "fail"
	}
	return ""
}

// AgainstLead says what a mode table's differences measure.
func AgainstLead(t engine.ModeTable) string {
	if t.Metric == "" {
		return "Rows where two outputs drew differently, and the first of them:"
	}
	if t.Metric == "logprob" {
		return "Greatest elementwise |difference| between two outputs that hold every token's logprobs, in nats, and its row (a top-N holds other tokens from row to row, so it is compared with the reference only):"
	}
	return "Greatest elementwise |difference| between two outputs, and its row:"
}

// ModeLead says what a mode table measures, in one sentence.
func ModeLead(t engine.ModeTable) string {
	switch t.Metric {
	case "logit":
		return "Each mode's logits against the golden logits: |Δlogit| over every element, the KL divergence of the golden softmax from the mode's at T = 1, and every row whose top-1 token is not the golden's (fragile when the two logits are within the tolerance, real otherwise)."
	case "abs":
		return "Each output's |output − reference| over every element of the real rows."
	case "logprob":
		return "Each output's |output − reference| in nats over the logprobs it holds (every token's, or its top-N), against the float64 log-softmax of its kind: raw (the logits at temperature 1) or processed (after the row's temperature and filters)."
	}
	return "Each output's rows whose tokens the reference rules out (mismatches)."
}

// RuleWords says what an agreement rule asks of a pair.
func RuleWords(rule string) string {
	switch rule {
	case "same_draws":
		return "same seed and offset: must draw the same tokens"
	case "draws":
		return "different seeds: compared, not required to agree"
	case "argmax":
		return "top-1 tokens compared: flips fragile or real"
	case "drift":
		return "elementwise |difference|"
	}
	return rule
}

// PairHeadline says a pair's comparison in a few words, as its rule
// measures it.
func PairHeadline(a engine.Agreement) string {
	switch {
	case a.Rule == "drift" && a.MaxAbs != nil:
		s := "greatest |difference| " + engine.FormatSig(float64(*a.MaxAbs), 4)
		if a.MaxRow >= 0 {
			s += fmt.Sprintf(" at row %d", a.MaxRow)
		}
		if len(a.Flips) > 0 {
			s += "; " + FlipCounts(a.Flips)
		}
		return s
	case len(a.Flips) > 0:
		return FlipCounts(a.Flips)
	}
	return AgreeText(a) + " rows agree"
}

// AgreeText says how many rows a pair agrees on.
func AgreeText(a engine.Agreement) string {
	if a.Compared == 0 {
		return "no row compared"
	}
	return fmt.Sprintf("%d of %d", a.Agree, a.Compared)
}

// PartText says where a pair first parts.
func PartText(a engine.Agreement) string {
	switch {
	case a.FirstRow < 0:
		return "never"
	case a.FirstDraw >= 0 && (a.Rule == "same_draws" || a.Rule == "draws"):
		return fmt.Sprintf("row %d, draw %d", a.FirstRow, a.FirstDraw)
	}
	return fmt.Sprintf("row %d", a.FirstRow)
}

// DriftText says how far apart a drift pair is ("" for others).
func DriftText(a engine.Agreement) string {
	if a.MaxAbs == nil {
		return ""
	}
	s := fmt.Sprintf("greatest |difference| %s", engine.FormatSig(float64(*a.MaxAbs), 4))
	if a.MaxRow >= 0 {
		s += fmt.Sprintf(" at row %d, token %d", a.MaxRow, a.MaxToken)
	}
	if a.MeanAbs != nil {
		s += ", mean " + engine.FormatSig(float64(*a.MeanAbs), 4)
	}
	return s
}

// FlipCounts says how many flips a pair has of each class.
func FlipCounts(flips []engine.Flip) string {
	real, fragile := 0, 0
	for _, f := range flips {
		if f.Fragile {
			fragile++
		} else {
			real++
		}
	}
	return fmt.Sprintf("%s (%d real, %d fragile)", Plural(len(flips), "flip"), real, fragile)
}

// FlipClass is a flip's class in one word.
func FlipClass(f engine.Flip) string {
	if f.Fragile {
		return "fragile"
	}
	return "real"
}

// TokenText writes a token of a parted row ("—" when the output has none).
func TokenText(t *int64) string {
	if t == nil {
		return "—"
	}
	return strconv.FormatInt(*t, 10)
}

// AgreementOpen says whether a pair's details start open: when it fails,
// or when the page opened on the agreement view.
func AgreementOpen(a Agreement, focus bool) bool { return focus || !a.Pass }

// Gate is one logits_gate output's KL and flips.
type Gate struct {
	Output string
	Pass   bool
	Stats  *engine.GateStats
}

// Gates returns the logits_gate outputs of a summary.
func Gates(s *Summary) []Gate {
	if s == nil {
		return nil
	}
	var g []Gate
	for _, o := range s.Outputs {
		if o.Gate != nil {
			g = append(g, Gate{Output: o.Name, Pass: o.Pass, Stats: o.Gate})
		}
	}
	return g
}

// GateLine says one mode's gate in a sentence.
func GateLine(g Gate) string {
	st := g.Stats
	verdict := "passes"
	if !g.Pass {
		verdict = "FAILS"
	}
	s := fmt.Sprintf("%s %s: mean KL %s, greatest %s (row %d); ", g.Output, verdict, engine.FormatSig(float64(st.MeanKL), 4), engine.FormatSig(float64(st.MaxKL), 4), st.MaxKLRow)
	if len(st.Flips) == 0 {
		return s + "the top-1 token is the golden's on every row."
	}
	return s + fmt.Sprintf("%s of the top-1 token (%d real, %d fragile).", Plural(len(st.Flips), "flip"), st.Real, st.Fragile)
}

// FlipLine says one top-1 flip of a gate in words.
func FlipLine(f engine.Flip) string {
	why := "its golden logit is more than the tolerance below the winner's: a real flip"
	if f.Fragile {
		why = "within the tolerance of the winner's: a near-tie that rounding may flip"
	}
	return fmt.Sprintf("row %d: top-1 token %d where the golden's is %d, %s below it; %s.", f.Row, f.Token, f.RefToken, engine.FormatSig(float64(f.Margin), 4), why)
}

// GateSentence says which modes of a gate pass.
func GateSentence(gs []Gate) string {
	var pass, fail []string
	for _, g := range gs {
		if g.Pass {
			pass = append(pass, g.Output)
		} else {
			fail = append(fail, g.Output)
		}
	}
	switch {
	case len(fail) == 0:
		return "Every mode passes the gate: " + listWords(pass) + "."
	case len(pass) == 0:
		return "No mode passes the gate: " + listWords(fail) + " fail."
	}
	return fmt.Sprintf("%s %s the gate; %s %s.", listWords(pass), verbFor(len(pass), "passes", "pass"), listWords(fail), verbFor(len(fail), "fails", "fail"))
}

func verbFor(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// listWords writes a, b and c.
func listWords(xs []string) string {
	switch len(xs) {
	case 0:
		return "none"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// RowsWords writes rows 6 and 7 (or row 3).
func RowsWords(rows []int) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = strconv.Itoa(r)
	}
	if len(rows) == 1 {
		return "row " + parts[0]
	}
	return "rows " + listWords(parts)
}

// PaddingLine says which rows are padding and what that means for the page.
func PaddingLine(s *Summary) string {
	if s == nil || len(s.Padding) == 0 {
		return ""
	}
	p := slices.Clone(s.Padding)
	slices.Sort(p)
	return fmt.Sprintf("%s of the %d %s padding (the dump's valid mask): greyed in the row table, left out of the charts and never judged against the reference; only what an output writes there is checked.",
		capitalise(RowsWords(p)), s.Rows, verbFor(len(p), "lanes is", "lanes are"))
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// PaddingVerdict says whether any output broke the padding rule.
func PaddingVerdict(s *Summary) string {
	if len(s.PaddingFindings) == 0 {
		return "Every output holds its fill in the padded lanes, and no real row is shifted by the padding."
	}
	outs := map[string]bool{}
	var names []string
	for _, f := range s.PaddingFindings {
		if !outs[f.Output] {
			outs[f.Output] = true
			names = append(names, f.Output)
		}
	}
	return fmt.Sprintf("%s %s the padding rule on %s.", listWords(names), verbFor(len(names), "breaks", "break"), Plural(len(s.PaddingFindings), "row"))
}
