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

// The trace of a draft tree on the row page, step by step: each trial's
// walk from the root, one test of a child at a time, then the draw where
// the walk stopped, each step put into words here once. The page script
// swaps the step shown (previous and next, the arrow keys), highlights the
// path so far on the tree, and keeps the step in the URL (?trial=&step=).
// Without the script the buttons are links and the page shows the step its
// URL names.

// TreeTrace is a tree row's trace as the row page shows it.
type TreeTrace struct {
	Trials int `json:"trials"`
	// Index is the step shown first (an index into Items).
	Index int             `json:"index"`
	Items []TreeTraceItem `json:"items"`
	// Charts draws, for each node a step is at, the node's target beside
	// the residual the walk draws from when it stops there, by node.
	Charts map[string]map[string]any `json:"charts"`
}

// TreeTraceItem is one step of one trial's walk, in words.
type TreeTraceItem struct {
	Trial int `json:"trial"`
	// Step counts the trial's steps from 0; Steps is how many it has.
	Step  int `json:"step"`
	Steps int `json:"steps"`
	// Node is the walk's node at this step, Child the child it tests (-1
	// at the draw).
	Node  int `json:"node"`
	Child int `json:"child"`
	// Title says where the step is; Cells fill the step table
	// (TreeTraceHeader order); Say says what happened and why.
	Title string   `json:"title"`
	Cells []string `json:"cells"`
	Say   string   `json:"say"`
	// Outcome is "accepted", "rejected", "drawn" (from the residual where
	// every child was rejected), "bonus" (from a leaf's target) or "none".
	Outcome string `json:"outcome"`
	// Path is the accepted path after this step (the root first), Rejected
	// the nodes the trial has tested and rejected so far.
	Path     []int `json:"path"`
	Rejected []int `json:"rejected"`
	// Marks pin the tested and the drawn token on the node's chart.
	Marks []TraceMark `json:"marks"`
	// URL is the row page showing this step.
	URL string `json:"url"`
}

// TreeTraceHeader names the step table's columns.
var TreeTraceHeader = []string{"at node", "child tested", "token x", "u", "r(x)", "q(x)", "a = min(1, r/q)", "u·q(x) < r(x)?", "emitted"}

// NewTreeTrace puts d's trace into words, starting at trial t, step i of
// its walk (clamped into range), with step links on path and base (the row
// page's query, without trial and step), naming tokens with names. It
// returns nil when the trace has no trials or the row no laws.
func NewTreeTrace(d *explain.TreeDetail, names Tokens, t, i int, path string, base url.Values) *TreeTrace {
	tr := d.Trace
	if tr == nil || tr.Trials == 0 || len(d.Node) == 0 {
		return nil
	}
	nodes := map[int]explain.TreeNode{}
	for _, n := range d.Node {
		nodes[n.Node] = n
	}
	v := &TreeTrace{Trials: tr.Trials, Charts: map[string]map[string]any{}}
	t = min(max(t, 0), tr.Trials-1)
	for ti := range tr.Trials {
		first := len(v.Items)
		items := treeWalk(d, nodes, names, ti)
		for j := range items {
			items[j].Step, items[j].Steps = j, len(items)
			items[j].Title = fmt.Sprintf("Trial %d of %d, step %d of %d: %s", ti, tr.Trials, j+1, len(items), items[j].Title)
			q := url.Values{}
			for k, vals := range base {
				q[k] = vals
			}
			q.Set("trial", strconv.Itoa(ti))
			q.Set("step", strconv.Itoa(j))
			items[j].URL = WithQuery(path, q)
			key := strconv.Itoa(items[j].Node)
			if _, ok := v.Charts[key]; !ok {
				v.Charts[key] = treeNodeChart(nodes[items[j].Node], names)
			}
		}
		v.Items = append(v.Items, items...)
		if ti == t {
			v.Index = first + min(max(i, 0), max(len(items)-1, 0))
		}
	}
	if len(v.Items) == 0 {
		return nil
	}
	return v
}

