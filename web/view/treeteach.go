package view

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// The tree teaching mode's words: one verification of a draft tree (one
// trial of the row, as the kernels draw it), node by node and sibling by
// sibling, with the residual before and after each rejection. The session
// computes the walk (engine/lesson TeachTree); this file says it. Every
// step of the walk is in the view, so the page script steps through them
// without asking the server again; another trial or seed is fetched from
// the teach API.

// TreeTeachView is the tree teaching page in the terms it shows; the page
// renders it and the teach API returns it as JSON for the page script.
type TreeTeachView struct {
	Run  store.Run        `json:"-"`
	Info session.DumpInfo `json:"-"`
	Row  int              `json:"row"`
	// Trial and Seed name the verification; Trials bounds the trial.
	Trial  int    `json:"trial"`
	Seed   string `json:"seed"`
	Trials int    `json:"trials"`
	// URL is this state's page, API its JSON, RowURL the row page;
	// PrevTrial and NextTrial the neighbouring trials' pages.
	URL       string `json:"url"`
	API       string `json:"api"`
	RowURL    string `json:"row_url"`
	PrevTrial string `json:"prev_trial_url"`
	NextTrial string `json:"next_trial_url"`
	// Index is the step shown (an index into Items), Total the walk's
	// steps.
	Index int             `json:"index"`
	Total int             `json:"total"`
	Items []TreeTeachItem `json:"items"`
	// Outcome says what the whole walk did; Intro, WhyResidual and
	// WhyLossless are the page's explanations.
	Outcome     string `json:"outcome"`
	Intro       string `json:"intro"`
	WhyResidual string `json:"why_residual"`
	WhyLossless string `json:"why_lossless"`
	// Tree draws the tree, on which the page script outlines the walk of
	// the step shown; Height is its chart's height in pixels.
	Tree   *TreeScript `json:"tree,omitempty"`
	Height int         `json:"height"`
	// Invalid says why nothing can be taught here.
	Invalid string `json:"invalid,omitempty"`
}

// TreeTeachItem is one step of the walk.
type TreeTeachItem struct {
	// Step counts from 1.
	Step int `json:"step"`
	// Title says where the step is, What what it does and why, Walk where
	// the walk is after it ("root → node 3 ‹x›").
	Title string `json:"title"`
	What  string `json:"what"`
	Walk  string `json:"walk"`
	// Node is the walk's node, Child the child tested (-1 at the draw);
	// Path is the accepted path after the step, Rejected the children
	// rejected so far, for the tree's outlines.
	Node     int   `json:"node"`
	Child    int   `json:"child"`
	Path     []int `json:"path"`
	Rejected []int `json:"rejected"`
	// Cells fill the step's row of the walk table (TreeTeachHeader order);
	// Outcome is "accepted", "rejected", "drawn" or "bonus".
	Cells   []string `json:"cells"`
	Outcome string   `json:"outcome"`
	// Chart draws the residual before and after the step, beside the
	// node's target; Marks pin the tested or drawn token on it.
	Chart map[string]any `json:"chart"`
	Marks []TraceMark    `json:"marks"`
	// URL is the page showing this step.
	URL string `json:"url"`
}

// TreeTeachHeader names the walk table's columns.
var TreeTeachHeader = []string{"step", "at node", "child tested", "token x", "u", "r(x)", "q(x)", "a = min(1, r/q)", "verdict", "emitted"}

// treeIntro is what the tree teaching page teaches, before any step.
const treeIntro = "A draft tree proposes several continuations at once: each node's children are candidate next tokens, tried in sibling order. " +
	"At the walk's node the target p is the first residual r. A child with token x passes its test with probability min(1, r(x)/q(x)): " +
	"the kernel draws u and accepts when u·q(x) < r(x). The first child that passes becomes the walk's node and the walk goes on from there; " +
	"after a rejection the residual loses what the draft proposed, r ← max(r − q, 0) normalised, and the next sibling is tested against " +
	"the new r. When every child is rejected the walk draws its token from the last residual; at a leaf it draws a bonus token from the " +
	"leaf's target. This is SpecInfer's multi-step speculative sampling; EAGLE and SGLang use its one-hot case, where q is 1 at the " +
	"child's token and a rejection simply removes that token from r."

