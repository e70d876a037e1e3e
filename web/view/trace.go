package view

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
)

// The speculative trace on the row page, step by step: every step of every
// traced trial is put into words here, once, and reaches the page as JSON;
// the page script only swaps the step shown (previous and next buttons,
// arrow keys) and keeps it in the URL (?trial=&step=). Without the script,
// the buttons are links and the page renders the step the URL names.

// Trace is a row's trace as the row page shows it.
type Trace struct {
	Trials int `json:"trials"`
	Steps  int `json:"steps"`
	// Index is the step shown first: Trial*Steps + Position of the URL.
	Index int         `json:"index"`
	Items []TraceItem `json:"items"`
	// Charts draws p, q and the residual at each position (Steps entries).
	Charts []map[string]any `json:"charts"`
}

// TraceItem is one step of one trial, in words.
type TraceItem struct {
	Trial    int `json:"trial"`
	Position int `json:"position"`
	// Title says where the step is; Cells fill the step table (traceHeader
	// order); Say says what happened and why.
	Title string   `json:"title"`
	Cells []string `json:"cells"`
	Say   string   `json:"say"`
	// Outcome is "accepted", "rejected", "bonus", "after" (a test after the
	// chain stopped) or "none".
	Outcome string `json:"outcome"`
	// Marks pin the draft and the token drawn here on the position's chart.
	Marks []TraceMark `json:"marks"`
	// URL is the row page showing this step.
	URL string `json:"url"`
}

// TraceMark is a pin on a position chart: a category (the token's index
// among the chart's) and the height to put it at.
type TraceMark struct {
	Name  string `json:"name"`
	Coord [2]any `json:"coord"`
	Color string `json:"color"`
}

// TraceHeader names the step table's columns.
var TraceHeader = []string{"draft x", "u", "p(x)", "q(x)", "p(x)/q(x)", "min(1, p/q)", "u·q(x) < p(x)?", "token emitted here"}

// NewTrace puts sd's trace into words, starting at trial t, position i
// (clamped into range), with step links built on base (the row page's URL
// query, without trial and step), naming tokens with names.
func NewTrace(sd *explain.SpecDetail, names Tokens, t, i int, path string, base url.Values, logScale bool) *Trace {
	tr := sd.Trace
	if tr == nil || tr.Trials == 0 || tr.Steps == 0 {
		return nil
	}
	v := &Trace{Trials: tr.Trials, Steps: tr.Steps}
	t = min(max(t, 0), tr.Trials-1)
	i = min(max(i, 0), tr.Steps-1)
	v.Index = t*tr.Steps + i
	// Where each position's tokens are on its chart (their index among the
	// categories), and their heights.
	type bar struct {
		at        int
		p, q, res float64
	}
	bars := make([]map[int]bar, tr.Steps)
	for pi := range tr.Steps {
		bars[pi] = map[int]bar{}
		if pi < len(sd.Positions) {
			pos := sd.Positions[pi]
			for at, tk := range pos.Tokens {
				bars[pi][tk.Token] = bar{at, float64(tk.P), float64(tk.Q), float64(tk.Residual)}
			}
			v.Charts = append(v.Charts, positionChart(sd, pos, names, logScale))
		} else {
			v.Charts = append(v.Charts, map[string]any{})
		}
	}
	for ti, steps := range tr.Step {
		emitted := len(steps) - 1 // the first rejection, or K
		for j, s := range steps {
			if j < sd.K && !s.Accepted {
				emitted = j
				break
			}
		}
		for j, s := range steps {
			it := TraceItem{Trial: ti, Position: j, Marks: []TraceMark{}}
			it.Title = fmt.Sprintf("Trial %d of %d, position %d of %d", ti, tr.Trials, j, sd.K)
			if j == sd.K {
				it.Title = fmt.Sprintf("Trial %d of %d, position %d: the bonus", ti, tr.Trials, j)
			}
			it.Cells, it.Say, it.Outcome = describeStep(sd, names, s, j, emitted)
			mark := func(name string, tok int32, color string, height func(bar) float64) {
				if tok < 0 {
					return
				}
				if b, ok := bars[j][int(tok)]; ok {
					if h := height(b); h > 0 && finite(h) {
						it.Marks = append(it.Marks, TraceMark{Name: name, Coord: [2]any{b.at, h}, Color: color})
					}
				}
			}
			if j < sd.K {
				mark("draft", s.Draft, colorDraft, func(b bar) float64 { return math.Max(b.p, b.q) })
			}
			if s.Resampled >= 0 && j < sd.K {
				mark("resampled", s.Resampled, colorResidual, func(b bar) float64 { return math.Max(b.p, b.res) })
			} else if s.Resampled >= 0 {
				mark("bonus", s.Resampled, colorNote, func(b bar) float64 { return b.p })
			}
			q := url.Values{}
			for k, vals := range base {
				q[k] = vals
			}
			q.Set("trial", strconv.Itoa(ti))
			q.Set("step", strconv.Itoa(j))
			it.URL = WithQuery(path, q)
			v.Items = append(v.Items, it)
		}
	}
	return v
}

