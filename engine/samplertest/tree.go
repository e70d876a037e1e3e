package samplertest

import (
	"math"
	"math/rand/v2"
)

// TreeMistake is a way a tree speculative verifier can be wrong, or
// relaxed on purpose.
type TreeMistake int

// The tree verifiers.
const (
	// TreeCorrect is lossless tree verification (docs/SEMANTICS.md
	// "spec_tree_verify"): each child is tested against the residual the
	// siblings rejected before it left.
	TreeCorrect TreeMistake = iota
	// SiblingAgainstTarget tests every child against the node's original
	// target p instead of the residual; the draw after the last rejection
	// is still from the residual.
	SiblingAgainstTarget
	// RelaxedThresholds is sgl-kernel's tree_speculative_sampling_target_only
	// (one-hot drafts): one coin per node, child x accepted when coin <=
	// (sum of p over the children tried so far, x included) / ThresholdAcc,
	// or when p(x) >= ThresholdSingle; the draw after the last rejection is
	// from p without the rejected tokens. At thresholds 1 it is lossless.
	RelaxedThresholds
)

// KaryTree returns the links (first child, next sibling) of the full tree
// in which every node above depth depth has topk children, in SGLang's
// breadth-first layout: node 0 is the root and a child's index is above
// its parent's.
func KaryTree(topk, depth int) (next, sibling []int64) {
	n, level := 1, 1
	for range depth {
		level *= topk
		n += level
	}
	next, sibling = make([]int64, n), make([]int64, n)
	for i := range next {
		next[i], sibling[i] = -1, -1
	}
	child := 1
	for u := 0; u < n && child < n; u++ {
		next[u] = int64(child)
		for j := range topk {
			if j+1 < topk {
				sibling[child+j] = int64(child + j + 1)
			}
		}
		child += topk
	}
	return next, sibling
}

// Tree is one row of tree speculative verification in float64: the links
// of the tree, each node's candidate token, its target distribution and
// (nil for one-hot drafts) the draft distribution of its children.
type Tree struct {
	Next, Sibling []int64
	Tokens        []int64
	Target        [][]float64
	Draft         [][]float64
	Mistake       TreeMistake
	// ThresholdSingle and ThresholdAcc are RelaxedThresholds' knobs.
	ThresholdSingle, ThresholdAcc float64
}

// children returns node u's children in sibling order.
func (t *Tree) children(u int) []int {
	var out []int
	for c := t.Next[u]; c != -1; c = t.Sibling[c] {
		out = append(out, int(c))
	}
	return out
}

// q returns the draft probability of token v for child c of node u.
func (t *Tree) q(u, c, v int) float64 {
	if t.Draft != nil {
		return t.Draft[u][v]
	}
	if int64(v) == t.Tokens[c] {
		return 1
	}
	return 0
}

// Trial verifies the tree once and returns the accepted path (the root
// first) and the emitted tokens (the accepted nodes' tokens, then the
// drawn one), each -1 after, width entries each.
func (t *Tree) Trial(rng *rand.Rand, width int) (path, tokens []int64) {
	path, tokens = make([]int64, width), make([]int64, width)
	for i := range path {
		path[i], tokens[i] = -1, -1
	}
	path[0] = 0
	u, a := 0, 0
	for {
		next, r := t.step(rng, u)
		if next < 0 {
			tokens[a] = int64(NewCDF(r).Draw(rng.Float64()))
			return path, tokens
		}
		tokens[a] = t.Tokens[next]
		a++
		path[a] = int64(next)
		u = next
	}
}

// step tries node u's children and returns the accepted one, or -1 and the
// distribution the token is then drawn from.
func (t *Tree) step(rng *rand.Rand, u int) (int, []float64) {
	p := t.Target[u]
	r := append([]float64(nil), p...)
	if t.Mistake == RelaxedThresholds {
		coin, acc := rng.Float64(), 0.0
		for _, c := range t.children(u) {
			x := t.Tokens[c]
			acc += p[x]
			if coin <= acc/t.ThresholdAcc || p[x] >= t.ThresholdSingle {
				return c, nil
			}
			r[x] = 0
		}
		return -1, r
	}
	for _, c := range t.children(u) {
		x := int(t.Tokens[c])
		test := r
		if t.Mistake == SiblingAgainstTarget {
			test = p
		}
		px, qx := test[x]/sum(test), t.q(u, c, x)
		a := 1.0
		switch {
		case px == 0:
			a = 0
		case qx > 0:
			a = math.Min(1, px/qx)
		}
		if rng.Float64() < a {
			return c, nil
		}
		res := make([]float64, len(r))
		z := sum(r)
		for v := range r {
			res[v] = math.Max(r[v]/z-t.q(u, c, v), 0)
		}
		if sum(res) > 0 {
			r = res
		}
	}
	return -1, r
}

// sum returns the sum of x.
func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}
