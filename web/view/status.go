package view

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// A judgement's progress and its rows in the terms the run page uses; the
// websocket sends them, and stream.json keeps them.

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
	// what the tolerance allows there; Max is the row's largest
	// |output - reference| against the strict reference, which may sit at
	// another token (the row table shows both).
	Worst   *engine.Float `json:"worst,omitempty"`
	Allowed *engine.Float `json:"allowed,omitempty"`
	Max     *engine.Float `json:"max,omitempty"`
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
	// Padding marks a padded lane: greyed in the table, left out of the
	// charts.
	Padding bool `json:"pad,omitempty"`
}

// SummarizeRow builds the table row of u.
func SummarizeRow(u session.RowUpdate) RowSummary {
	rep := u.Report
	s := RowSummary{
		Output: u.Output, Row: rep.Row, Pass: rep.Pass, Matched: rep.Matched,
		Token: rep.Token, RefToken: rep.RefToken,
		Violations: len(rep.Violations), Padding: rep.Padding,
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
	if rep.Strict != nil {
		m := rep.Strict.Abs.Max
		s.Max = &m
	}
	return s
}