// NewTreeTeachView puts one walk of a tree lesson into words and charts,
// showing step index (from 0; clamped into range). url(step) gives the
// page of step step (from 0) of this walk; prev and next are the
// neighbouring trials' pages.
func NewTreeTeachView(st *lesson.TreeState, index int, url func(step int) string) *TreeTeachView {
	v := &TreeTeachView{
		Row: st.Row, Trial: st.Trial, Seed: strconv.FormatUint(st.Seed, 10), Trials: engine.MaxTrials,
		Total: st.Total, Invalid: st.Invalid, Intro: treeIntro, Items: []TreeTeachItem{},
	}
	v.WhyResidual, v.WhyLossless = treeWhy(st)
	if st.Invalid != "" || len(st.Steps) == 0 {
		if v.Invalid == "" {
			v.Invalid = "This walk has no steps to show."
		}
		return v
	}
	names := Tokens(st.Text)
	tested := map[int]bool{} // nodes with a test: not leaves
	for _, s := range st.Steps {
		if s.Child >= 0 {
			tested[s.Node] = true
		}
	}
	walk := []string{"root"}
	path, rejected := []int{0}, []int{}
	for i, s := range st.Steps {
		it := TreeTeachItem{Step: s.Step, URL: url(i), Node: s.Node, Child: s.Child}
		if s.Child >= 0 && s.Accepted {
			path = append(path, s.Child)
		} else if s.Child >= 0 {
			rejected = append(rejected, s.Child)
		}
		it.Path, it.Rejected = append([]int{}, path...), append([]int{}, rejected...)
		at := "root"
		if s.Node != 0 {
			at = strconv.Itoa(s.Node)
		}
		if s.Child >= 0 {
			it.Title = fmt.Sprintf("Step %d of %d: %s tests its %s child", s.Step, st.Total, teachWhere(s.Node, st, names), ordinal(s.Sibling+1))
			it.What, it.Outcome = teachTestWords(s, st, names)
			a := acceptProb(float64(s.P), float64(s.Q))
			verdict := "rejected"
			if s.Accepted {
				verdict = "accepted"
				walk = append(walk, fmt.Sprintf("node %d (token %s)", s.Child, names.Label(int64(s.Token))))
			}
			emitted := ""
			if s.Accepted {
				emitted = names.Label(int64(s.Token))
			}
			it.Cells = []string{strconv.Itoa(s.Step), at, fmt.Sprintf("node %d (sibling %d)", s.Child, s.Sibling+1), names.Label(int64(s.Token)),
				engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(s.P), 3), engine.FormatSig(float64(s.Q), 3), engine.FormatSig(float64(a), 3), verdict, emitted}
		} else {
			it.Title = fmt.Sprintf("Step %d of %d: the draw at %s", s.Step, st.Total, teachWhere(s.Node, st, names))
			it.What, it.Outcome = teachDrawWords(s, st, names, !tested[s.Node])
			drawn := "none"
			if s.Drawn >= 0 {
				drawn = names.Label(int64(s.Drawn))
			}
			it.Cells = []string{strconv.Itoa(s.Step), at, "none: the draw", "", "", "", "", "", it.Outcome, drawn}
		}
		it.Walk = strings.Join(walk, " → ")
		it.Chart, it.Marks = teachResidualChart(s, names, !tested[s.Node])
		if it.Marks == nil {
			it.Marks = []TraceMark{}
		}
		v.Items = append(v.Items, it)
	}
	v.Index = min(max(index, 0), len(v.Items)-1)
	v.Outcome = treeOutcome(st, names)
	if nodes, depth := lessonNodes(st); len(nodes) > 0 {
		plain := TreeColors{}
		for range nodes {
			plain.Fill, plain.Text = append(plain.Fill, "#f1f3f5"), append(plain.Text, "#212529")
		}
		if _, leaves := treeSlots(nodes); leaves <= 1 {
			plain.Fill, plain.Text = append(plain.Fill, "#ffffff", "#ffffff"), append(plain.Text, "#ffffff", "#ffffff")
		}
		tip := func(n explain.TreeNode) string {
			if n.Parent < 0 {
				return "the root: every walk starts here"
			}
			return fmt.Sprintf("node %d: token %s\nchild %d of node %d, depth %d", n.Node, names.Label(n.Token), n.Rank+1, n.Parent, n.Depth)
		}
		v.Tree = &TreeScript{Chart: treeGraph(nodes, depth, names, plain, true, nil, tip), Color: "plain", Modes: map[string]TreeColors{"plain": plain}}
		v.Height = treeHeight(nodes, true)
	}
	return v
}