// treeWalk replays trial ti of d's trace from the root: each child tested,
// in sibling order, until one is accepted (the walk moves to it) or none
// is (the walk draws where it is).
func treeWalk(d *explain.TreeDetail, nodes map[int]explain.TreeNode, names Tokens, ti int) []TreeTraceItem {
	tr := d.Trace
	steps := tr.Step[ti]
	emitted := tokensOf(tr.Tokens[ti])
	var items []TreeTraceItem
	path, rejected := []int{0}, []int{}
	u := 0
	for range len(d.Node) + 1 {
		n, ok := nodes[u]
		if !ok {
			break
		}
		moved := false
		for j, c := range n.Children {
			if c >= len(steps) || !steps[c].Tried {
				break
			}
			s := steps[c]
			it := TreeTraceItem{Trial: ti, Node: u, Child: c, Marks: []TraceMark{}}
			next := -1
			if j+1 < len(n.Children) {
				next = n.Children[j+1]
			}
			it.Title = fmt.Sprintf("%s tests its %s child", capital(where(nodes, u, names)), childOrdinal(j, len(n.Children)))
			it.Cells, it.Say, it.Outcome = describeTreeTest(d, nodes, names, u, c, j, s, next)
			if s.Accepted {
				path = append(path, c)
			} else {
				rejected = append(rejected, c)
			}
			it.Path, it.Rejected = append([]int{}, path...), append([]int{}, rejected...)
			it.Marks = nodeMarks(n, names, nodes[c].Token, "tested", colorDraft)
			items = append(items, it)
			if s.Accepted {
				u, moved = c, true
				break
			}
		}
		if moved {
			continue
		}
		drawn := int32(-1)
		if u < len(steps) {
			drawn = steps[u].Drawn
		}
		it := TreeTraceItem{Trial: ti, Node: u, Child: -1, Path: append([]int{}, path...), Rejected: append([]int{}, rejected...), Marks: []TraceMark{}}
		it.Title = "The draw at " + where(nodes, u, names)
		it.Cells, it.Say, it.Outcome = describeTreeDraw(nodes, names, u, drawn, len(path)-1, emitted, ti, d.OneHot)
		if drawn >= 0 {
			color := colorResidual
			if it.Outcome == "bonus" {
				color = colorNote
			}
			it.Marks = nodeMarks(n, names, int64(drawn), "drawn", color)
		}
		items = append(items, it)
		break
	}
	return items
}

// tokensOf returns a trial's emitted tokens, up to the -1 fill.
func tokensOf(ts []int32) []int64 {
	var out []int64
	for _, t := range ts {
		if t < 0 {
			break
		}
		out = append(out, int64(t))
	}
	return out
}

// nodeMarks pins token tok on node n's chart, if the chart shows it.
func nodeMarks(n explain.TreeNode, names Tokens, tok int64, name, color string) []TraceMark {
	for at, t := range n.Final {
		if int64(t.Token) == tok {
			h := math.Max(float64(t.P), float64(t.Law))
			if len(n.Children) == 0 {
				h = float64(t.P)
			}
			if finite(h) && h > 0 {
				return []TraceMark{{Name: name, Coord: [2]any{at, h}, Color: color}}
			}
		}
	}
	return []TraceMark{}
}

// where names node u in a sentence: "the root", or "node 3 (token 17)".
func where(nodes map[int]explain.TreeNode, u int, names Tokens) string {
	if u == 0 {
		return "the root"
	}
	return fmt.Sprintf("node %d (token %s)", u, names.Label(nodes[u].Token))
}

// capital starts s with a capital letter.
func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// childOrdinal names the j-th (from 0) of m children: "only" when m is 1,
// else its ordinal.
func childOrdinal(j, m int) string {
	if m == 1 {
		return "only"
	}
	return ordinal(j + 1)
}

