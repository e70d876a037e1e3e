package view

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
)

// The charts of a draft tree: the tree itself as an ECharts graph laid out
// here (go-echarts' graph types cannot carry a label per edge, so its
// options are written out below), acceptance by depth, the law of the
// accepted tokens, the first token's law, and a node's target beside the
// residual drawn from when the walk stops there.

// Layout of the tree chart, in pixels at its usual width: depth runs left
// to right, the leaves top to bottom.
const (
	treeWidth    = 1000 // the span of the deepest level
	treeColMin   = 150
	treeColMax   = 420
	treeRowWide  = 38 // between leaves, up to treeManyLeaves of them
	treeRowTight = 30
	treeMargin   = 90 // above and below the leaves
	treeMinH     = 260
	treeBoxH     = 24

	treeManyLeaves = 20
)

// treeNode is one node of the graph series: ECharts reads name, x, y,
// value, symbolSize, itemStyle and label; the page script reads text (the
// label), tip (the tooltip) and node.
type treeNode struct {
	Name       string         `json:"name"`
	X          float64        `json:"x"`
	Y          float64        `json:"y"`
	Node       int            `json:"node"`
	SymbolSize [2]float64     `json:"symbolSize"`
	ItemStyle  map[string]any `json:"itemStyle"`
	Label      map[string]any `json:"label"`
	Text       string         `json:"text"`
	Tip        string         `json:"tip,omitempty"`
	Silent     bool           `json:"silent,omitempty"`
}

// treeLink is one edge: from a node's parent to the node; text is its
// label, a = the node's acceptance probability.
type treeLink struct {
	Source string `json:"source"`
	Target string `json:"target"`
	Node   int    `json:"node"`
	Text   string `json:"text"`
}

// TreeColors is one colouring of the tree chart's nodes, in the order of
// its data: each node's fill and its label's colour.
type TreeColors struct {
	Fill []string `json:"fill"`
	Text []string `json:"text"`
}

// treeSlots lays out nodes (the root first): each leaf its own row (in
// sibling order, depth first), a parent midway between its first and last
// child. It returns each node's row and the number of leaves.
func treeSlots(nodes []explain.TreeNode) (map[int]float64, int) {
	children := map[int][]int{}
	for _, n := range nodes {
		children[n.Node] = n.Children
	}
	slot := map[int]float64{}
	leaves := 0
	var walk func(n int)
	walk = func(n int) {
		cs := children[n]
		if len(cs) == 0 {
			slot[n] = float64(leaves)
			leaves++
			return
		}
		for _, c := range cs {
			walk(c)
		}
		slot[n] = (slot[cs[0]] + slot[cs[len(cs)-1]]) / 2
	}
	if len(nodes) > 0 {
		walk(nodes[0].Node)
	}
	return slot, leaves
}

// treeRowHeight is the distance between two leaves of the tree chart; a
// compact chart (the teaching page's) packs them closer.
func treeRowHeight(leaves int, compact bool) float64 {
	row := float64(treeRowWide)
	if leaves > treeManyLeaves {
		row = treeRowTight
	}
	if compact {
		row = math.Max(treeBoxH+4, row*0.75)
	}
	return row
}

// treeHeight is the height in pixels of the chart of nodes.
func treeHeight(nodes []explain.TreeNode, compact bool) int {
	_, leaves := treeSlots(nodes)
	return max(treeMinH, int(float64(leaves)*treeRowHeight(leaves, compact))+treeMargin)
}