// describeStep fills the step table's cells and says what step s (position
// j of a trial whose chain emitted up to position emitted) did and why.
func describeStep(sd *explain.SpecDetail, names Tokens, s engine.SpecStep, j, emitted int) (cells []string, say, outcome string) {
	f := func(x float32) string { return engine.FormatSig(float64(x), 3) }
	tok := "none"
	if s.Resampled >= 0 {
		tok = names.Label(int64(s.Resampled))
	}
	draft := names.Label(int64(s.Draft))
	if j >= sd.K {
		cells = []string{"none (bonus)", "", "", "", "", "", "", tok}
		if s.Resampled >= 0 {
			return cells, fmt.Sprintf("Every one of the %d drafts was accepted, so the chain draws a bonus token from the target p at position %d: token %s. This trial emits %d tokens.", sd.K, j, tok, sd.K+1), "bonus"
		}
		if emitted < sd.K {
			return cells, fmt.Sprintf("No bonus: the chain stopped at position %d.", emitted), "none"
		}
		return cells, "No bonus token: the target has no distribution at this position, so the chain writes -1 here.", "none"
	}
	p, q := float64(s.P), float64(s.Q)
	a := acceptProb(p, q)
	ratio := "∞"
	if q > 0 {
		ratio = engine.FormatSig(float64(p/q), 3)
	}
	test := "no"
	if s.Accepted {
		test = "yes"
	}
	if j < emitted {
		tok = draft
	} else if j > emitted {
		tok = "none (chain stopped)"
	}
	cells = []string{draft, f(s.U), f(s.P), f(s.Q), ratio, engine.FormatSig(float64(a), 3), test, tok}
	b := &strings.Builder{}
	switch {
	case math.IsNaN(p):
		fmt.Fprintf(b, "The target has no distribution at position %d (its probabilities are NaN), so the test fails and the chain writes -1 here.", j)
		return cells, b.String(), "rejected"
	case j > emitted:
		verdict := "≥ p(x): it fails"
		if s.Accepted {
			verdict = "< p(x): it passes"
		}
		fmt.Fprintf(b, "The draft here is token %s, but the chain already stopped at position %d in this trial. The kernel still tests it (u·q(x) = %s %s), because spec_accepted counts the acceptances at every position; nothing is emitted here.",
			draft, emitted, engine.FormatSig(float64(s.U)*q, 3), verdict)
		return cells, b.String(), "after"
	}
	fmt.Fprintf(b, "The draft proposed token %s. The target gives it p(x) = %s and the draft q(x) = %s", draft, f(s.P), f(s.Q))
	if sd.OneHot {
		b.WriteString(" (a one-hot draft: q(x) = 1, so the acceptance probability is p(x) itself)")
	}
	b.WriteString(". ")
	switch {
	case p >= q:
		fmt.Fprintf(b, "p ≥ q, so min(1, p/q) = 1: the target wants this token at least as often as the draft proposes it, and the test u·q(x) < p(x) passes for every u < 1 (u = %s). Accepted: the chain moves on to position %d.", f(s.U), j+1)
		outcome = "accepted"
	case s.Accepted:
		fmt.Fprintf(b, "The draft over-proposes it, so it is kept with probability min(1, p/q) = %s. u = %s, and u·q(x) = %s < p(x): accepted. The chain moves on to position %d.",
			engine.FormatSig(float64(a), 3), f(s.U), engine.FormatSig(float64(s.U)*q, 3), j+1)
		outcome = "accepted"
	default:
		fmt.Fprintf(b, "The draft over-proposes it, so it is kept with probability min(1, p/q) = %s. u = %s, and u·q(x) = %s ≥ p(x): rejected. The chain stops here and emits a token drawn from the residual max(p − q, 0), normalised (orange), which has mass only where the draft proposes less than the target: token %s.",
			engine.FormatSig(float64(a), 3), f(s.U), engine.FormatSig(float64(s.U)*q, 3), tok)
		outcome = "rejected"
	}
	return cells, b.String(), outcome
}

// TraceURL returns the URL of step index of v, wrapping around at both
// ends.
func TraceURL(v *Trace, index int) string {
	n := len(v.Items)
	return v.Items[((index%n)+n)%n].URL
}
