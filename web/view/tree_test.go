package view

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
)

// binaryTree returns the detail of a seven-node tree (the root's children
// 1 and 2, node 1's 3 and 4, node 2's 5 and 6) with one-hot drafts, fresh
// random target probabilities, the laws a lossless verifier gives them,
// one output's reach counts over 400 trials, and trace: trial 0 rejects
// node 1, accepts node 2 and node 5 (a leaf: a bonus); trial 1 rejects both
// of the root's children and draws at the root.
func binaryTree(t *testing.T) (*explain.TreeDetail, []float64) {
	t.Helper()
	p := make([]float64, 7) // p[n]: the parent's target probability of n's token
	for n := 1; n < 7; n += 2 {
		a := 0.1 + 0.4*rand.Float64()
		b := (1 - a) * (0.1 + 0.8*rand.Float64())
		p[n], p[n+1] = a, b
	}
	d := &explain.TreeDetail{Nodes: 7, MaxDepth: 2, OneHot: true, Outputs: []engine.OutputInfo{{Name: "cpu", Kind: "tree"}}, Trials: []int{400}}
	children := [][]int{{1, 2}, {3, 4}, {5, 6}, nil, nil, nil, nil}
	parent := []int{-1, 0, 0, 1, 1, 2, 2}
	reach := make([]float64, 7)
	reach[0] = 1
	reached := []int{400}
	for n := 0; n < 7; n++ {
		node := explain.TreeNode{Node: n, Parent: parent[n], Depth: map[bool]int{true: 0, false: 1 + n/3}[n == 0], Rank: -1,
			Children: children[n], Token: int64(10 + n), Reach: 1}
		if n > 0 {
			node.Rank = (n + 1) % 2
			node.P, node.Q = engine.Float(p[n]), 1
			r := p[n]
			if node.Rank == 1 {
				r = p[n] / (1 - p[n-1])
			}
			node.Residual, node.Accept = engine.Float(r), engine.Float(r)
			node.Tested = engine.Float(reach[parent[n]])
			if node.Rank == 1 {
				node.Tested = engine.Float(reach[parent[n]] * (1 - p[n-1]))
			}
			reach[n] = reach[parent[n]] * p[n]
			node.Reach = engine.Float(reach[n])
			reached = append(reached, int(math.Round(400*reach[n])))
		}
		node.Final = []explain.TreeToken{{Token: 30, P: 0.3, Law: 0.5}, {Token: 10 + 2*n + 1, P: 0.2, Law: 0}}
		d.Node = append(d.Node, node)
	}
	d.Reached = [][]int{reached}
	d.Depth = []engine.Float{engine.Float(1 - reach[1] - reach[2]), engine.Float(reach[1] + reach[2] - reach[3] - reach[4] - reach[5] - reach[6]), engine.Float(reach[3] + reach[4] + reach[5] + reach[6])}
	d.Accept = []engine.Float{engine.Float(reach[1] + reach[2]), engine.Float((reach[3] + reach[4] + reach[5] + reach[6]) / (reach[1] + reach[2]))}
	d.MeanAcceptanceLength = 1 + d.Depth[1] + 2*d.Depth[2]
	d.First = []explain.TreeToken{{Token: 11, P: engine.Float(p[1]), Law: engine.Float(p[1])}}
	steps := func() []engine.TreeStep {
		s := make([]engine.TreeStep, 7)
		for i := range s {
			s[i].Drawn = -1
		}
		return s
	}
	t0, t1 := steps(), steps()
	t0[1] = engine.TreeStep{Tried: true, U: float32(p[1] + 0.01), P: float32(p[1]), Q: 1, Drawn: -1}
	t0[2] = engine.TreeStep{Tried: true, U: float32(p[2] / 2), P: float32(p[2] / (1 - p[1])), Q: 1, Accepted: true, Drawn: -1}
	t0[5] = engine.TreeStep{Tried: true, U: float32(p[5] / 2), P: float32(p[5]), Q: 1, Accepted: true, Drawn: -1}
	t0[5].Drawn = 30
	t1[1] = engine.TreeStep{Tried: true, U: 0.999, P: float32(p[1]), Q: 1, Drawn: -1}
	t1[2] = engine.TreeStep{Tried: true, U: 0.999, P: float32(p[2] / (1 - p[1])), Q: 1, Drawn: -1}
	t1[0].Drawn = 31
	d.Trace = &explain.TreeTrace{Trials: 2, Nodes: 7, Width: 3,
		Path: [][]int32{{0, 2, 5}, {0, -1, -1}}, Tokens: [][]int32{{12, 15, 30}, {31, -1, -1}}, Step: [][]engine.TreeStep{t0, t1}}
	return d, p
}