// treeGraph draws a tree: nodes (the root first, every parent before its
// children, maxDepth the deepest) labelled with their token and filled by
// colors (in the order of nodes, then the pads of a chain), the edge into
// each node labelled edge(n) (no labels when edge is nil), each node's
// tooltip tip(n). The page script outlines the walk of a step on it.
func treeGraph(nodes []explain.TreeNode, maxDepth int, names Tokens, colors TreeColors, compact bool, edge, tip func(explain.TreeNode) string) map[string]any {
	slot, leaves := treeSlots(nodes)
	col := float64(treeColMax)
	if maxDepth > 0 {
		col = math.Min(treeColMax, math.Max(treeColMin, treeWidth/float64(maxDepth)))
	}
	row := treeRowHeight(leaves, compact)
	var data []treeNode
	var links []treeLink
	for i, n := range nodes {
		text := names.Short(n.Token)
		if n.Parent < 0 {
			text = "root"
		} else if utf8.RuneCountInString(text) > 12 {
			text = string([]rune(text)[:11]) + "…"
		}
		w := math.Min(120, math.Max(40, 14+7.5*float64(utf8.RuneCountInString(text))))
		tn := treeNode{
			Name: "n" + strconv.Itoa(n.Node), X: float64(n.Depth) * col, Y: slot[n.Node] * row, Node: n.Node,
			SymbolSize: [2]float64{w, treeBoxH},
			ItemStyle:  map[string]any{"color": colors.Fill[i], "borderColor": "#868e96", "borderWidth": 1},
			Label:      map[string]any{"color": colors.Text[i]},
			Text:       text,
		}
		if tip != nil {
			tn.Tip = tip(n)
		}
		data = append(data, tn)
		if n.Parent >= 0 {
			l := treeLink{Source: "n" + strconv.Itoa(n.Parent), Target: "n" + strconv.Itoa(n.Node), Node: n.Node}
			if edge != nil {
				l.Text = edge(n)
			}
			links = append(links, l)
		}
	}
	if leaves <= 1 {
		// A chain is one row high: two invisible nodes give the view a
		// height to fit it in.
		for i, y := range []float64{-2 * row, 2 * row} {
			data = append(data, treeNode{Name: "pad" + strconv.Itoa(i), Y: y, Node: -1, SymbolSize: [2]float64{0, 0},
				ItemStyle: map[string]any{"opacity": 0}, Label: map[string]any{"show": false}, Silent: true})
		}
	}
	return map[string]any{
		"animation": false,
		"tooltip":   map[string]any{"show": true, "trigger": "item"},
		"series": []any{map[string]any{
			"id": "tree", "type": "graph", "layout": "none", "roam": true,
			"left": 60, "right": 100, "top": 30, "bottom": 30,
			"symbol":    "roundRect",
			"label":     map[string]any{"show": true, "position": "inside", "fontSize": 12},
			"edgeLabel": map[string]any{"show": edge != nil, "fontSize": 11, "color": colorRef, "backgroundColor": "rgba(255,255,255,0.85)", "padding": []int{1, 3}, "borderRadius": 3},
			"lineStyle": map[string]any{"color": "#adb5bd", "width": 1.5, "opacity": 1},
			"emphasis":  map[string]any{"focus": "none", "scale": false},
			"data":      data,
			"links":     links,
		}},
	}
}

// treeChart draws a row's tree filled by the colouring color, with a on
// its edges and each node's laws in its tooltip.
func treeChart(d *explain.TreeDetail, names Tokens, color string) map[string]any {
	return treeGraph(d.Node, d.MaxDepth, names, treeColorModes(d)[color], false,
		func(n explain.TreeNode) string { return "a=" + engine.FormatSig(float64(n.Accept), 3) },
		func(n explain.TreeNode) string { return nodeTip(d, n, names) })
}

// nodeTip says everything known of node n in a few lines, for its tooltip.
func nodeTip(d *explain.TreeDetail, n explain.TreeNode, names Tokens) string {
	var lines []string
	if n.Parent < 0 {
		lines = append(lines, "the root: after token "+names.Label(n.Token)+", the last accepted one",
			"every trial starts here; it stops here, accepting nothing, with probability "+engine.FormatSig(float64(n.Stop), 3))
	} else {
		lines = append(lines,
			fmt.Sprintf("node %d: token %s", n.Node, names.Label(n.Token)),
			fmt.Sprintf("child %d of node %d, depth %d", n.Rank+1, n.Parent, n.Depth),
			fmt.Sprintf("its test: r(x) = %s (target p(x) = %s), q(x) = %s", engine.FormatSig(float64(n.Residual), 3), engine.FormatSig(float64(n.P), 3), engine.FormatSig(float64(n.Q), 3)),
			fmt.Sprintf("a = min(1, r/q) = %s; tested with probability %s", engine.FormatSig(float64(n.Accept), 3), engine.FormatSig(float64(n.Tested), 3)),
			fmt.Sprintf("on the accepted path with probability %s; stops there with probability %s", engine.FormatSig(float64(n.Reach), 3), engine.FormatSig(float64(n.Stop), 3)))
	}
	for i, o := range d.Outputs {
		if s := observedShare(d, i, n.Node); s != "" {
			lines = append(lines, o.Label()+": on the path in "+s)
		}
	}
	return strings.Join(lines, "\n")
}

// Colour ramps of the tree's fills: acceptance in blues, reach in greens.
var (
	acceptRamp = []string{"#f8f9fa", "#a5d8ff", "#4dabf7", "#1971c2", "#0b3d7a"}
	reachRamp  = []string{"#f8f9fa", "#d3f9d8", "#8ce99a", "#37b24d", "#1b5e20"}
)

// treeRootFill fills the root when the colouring is acceptance: it has no
// test.
const treeRootFill = "#dee2e6"

// reachFloor is the least reach probability the log scale of reach tells
// apart from 0.
const reachFloor = 1e-3

