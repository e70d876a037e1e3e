package view

import (
	"fmt"
	"strings"

	"github.com/sampviz/sampviz/engine/explain"
)

// TokenSpan is one piece of a token sequence as the n-gram view draws it: a
// token with its role, or an elision of tokens that play none.
type TokenSpan struct {
	Text string
	// Class is "" (no role), "pattern", "match", "draft" or "elided".
	Class string
}

// Elision: a sequence longer than showAll tokens keeps its first and last
// keepEdge tokens and keepNear on each side of every marked range.
const (
	showAll  = 160
	keepEdge = 12
	keepNear = 16
)

// markedRange gives tokens [from, to) of a sequence a class.
type markedRange struct {
	from, to int
	class    string
}

// tokenSpans lays out seq with the classes of marks, eliding long runs of
// unmarked tokens so that the match stays in view.
func tokenSpans(seq []int64, names Tokens, marks ...markedRange) []TokenSpan {
	class := make([]string, len(seq))
	keep := make([]bool, len(seq))
	for i := range seq {
		keep[i] = len(seq) <= showAll || i < keepEdge || i >= len(seq)-keepEdge
	}
	for _, m := range marks {
		for i := max(m.from-keepNear, 0); i < min(m.to+keepNear, len(seq)); i++ {
			keep[i] = true
			if i >= m.from && i < m.to {
				class[i] = m.class
			}
		}
	}
	var out []TokenSpan
	for i := 0; i < len(seq); {
		if !keep[i] {
			j := i
			for j < len(seq) && !keep[j] {
				j++
			}
			out = append(out, TokenSpan{Text: fmt.Sprintf("… %d tokens …", j-i), Class: "elided"})
			i = j
			continue
		}
		out = append(out, TokenSpan{Text: names.Label(seq[i]), Class: class[i]})
		i++
	}
	return out
}

// ngramMarks returns the marks of the match and the draft after it, when the
// match lies in source.
func ngramMarks(n *explain.NgramDetail, source string) []markedRange {
	if n.N == 0 || n.Source != source {
		return nil
	}
	return []markedRange{
		{n.Start, n.Start + n.N, "match"},
		{n.Start + n.N, n.Start + n.N + len(n.Reference), "draft"},
	}
}

// NgramGenerated lays out the generated tokens: the pattern (their last N),
// and the match and draft when the match lies among them.
func NgramGenerated(n *explain.NgramDetail, names Tokens) []TokenSpan {
	marks := ngramMarks(n, "generated")
	if n.N > 0 {
		marks = append(marks, markedRange{len(n.Generated) - n.N, len(n.Generated), "pattern"})
	}
	return tokenSpans(n.Generated, names, marks...)
}

// NgramPrompt lays out the prompt, with the match and draft when the match
// lies there.
func NgramPrompt(n *explain.NgramDetail, names Tokens) []TokenSpan {
	return tokenSpans(n.Prompt, names, ngramMarks(n, "prompt")...)
}

// NgramSentence says how the row was drafted.
func NgramSentence(n *explain.NgramDetail, names Tokens) string {
	budget := fmt.Sprintf("Rows draft in order from one shared budget; when this row's turn came %d draft tokens were left, so it could propose min(max_draft_tokens %d, %d) = %d.",
		n.Budget, n.MaxDraftTokens, n.Budget, n.Limit)
	if n.Semantics != "" {
		if n.Why != "" && n.Budget == 0 && n.Limit == 0 {
			return fmt.Sprintf("Under FastDeploy's rules (%s) this row proposes nothing: %s; seq_lens_this_time is %d.", n.Semantics, n.Why, n.SeqLen)
		}
		budget = fmt.Sprintf("Under FastDeploy's rules (%s) the threshold counts every row's tokens so far, this row's own included, and keeps one token for every later active row: %d were left when this row's turn came, so it could propose %d, written from column %d; seq_lens_this_time is %d.",
			n.Semantics, n.Budget, n.Limit, n.Offset, n.SeqLen)
		if n.Why != "" {
			return budget + " It proposes nothing: " + n.Why + "."
		}
	}
	switch {
	case n.Limit <= 0:
		return budget + " So it proposes nothing."
	case len(n.Generated) == 0:
		return "Nothing has been generated yet (step_idx is 0), so there is no n-gram to look up and no draft. " + budget
	case n.N == 0:
		return fmt.Sprintf("No n-gram of the last %d down to 1 generated tokens occurs earlier (in the prompt, then in the generated tokens) with a token after it, so there is no draft. %s",
			min(n.MaxNgram, len(n.Generated)), budget)
	}
	where := "the prompt"
	if n.Source == "generated" {
		where = "the generated tokens"
	}
	tried := ""
	if n.N < min(n.MaxNgram, len(n.Generated)) {
		tried = fmt.Sprintf(" (no longer n-gram, up to %d, occurs earlier)", min(n.MaxNgram, len(n.Generated)))
	}
	return fmt.Sprintf("The last %d generated tokens [%s]%s first occur in %s at position %d; the draft is the %s after them. %s",
		n.N, joinTokens(n.Generated[len(n.Generated)-n.N:], names), tried, where, n.Start, Plural(len(n.Reference), "token"), budget)
}

// DraftCell is one token of an output's draft, marked where it differs
// from the reference's.
type DraftCell struct {
	Text string
	Diff bool
}

// DraftCells compares an output's draft with the reference position by
// position; positions past either end count as different.
func DraftCells(got, want []int64, names Tokens) []DraftCell {
	var out []DraftCell
	for j := range max(len(got), len(want)) {
		switch {
		case j >= len(got):
			out = append(out, DraftCell{Text: "(missing)", Diff: true})
		default:
			out = append(out, DraftCell{Text: names.Label(got[j]), Diff: j >= len(want) || got[j] != want[j]})
		}
	}
	return out
}

// DraftVerdict says in a few words whether an output's draft is the
// reference's.
func DraftVerdict(got, want []int64) string {
	for _, c := range DraftCells(got, want, nil) {
		if c.Diff {
			return "differs"
		}
	}
	return "same as the reference"
}

func joinTokens(t []int64, names Tokens) string {
	s := make([]string, len(t))
	for i, x := range t {
		s[i] = names.Label(x)
	}
	return strings.Join(s, " ")
}
