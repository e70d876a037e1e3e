package ref

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// TreeRef holds the exact laws of tree speculative sampling on one row
// (SEMANTICS.md "spec_tree_verify"), found by enumerating the tree: the
// tree and its candidate tokens are fixed inputs, the randomness is the
// acceptance tests and the draw where the walk stops.
//
// At a node u with target p, the children c_1..c_m (tokens x_j) are tried
// in sibling order against the residual r_j (r_0 = p): child c_j is
// accepted with a_j = min(1, r_{j-1}(x_j)/q_j(x_j)) (1 when q_j(x_j) = 0 <
// r_{j-1}(x_j), 0 when r_{j-1}(x_j) = 0), and on its rejection r_j =
// normalise(max(r_{j-1} - q_j, 0)) (r_{j-1} when that is all zero), q_j
// one-hot at x_j or the draft distribution of u. When every child is
// rejected the token is drawn from r_m: the target itself at a leaf.
type TreeRef struct {
	// Invalid says why the row cannot be judged: a node the root reaches
	// without a distribution, a candidate outside [0, V), or draft probs
	// that are not probabilities.
	Invalid     string
	InvalidRule engine.Rule

	Tree *engine.Tree
	// Tokens are the candidate tokens by node (the root's is not verified).
	Tokens []int64
	// Target are the renorm of each node's target logits (empty for nodes
	// the root does not reach).
	Target []Dist
	// Draft holds each node's draft distribution (nil for leaves), or is
	// nil for one-hot drafts.
	Draft [][]float64
	// For each child node c: Residual[c] is r(x_c), the residual
	// probability of its token when its turn comes (the target's for a
	// first child); Accept[c] the probability that its test passes;
	// Tested[c] the probability that the walk tests it.
	Residual, Accept, Tested []float64
	// Reach[n] is the probability that the accepted path holds node n
	// (1 at the root); Stop[n] the probability that the walk stops at n
	// once there (every child rejected; 1 at a leaf).
	Reach, Stop []float64
	// Final[n] is the law of the token drawn when the walk stops at n: the
	// last residual, the target at a leaf (nil for unreached nodes).
	Final [][]float64
	// Depth[d] is the probability that d tokens are accepted (d = 0..D),
	// ReachDepth[d] that at least d are.
	Depth, ReachDepth []float64
	// Position[j] is the law of the token at position j of the emitted
	// path given that at least j tokens were accepted: a node's accepted
	// child's token, or its final draw, mixed over the nodes of depth j.
	Position [][]float64
	// MeanAccepted is the mean number of accepted tokens.
	MeanAccepted float64
	// TargetTV is the total variation between Position[0] and the root's
	// target: 0 for one-hot drafts with distinct siblings (lossless token
	// by token), the conditioning on the fixed drafts otherwise.
	TargetTV float64
}

// SpecTreeVerify returns the laws of row r of a spec_tree_verify run, with
// the row's temperature and filters applied to every node's target; eps is
// the boundary band (BoundaryEps).
func SpecTreeVerify(run *engine.Run, r int, eps float64) TreeRef {
	var s TreeRef
	tl, cand, dp := run.TargetLogits, run.Candidates, run.DraftProbs
	tree, err := run.Tree(r)
	switch {
	case tl == nil || cand == nil:
		s.invalidate("the run lacks target_logits or candidates", RuleParameter)
		return s
	case err != nil:
		s.invalidate(err.Error(), RuleParameter)
		return s
	case len(tl.Shape) != 3 || len(cand.Shape) != 2 || cand.Dim(0) != tl.Dim(0) || cand.Dim(1) != tl.Dim(1) || tree.Nodes() != tl.Dim(1) || run.NextToken.Dim(0) != tl.Dim(0):
		s.invalidate(fmt.Sprintf("target_logits %s and candidates %s do not fit together (want [B, N, V] and [B, N])", tl.ShapeString(), cand.ShapeString()), RuleParameter)
		return s
	case dp != nil && (len(dp.Shape) != 3 || dp.Dim(0) != tl.Dim(0) || dp.Dim(1) != tl.Dim(1) || dp.Dim(2) != tl.Dim(2)):
		s.invalidate(fmt.Sprintf("draft_probs %s does not fit target_logits %s (want [B, N, V])", dp.ShapeString(), tl.ShapeString()), RuleParameter)
		return s
	case r < 0 || r >= tl.Dim(0):
		s.invalidate(fmt.Sprintf("row %d is outside the batch of %d", r, tl.Dim(0)), RuleParameter)
		return s
	}
	n, v := tl.Dim(1), tl.Dim(2)
	s.Tree = tree
	s.Tokens = make([]int64, n)
	for i := range n {
		s.Tokens[i] = cand.Int(r*n + i)
		if x := s.Tokens[i]; i > 0 && tree.Reached(i) && (x < 0 || x >= int64(v)) {
			s.invalidate(fmt.Sprintf("candidate %d at node %d is outside [0, %d)", x, i, v), engine.RuleTokenRange)
			return s
		}
	}
	var ws Workspace
	t, f := Temperature(run, r), RowFilter(run, r, eps)
	s.Target = make([]Dist, n)
	if dp != nil {
		s.Draft = make([][]float64, n)
	}
	for i := range n {
		if !tree.Reached(i) {
			continue
		}
		ws.Compute(&s.Target[i], Logits{Tensor: tl, Offset: (r*n + i) * v, Len: v, Name: fmt.Sprintf("target logits at node %d", i)}, t, f, false)
		if d := &s.Target[i]; !d.Valid() {
			s.invalidate(d.Invalid, d.InvalidRule)
			return s
		}
		if dp != nil && len(tree.Children[i]) > 0 {
			q := make([]float64, v)
			dp.Floats64((r*n+i)*v, q)
			if msg := probsProblem(q); msg != "" {
				s.invalidate(fmt.Sprintf("draft probs at node %d %s", i, msg), engine.RuleNaN)
				return s
			}
			s.Draft[i] = q
		}
	}
	s.walk()
	return s
}

