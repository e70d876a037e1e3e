package view

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// The teaching mode's words: what a lesson's controls, last steps and
// numbers mean, for the page and for the JSON the page script swaps in.
// The session computes the lesson (engine/lesson); this file only says it.

// TeachView is the teaching page in the terms it shows; the page renders it
// and the teach API returns it as JSON for the page script to swap in.
type TeachView struct {
	Run  store.Run        `json:"-"`
	Info session.DumpInfo `json:"-"`
	Row  int              `json:"row"`
	// URL is this state's page, API its JSON.
	URL string `json:"url"`
	API string `json:"api"`
	// RowURL is the row page; Step, Run and Reset link the next states.
	RowURL string `json:"row_url"`
	Step   string `json:"step_url"`
	RunN   string `json:"run_url"`
	Reset  string `json:"reset_url"`
	// Steps is how many steps were taken; Full says no more can be.
	Steps int  `json:"steps"`
	Full  bool `json:"full"`
	// Controls are the values in force, as the form shows them.
	Controls  TeachControls `json:"controls"`
	Positions []int         `json:"positions"`
	// Counter, What, Definition and the Why texts are the page's words.
	Counter     string `json:"counter"`
	What        string `json:"what"`
	Definition  string `json:"definition"`
	WhyMin      string `json:"why_min"`
	WhyResidual string `json:"why_residual"`
	WhyP        string `json:"why_p"`
	// Last are the last steps, newest first, as the table shows them.
	Last   []TeachStepRow `json:"last"`
	Charts map[string]any `json:"charts"`
	// Invalid says why nothing can be taught here.
	Invalid string `json:"invalid,omitempty"`
}

// TeachControls are a lesson's controls as the form's fields show them.
type TeachControls struct {
	Position    int    `json:"pos"`
	Temperature string `json:"temperature"`
	TopK        string `json:"top_k"`
	TopP        string `json:"top_p"`
	Distance    string `json:"distance"`
	Seed        string `json:"seed"`
	MinP        string `json:"min_p"`
}

// TeachStepRow is one step in the table of the last steps.
type TeachStepRow struct {
	Step     string `json:"step"`
	Draft    string `json:"draft"`
	U        string `json:"u"`
	P        string `json:"p"`
	Q        string `json:"q"`
	Accept   string `json:"accept"`
	Verdict  string `json:"verdict"`
	Token    string `json:"token"`
	Accepted bool   `json:"accepted"`
}

// NewTeachView puts a lesson's state into words and charts.
func NewTeachView(st *lesson.State, k int) *TeachView {
	v := &TeachView{
		Steps: st.Steps, Full: st.Steps >= lesson.MaxSteps, Invalid: st.Invalid,
		Controls: TeachControls{
			Position: st.Position, Temperature: engine.FormatParam(st.Temperature), TopK: strconv.Itoa(st.TopK),
			TopP: engine.FormatParam(st.TopP), Distance: engine.FormatFloat(st.Distance), Seed: strconv.FormatUint(st.Seed, 10),
			MinP: engine.FormatParam(st.MinP),
		},
		Last: []TeachStepRow{},
	}
	for i := range k {
		v.Positions = append(v.Positions, i)
	}
	v.Definition = definitionText(st)
	if st.Invalid != "" {
		v.Charts = map[string]any{}
		return v
	}
	v.Counter = counterText(st)
	v.What = whatText(st)
	v.WhyMin, v.WhyResidual, v.WhyP = whyTexts(st)
	for i := len(st.Last) - 1; i >= 0; i-- {
		v.Last = append(v.Last, stepRow(st.Last[i], Tokens(st.Text)))
	}
	v.Charts = map[string]any{"hist": teachHistChart(st), "tv": teachTVChart(st)}
	return v
}