// ordinal writes 1 as "first", 2 as "second", and so on.
func ordinal(n int) string {
	words := []string{"first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"}
	if n >= 1 && n <= len(words) {
		return words[n-1]
	}
	return strconv.Itoa(n) + "th"
}

// describeTreeTest fills the step table's cells and says what the test of
// child c (the j-th of node u, next its next sibling or -1) did and why.
func describeTreeTest(d *explain.TreeDetail, nodes map[int]explain.TreeNode, names Tokens, u, c, j int, s engine.TreeStep, next int) (cells []string, say, outcome string) {
	x := names.Label(nodes[c].Token)
	r, q := float64(s.P), float64(s.Q)
	a := acceptProb(r, q)
	uq := float64(s.U) * q
	verdict, emitted := "no", ""
	if s.Accepted {
		verdict, emitted = "yes", x
	}
	at := "root"
	if u != 0 {
		at = strconv.Itoa(u)
	}
	cells = []string{at, fmt.Sprintf("node %d (%d of %d)", c, j+1, len(nodes[u].Children)), x,
		engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(r), 3), engine.FormatSig(float64(q), 3), engine.FormatSig(float64(a), 3), verdict, emitted}
	b := &strings.Builder{}
	if m := len(nodes[u].Children); m == 1 {
		fmt.Fprintf(b, "At %s the walk tests its only child: node %d, token %s.", where(nodes, u, names), c, x)
	} else {
		fmt.Fprintf(b, "At %s the walk tests its %s child of %d: node %d, token %s.", where(nodes, u, names), ordinal(j+1), m, c, x)
	}
	switch {
	case math.IsNaN(r):
		fmt.Fprintf(b, " The target at %s has no distribution (its probabilities are NaN), so the test fails and nothing is accepted here.", where(nodes, u, names))
		return cells, b.String(), "rejected"
	case j == 0:
		fmt.Fprintf(b, " A first child is tested against its node's target itself: r(x) = p(x) = %s.", engine.FormatSig(float64(r), 3))
	default:
		var sibs []string
		for _, e := range nodes[u].Children[:j] {
			sibs = append(sibs, fmt.Sprintf("node %d", e))
		}
		fmt.Fprintf(b, " Its earlier %s (%s) %s rejected, so it is tested against the residual %s left: r(x) = %s, where the target gave it p(x) = %s.",
			pluralWord(j, "sibling"), strings.Join(sibs, ", "), pluralWord(j, "was"), pluralWord(j, "it"), engine.FormatSig(float64(r), 3), engine.FormatSig(float64(nodes[c].P), 3))
	}
	if d.OneHot {
		b.WriteString(" Its draft is one-hot (q(x) = 1), so it passes with probability r(x) itself.")
	} else {
		fmt.Fprintf(b, " The draft at %s gave it q(x) = %s, so it passes with probability min(1, r(x)/q(x)) = %s.", where(nodes, u, names), engine.FormatSig(float64(q), 3), engine.FormatSig(float64(a), 3))
	}
	if s.Accepted {
		fmt.Fprintf(b, " u = %s, and u·q(x) = %s < r(x): accepted. Token %s is emitted and the walk moves to node %d", engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(uq), 3), x, c)
		if len(nodes[c].Children) == 0 {
			b.WriteString(", a leaf: next it draws a bonus token from that node's target.")
		} else {
			fmt.Fprintf(b, ", whose %s it tries next.", children(len(nodes[c].Children)))
		}
		return cells, b.String(), "accepted"
	}
	fmt.Fprintf(b, " u = %s, and u·q(x) = %s ≥ r(x): rejected.", engine.FormatSig(float64(s.U), 3), engine.FormatSig(float64(uq), 3))
	if d.OneHot {
		fmt.Fprintf(b, " The residual drops token %s and is renormalised", x)
	} else {
		b.WriteString(" The residual loses what the draft proposed, r ← max(r − q, 0), normalised")
	}
	if next >= 0 {
		fmt.Fprintf(b, "; the next sibling, node %d (token %s), is tested against it, where its token now has r = %s (target p = %s).",
			next, names.Label(nodes[next].Token), engine.FormatSig(float64(nodes[next].Residual), 3), engine.FormatSig(float64(nodes[next].P), 3))
	} else {
		fmt.Fprintf(b, "; no sibling is left, so the walk stops at %s and draws its token from this residual (orange on the chart below).", where(nodes, u, names))
	}
	return cells, b.String(), "rejected"
}

