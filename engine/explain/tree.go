package explain

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// TreeDetail is a spec_tree_verify row for the row page: the draft tree with
// the exact laws of tree speculative sampling at every node (engine/ref),
// acceptance by depth with its theory, the first emitted token's law beside
// the root's target, how often every output's trials put each node on their
// accepted path, and our backend's trace of its first trials.
type TreeDetail struct {
	// Nodes is N (nodes of the row, reachable or not), MaxDepth the deepest
	// path's accepted tokens.
	Nodes    int `json:"nodes"`
	MaxDepth int `json:"max_depth"`
	// OneHot says the dump has no draft_probs: each child's draft is
	// one-hot at its token.
	OneHot bool `json:"one_hot"`
	// Invalid says why there are no laws ("" when there are).
	Invalid string `json:"invalid,omitempty"`
	// Node describes every node the root reaches, in index order (the
	// root first; a parent always before its children).
	Node []TreeNode `json:"node"`
	// Depth[d] is the probability that d tokens are accepted (MaxDepth+1
	// entries), Accept[d] the acceptance by depth: the probability of
	// accepting one more token once d are accepted (MaxDepth entries).
	Depth  []engine.Float `json:"depth"`
	Accept []engine.Float `json:"accept"`
	// MeanAcceptanceLength is 1 + the mean number of accepted tokens.
	MeanAcceptanceLength engine.Float `json:"mean_acceptance_length"`
	// First is the law of the first emitted token beside the root's target,
	// on the tokens worth drawing: the most probable under either, and
	// every child of the root. TargetTV is their total variation (0 for
	// one-hot drafts with distinct siblings: lossless token by token).
	First    []TreeToken  `json:"first"`
	TargetTV engine.Float `json:"target_tv"`
	// Outputs are the outputs that verified the row (ours first), Trials
	// how many trials each ran, and Reached[i][n] how many of output i's
	// trials put node n on their accepted path (the tree chart's counts
	// beside Node[].Reach).
	Outputs []engine.OutputInfo `json:"outputs"`
	Trials  []int               `json:"trials"`
	Reached [][]int             `json:"reached"`
	// Trace is our backend's trace of the row; NoTrace says why there is
	// none ("" when there is one).
	Trace   *TreeTrace `json:"trace,omitempty"`
	NoTrace string     `json:"no_trace,omitempty"`
}

// TreeNode is one node of a draft tree, for the tree chart: where it sits,
// its token, and the exact laws of its test (at its parent) and of the walk
// once it is reached.
type TreeNode struct {
	Node     int   `json:"node"`
	Parent   int   `json:"parent"` // -1 for the root
	Depth    int   `json:"depth"`
	Rank     int   `json:"rank"` // its place among its siblings, -1 for the root
	Children []int `json:"children"`
	// Token is the candidate token (the root's is the last accepted token,
	// which is not verified).
	Token int64 `json:"token"`
	// The test of the node's token at its parent (0 at the root): P is the
	// parent's target probability of the token, Q its draft probability (1
	// for one-hot drafts), Residual the residual probability when its turn
	// comes (P for a first child; lower once earlier siblings took their
	// mass), Accept = min(1, Residual/Q) the probability that the test
	// passes, Tested the probability that the walk tests it.
	P        engine.Float `json:"p"`
	Q        engine.Float `json:"q"`
	Residual engine.Float `json:"residual"`
	Accept   engine.Float `json:"accept"`
	Tested   engine.Float `json:"tested"`
	// Reach is the probability that the accepted path holds the node, Stop
	// that the walk stops there once it is reached (every child rejected).
	Reach engine.Float `json:"reach"`
	Stop  engine.Float `json:"stop"`
	// Final is the distribution drawn from when the walk stops here (the
	// residual left by rejecting every child, the target at a leaf), beside
	// the node's target, on its most probable tokens and the children's.
	Final []TreeToken `json:"final"`
}

// TreeToken is one token of a node's distributions.
type TreeToken struct {
	Token int `json:"token"`
	// P is the node's target probability, Law the distribution shown
	// beside it (the final residual, or the first token's law).
	P   engine.Float `json:"p"`
	Law engine.Float `json:"law"`
}

// TreeTrace is our backend's trace of one row's first trials: Path[t] and
// Tokens[t] are trial t's accepted path and emitted tokens (Width entries,
// -1 after), Step[t][n] what trial t did at node n.
type TreeTrace struct {
	Trials int                 `json:"trials"`
	Nodes  int                 `json:"nodes"`
	Width  int                 `json:"width"`
	Path   [][]int32           `json:"path"`
	Tokens [][]int32           `json:"tokens"`
	Step   [][]engine.TreeStep `json:"step"`
}

// treeTokensShown bounds the tokens a node's distributions list beyond its
// children's: the most probable under the target, then under the law.
const (
	treeTopP   = 12
	treeTopLaw = 4
)

