package view

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// "Which engine does this match?": a run judged with semantics any holds
// every preset's verdict on the dump's outputs (engine.Report.Matches,
// engine/session/semantics.go). The judge decided every verdict; this file
// puts them in the run page's words.

// MatchLine is one preset's line of the run page's semantics panel.
type MatchLine struct {
	engine.SemanticsMatch
	// ChainText is the preset's filter chain in words.
	ChainText string
	// Failures says how many rows fail, and failures of whole outputs.
	Failures string
	// Same says which earlier preset it was judged with, "" for none.
	Same string
	// Href links the first failing row ("" for none).
	Href string
	// Shown marks the preset whose judgement the rest of the page is.
	Shown bool
}

// MatchLines are the panel's lines, one per preset in the table's order.
func MatchLines(d RunPage) []MatchLine {
	if d.Summary == nil {
		return nil
	}
	lines := make([]MatchLine, 0, len(d.Summary.Matches))
	for _, m := range d.Summary.Matches {
		l := MatchLine{SemanticsMatch: m, ChainText: m.Chain, Failures: matchFailures(m), Shown: m.Semantics == d.Summary.Semantics}
		if m.SameAs != "" {
			l.Same = fmt.Sprintf("the same parameters as %s on this dump: judged once, for both", m.SameAs)
		}
		if !m.Pass && m.FirstRow >= 0 {
			l.Href = RowHref(d, m.FirstRow, false)
		}
		lines = append(lines, l)
	}
	return lines
}

// matchFailures says a preset's failures: the failing rows, and the
// failures of whole outputs.
func matchFailures(m engine.SemanticsMatch) string {
	if m.Pass {
		return "none"
	}
	s := Plural(m.FailedRows, "row")
	if m.Violations > 0 {
		s += fmt.Sprintf(", and %d over all rows together", m.Violations)
	}
	return s
}

// presetsAlike reports whether every preset came out the same on the dump
// (only the first was judged).
func presetsAlike(ms []engine.SemanticsMatch) bool {
	for i, m := range ms {
		if i > 0 && m.SameAs == "" {
			return false
		}
	}
	return len(ms) > 0
}

// MatchSentence names the engines whose filter chain the outputs follow,
// says that none does, or that the dump cannot tell the presets apart (an
// op without filters, or parameters under which every chain is the same).
func MatchSentence(s *Summary, op engine.Op) string {
	if s == nil || len(s.Matches) == 0 {
		return ""
	}
	ms := s.Matches
	var pass []string
	for _, m := range ms {
		if m.Pass {
			pass = append(pass, fmt.Sprintf("%s (%s)", m.Engine, m.Semantics))
		}
	}
	if presetsAlike(ms) {
		verdict := "they pass under every one"
		if len(pass) == 0 {
			verdict = "they fail under every one"
		}
		return fmt.Sprintf("No engine can be named from this dump: every preset judges it alike, since op %s and its parameters leave no room for the filter chain to differ; %s.", op, verdict)
	}
	if len(pass) == 0 {
		closest := ""
		for _, m := range ms {
			if m.Semantics == s.Semantics {
				closest = fmt.Sprintf(" The closest is %s (%s), which fails %s; the sections below are its judgement.", m.Engine, m.Semantics, matchFailures(m))
			}
		}
		return fmt.Sprintf("No engine matches: the outputs follow none of the %d presets' filter chains.%s", len(ms), closest)
	}
	return fmt.Sprintf("The outputs follow the semantics of %s: %d of %d presets pass.", listWords(pass), len(pass), len(ms))
}

// MatchShownLine says whose judgement the rest of the run page shows.
func MatchShownLine(s *Summary) string {
	if s == nil || len(s.Matches) == 0 || s.Semantics == "" {
		return ""
	}
	why := "the first preset that passes"
	if !s.Pass {
		why = "the preset with the fewest failures"
	}
	return fmt.Sprintf("The verdict, the row table and the row pages below are the judgement under %s, %s. A preset's first failure links its row, shown under %s.", s.Semantics, why, s.Semantics)
}

// matchVerdict is the verdict sentence of a run judged under every preset.
func matchVerdict(s *Summary) string {
	var pass []string
	for _, m := range s.Matches {
		if m.Pass {
			pass = append(pass, string(m.Semantics))
		}
	}
	if len(pass) == 0 {
		return fmt.Sprintf("FAIL: the outputs follow none of the %d semantics presets; below, the judgement under %s, the closest.", len(s.Matches), s.Semantics)
	}
	return fmt.Sprintf("PASS: the outputs follow %s (%d of %d semantics presets); below, the judgement under %s.", listWords(pass), len(pass), len(s.Matches), s.Semantics)
}

// Choice is one option of a form's select.
type Choice struct {
	Value, Text string
}

// SemanticsChoices are the forms' options for semantics: every preset with
// its engine, then any.
func SemanticsChoices() []Choice {
	var cs []Choice
	for _, p := range engine.Presets() {
		cs = append(cs, Choice{Value: string(p.Name), Text: fmt.Sprintf("%s: %s", p.Name, p.Engine)})
	}
	return append(cs, Choice{Value: string(engine.SemanticsAny), Text: "any: which engine does this match?"})
}

// HasLogprobs reports whether a dump holds logprobs outputs.
func HasLogprobs(info session.DumpInfo) bool {
	for _, n := range info.External {
		if t, _ := engine.SplitName(n); t == "logprobs" {
			return true
		}
	}
	return false
}
