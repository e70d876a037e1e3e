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

// The draft tree of a spec_tree_verify row on the row page: the tree drawn
// as a graph (treechart.go), its nodes in a table, acceptance by depth and
// the law of the accepted tokens against each output's trials, the first
// emitted token's law beside the target, and the trace of our backend's
// first trials step by step (treetrace.go). engine/explain computed every
// number; this file only puts them into words, tables and charts.

// TreeView is a spec_tree_verify row's tree as the row page shows it.
type TreeView struct {
	// Summary says what the tree is and what exact tree speculative
	// sampling gives on it (each output's trials against it are in the
	// row's verdict, TreeStatsLine).
	Summary string
	// Invalid says why the row has no laws ("" when it has).
	Invalid string
	// Heads name the node table's observed-reach columns, one per output
	// that verified the row; Nodes are its rows.
	Heads []string
	Nodes []TreeNodeRow
	// Depths are the table of acceptance by depth, one row per number of
	// accepted tokens.
	Depths []TreeDepthRow
	// First says how the first emitted token's law stands to the target.
	First string
	// Color is the tree's colouring ("accept" or "reach"), Colors the
	// links that switch it, Legend the scale of the one in force.
	Color  string
	Colors []TreeColorLink
	Legend TreeLegend
	// Height is the tree chart's height in pixels.
	Height int
	// Charts are the section's statistical charts, drawn with the row
	// page's other charts: "tree-accept", "tree-depth" and "tree-first".
	Charts map[string]any
	// Script is what the page script needs beyond the charts: the
	// colourings, and the trace.
	Script *TreeScript
	// NoTrace says why there is no trace to step through ("" when there
	// is one).
	NoTrace string
	// Teach is the tree teaching page of the trial shown.
	Teach string
}

// TreeScript reaches the page script as JSON: the tree chart, its
// colourings and their legends, the trace step by step, and the teaching
// page (whose trial follows the trace's).
type TreeScript struct {
	Chart  map[string]any        `json:"chart"`
	Color  string                `json:"color"`
	Modes  map[string]TreeColors `json:"modes"`
	Trace  *TreeTrace            `json:"trace,omitempty"`
	Teach  string                `json:"teach"`
	Legend map[string]TreeLegend `json:"legends"`
}

// TreeColorLink is one choice of the tree's colouring.
type TreeColorLink struct {
	Mode, Name, URL string
	Active          bool
}

// TreeLegend is a colour scale in words: its title, the CSS gradient and
// the ticks under it.
type TreeLegend struct {
	Title    string   `json:"title"`
	Gradient string   `json:"gradient"`
	Ticks    []string `json:"ticks"`
}

// TreeNodeRow is one line of the node table.
type TreeNodeRow struct {
	Node, Parent, Depth, Sibling string
	Token                        string
	P, Q, Residual, Accept       string
	Tested, Reach, Stop          string
	// Observed is how often each output's trials put the node on their
	// accepted path: the share, and the count of the trials.
	Observed []string
}

// TreeDepthRow is one line of the table of acceptance by depth: d tokens
// accepted.
type TreeDepthRow struct {
	Depth string
	// Exactly is P(exactly d accepted) in theory, ExactlyObserved each
	// output's share of trials that accepted exactly d.
	Exactly         string
	ExactlyObserved []string
	// More is P(one more accepted | d accepted) in theory, MoreObserved
	// each output's rate with its 95% interval ("" at the deepest level,
	// where no node has a child).
	More         string
	MoreObserved []string
}

// TreeOptions are what the row page's URL and handler say about the tree
// section: the trial and step of the trace shown, the colouring, the row
// page's path and query (without trial, step and color) and the tree
// teaching page's path.
type TreeOptions struct {
	Trial, Step int
	Color       string
	Path        string
	Query       url.Values
	Teach       string
}

// Colourings of the tree.
const (
	TreeColorAccept = "accept"
	TreeColorReach  = "reach"
)