// walk fills the laws from the targets and drafts, nodes in index order
// (a parent comes before its children).
func (s *TreeRef) walk() {
	tree, n := s.Tree, len(s.Tokens)
	s.Residual, s.Accept, s.Tested = make([]float64, n), make([]float64, n), make([]float64, n)
	s.Reach, s.Stop, s.Final = make([]float64, n), make([]float64, n), make([][]float64, n)
	s.Reach[0] = 1
	var sum exactSum
	for u := range n {
		if !tree.Reached(u) {
			continue
		}
		p := s.Target[u].Probs
		res := p
		stop := 1.0
		for _, c := range tree.Children[u] {
			x := int(s.Tokens[c])
			q := func(j int) float64 {
				if s.Draft != nil {
					return s.Draft[u][j]
				}
				if j == x {
					return 1
				}
				return 0
			}
			rx, qx := res[x], q(x)
			a := 1.0
			switch {
			case rx == 0:
				a = 0
			case qx > 0:
				a = math.Min(1, rx/qx)
			}
			s.Residual[c], s.Accept[c], s.Tested[c] = rx, a, s.Reach[u]*stop
			s.Reach[c] = s.Tested[c] * a
			stop *= 1 - a
			next := make([]float64, len(p))
			sum.reset()
			for j := range next {
				next[j] = math.Max(res[j]-q(j), 0)
				sum.add(next[j])
			}
			if z := sum.value(); z > 0 {
				for j := range next {
					next[j] /= z
				}
				res = next
			}
		}
		s.Stop[u], s.Final[u] = stop, res
	}

	d := tree.MaxDepth
	s.Depth, s.ReachDepth, s.Position = make([]float64, d+1), make([]float64, d+1), make([][]float64, d+1)
	for u := range n {
		if !tree.Reached(u) {
			continue
		}
		k := tree.Depth[u]
		s.Depth[k] += s.Reach[u] * s.Stop[u]
		s.ReachDepth[k] += s.Reach[u]
		if u > 0 {
			s.MeanAccepted += s.Reach[u]
		}
		pos := s.Position[k]
		if pos == nil {
			pos = make([]float64, len(s.Final[u]))
			s.Position[k] = pos
		}
		w := s.Reach[u] * s.Stop[u]
		for j, x := range s.Final[u] {
			pos[j] += w * x
		}
		for _, c := range tree.Children[u] {
			pos[s.Tokens[c]] += s.Reach[c]
		}
	}
	for k, pos := range s.Position {
		if z := s.ReachDepth[k]; z > 0 {
			for j := range pos {
				pos[j] /= z
			}
		}
	}
	var tv float64
	for j, x := range s.Position[0] {
		tv += math.Abs(x - s.Target[0].Probs[j])
	}
	s.TargetTV = tv / 2
}

// invalidate records the first reason the row cannot be judged.
func (s *TreeRef) invalidate(msg string, rule engine.Rule) {
	if s.Invalid == "" {
		s.Invalid, s.InvalidRule = msg, rule
	}
}