// treeColorModes returns both colourings of the tree chart's nodes, in the
// order of d.Node (the pads of a chain after them).
func treeColorModes(d *explain.TreeDetail) map[string]TreeColors {
	acc, reach := TreeColors{}, TreeColors{}
	add := func(c *TreeColors, fill string) {
		c.Fill = append(c.Fill, fill)
		c.Text = append(c.Text, textOn(fill))
	}
	for _, n := range d.Node {
		if n.Parent < 0 {
			add(&acc, treeRootFill)
		} else {
			add(&acc, rampColor(acceptRamp, float64(n.Accept)))
		}
		add(&reach, rampColor(reachRamp, reachScale(float64(n.Reach))))
	}
	if _, leaves := treeSlots(d.Node); leaves <= 1 {
		for range 2 {
			add(&acc, "#ffffff")
			add(&reach, "#ffffff")
		}
	}
	return map[string]TreeColors{TreeColorAccept: acc, TreeColorReach: reach}
}

// reachScale maps a reach probability to [0, 1] on a log scale from
// reachFloor to 1.
func reachScale(r float64) float64 {
	if !(r > reachFloor) {
		return 0
	}
	return math.Min(1, (math.Log10(r)-math.Log10(reachFloor))/-math.Log10(reachFloor))
}

// treeLegend says a colouring's scale.
func treeLegend(mode string) TreeLegend {
	ramp, ticks := acceptRamp, []string{"0", "0.25", "0.5", "0.75", "1"}
	title := "Fill: a = min(1, r/q), the probability that a node's test passes when its turn comes (the root has no test)."
	if mode == TreeColorReach {
		ramp, ticks = reachRamp, []string{"≤ 0.001", "0.01", "0.1", "1"}
		title = "Fill: the probability that the accepted path holds the node, on a log scale."
	}
	stops := make([]string, len(ramp))
	for i, c := range ramp {
		stops[i] = fmt.Sprintf("%s %d%%", c, 100*i/(len(ramp)-1))
	}
	return TreeLegend{Title: title, Gradient: "linear-gradient(to right, " + strings.Join(stops, ", ") + ")", Ticks: ticks}
}