func TestTreeTraceWalks(t *testing.T) {
	d, p := binaryTree(t)
	names := Tokens{15: "␣fox"}
	base := url.Values{"log": {"1"}}
	v := NewTreeTrace(d, names, 1, 99, "/runs/r/rows/3", base)
	if v == nil || v.Trials != 2 || len(v.Items) != 7 {
		t.Fatalf("trace %+v", v)
	}
	if v.Index != 6 {
		t.Errorf("trial 1, step 99 shows item %d, want the last of trial 1, 6", v.Index)
	}
	tests := []struct {
		title, outcome string
		path, rejected []int
		say            []string
	}{
		{"Trial 0 of 2, step 1 of 4: The root tests its first child", "rejected", []int{0}, []int{1},
			[]string{"first child of 2: node 1, token 11", "r(x) = p(x) = " + engine.FormatSig(float64(float32(p[1])), 3), "rejected", "next sibling, node 2 (token 12)"}},
		{"Trial 0 of 2, step 2 of 4: The root tests its second child", "accepted", []int{0, 2}, []int{1},
			[]string{"earlier sibling (node 1) was rejected", "residual it left", "accepted", "moves to node 2, whose 2 children"}},
		{"Trial 0 of 2, step 3 of 4: Node 2 (token 12) tests its first child", "accepted", []int{0, 2, 5}, []int{1},
			[]string{"node 5, token 15 ‹␣fox›", "a leaf"}},
		{"Trial 0 of 2, step 4 of 4: The draw at node 5 (token 15 ‹␣fox›)", "bonus", []int{0, 2, 5}, []int{1},
			[]string{"Node 5 is a leaf", "bonus token from its target p: token 30 (p = 0.3)", "accepts 2 tokens and emits 3 tokens: 12, 15 ‹␣fox›, 30"}},
		{"Trial 1 of 2, step 1 of 3: The root tests its first child", "rejected", []int{0}, []int{1}, nil},
		{"Trial 1 of 2, step 2 of 3: The root tests its second child", "rejected", []int{0}, []int{1, 2},
			[]string{"no sibling is left, so the walk stops at the root"}},
		{"Trial 1 of 2, step 3 of 3: The draw at the root", "drawn", []int{0}, []int{1, 2},
			[]string{"Every child of the root was rejected", "token 31", "with one-hot drafts each rejection removes its token", "accepts 0 tokens and emits 1 token: 31"}},
	}
	for i, tt := range tests {
		it := v.Items[i]
		if it.Title != tt.title || it.Outcome != tt.outcome || !slices.Equal(it.Path, tt.path) || !slices.Equal(it.Rejected, tt.rejected) {
			t.Errorf("item %d: %q %s path %v rejected %v; want %q %s %v %v", i, it.Title, it.Outcome, it.Path, it.Rejected, tt.title, tt.outcome, tt.path, tt.rejected)
		}
		for _, want := range tt.say {
			if !strings.Contains(it.Say, want) {
				t.Errorf("item %d says %q, want %q in it", i, it.Say, want)
			}
		}
		if len(it.Cells) != len(TreeTraceHeader) {
			t.Errorf("item %d has %d cells for %d columns", i, len(it.Cells), len(TreeTraceHeader))
		}
		u, _ := url.Parse(it.URL)
		if q := u.Query(); q.Get("trial") != fmt.Sprint(it.Trial) || q.Get("step") != fmt.Sprint(it.Step) || q.Get("log") != "1" {
			t.Errorf("item %d links %s", i, it.URL)
		}
	}
	// The draw at node 5 pins token 30 on node 5's chart, which is there.
	if m := v.Items[3].Marks; len(m) != 1 || m[0].Name != "drawn" || m[0].Coord[0] != 0 {
		t.Errorf("the bonus's marks %+v", m)
	}
	for _, n := range []string{"0", "2"} {
		if v.Charts[n] == nil {
			t.Errorf("no chart of node %s, where the walk is", n)
		}
	}
	if got := TreeTraceURL(v, -1); got != v.Items[6].URL {
		t.Errorf("before the first step comes %s, want the last", got)
	}
}