// lessonNodes returns the nodes of a lesson's tree the root reaches, the
// root first and every parent before its children, and the deepest depth.
func lessonNodes(st *lesson.TreeState) ([]explain.TreeNode, int) {
	if len(st.Parent) == 0 || len(st.Children) != len(st.Parent) || len(st.Candidates) != len(st.Parent) {
		return nil, 0
	}
	depth := map[int]int{0: 0}
	rank := map[int]int{0: -1}
	order := []int{0}
	for i := 0; i < len(order); i++ {
		u := order[i]
		for j, c := range st.Children[u] {
			if _, seen := depth[c]; seen || c <= 0 || c >= len(st.Parent) {
				continue
			}
			depth[c], rank[c] = depth[u]+1, j
			order = append(order, c)
		}
	}
	sort.Ints(order) // a parent always comes before its children
	var nodes []explain.TreeNode
	deepest := 0
	for _, n := range order {
		p := st.Parent[n]
		if n == 0 {
			p = -1
		}
		nodes = append(nodes, explain.TreeNode{Node: n, Parent: p, Depth: depth[n], Rank: rank[n], Children: st.Children[n], Token: int64(st.Candidates[n])})
		deepest = max(deepest, depth[n])
	}
	return nodes, deepest
}

// teachWhere names node u in a sentence: "the root" or "node 3 (token x)".
func teachWhere(u int, st *lesson.TreeState, names Tokens) string {
	if u == 0 {
		return "the root"
	}
	for _, s := range st.Steps {
		if s.Child == u {
			return fmt.Sprintf("node %d (token %s)", u, names.Label(int64(s.Token)))
		}
	}
	return fmt.Sprintf("node %d", u)
}

// teachTestWords says what test step s does and why, with the residual
// before and after it.
func teachTestWords(s lesson.TreeStep, st *lesson.TreeState, names Tokens) (what, outcome string) {
	x := names.Label(int64(s.Token))
	r, q := float64(s.P), float64(s.Q)
	b := &strings.Builder{}
	fmt.Fprintf(b, "At %s the walk tests its %s child, node %d, token %s. ", teachWhere(s.Node, st, names), ordinal(s.Sibling+1), s.Child, x)
	target := math.NaN()
	for _, t := range s.Before {
		if t.Token == s.Token {
			target = float64(t.Target)
		}
	}
	switch {
	case math.IsNaN(r):
		b.WriteString("The target here has no distribution (NaN), so the test fails.")
		return b.String(), "rejected"
	case s.Sibling == 0:
		fmt.Fprintf(b, "A first child is tested against the node's target itself: r(x) = p(x) = %s. ", engine.FormatSig(float64(s.P), 3))
	default:
		if s.Sibling == 1 {
			b.WriteString("Its earlier sibling was rejected, so it is tested against the residual that rejection left")
		} else {
			fmt.Fprintf(b, "Its %d earlier siblings were rejected, so it is tested against the residual their rejections left", s.Sibling)
		}
		fmt.Fprintf(b, ": r(x) = %s, where the target gives p(x) = %s. ", engine.FormatSig(float64(s.P), 3), engine.FormatSig(float64(target), 3))
	}
	a := acceptProb(r, q)
	if st.OneHot {
		b.WriteString("Its draft is one-hot (q(x) = 1), so it passes with probability r(x) itself. ")
	} else {
		fmt.Fprintf(b, "The draft gave it q(x) = %s, so it passes with probability min(1, r(x)/q(x)) = %s. ", engine.FormatSig(float64(s.Q), 3), engine.FormatSig(float64(a), 3))
	}
	uq := float64(s.U) * q
	if s.Accepted {
		fmt.Fprintf(b, "u = %s, and u·q(x) = %s < r(x): accepted. Token %s is emitted, and the walk moves to node %d and starts again from its target.", engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(uq), 3), x, s.Child)
		return b.String(), "accepted"
	}
	fmt.Fprintf(b, "u = %s, and u·q(x) = %s ≥ r(x): rejected. ", engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(uq), 3))
	b.WriteString(residualChange(s, st.OneHot, names))
	return b.String(), "rejected"
}