// describeTreeDraw fills the step table's cells and says what the draw at
// node u did (drawn -1: none), after the trial accepted accepted tokens and
// emits emitted; oneHot says the drafts are one-hot.
func describeTreeDraw(nodes map[int]explain.TreeNode, names Tokens, u int, drawn int32, accepted int, emitted []int64, ti int, oneHot bool) (cells []string, say, outcome string) {
	at := "root"
	if u != 0 {
		at = strconv.Itoa(u)
	}
	tok := "none"
	if drawn >= 0 {
		tok = names.Label(int64(drawn))
	}
	cells = []string{at, "none: the draw", "", "", "", "", "", "", tok}
	b := &strings.Builder{}
	n := nodes[u]
	var law, p float64 = math.NaN(), math.NaN()
	for _, t := range n.Final {
		if int32(t.Token) == drawn {
			law, p = float64(t.Law), float64(t.P)
		}
	}
	switch {
	case drawn < 0:
		fmt.Fprintf(b, "The target at %s has no distribution, so the walk draws nothing there and writes -1.", where(nodes, u, names))
		outcome = "none"
	case len(n.Children) == 0:
		if u == 0 {
			fmt.Fprintf(b, "The root has no children, so the walk draws a token from the root's target p: token %s", tok)
		} else {
			fmt.Fprintf(b, "Node %d is a leaf, reached by accepting every token on its path, so the walk draws a bonus token from its target p: token %s", u, tok)
		}
		if finite(p) {
			fmt.Fprintf(b, " (p = %s)", engine.FormatSig(float64(p), 3))
		}
		b.WriteString(".")
		outcome = "bonus"
	default:
		fmt.Fprintf(b, "Every child of %s was rejected, so the walk stops there and draws from the residual their rejections left (orange): token %s", where(nodes, u, names), tok)
		if finite(law) {
			fmt.Fprintf(b, ", which the residual gives %s where the target gave it %s", engine.FormatSig(float64(law), 3), engine.FormatSig(float64(p), 3))
		}
		if oneHot {
			b.WriteString(". The rejected children's tokens have no mass in it: with one-hot drafts each rejection removes its token.")
		} else {
			b.WriteString(". A token the drafts proposed keeps mass in it only where the target wanted it more than the drafts did.")
		}
		outcome = "drawn"
	}
	var ts []string
	for _, t := range emitted {
		ts = append(ts, names.Label(t))
	}
	fmt.Fprintf(b, " Trial %d accepts %s and emits %s", ti, Plural(accepted, "token"), Plural(len(emitted), "token"))
	if len(ts) > 0 {
		b.WriteString(": " + strings.Join(ts, ", "))
	}
	b.WriteString(".")
	return cells, b.String(), outcome
}

// children writes n children.
func children(n int) string {
	if n == 1 {
		return "1 child"
	}
	return strconv.Itoa(n) + " children"
}

// pluralWord writes the singular or plural of a word for n of them:
// sibling/siblings, was/were, it/they.
func pluralWord(n int, word string) string {
	switch {
	case n == 1:
		return word
	case word == "was":
		return "were"
	case word == "it":
		return "they"
	}
	return word + "s"
}

// TreeTraceURL returns the URL of step index of v, wrapping around at both
// ends.
func TreeTraceURL(v *TreeTrace, index int) string {
	n := len(v.Items)
	return v.Items[((index%n)+n)%n].URL
}
