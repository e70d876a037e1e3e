package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// The teaching mode: /runs/{id}/rows/{r}/teach steps through accept/reject
// on one real spec_verify row, with controls for the target (temperature,
// top-k, top-p) and for how far the draft is from it. Its whole state is in
// the URL (lessonQuery), so a teacher can paste a link; the page script
// asks /api/runs/{id}/rows/{r}/teach for the next state and redraws without
// reloading. The runner computes (Runner.Teach); this file says what the
// numbers mean.

// teachStepsPerRun is how many steps the "run" button takes at once.
const teachStepsPerRun = 100

// parseLesson reads a lesson from a URL query for a row with k draft
// positions: pos, temperature, top_k, top_p, distance, seed and step, each
// optional. It returns one sentence for the first value that is not usable.
func parseLesson(q url.Values, k int) (lesson.Lesson, error) {
	l := lesson.Lesson{Distance: 1}
	num := func(name string, dst *float64) (bool, error) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return false, nil
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return false, fmt.Errorf("%s must be a number, not %q", strings.ReplaceAll(name, "_", "-"), v)
		}
		*dst = x
		return true, nil
	}
	whole := func(name string, dst *int) (bool, error) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return false, nil
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			return false, fmt.Errorf("%s must be a whole number, not %q", strings.ReplaceAll(name, "_", "-"), v)
		}
		*dst = x
		return true, nil
	}
	if _, err := whole("pos", &l.Position); err != nil {
		return l, err
	}
	if l.Position < 0 || l.Position >= k {
		return l, fmt.Errorf("pos %d is not a draft position of this row: it has positions 0 to %d", l.Position, k-1)
	}
	var t, p float64
	var topK int
	if ok, err := num("temperature", &t); err != nil {
		return l, err
	} else if ok {
		if t < 0 || t > math.MaxFloat32 {
			return l, fmt.Errorf("temperature must be >= 0 (0 means greedy) and finite in float32, not %v", t)
		}
		l.Temperature = &t
	}
	if ok, err := whole("top_k", &topK); err != nil {
		return l, err
	} else if ok {
		if topK < 0 {
			return l, fmt.Errorf("top-k must be >= 0 (0 means off), not %d", topK)
		}
		l.TopK = &topK
	}
	if ok, err := num("top_p", &p); err != nil {
		return l, err
	} else if ok {
		if !(p > 0 && p <= 1) {
			return l, fmt.Errorf("top-p must be in (0, 1] (1 means off), not %v", p)
		}
		l.TopP = &p
	}
	if _, err := num("distance", &l.Distance); err != nil {
		return l, err
	}
	if !(l.Distance >= 0 && l.Distance <= 1) {
		return l, fmt.Errorf("distance must be in [0, 1] (0: the draft is the target, 1: the row's own draft), not %v", l.Distance)
	}
	if v := strings.TrimSpace(q.Get("seed")); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return l, fmt.Errorf("seed must be a whole number >= 0, not %q", v)
		}
		l.Seed = &seed
	}
	if _, err := whole("step", &l.Steps); err != nil {
		return l, err
	}
	if l.Steps < 0 || l.Steps > lesson.MaxSteps {
		return l, fmt.Errorf("step must be in [0, %d], not %d", lesson.MaxSteps, l.Steps)
	}
	return l, nil
}

// lessonQuery writes the state of st as the URL query that names it, with
// steps steps: every control explicit, so the link means the same even if
// the row's defaults were to change.
func lessonQuery(st *lesson.State, steps int) url.Values {
	return url.Values{
		"pos":         {strconv.Itoa(st.Position)},
		"temperature": {paramText(st.Temperature)},
		"top_k":       {strconv.Itoa(st.TopK)},
		"top_p":       {paramText(st.TopP)},
		"distance":    {engine.FormatFloat(st.Distance)},
		"seed":        {strconv.FormatUint(st.Seed, 10)},
		"step":        {strconv.Itoa(steps)},
	}
}