// stepRow puts one step into the table's words.
func stepRow(s lesson.Step, names Tokens) TeachStepRow {
	a := acceptProb(float64(s.P), float64(s.Q))
	row := TeachStepRow{
		Step: strconv.Itoa(s.Step), Draft: names.Label(int64(s.Draft)), U: engine.FormatSig(float64(s.U), 3), P: engine.FormatSig(float64(s.P), 3), Q: engine.FormatSig(float64(s.Q), 3),
		Accept: engine.FormatSig(float64(a), 3), Token: names.Label(int64(s.Token)), Accepted: s.Accepted,
	}
	if s.Accepted {
		row.Verdict = "accepted"
	} else {
		row.Verdict = "rejected: residual"
	}
	return row
}

// definitionText says what p and q are in this lesson, and their total
// variation and acceptance rate.
func definitionText(st *lesson.State) string {
	qrow := fmt.Sprintf("this row's real draft distribution at position %d", st.Position)
	if st.OneHot {
		qrow = fmt.Sprintf("this row's real draft at position %d, one-hot at its draft token %s (the dump has no draft_probs)", st.Position, Tokens(st.Text).Label(int64(st.Draft)))
	}
	s := fmt.Sprintf("The target p is the renormalised softmax of this row's target logits at position %d with the controls above", st.Position)
	if st.MinP > 0 {
		s += fmt.Sprintf(" (and the row's min-p %s)", engine.FormatParam(st.MinP))
	}
	s += fmt.Sprintf(". The draft is q = normalise((1 − d)·p + d·q_row), where q_row is %s, and d = %s: at d = 0 the draft is the target itself and every proposal is accepted; at d = 1 it is the row's real draft.", qrow, engine.FormatFloat(st.Distance))
	if st.Invalid == "" {
		s += fmt.Sprintf(" Here the total variation between p and q is %s, so a step accepts its draft with probability β = Σ min(p, q) = %s.", engine.FormatSig(float64(st.TV), 3), engine.FormatSig(float64(st.Beta), 3))
	}
	return s
}

// counterText counts the steps, the accepted drafts and the rejections.
func counterText(st *lesson.State) string {
	if st.Steps == 0 {
		return "No steps yet."
	}
	return fmt.Sprintf("%s: %s accepted (%s), %d rejected and redrawn from the residual.",
		Plural(st.Steps, "step"), Plural(st.Accepted, "draft"), engine.FormatShare(st.Accepted, st.Steps), st.Resampled)
}

// whatText says what the last step did and why.
func whatText(st *lesson.State) string {
	if len(st.Last) == 0 {
		return "Press Step: the draft proposes a token x drawn from q, and the target keeps it with probability min(1, p(x)/q(x))."
	}
	s := st.Last[len(st.Last)-1]
	names := Tokens(st.Text)
	draft, emitted := names.Label(int64(s.Draft)), names.Label(int64(s.Token))
	p, q := float64(s.P), float64(s.Q)
	a := acceptProb(p, q)
	b := &strings.Builder{}
	fmt.Fprintf(b, "Step %d: the draft proposes token %s, drawn from q, which gives it q(x) = %s; the target gives it p(x) = %s. ", s.Step, draft, engine.FormatSig(float64(s.Q), 3), engine.FormatSig(float64(s.P), 3))
	switch {
	case p >= q:
		fmt.Fprintf(b, "p ≥ q, so min(1, p/q) = 1: the draft proposes this token no more often than the target wants it, and it is always accepted (u = %s). Token %s is emitted.", engine.FormatSig(float64(s.U), 3), emitted)
	case s.Accepted:
		fmt.Fprintf(b, "p/q = %s, so it is accepted with probability min(1, p/q) = %s. u = %s and u·q(x) = %s < p(x): accepted, and token %s is emitted.",
			engine.FormatSig(float64(p/q), 3), engine.FormatSig(float64(a), 3), engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(s.U)*q, 3), emitted)
	default:
		fmt.Fprintf(b, "p/q = %s, so it is accepted with probability min(1, p/q) = %s. u = %s and u·q(x) = %s ≥ p(x): rejected. The token emitted is drawn instead from the residual max(p − q, 0), normalised: token %s.",
			engine.FormatSig(float64(p/q), 3), engine.FormatSig(float64(a), 3), engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(s.U)*q, 3), emitted)
	}
	return b.String()
}