// residualChange says how a rejection moved the residual: the rejected
// token's share before and after, the tokens that lost all of theirs, and
// the token that gained most.
func residualChange(s lesson.TreeStep, oneHot bool, names Tokens) string {
	after := map[int]float64{}
	for _, t := range s.After {
		after[t.Token] = float64(t.Residual)
	}
	b := &strings.Builder{}
	if oneHot {
		b.WriteString("The residual drops the rejected token and is renormalised (blue bars before, orange after)")
	} else {
		b.WriteString("The residual loses what the draft proposed, r ← max(r − q, 0), normalised (blue bars before, orange after)")
	}
	var before float64
	for _, t := range s.Before {
		if t.Token == s.Token {
			before = float64(t.Residual)
		}
	}
	if before > 0 {
		fmt.Fprintf(b, ": token %s goes from %s to %s", names.Label(int64(s.Token)), engine.FormatSig(float64(before), 3), engine.FormatSig(float64(after[s.Token]), 3))
	} else {
		fmt.Fprintf(b, ": token %s had no residual mass left to lose", names.Label(int64(s.Token)))
	}
	var zeroed []string
	best, gain := -1, 0.0
	for _, t := range s.Before {
		if t.Token == s.Token {
			continue
		}
		a := after[t.Token]
		if float64(t.Residual) > 0 && a == 0 {
			zeroed = append(zeroed, names.Label(int64(t.Token)))
		}
		if g := a - float64(t.Residual); g > gain {
			best, gain = t.Token, g
		}
	}
	if len(zeroed) > 0 {
		sort.Strings(zeroed)
		if len(zeroed) > 3 {
			zeroed = append(zeroed[:3], "…")
		}
		if len(zeroed) == 1 {
			fmt.Fprintf(b, "; token %s, which the draft proposed at least as much as r gave it, drops to 0 too", zeroed[0])
		} else {
			fmt.Fprintf(b, "; tokens %s, which the draft proposed at least as much as r gave them, drop to 0 too", strings.Join(zeroed, ", "))
		}
	}
	if best >= 0 {
		for _, t := range s.Before {
			if t.Token == best {
				fmt.Fprintf(b, "; the rest grow to fill the mass, token %s most, from %s to %s", names.Label(int64(best)), engine.FormatSig(float64(t.Residual), 3), engine.FormatSig(float64(after[best]), 3))
			}
		}
	}
	b.WriteString(". The next sibling, if there is one, is tested against this new residual; if none is left, the walk draws from it.")
	return b.String()
}

// teachDrawWords says what the draw step s does: from the residual when
// every child was rejected, or a bonus from a leaf's target.
func teachDrawWords(s lesson.TreeStep, st *lesson.TreeState, names Tokens, leaf bool) (what, outcome string) {
	where := teachWhere(s.Node, st, names)
	if s.Drawn < 0 {
		return fmt.Sprintf("The target at %s has no distribution, so the walk draws nothing and writes -1.", where), "none"
	}
	z := names.Label(int64(s.Drawn))
	var r, p = math.NaN(), math.NaN()
	for _, t := range s.Before {
		if t.Token == s.Drawn {
			r, p = float64(t.Residual), float64(t.Target)
		}
	}
	b := &strings.Builder{}
	if leaf {
		if s.Node == 0 {
			fmt.Fprintf(b, "The root has no children, so the walk draws from the root's target p: token %s", z)
		} else {
			fmt.Fprintf(b, "%s is a leaf: the walk accepted every token on its path, so it draws a bonus token from the leaf's target p: token %s", capital(where), z)
		}
		if finite(p) {
			fmt.Fprintf(b, " (p = %s)", engine.FormatSig(float64(p), 3))
		}
		outcome = "bonus"
	} else {
		fmt.Fprintf(b, "Every child of %s was rejected, so the walk stops there and draws from the residual the rejections left (orange): token %s", where, z)
		if finite(r) {
			fmt.Fprintf(b, ", which the residual gives %s where the target gives %s", engine.FormatSig(float64(r), 3), engine.FormatSig(float64(p), 3))
		}
		outcome = "drawn"
	}
	fmt.Fprintf(b, ". The walk ends: it accepted %s and emits %s.", Plural(st.Accepted, "token"), Plural(emittedCount(st), "token"))
	return b.String(), outcome
}

// emittedCount counts a walk's emitted tokens.
func emittedCount(st *lesson.TreeState) int {
	n := 0
	for _, t := range st.Tokens {
		if t >= 0 {
			n++
		}
	}
	return n
}

// treeOutcome says what the whole walk did.
func treeOutcome(st *lesson.TreeState, names Tokens) string {
	var path, toks []string
	for j, n := range st.Path {
		if n < 0 || j > st.Accepted {
			break
		}
		if n == 0 {
			path = append(path, "root")
		} else {
			path = append(path, fmt.Sprintf("node %d", n))
		}
	}
	for _, t := range st.Tokens {
		if t >= 0 {
			toks = append(toks, names.Label(int64(t)))
		}
	}
	return fmt.Sprintf("Trial %d with seed %d: the walk tests %s, accepts %s along %s, and emits %s: %s.",
		st.Trial, st.Seed, children(st.Total-1), Plural(st.Accepted, "token"), strings.Join(path, " → "), Plural(len(toks), "token"), strings.Join(toks, ", "))
}