func TestTreeView(t *testing.T) {
	d, p := binaryTree(t)
	excess := 0.05 + 0.3*rand.Float64()
	rep := &engine.RowReport{
		Spec: &engine.SpecStats{Trials: 400, Emitted: []int{100, 200, 100},
			Positions: []engine.PositionRate{{Position: 0, Reached: 400, Accepted: 300, Rate: 0.75, Lo: 0.7, Hi: 0.8, Theory: d.Accept[0]}, {Position: 1, Reached: 300, Accepted: 100, Rate: 1.0 / 3, Lo: 0.28, Hi: 0.39, Theory: d.Accept[1]}}},
		Tree: &engine.TreeStats{Trials: 400, Accepted: engine.Float(1.2 * (1 + excess)), Theory: 1.2, Excess: engine.Float(excess), FirstTV: 0.4, FirstTVBound: 0.12},
	}
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "tree"}}
	v := NewTreeView(d, outs, []*engine.RowReport{rep}, nil, TreeOptions{Trial: 0, Step: 2, Color: "reach", Path: "/runs/r/rows/3", Query: url.Values{}, Teach: "/runs/r/rows/3/teach"})
	if !strings.HasPrefix(v.Summary, "A draft tree of 7 nodes, 2 levels deep, with one-hot drafts") {
		t.Errorf("summary %q", v.Summary)
	}
	if v.Color != TreeColorReach || !v.Colors[1].Active || v.Colors[0].Active || !strings.Contains(v.Colors[1].URL, "color=reach") || strings.Contains(v.Colors[0].URL, "color=") {
		t.Errorf("colourings %+v", v.Colors)
	}
	if len(v.Nodes) != 7 || v.Nodes[0].Token != "root: 10" || v.Nodes[2].P != engine.FormatSig(float64(p[2]), 3) || v.Nodes[2].Residual != engine.FormatSig(float64(p[2]/(1-p[1])), 3) {
		t.Errorf("node rows %+v", v.Nodes[:3])
	}
	if want := fmt.Sprintf("%s (%d of 400)", engine.FormatSig(float64(d.Reached[0][2])/400, 3), d.Reached[0][2]); v.Nodes[2].Observed[0] != want {
		t.Errorf("node 2 observed %q, want %q", v.Nodes[2].Observed[0], want)
	}
	if len(v.Depths) != 3 || v.Depths[0].ExactlyObserved[0] != "0.25 (100 of 400)" || v.Depths[1].MoreObserved[0] != "0.333 (100 of 300; 95%: 0.28–0.39)" || v.Depths[2].More != "" {
		t.Errorf("depth rows %+v", v.Depths)
	}
	if v.Teach != "/runs/r/rows/3/teach?trial=0" || v.Script.Trace == nil || v.Script.Trace.Index != 2 {
		t.Errorf("teach %q, trace %+v", v.Teach, v.Script.Trace)
	}
	for _, k := range []string{"tree-accept", "tree-depth", "tree-first"} {
		if v.Charts[k] == nil {
			t.Errorf("no chart %s", k)
		}
	}
	line := TreeStatsLine(rep)
	for _, want := range []string{"400 trials accepted", "(" + engine.FormatPercent(excess) + " more)", "0.4 from their exact law", "past the 0.12 a lossless verifier stays under"} {
		if !strings.Contains(line, want) {
			t.Errorf("stats line %q lacks %q", line, want)
		}
	}

	// The tree chart: a node per tree node, each parent midway between
	// its children and a level to the right of its parent, edges labelled a.
	b, err := json.Marshal(v.Script.Chart)
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Series []struct {
			Data  []treeNode `json:"data"`
			Links []treeLink `json:"links"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	nodes, links := chart.Series[0].Data, chart.Series[0].Links
	if len(nodes) != 7 || len(links) != 6 {
		t.Fatalf("%d nodes and %d links", len(nodes), len(links))
	}
	at := map[int]treeNode{}
	for _, n := range nodes {
		at[n.Node] = n
	}
	for _, n := range d.Node {
		if len(n.Children) == 0 {
			continue
		}
		first, last := at[n.Children[0]], at[n.Children[len(n.Children)-1]]
		if me := at[n.Node]; me.Y != (first.Y+last.Y)/2 || first.X <= me.X {
			t.Errorf("node %d at (%v, %v), its children at (%v, %v) and (%v, %v)", n.Node, me.X, me.Y, first.X, first.Y, last.X, last.Y)
		}
	}
	if links[1].Text != "a="+engine.FormatSig(float64(d.Node[2].Accept), 3) || at[5].Text != "#15" || at[0].Text != "root" {
		t.Errorf("edge %+v, node 5 labelled %q", links[1], at[5].Text)
	}
	for _, m := range []string{TreeColorAccept, TreeColorReach} {
		if c := v.Script.Modes[m]; len(c.Fill) != 7 || len(c.Text) != 7 {
			t.Errorf("colouring %s has %d fills", m, len(c.Fill))
		}
	}
	if v.Script.Modes[TreeColorReach].Fill[0] != reachRamp[len(reachRamp)-1] {
		t.Errorf("the root, reached by every trial, is filled %s", v.Script.Modes[TreeColorReach].Fill[0])
	}
}

// A tree without laws says why, and draws nothing.
func TestTreeViewInvalid(t *testing.T) {
	d := &explain.TreeDetail{Nodes: 3, Invalid: "This row has no laws: node 1's candidate 99 is outside the vocabulary."}
	v := NewTreeView(d, nil, nil, nil, TreeOptions{Path: "/runs/r/rows/0", Teach: "/runs/r/rows/0/teach"})
	if v.Summary != d.Invalid || v.Script != nil || len(v.Charts) != 0 {
		t.Errorf("view %+v", v)
	}
}

func TestRampColor(t *testing.T) {
	for _, tt := range []struct {
		t    float64
		want string
	}{{0, acceptRamp[0]}, {1, acceptRamp[4]}, {0.5, acceptRamp[2]}, {-1, acceptRamp[0]}, {2, acceptRamp[4]}, {math.NaN(), acceptRamp[0]}} {
		if got := rampColor(acceptRamp, tt.t); got != tt.want {
			t.Errorf("rampColor(%v) = %s, want %s", tt.t, got, tt.want)
		}
	}
	if textOn("#0b3d7a") != "#ffffff" || textOn("#f8f9fa") != "#212529" {
		t.Error("labels do not read on their fills")
	}
	if reachScale(1) != 1 || reachScale(1e-4) != 0 || math.Abs(reachScale(0.01)-1.0/3) > 1e-12 {
		t.Error("reach is not on a log scale from 0.001 to 1")
	}
}

func TestTreeTeachView(t *testing.T) {
	p1 := 0.2 + 0.3*rand.Float64()
	before := []lesson.Residual{{Token: 10, Target: engine.Float(p1), Residual: engine.Float(p1)}, {Token: 11, Target: engine.Float(0.6 - p1/2), Residual: engine.Float(0.6 - p1/2)}, {Token: 12, Target: 0.1, Residual: 0.1}}
	after := []lesson.Residual{{Token: 10, Target: before[0].Target, Residual: 0}, {Token: 11, Target: before[1].Target, Residual: engine.Float((0.6 - p1/2) / (1 - p1))}, {Token: 12, Target: 0.1, Residual: engine.Float(0.1 / (1 - p1))}}
	st := &lesson.TreeState{Row: 2, Trial: 5, Seed: 9, Nodes: 4, OneHot: true, Path: []int{0, 2}, Tokens: []int{11, 30}, Accepted: 1, Total: 3,
		Parent: []int{-1, 0, 0, -1}, Children: [][]int{{1, 2}, nil, nil, nil}, Candidates: []int{7, 10, 11, 0},
		Text: map[int64]string{11: "␣dog"},
		Steps: []lesson.TreeStep{
			{Step: 1, Node: 0, Child: 1, Sibling: 0, Token: 10, U: 0.9, P: engine.Float(p1), Q: 1, Drawn: -1, Before: before, After: after},
			{Step: 2, Node: 0, Child: 2, Sibling: 1, Token: 11, U: 0.01, P: after[1].Residual, Q: 1, Accepted: true, Drawn: -1, Before: after},
			{Step: 3, Node: 2, Child: -1, Sibling: -1, Token: -1, Drawn: 30, Before: []lesson.Residual{{Token: 30, Target: 0.4, Residual: 0.4}}},
		}}
	v := NewTreeTeachView(st, 7, func(i int) string { return fmt.Sprintf("/teach?step=%d", i+1) })
	if v.Index != 2 || len(v.Items) != 3 || v.Trial != 5 || v.Seed != "9" {
		t.Fatalf("view %+v", v)
	}
	checks := []struct {
		i       int
		title   string
		outcome string
		what    []string
	}{
		{0, "Step 1 of 3: the root tests its first child", "rejected", []string{"r(x) = p(x) = " + engine.FormatSig(float64(p1), 3), "rejected",
			fmt.Sprintf("token 10 goes from %s to 0", engine.FormatSig(float64(p1), 3)), fmt.Sprintf("token 11 ‹␣dog› most, from %s to %s", engine.FormatSig(float64(before[1].Residual), 3), engine.FormatSig(float64(after[1].Residual), 3))}},
		{1, "Step 2 of 3: the root tests its second child", "accepted", []string{"Its earlier sibling was rejected, so it is tested against the residual that rejection left", "accepted", "moves to node 2"}},
		{2, "Step 3 of 3: the draw at node 2 (token 11 ‹␣dog›)", "bonus", []string{"is a leaf", "token 30 (p = 0.4)", "accepted 1 token and emits 2 tokens"}},
	}
	for _, c := range checks {
		it := v.Items[c.i]
		if it.Title != c.title || it.Outcome != c.outcome || it.URL != fmt.Sprintf("/teach?step=%d", c.i+1) || len(it.Cells) != len(TreeTeachHeader) {
			t.Errorf("item %d: %q %s %s, %d cells", c.i, it.Title, it.Outcome, it.URL, len(it.Cells))
		}
		for _, w := range c.what {
			if !strings.Contains(it.What, w) {
				t.Errorf("item %d says %q, want %q in it", c.i, it.What, w)
			}
		}
	}
	if v.Items[1].Walk != "root → node 2 (token 11 ‹␣dog›)" || v.Items[0].Walk != "root" {
		t.Errorf("walks %q, %q", v.Items[0].Walk, v.Items[1].Walk)
	}
	if !strings.Contains(v.Outcome, "accepts 1 token along root → node 2, and emits 2 tokens: 11 ‹␣dog›, 30") {
		t.Errorf("outcome %q", v.Outcome)
	}
	if m := v.Items[0].Marks; len(m) != 1 || m[0].Name != "tested" || m[0].Coord[0] != 0 {
		t.Errorf("the first test's marks %+v", m)
	}
	if !strings.Contains(v.WhyResidual, "In this walk, step 1 rejects token 10 at the root: the residual drops") {
		t.Errorf("why residual %q", v.WhyResidual)
	}
	// The tree of the reached nodes (node 3 is padding), the walk on it.
	if v.Tree == nil || len(v.Tree.Modes["plain"].Fill) != 3 {
		t.Fatalf("the lesson's tree %+v", v.Tree)
	}
	if it := v.Items[1]; !slices.Equal(it.Path, []int{0, 2}) || !slices.Equal(it.Rejected, []int{1}) || it.Node != 0 || it.Child != 2 {
		t.Errorf("step 2's walk: path %v, rejected %v, node %d, child %d", it.Path, it.Rejected, it.Node, it.Child)
	}
	nodes, depth := lessonNodes(st)
	if len(nodes) != 3 || depth != 1 || nodes[2].Rank != 1 || nodes[2].Token != 11 || nodes[0].Parent != -1 {
		t.Errorf("lesson nodes %+v, depth %d", nodes, depth)
	}
}

// With draft distributions a rejection can empty other tokens too; the
// words say which, and one that had nothing to lose is said so.
func TestResidualChange(t *testing.T) {
	s := lesson.TreeStep{Token: 3,
		Before: []lesson.Residual{{Token: 3, Residual: 0.3}, {Token: 4, Residual: 0.2}, {Token: 5, Residual: 0.5}},
		After:  []lesson.Residual{{Token: 3, Residual: 0}, {Token: 4, Residual: 0}, {Token: 5, Residual: 1}}}
	got := residualChange(s, false, nil)
	for _, want := range []string{"r ← max(r − q, 0), normalised", "token 3 goes from 0.3 to 0", "token 4, which the draft proposed at least as much as r gave it, drops to 0 too", "token 5 most, from 0.5 to 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	s.Before[0].Residual = 0
	if got := residualChange(s, false, nil); !strings.Contains(got, "token 3 had no residual mass left to lose") {
		t.Errorf("%q", got)
	}
}