// whyTexts explain, with this lesson's numbers, why the accept step is
// min(1, p/q), why the residual is max(p - q, 0), and why what comes out
// follows p.
func whyTexts(st *lesson.State) (whyMin, whyResidual, whyP string) {
	// The most over-proposed and the most under-proposed listed tokens make
	// the examples.
	over, under := -1, -1
	for i, t := range st.Tokens {
		d := float64(t.Q - t.P)
		if d > 0 && (over < 0 || d > float64(st.Tokens[over].Q-st.Tokens[over].P)) {
			over = i
		}
		if d < 0 && (under < 0 || d < float64(st.Tokens[under].Q-st.Tokens[under].P)) {
			under = i
		}
	}
	beta := float64(st.Beta)
	whyMin = "Why min(1, p/q): where the draft over-proposes a token (q(x) > p(x)), keeping only the share p/q of its proposals brings it down to exactly p(x), since q(x)·p(x)/q(x) = p(x); where it under-proposes (q(x) ≤ p(x)), every proposal is kept, and the token still lacks p(x) − q(x)."
	if over >= 0 {
		t := st.Tokens[over]
		whyMin += fmt.Sprintf(" Here token %s is proposed with q = %s but the target wants p = %s: only %s of its proposals are kept, %s × %s = %s.",
			Tokens(st.Text).Label(int64(t.Token)), engine.FormatSig(float64(t.Q), 3), engine.FormatSig(float64(t.P), 3), engine.FormatSig(float64(t.P/t.Q), 3), engine.FormatSig(float64(t.Q), 3), engine.FormatSig(float64(t.P/t.Q), 3), engine.FormatSig(float64(t.P), 3))
	}
	whyMin += fmt.Sprintf(" Over every token the accept step delivers Σ min(p, q) = β = %s of the mass.", engine.FormatSig(float64(st.Beta), 3))
	whyResidual = fmt.Sprintf("Why the residual is max(p − q, 0): a step rejects with probability 1 − β = %s, and the mass still missing at each token after the accept step is exactly max(p(x) − q(x), 0), which sums to 1 − β as well (Σ max(p − q, 0) = 1 − Σ min(p, q)). So after a rejection, drawing from that shortfall, normalised, fills every token up to p(x) and no further; tokens the draft over-proposes get nothing from it.", engine.FormatSig(float64(1-beta), 3))
	if 1-beta < 1e-9 {
		whyResidual = "Why the residual is max(p − q, 0): here the draft is the target (q = p), so no step is ever rejected and the residual, max(p − q, 0) = 0 everywhere, is never used. Move the draft away from p (d > 0) to see it work: a step then rejects with probability 1 − β, and the mass still missing at each token after the accept step is exactly max(p(x) − q(x), 0), which sums to 1 − β as well; drawing from that shortfall, normalised, fills every token up to p(x) and no further."
	}
	if under >= 0 && 1-beta >= 1e-9 {
		t := st.Tokens[under]
		whyResidual += fmt.Sprintf(" Token %s, for one, has p = %s but q = %s: the residual gives it %s of the rejections.",
			Tokens(st.Text).Label(int64(t.Token)), engine.FormatSig(float64(t.P), 3), engine.FormatSig(float64(t.Q), 3), engine.FormatSig(float64((float64(t.P)-float64(t.Q))/math.Max(1-beta, 1e-300)), 3))
	}
	whyP = "Why the result is still p: a token x comes out with probability q(x)·min(1, p(x)/q(x)) + (1 − β)·max(p(x) − q(x), 0)/(1 − β) = min(p(x), q(x)) + max(p(x) − q(x), 0) = p(x), whatever q is; q only decides how often the cheap accept step does the work (β)."
	if n := len(st.Running); n > 0 {
		last := st.Running[n-1]
		whyP += fmt.Sprintf(" After %s the emitted tokens are %s from p in total variation over the histogram's bars, shrinking like 1/√n, while the drafts alone settle %s away, where q itself is (now %s).",
			Plural(last.Steps, "step"), engine.FormatSig(float64(last.Emitted), 3), engine.FormatSig(float64(st.TVBars), 3), engine.FormatSig(float64(last.Drafts), 3))
	}
	return whyMin, whyResidual, whyP
}