// treeDetail describes row r of a spec_tree_verify run with the laws of
// ref.SpecTreeVerify (boundary band eps), the trials of every output in
// outs that verified it, and tr, our backend's trace (nil: none).
func treeDetail(run *engine.Run, outs []*engine.Output, tr *TreeTrace, r int, eps float64) *TreeDetail {
	s := ref.SpecTreeVerify(run, r, eps)
	d := &TreeDetail{Nodes: run.Nodes(), OneHot: run.DraftProbs == nil, Trace: tr}
	if s.Invalid != "" {
		d.Invalid = "This row has no laws: " + s.Invalid + "."
		return d
	}
	t := s.Tree
	d.MaxDepth = t.MaxDepth
	d.Depth = floats(s.Depth)
	for k := range t.MaxDepth {
		a := 0.0
		if s.ReachDepth[k] > 0 {
			a = s.ReachDepth[k+1] / s.ReachDepth[k]
		}
		d.Accept = append(d.Accept, engine.Float(a))
	}
	d.MeanAcceptanceLength = engine.Float(1 + s.MeanAccepted)
	d.TargetTV = engine.Float(s.TargetTV)
	for n := range t.Nodes() {
		if !t.Reached(n) {
			continue
		}
		node := TreeNode{Node: n, Parent: t.Parent[n], Depth: t.Depth[n], Rank: t.Rank[n], Children: append([]int{}, t.Children[n]...),
			Token: s.Tokens[n], Reach: engine.Float(s.Reach[n]), Stop: engine.Float(s.Stop[n])}
		if u := t.Parent[n]; u >= 0 {
			x := int(s.Tokens[n])
			q := 1.0
			if s.Draft != nil {
				q = s.Draft[u][x]
			}
			node.P, node.Q, node.Residual = engine.Float(s.Target[u].Probs[x]), engine.Float(q), engine.Float(s.Residual[n])
			node.Accept, node.Tested = engine.Float(s.Accept[n]), engine.Float(s.Tested[n])
		}
		node.Final = treeTokens(s.Target[n].Probs, s.Final[n], s.Tokens, t.Children[n])
		d.Node = append(d.Node, node)
	}
	d.First = treeTokens(s.Target[0].Probs, s.Position[0], s.Tokens, t.Children[0])
	for _, o := range outs {
		path, trials := o.TreePathTrials, 0
		if path != nil && len(path.Shape) == 3 && path.Dim(1) == run.Rows() {
			trials = path.Dim(0)
		} else if path = o.TreePath; path != nil && len(path.Shape) == 2 && path.Dim(0) == run.Rows() {
			trials = 1
		}
		if trials == 0 {
			continue
		}
		width := path.Dim(len(path.Shape) - 1)
		reached := make([]int, t.Nodes())
		for k := range trials {
			for j := range width {
				if n := path.Int((k*run.Rows()+r)*width + j); n >= 0 && n < int64(len(reached)) {
					reached[n]++
				}
			}
		}
		d.Outputs = append(d.Outputs, engine.OutputInfo{Name: o.Name, External: o.External, Kind: "tree"})
		d.Trials = append(d.Trials, trials)
		d.Reached = append(d.Reached, reached)
	}
	return d
}

// treeTokens lists a node's target p beside law on its most probable tokens
// under p, then under law, then its children's tokens.
func treeTokens(p, law []float64, tokens []int64, children []int) []TreeToken {
	shown := map[int]bool{}
	var out []TreeToken
	add := func(t int) {
		if !shown[t] && t >= 0 && t < len(p) {
			shown[t] = true
			out = append(out, TreeToken{Token: t, P: engine.Float(p[t]), Law: engine.Float(law[t])})
		}
	}
	for _, t := range ref.TopIndices(p, treeTopP) {
		add(t)
	}
	for _, t := range ref.TopIndices(law, treeTopP+treeTopLaw) {
		if len(out) >= treeTopP+treeTopLaw {
			break
		}
		add(t)
	}
	for _, c := range children {
		add(int(tokens[c]))
	}
	return out
}

// floats converts float64 values to the report's Float.
func floats(x []float64) []engine.Float {
	out := make([]engine.Float, len(x))
	for i, v := range x {
		out[i] = engine.Float(v)
	}
	return out
}

// checkTreeTrace reports why tr cannot be a trace of a row of n nodes, or "".
func checkTreeTrace(tr *TreeTrace, n int) string {
	if tr.Nodes != n || len(tr.Step) != tr.Trials || len(tr.Path) != tr.Trials || len(tr.Tokens) != tr.Trials {
		return fmt.Sprintf("the stored trace holds %d trials of %d nodes, and the row has %d nodes", tr.Trials, tr.Nodes, n)
	}
	return ""
}