// treeWhy explains the residual update and why the result follows the
// target, with the walk's own first rejection when it has one.
func treeWhy(st *lesson.TreeState) (whyResidual, whyLossless string) {
	whyResidual = "Why the residual: a child x is kept with probability min(1, r(x)/q(x)), so the acceptances deliver min(r, q) of the mass; " +
		"what the target still lacks is max(r − q, 0), which sums to the probability of a rejection. Drawing the next sibling's test, or the final token, " +
		"from that shortfall normalised fills every token up to r and no further. With a one-hot draft, max(r − q, 0) is r without x: the second child y " +
		"is accepted with r(y) = p(y)/(1 − p(x)), which makes it come out with probability (1 − p(x))·p(y)/(1 − p(x)) = p(y) overall."
	names := Tokens(st.Text)
	for _, s := range st.Steps {
		if s.Child >= 0 && !s.Accepted && len(s.After) > 0 {
			change := residualChange(s, st.OneHot, names)
			whyResidual += fmt.Sprintf(" In this walk, step %d rejects token %s at %s: %s", s.Step, names.Label(int64(s.Token)), teachWhere(s.Node, st, names), strings.ToLower(change[:1])+change[1:])
			break
		}
	}
	whyLossless = "Why the emitted token still follows the target: at a node, testing the first child against p is the chain rule of speculative sampling, " +
		"which emits min(p, q) through acceptances and leaves exactly the missing mass as the residual. Testing the next sibling against that residual " +
		"is the chain rule again, on what is still missing, and so on; the final draw fills what is left. So the token chosen at each node, an accepted " +
		"child or the draw, follows that node's target exactly, whatever the drafts were. A verifier that tests a sibling against the original p instead " +
		"of the residual (the tree-sibling-bug scenario) emits the second child half as often as it should; one that accepts a child whatever its coin says " +
		"(SGLang's relaxed thresholds, the tree-relaxed-thresholds scenario) accepts more tokens and no longer follows the target."
	return whyResidual, whyLossless
}

// teachResidualChart draws the residual a step is made against beside the
// node's target, and after a rejection the residual it leaves, with a pin
// for the tested or drawn token.
func teachResidualChart(s lesson.TreeStep, names Tokens, leaf bool) (map[string]any, []TraceMark) {
	n := len(s.Before)
	xs := make([]string, n)
	p := make([]opts.BarData, n)
	before := make([]opts.BarData, n)
	after := map[int]float64{}
	for _, t := range s.After {
		after[t.Token] = float64(t.Residual)
	}
	aft := make([]opts.BarData, n)
	pin, pinAt, pinH := "", -1, 0.0
	for i, t := range s.Before {
		xs[i] = names.Axis(int64(t.Token))
		p[i] = opts.BarData{Value: finiteOr(float64(t.Target), false)}
		before[i] = opts.BarData{Value: finiteOr(float64(t.Residual), false)}
		aft[i] = opts.BarData{Value: finiteOr(after[t.Token], false)}
		if (s.Child >= 0 && t.Token == s.Token) || (s.Child < 0 && t.Token == s.Drawn) {
			pinAt, pinH = i, math.Max(float64(t.Target), float64(t.Residual))
		}
	}
	title := "The residual r before the test, beside the target p"
	switch {
	case s.Child >= 0 && len(s.After) > 0:
		title = "The rejection moves the residual: before (blue) and after (orange)"
		pin = "tested"
	case s.Child >= 0:
		title = "The residual r the test is made against: accepted"
		pin = "tested"
	case leaf:
		title = "A leaf: the target p the bonus token is drawn from"
		pin = "drawn"
	default:
		title = "Every child rejected: the residual the token is drawn from (orange)"
		pin = "drawn"
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable under p first, then the node's children", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "probability", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	var marks []TraceMark
	if pinAt >= 0 && finite(pinH) && pinH > 0 {
		color := colorDraft
		if pin == "drawn" {
			color = colorResidual
		}
		marks = append(marks, TraceMark{Name: pin, Coord: [2]any{pinAt, pinH}, Color: color})
	}
	pOpts := []charts.SeriesOpts{charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef})}
	c.AddSeries("p: target", p, pOpts...)
	switch {
	case s.Child >= 0:
		c.AddSeries("r: residual before the test", before, charts.WithSeriesId("before"), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}))
		if len(s.After) > 0 {
			c.AddSeries("r after the rejection", aft, charts.WithSeriesId("after"), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}))
		}
	case !leaf:
		c.AddSeries("r: the residual drawn from", before, charts.WithSeriesId(seriesResidual), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}))
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON(), marks
}