// NewTreeView puts a spec_tree_verify row's detail into words and charts:
// d its tree detail, outs and reps the row's outputs and their reports
// (reps[i] nil while output i has not reached the row), names its token
// text.
func NewTreeView(d *explain.TreeDetail, outs []engine.OutputInfo, reps []*engine.RowReport, names Tokens, o TreeOptions) *TreeView {
	v := &TreeView{Invalid: d.Invalid, Color: o.Color, Charts: map[string]any{}}
	if v.Color != TreeColorReach {
		v.Color = TreeColorAccept
	}
	query := func(extra map[string]string) url.Values {
		q := url.Values{}
		for k, vals := range o.Query {
			q[k] = vals
		}
		for k, x := range extra {
			if x == "" {
				q.Del(k)
			} else {
				q.Set(k, x)
			}
		}
		return q
	}
	colorParam := func(mode string) string {
		if mode == TreeColorAccept {
			return ""
		}
		return mode
	}
	for _, m := range []struct{ mode, name string }{{TreeColorAccept, "acceptance probability a"}, {TreeColorReach, "reach probability"}} {
		extra := map[string]string{"color": colorParam(m.mode)}
		if o.Query.Has("trial") || o.Trial > 0 || o.Step > 0 {
			extra["trial"], extra["step"] = strconv.Itoa(o.Trial), strconv.Itoa(o.Step)
		}
		v.Colors = append(v.Colors, TreeColorLink{Mode: m.mode, Name: m.name, URL: WithQuery(o.Path, query(extra)), Active: m.mode == v.Color})
	}
	v.Summary = treeSummary(d)
	if d.Invalid != "" {
		return v
	}
	byName := reportsByName(outs, reps)
	for _, oi := range d.Outputs {
		v.Heads = append(v.Heads, oi.Label())
	}
	for _, n := range d.Node {
		row := TreeNodeRow{Node: strconv.Itoa(n.Node), Depth: strconv.Itoa(n.Depth), Reach: engine.FormatSig(float64(n.Reach), 3), Stop: engine.FormatSig(float64(n.Stop), 3)}
		if n.Parent < 0 {
			row.Token = "root: " + names.Label(n.Token)
		} else {
			row.Parent, row.Sibling = strconv.Itoa(n.Parent), strconv.Itoa(n.Rank+1)
			row.Token = names.Label(n.Token)
			row.P, row.Q, row.Residual, row.Accept, row.Tested = engine.FormatSig(float64(n.P), 3), engine.FormatSig(float64(n.Q), 3), engine.FormatSig(float64(n.Residual), 3), engine.FormatSig(float64(n.Accept), 3), engine.FormatSig(float64(n.Tested), 3)
		}
		for i := range d.Outputs {
			row.Observed = append(row.Observed, observedShare(d, i, n.Node))
		}
		v.Nodes = append(v.Nodes, row)
	}
	v.Depths = treeDepthRows(d, byName)
	v.First = firstLine(d)
	v.Height = treeHeight(d.Node, false)
	v.Charts["tree-accept"] = treeAcceptChart(d, byName)
	v.Charts["tree-depth"] = treeDepthChart(d, byName)
	v.Charts["tree-first"] = treeFirstChart(d, names)
	v.Script = &TreeScript{Chart: treeChart(d, names, v.Color), Color: v.Color, Modes: treeColorModes(d), Legend: map[string]TreeLegend{}}
	for _, m := range []string{TreeColorAccept, TreeColorReach} {
		v.Script.Legend[m] = treeLegend(m)
	}
	v.Legend = v.Script.Legend[v.Color]
	if d.Trace == nil {
		v.NoTrace = d.NoTrace
		if v.NoTrace == "" {
			v.NoTrace = "There is no trace of this row to step through."
		}
	} else {
		base := query(map[string]string{"color": colorParam(v.Color)})
		v.Script.Trace = NewTreeTrace(d, names, o.Trial, o.Step, o.Path, base)
		if v.Script.Trace == nil {
			v.NoTrace = "The stored trace of this row has no trials to step through."
		}
	}
	trial := 0
	if tr := v.Script.Trace; tr != nil {
		trial = tr.Items[tr.Index].Trial
	}
	v.Teach = WithQuery(o.Teach, url.Values{"trial": {strconv.Itoa(trial)}})
	v.Script.Teach = o.Teach
	return v
}