// paramText writes a sampling parameter exactly and short: a value read
// from a dump as float32 (0.77, not 0.7704528570175171) as float32's
// shortest form, any other as float64's, so that it reads back the same.
func paramText(v float64) string {
	if float64(float32(v)) == v {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return engine.FormatFloat(v)
}

// draftPositions returns K of a spec_verify dump from its target_logits
// shape [B, K+1, V], or 0.
func draftPositions(info *session.DumpInfo) int {
	if info.Op != engine.OpSpecVerify || info.Input != "target_logits" || len(info.Shape) != 3 {
		return 0
	}
	return max(info.Shape[1]-1, 0)
}

// teachView is the teaching page in the terms it shows; the page renders it
// and the teach API returns it as JSON for the page script to swap in.
type teachView struct {
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
	Controls  teachControls `json:"controls"`
	Positions []int         `json:"positions"`
	// Counter, What, Definition and the Why texts are the page's words.
	Counter     string `json:"counter"`
	What        string `json:"what"`
	Definition  string `json:"definition"`
	WhyMin      string `json:"why_min"`
	WhyResidual string `json:"why_residual"`
	WhyP        string `json:"why_p"`
	// Last are the last steps, newest first, as the table shows them.
	Last   []teachStepRow `json:"last"`
	Charts map[string]any `json:"charts"`
	// Invalid says why nothing can be taught here.
	Invalid string `json:"invalid,omitempty"`
}

// teachControls are a lesson's controls as the form's fields show them.
type teachControls struct {
	Position    int    `json:"pos"`
	Temperature string `json:"temperature"`
	TopK        string `json:"top_k"`
	TopP        string `json:"top_p"`
	Distance    string `json:"distance"`
	Seed        string `json:"seed"`
	MinP        string `json:"min_p"`
}

// teachStepRow is one step in the table of the last steps.
type teachStepRow struct {
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

// lessonFor reads the run, row and lesson a teaching URL names and asks the
// runner for it.
func (s *Server) lessonFor(r *http.Request) (*teachView, error) {
	run, info, p, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	row, err := parseRow(r, info.Rows)
	if err != nil {
		return nil, err
	}
	k := draftPositions(info)
	if k == 0 {
		return nil, notFound(fmt.Sprintf("The teaching mode steps through speculative sampling; run %s is a %s run, not spec_verify.", run.ID, info.Op))
	}
	l, err := parseLesson(r.URL.Query(), k)
	if err != nil {
		return nil, badRequest(sentence(err.Error()))
	}
	job := session.Job{DumpPath: s.store.DumpPath(run.DumpSHA, run.DumpExt), FileName: run.FileName,
		OutputsPath: s.store.OutputsPath(run.ID), Backend: run.Backend, Overrides: p}
	select {
	case s.rowSlots <- struct{}{}:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	st, err := s.runner.Teach(r.Context(), job, row, l)
	<-s.rowSlots
	if err != nil {
		var le *lesson.Error
		if errors.As(err, &le) {
			return nil, &httpError{Status: http.StatusBadRequest, Msg: le.Msg, Err: err}
		}
		return nil, internal(fmt.Errorf("teach run %s row %d: %w", run.ID, row, err))
	}
	v := newTeachView(st, k)
	v.Run, v.Info, v.Row = run, *info, row
	base := fmt.Sprintf("/runs/%s/rows/%d", run.ID, row)
	v.RowURL = base
	v.URL = withQuery(base+"/teach", lessonQuery(st, st.Steps))
	v.API = withQuery("/api"+base+"/teach", lessonQuery(st, st.Steps))
	v.Step = withQuery(base+"/teach", lessonQuery(st, min(st.Steps+1, lesson.MaxSteps)))
	v.RunN = withQuery(base+"/teach", lessonQuery(st, min(st.Steps+teachStepsPerRun, lesson.MaxSteps)))
	v.Reset = withQuery(base+"/teach", lessonQuery(st, 0))
	return v, nil
}

func (s *Server) handleTeachPage(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lessonFor(r)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, teachPage(s.chrome(), v))
	return nil
}

func (s *Server) handleTeachAPI(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lessonFor(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// newTeachView puts a lesson's state into words and charts.
func newTeachView(st *lesson.State, k int) *teachView {
	v := &teachView{
		Steps: st.Steps, Full: st.Steps >= lesson.MaxSteps, Invalid: st.Invalid,
		Controls: teachControls{
			Position: st.Position, Temperature: paramText(st.Temperature), TopK: strconv.Itoa(st.TopK),
			TopP: paramText(st.TopP), Distance: engine.FormatFloat(st.Distance), Seed: strconv.FormatUint(st.Seed, 10),
			MinP: paramText(st.MinP),
		},
		Last: []teachStepRow{},
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
		v.Last = append(v.Last, stepRow(st.Last[i]))
	}
	v.Charts = map[string]any{"hist": teachHistChart(st), "tv": teachTVChart(st)}
	return v
}

// prob writes a probability for the teaching texts: 3 significant digits.
func prob(x engine.Float) string {
	v := float64(x)
	if v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e4) {
		return strconv.FormatFloat(v, 'e', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// acceptProb returns min(1, p/q) as SEMANTICS.md defines it: 1 when q = 0 <
// p, 0 when p = 0.
func acceptProb(p, q float64) float64 {
	switch {
	case p <= 0 || math.IsNaN(p):
		return 0
	case q <= 0:
		return 1
	}
	return math.Min(1, p/q)
}

func stepRow(s lesson.Step) teachStepRow {
	a := acceptProb(float64(s.P), float64(s.Q))
	row := teachStepRow{
		Step: strconv.Itoa(s.Step), Draft: strconv.Itoa(s.Draft), U: prob(s.U), P: prob(s.P), Q: prob(s.Q),
		Accept: prob(engine.Float(a)), Token: strconv.Itoa(s.Token), Accepted: s.Accepted,
	}
	if s.Accepted {
		row.Verdict = "accepted"
	} else {
		row.Verdict = "rejected: residual"
	}
	return row
}

func definitionText(st *lesson.State) string {
	qrow := fmt.Sprintf("this row's real draft distribution at position %d", st.Position)
	if st.OneHot {
		qrow = fmt.Sprintf("this row's real draft at position %d, one-hot at its draft token %d (the dump has no draft_probs)", st.Position, st.Draft)
	}
	s := fmt.Sprintf("The target p is the renormalised softmax of this row's target logits at position %d with the controls above", st.Position)
	if st.MinP > 0 {
		s += fmt.Sprintf(" (and the row's min-p %s)", shortFloat(st.MinP))
	}
	s += fmt.Sprintf(". The draft is q = normalise((1 − d)·p + d·q_row), where q_row is %s, and d = %s: at d = 0 the draft is the target itself and every proposal is accepted; at d = 1 it is the row's real draft.", qrow, engine.FormatFloat(st.Distance))
	if st.Invalid == "" {
		s += fmt.Sprintf(" Here the total variation between p and q is %s, so a step accepts its draft with probability β = Σ min(p, q) = %s.", prob(st.TV), prob(st.Beta))
	}
	return s
}

func counterText(st *lesson.State) string {
	if st.Steps == 0 {
		return "No steps yet."
	}
	return fmt.Sprintf("%s: %s accepted (%s), %d rejected and redrawn from the residual.",
		plural(st.Steps, "step"), plural(st.Accepted, "draft"), percent(st.Accepted, st.Steps), st.Resampled)
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func percent(a, n int) string {
	if n == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*float64(a)/float64(n), 'f', 1, 64) + "%"
}

// whatText says what the last step did and why.
func whatText(st *lesson.State) string {
	if len(st.Last) == 0 {
		return "Press Step: the draft proposes a token x drawn from q, and the target keeps it with probability min(1, p(x)/q(x))."
	}
	s := st.Last[len(st.Last)-1]
	p, q := float64(s.P), float64(s.Q)
	a := acceptProb(p, q)
	b := &strings.Builder{}
	fmt.Fprintf(b, "Step %d: the draft proposes token %d, drawn from q, which gives it q(x) = %s; the target gives it p(x) = %s. ", s.Step, s.Draft, prob(s.Q), prob(s.P))
	switch {
	case p >= q:
		fmt.Fprintf(b, "p ≥ q, so min(1, p/q) = 1: the draft proposes this token no more often than the target wants it, and it is always accepted (u = %s). Token %d is emitted.", prob(s.U), s.Token)
	case s.Accepted:
		fmt.Fprintf(b, "p/q = %s, so it is accepted with probability min(1, p/q) = %s. u = %s and u·q(x) = %s < p(x): accepted, and token %d is emitted.",
			prob(engine.Float(p/q)), prob(engine.Float(a)), prob(s.U), prob(engine.Float(float64(s.U)*q)), s.Token)
	default:
		fmt.Fprintf(b, "p/q = %s, so it is accepted with probability min(1, p/q) = %s. u = %s and u·q(x) = %s ≥ p(x): rejected. The token emitted is drawn instead from the residual max(p − q, 0), normalised: token %d.",
			prob(engine.Float(p/q)), prob(engine.Float(a)), prob(s.U), prob(engine.Float(float64(s.U)*q)), s.Token)
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
		whyMin += fmt.Sprintf(" Here token %d is proposed with q = %s but the target wants p = %s: only %s of its proposals are kept, %s × %s = %s.",
			t.Token, prob(t.Q), prob(t.P), prob(engine.Float(float64(t.P/t.Q))), prob(t.Q), prob(engine.Float(float64(t.P/t.Q))), prob(t.P))
	}
	whyMin += fmt.Sprintf(" Over every token the accept step delivers Σ min(p, q) = β = %s of the mass.", prob(st.Beta))
	whyResidual = fmt.Sprintf("Why the residual is max(p − q, 0): a step rejects with probability 1 − β = %s, and the mass still missing at each token after the accept step is exactly max(p(x) − q(x), 0), which sums to 1 − β as well (Σ max(p − q, 0) = 1 − Σ min(p, q)). So after a rejection, drawing from that shortfall, normalised, fills every token up to p(x) and no further; tokens the draft over-proposes get nothing from it.", prob(engine.Float(1-beta)))
	if 1-beta < 1e-9 {
		whyResidual = "Why the residual is max(p − q, 0): here the draft is the target (q = p), so no step is ever rejected and the residual, max(p − q, 0) = 0 everywhere, is never used. Move the draft away from p (d > 0) to see it work: a step then rejects with probability 1 − β, and the mass still missing at each token after the accept step is exactly max(p(x) − q(x), 0), which sums to 1 − β as well; drawing from that shortfall, normalised, fills every token up to p(x) and no further."
	}
	if under >= 0 && 1-beta >= 1e-9 {
		t := st.Tokens[under]
		whyResidual += fmt.Sprintf(" Token %d, for one, has p = %s but q = %s: the residual gives it %s of the rejections.",
			t.Token, prob(t.P), prob(t.Q), prob(engine.Float((float64(t.P)-float64(t.Q))/math.Max(1-beta, 1e-300))))
	}
	whyP = "Why the result is still p: a token x comes out with probability q(x)·min(1, p(x)/q(x)) + (1 − β)·max(p(x) − q(x), 0)/(1 − β) = min(p(x), q(x)) + max(p(x) − q(x), 0) = p(x), whatever q is; q only decides how often the cheap accept step does the work (β)."
	if n := len(st.Running); n > 0 {
		last := st.Running[n-1]
		whyP += fmt.Sprintf(" After %s the emitted tokens are %s from p in total variation over the histogram's bars, shrinking like 1/√n, while the drafts alone settle %s away, where q itself is (now %s).",
			plural(last.Steps, "step"), prob(last.Emitted), prob(st.TVBars), prob(last.Drafts))
	}
	return whyMin, whyResidual, whyP
}