// rampColor interpolates ramp (evenly spaced stops) at t in [0, 1].
func rampColor(ramp []string, t float64) string {
	if !finite(t) {
		t = 0
	}
	t = math.Min(1, math.Max(0, t)) * float64(len(ramp)-1)
	i := min(int(t), len(ramp)-2)
	f := t - float64(i)
	a, b := rgb(ramp[i]), rgb(ramp[i+1])
	var c [3]int
	for k := range c {
		c[k] = int(math.Round(a[k] + f*(b[k]-a[k])))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// rgb reads "#rrggbb".
func rgb(hex string) [3]float64 {
	var c [3]float64
	for k := range c {
		v, _ := strconv.ParseUint(hex[1+2*k:3+2*k], 16, 8)
		c[k] = float64(v)
	}
	return c
}

// textOn is the label colour that reads on fill: white on dark fills.
func textOn(fill string) string {
	c := rgb(fill)
	if (0.2126*c[0]+0.7152*c[1]+0.0722*c[2])/255 < 0.5 {
		return "#ffffff"
	}
	return "#212529"
}

// treeAcceptChart draws acceptance by depth: each output's rate of
// accepting one more token among its trials that accepted d, against the
// exact rate.
func treeAcceptChart(d *explain.TreeDetail, reps map[string]*engine.RowReport) map[string]any {
	n := len(d.Accept)
	xs := make([]string, n)
	theory := make([]opts.LineData, n)
	for k := range n {
		xs[k] = fmt.Sprintf("%d → %d", k, k+1)
		theory[k] = opts.LineData{Value: finiteOr(float64(d.Accept[k]), false)}
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Acceptance by depth", Subtitle: "of the trials that accepted d tokens, the share that accepted one more"}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "accepted tokens d → d + 1", NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "acceptance rate", NameLocation: "middle", NameGap: 45, Min: 0, Max: 1}),
	)...)
	for i, o := range d.Outputs {
		rate := make([]opts.BarData, n)
		for k := range n {
			rate[k] = opts.BarData{Value: "-"}
		}
		if rep := reps[o.Name]; rep != nil && rep.Spec != nil {
			for _, p := range rep.Spec.Positions {
				if p.Position < n && p.Reached > 0 {
					rate[p.Position] = opts.BarData{Value: finiteOr(float64(p.Rate), false)}
				}
			}
		}
		c.AddSeries(o.Label(), rate, charts.WithItemStyleOpts(opts.ItemStyle{Color: outputColors[i%len(outputColors)], Opacity: opts.Float(0.8)}))
	}
	l := charts.NewLine()
	l.AddSeries("theory: exact tree sampling", theory,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 11}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2}))
	c.Overlap(l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// treeDepthChart draws the law of the accepted tokens: each output's share
// of trials that accepted exactly d against the exact law.
func treeDepthChart(d *explain.TreeDetail, reps map[string]*engine.RowReport) map[string]any {
	n := len(d.Depth)
	xs := make([]string, n)
	theory := make([]opts.LineData, n)
	for k := range n {
		xs[k] = strconv.Itoa(k)
		theory[k] = opts.LineData{Value: finiteOr(float64(d.Depth[k]), false)}
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "Accepted tokens per trial", Subtitle: fmt.Sprintf("mean acceptance length %s in theory", engine.FormatSig(float64(d.MeanAcceptanceLength), 3))}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "tokens accepted (the depth where the walk stopped)", NameLocation: "middle", NameGap: 28}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "share of the trials", NameLocation: "middle", NameGap: 45, Min: 0}),
	)...)
	for i, o := range d.Outputs {
		share := make([]opts.BarData, n)
		for k := range n {
			share[k] = opts.BarData{Value: "-"}
		}
		if rep := reps[o.Name]; rep != nil && rep.Spec != nil && rep.Spec.Trials > 0 {
			for k, e := range rep.Spec.Emitted {
				if k < n {
					share[k] = opts.BarData{Value: float64(e) / float64(rep.Spec.Trials)}
				}
			}
		}
		c.AddSeries(o.Label(), share, charts.WithItemStyleOpts(opts.ItemStyle{Color: outputColors[i%len(outputColors)], Opacity: opts.Float(0.8)}))
	}
	l := charts.NewLine()
	l.AddSeries("exact law: P(d accepted)", theory,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(true), Symbol: "diamond", SymbolSize: 11}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorAllowed}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorAllowed, Type: "dashed", Width: 2}))
	c.Overlap(l)
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// treeFirstChart draws the first emitted token's law beside the root's
// target, on the tokens worth drawing.
func treeFirstChart(d *explain.TreeDetail, names Tokens) map[string]any {
	xs := make([]string, len(d.First))
	p := make([]opts.BarData, len(d.First))
	law := make([]opts.BarData, len(d.First))
	for i, t := range d.First {
		xs[i] = names.Axis(int64(t.Token))
		p[i] = opts.BarData{Value: finiteOr(float64(t.P), false)}
		law[i] = opts.BarData{Value: finiteOr(float64(t.Law), false)}
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: "The first emitted token: its exact law beside the root's target", Subtitle: "total variation " + engine.FormatSig(float64(d.TargetTV), 4)}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "60", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable under the target first, then the root's children", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "probability", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	c.AddSeries("target p at the root", p, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
	c.AddSeries("law of the first emitted token", law, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorNote}))
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}

// treeNodeChart draws node n's target beside the distribution the walk
// draws from when it stops there: the residual left by rejecting every
// child, or the target itself at a leaf.
func treeNodeChart(n explain.TreeNode, names Tokens) map[string]any {
	xs := make([]string, len(n.Final))
	p := make([]opts.BarData, len(n.Final))
	law := make([]opts.BarData, len(n.Final))
	for i, t := range n.Final {
		xs[i] = names.Axis(int64(t.Token))
		p[i] = opts.BarData{Value: finiteOr(float64(t.P), false)}
		law[i] = opts.BarData{Value: finiteOr(float64(t.Law), false)}
	}
	where := "the root"
	if n.Parent >= 0 {
		where = fmt.Sprintf("node %d (token %s)", n.Node, names.Label(n.Token))
	}
	title := fmt.Sprintf("At %s: the target p, and the residual the walk draws from when it stops here", where)
	leaf := len(n.Children) == 0
	if leaf {
		title = fmt.Sprintf("At %s, a leaf: the target p the bonus token is drawn from", where)
	}
	c := charts.NewBar()
	c.SetXAxis(xs)
	c.SetGlobalOptions(append(frame(opts.Title{Title: title}, true, "axis", opts.Grid{Left: "70", Right: "20", Top: "50", Bottom: "80"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "token, most probable under p first, then the children's", NameLocation: "middle", NameGap: 30}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "probability", NameLocation: "middle", NameGap: 50, Min: 0}),
	)...)
	c.AddSeries("p: target", p, charts.WithSeriesId(seriesP), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorRef}))
	if !leaf {
		c.AddSeries("residual after every child is rejected, normalised", law, charts.WithSeriesId(seriesResidual), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorResidual}))
	}
	plainData(c.MultiSeries)
	c.Validate()
	return c.JSON()
}