// reportsByName indexes the row's reports by output name.
func reportsByName(outs []engine.OutputInfo, reps []*engine.RowReport) map[string]*engine.RowReport {
	m := map[string]*engine.RowReport{}
	for i, o := range outs {
		if i < len(reps) && reps[i] != nil {
			m[o.Name] = reps[i]
		}
	}
	return m
}

// treeSummary says what the tree is and what the lossless rule gives on it.
func treeSummary(d *explain.TreeDetail) string {
	if d.Invalid != "" {
		return d.Invalid
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "A draft tree of %s", Plural(d.Nodes, "node"))
	if reached := len(d.Node); reached < d.Nodes {
		fmt.Fprintf(b, " (%d of them reached from the root; the others are padding)", reached)
	}
	fmt.Fprintf(b, ", %s deep", Plural(d.MaxDepth, "level"))
	if d.OneHot {
		b.WriteString(", with one-hot drafts (each child's draft is its own token, q = 1).")
	} else {
		b.WriteString(", with draft distributions (each node's children were drawn from the node's q).")
	}
	fmt.Fprintf(b, " Exact tree speculative sampling accepts %s tokens a trial on average here (mean acceptance length %s)",
		engine.FormatSig(float64(d.MeanAcceptanceLength-1), 3), engine.FormatSig(float64(d.MeanAcceptanceLength), 3))
	switch {
	case len(d.Depth) == 0:
	case d.Depth[0] < 5e-4:
		b.WriteString(" and almost never stops at the root without accepting a token")
	default:
		fmt.Fprintf(b, " and stops at the root, accepting nothing, in %s of the trials", engine.FormatPercent(float64(d.Depth[0])))
	}
	b.WriteString(".")
	return b.String()
}

// TreeStatsLine says a tree output's trials of one row in a sentence: the
// tokens accepted against the lossless rule, acceptance by depth, the
// accepted tokens' law, and the first tokens' distance from their law.
func TreeStatsLine(rep *engine.RowReport) string {
	t := rep.Tree
	parts := []string{fmt.Sprintf("%s accepted %s tokens a trial where the lossless rule gives %s (%s)",
		Plural(t.Trials, "trial"), engine.FormatSig(float64(t.Accepted), 3), engine.FormatSig(float64(t.Theory), 3), signedPercent(float64(t.Excess)))}
	if s := rep.Spec; s != nil {
		var by []string
		for _, p := range s.Positions {
			by = append(by, fmt.Sprintf("%d: %d of %d (theory %s, %s)", p.Position, p.Accepted, p.Reached, engine.FormatSig(float64(p.Theory), 3), engine.StoredPText(float64(p.PValue))))
		}
		if len(by) > 0 {
			parts = append(parts, "one more token accepted after depth "+strings.Join(by, "; "))
		}
		if len(s.Emitted) > 0 {
			parts = append(parts, "the accepted tokens against their exact law: "+engine.StoredPText(float64(s.EmittedPValue)))
		}
	}
	first := fmt.Sprintf("the first emitted tokens are %s from their exact law in total variation", engine.FormatSig(float64(t.FirstTV), 3))
	if t.FirstTVBound > 0 {
		if t.FirstTV > t.FirstTVBound {
			first += fmt.Sprintf(", past the %s a lossless verifier stays under at this many trials", engine.FormatSig(float64(t.FirstTVBound), 3))
		} else {
			first += fmt.Sprintf(" (a lossless verifier stays under %s)", engine.FormatSig(float64(t.FirstTVBound), 3))
		}
	}
	parts = append(parts, first)
	return Sentence(strings.Join(parts, "; "))
}

// signedPercent writes a relative excess as "+7.2% over it" or "2.1%
// under it".
func signedPercent(x float64) string {
	switch {
	case !finite(x):
		return "no comparison"
	case math.Abs(x) < 5e-4:
		return "the same"
	case x > 0:
		return engine.FormatPercent(x) + " more"
	}
	return engine.FormatPercent(-x) + " fewer"
}

// observedShare writes how often output i's trials reached node n: the
// share and the count.
func observedShare(d *explain.TreeDetail, i, n int) string {
	if i >= len(d.Reached) || n >= len(d.Reached[i]) || i >= len(d.Trials) || d.Trials[i] == 0 {
		return ""
	}
	k, t := d.Reached[i][n], d.Trials[i]
	return fmt.Sprintf("%s (%d of %d)", engine.FormatSig(float64(k)/float64(t), 3), k, t)
}

// treeDepthRows lists, for each number d of accepted tokens, its law and
// the acceptance of one more, beside each output's trials.
func treeDepthRows(d *explain.TreeDetail, reps map[string]*engine.RowReport) []TreeDepthRow {
	var rows []TreeDepthRow
	for k := 0; k < len(d.Depth); k++ {
		r := TreeDepthRow{Depth: strconv.Itoa(k), Exactly: engine.FormatSig(float64(d.Depth[k]), 3)}
		if k < len(d.Accept) {
			r.More = engine.FormatSig(float64(d.Accept[k]), 3)
		}
		for _, o := range d.Outputs {
			var s *engine.SpecStats
			if rep := reps[o.Name]; rep != nil {
				s = rep.Spec
			}
			ex, more := "", ""
			if s != nil && s.Trials > 0 {
				if k < len(s.Emitted) {
					ex = fmt.Sprintf("%s (%d of %d)", engine.FormatSig(float64(s.Emitted[k])/float64(s.Trials), 3), s.Emitted[k], s.Trials)
				}
				if k < len(s.Positions) && k < len(d.Accept) {
					p := s.Positions[k]
					if p.Reached > 0 {
						more = fmt.Sprintf("%s (%d of %d; 95%%: %s–%s)", engine.FormatSig(float64(p.Rate), 3), p.Accepted, p.Reached, engine.FormatSig(float64(p.Lo), 3), engine.FormatSig(float64(p.Hi), 3))
					} else {
						more = "no trial got here"
					}
				}
			}
			r.ExactlyObserved = append(r.ExactlyObserved, ex)
			if k < len(d.Accept) {
				r.MoreObserved = append(r.MoreObserved, more)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// firstLine says how the first emitted token's law stands to the root's
// target.
func firstLine(d *explain.TreeDetail) string {
	tv := float64(d.TargetTV)
	if d.OneHot {
		if tv < 1e-9 {
			return fmt.Sprintf("The first emitted token (an accepted child of the root, or the root's draw when all are rejected) follows this law, which is the root's target itself: their total variation is %s. With one-hot drafts of distinct tokens a lossless tree verifier emits the target, token by token.", engine.FormatSig(float64(d.TargetTV), 4))
		}
		return fmt.Sprintf("The first emitted token follows this law, %s from the root's target in total variation: siblings with the same token make a one-hot tree's law differ from the target.", engine.FormatSig(float64(d.TargetTV), 4))
	}
	return fmt.Sprintf("The first emitted token follows this law, %s from the root's target in total variation: with draft distributions the tree's tokens are fixed in the dump, so the law is conditioned on them; averaged over the drafter's own draws it would be the target.", engine.FormatSig(float64(d.TargetTV), 4))
}
