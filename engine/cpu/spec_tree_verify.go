package cpu

import (
	"context"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/philox"
)

// SpecTree is one row of tree speculative sampling (docs/SEMANTICS.md
// "spec_tree_verify"): a draft tree whose node n holds a candidate token,
// the target distribution after n and, unless the drafts are one-hot, the
// draft distribution its children were drawn from. Verify runs one trial:
// from the root, the children of the current node are tried in sibling
// order against the residual left by the siblings rejected before them;
// the first accepted becomes the current node; when none is, a token is
// drawn from the last residual (from the target at a leaf).
//
// What a node's tests and draw need depends on the node alone, never on
// the trial: its children's thresholds, and the fixed-point weights of the
// residual it draws from. They are computed on the first trial that
// reaches the node and kept (as cumulative sums) for the next, so a
// SpecTree is not safe for concurrent use.
type SpecTree struct {
	tree   *engine.Tree
	tokens []int32
	// target writes the target distribution of node n into p and reports
	// whether it has one; draft writes its draft distribution into q (nil
	// for one-hot drafts).
	target func(n int, p []float32) bool
	draft  func(n int, q []float32)
	vocab  int

	ready []bool
	valid []bool
	// thr and qx hold, per child node c, the test's threshold (the
	// residual probability of c's token when its turn comes) and q(x_c).
	thr, qx []float32
	cdf     []*CDF
	p, q    []float32
	fixed   []uint64
}

// NewSpecTree returns the row of tree, whose node n holds the candidate
// tokens[n] (in [0, vocab) for every node the root reaches but the root).
// target(n, p) must write the target distribution of node n into p (length
// vocab) and report whether it has one; draft(n, q) the draft distribution
// of node n, or draft is nil for one-hot drafts. Both are called at most
// once per node, when a trial first reaches it.
func NewSpecTree(tree *engine.Tree, tokens []int32, vocab int, target func(n int, p []float32) bool, draft func(n int, q []float32)) *SpecTree {
	n := tree.Nodes()
	return &SpecTree{
		tree: tree, tokens: tokens, target: target, draft: draft, vocab: vocab,
		ready: make([]bool, n), valid: make([]bool, n),
		thr: make([]float32, n), qx: make([]float32, n), cdf: make([]*CDF, n),
	}
}

// residualCut is the fixed-point share of a residual of total z that a
// draft probability q removes from a token: q·z in float64, truncated; 0
// for q <= 0 (or NaN) and all of z for q >= 1.
func residualCut(z uint64, q float32) uint64 {
	switch {
	case !(q > 0):
		return 0
	case q >= 1:
		return z
	}
	return uint64(float64(z) * float64(q))
}

// prepare computes what node u's trials need: each child's threshold and
// draft probability, and the cumulative weights of the distribution drawn
// from when the walk stops at u. With p = p_u and the children c_1..c_m of
// tokens x_1..x_m (q_j the draft, one-hot at x_j or node u's draft
// distribution):
//
//	threshold of c_1: p(x_1)
//	R_1 = Weight(float32(p - q_1)), or Weight(p) where that is all 0
//	threshold of c_{j+1}: float32(float64(R_j(x_{j+1})) / float64(Z_j)), Z_j = ΣR_j
//	R_{j+1} = R_j - min(R_j, residualCut(Z_j, q_{j+1})), or R_j where that is all 0
//
// and the stop law is R_m (Weight(p) at a leaf). R_1 and the first
// threshold are spec_verify's, so a chain written as a tree verifies as
// spec_verify does.
func (s *SpecTree) prepare(u int) {
	s.ready[u] = true
	if cap(s.p) < s.vocab {
		s.p = make([]float32, s.vocab)
	}
	p := s.p[:s.vocab]
	s.valid[u] = s.target(u, p)
	children := s.tree.Children[u]
	var q []float32
	if s.draft != nil && len(children) > 0 {
		if cap(s.q) < s.vocab {
			s.q = make([]float32, s.vocab)
		}
		q = s.q[:s.vocab]
		s.draft(u, q)
	}
	qAt := func(c, v int) float32 { // q_j(v) for child c
		if q != nil {
			return q[v]
		}
		if int32(v) == s.tokens[c] {
			return 1
		}
		return 0
	}
	for _, c := range children {
		s.qx[c] = qAt(c, int(s.tokens[c]))
	}
	if !s.valid[u] {
		for _, c := range children {
			s.thr[c] = float32(math.NaN())
		}
		return
	}
	cdf := new(CDF)
	s.cdf[u] = cdf
	if len(children) == 0 {
		cdf.Reset(p, nil)
		return
	}
	if cap(s.fixed) < s.vocab {
		s.fixed = make([]uint64, s.vocab)
	}
	R := s.fixed[:s.vocab]
	c1 := children[0]
	s.thr[c1] = p[s.tokens[c1]]
	var z uint64
	for v, pv := range p {
		R[v] = philox.Weight(float32(pv - qAt(c1, v))) // Weight maps d <= 0 and NaN to 0
		z += R[v]
	}
	if z == 0 {
		for v, pv := range p {
			R[v] = philox.Weight(pv)
			z += R[v]
		}
	}
	for _, c := range children[1:] {
		x := s.tokens[c]
		s.thr[c] = float32(float64(R[x]) / float64(z))
		if q == nil { // one-hot: the cut is all of x's weight and nothing else
			if z > R[x] {
				z -= R[x]
				R[x] = 0
			}
			continue
		}
		var next uint64
		for v, r := range R {
			next += r - min(r, residualCut(z, q[v]))
		}
		if next == 0 {
			continue // the residual stays as it was
		}
		for v, r := range R {
			R[v] = r - min(r, residualCut(z, q[v]))
		}
		z = next
	}
	cdf.ResetFixed(R)
}

// Verify runs one trial of the row with stream st (the row's stream for
// the trial's draw index). Child c is tested with u = philox.U01(word 0 of
// block 2(c-1)) and accepted iff float32(u·q(x_c)) < its threshold; the
// token where the walk stops at node n is drawn with the 64-bit uniform of
// block 2n+1, or is -1 when node n's target has no distribution. path
// receives the accepted path's nodes (the root first) and tokens the
// accepted nodes' tokens then the drawn one, each -1 after (both as long as
// the deepest path plus one). When steps is not nil (one per node) it
// receives the trial's trace. Verify returns the number of accepted tokens.
func (s *SpecTree) Verify(st philox.Stream, path, tokens []int32, steps []engine.TreeStep) (accepted int) {
	for i := range steps {
		steps[i] = engine.TreeStep{Drawn: -1}
	}
	u := 0
	path[0] = 0
	for {
		if !s.ready[u] {
			s.prepare(u)
		}
		next := -1
		for _, c := range s.tree.Children[u] {
			x := philox.U01(st.Block(uint64(2 * (c - 1)))[0])
			ok := float32(x*s.qx[c]) < s.thr[c]
			if steps != nil {
				steps[c] = engine.TreeStep{Tried: true, U: x, P: s.thr[c], Q: s.qx[c], Accepted: ok, Drawn: -1}
			}
			if ok {
				next = c
				break
			}
		}
		if next < 0 {
			break
		}
		tokens[accepted] = s.tokens[next]
		accepted++
		path[accepted] = int32(next)
		u = next
	}
	drawn := int32(-1)
	if s.valid[u] {
		drawn = int32(s.cdf[u].Draw(st.U64(uint64(2*u + 1))))
	}
	tokens[accepted] = drawn
	if steps != nil {
		steps[u].Drawn = drawn
	}
	for i := accepted + 1; i < len(path); i++ {
		path[i], tokens[i] = -1, -1
	}
	return accepted
}

// specTreeVerify runs spec_tree_verify: TreePath and TreeTokens I32 [B, P]
// and TreeAccepted I32 [B] of trial 0, with P the deepest row's depth plus
// one; TreePathTrials and TreeTrials I32 [T, B, P] when T > 1; and the
// TreeTrace of the first min(T, 16) trials.
func (b *Backend) specTreeVerify(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	in, err := treeInputs(run)
	if err != nil {
		return nil, 0, err
	}
	if run.Params.Trials < 0 {
		return nil, 0, fmt.Errorf("spec_tree_verify: trials %d is negative", run.Params.Trials)
	}
	rp, err := run.Params.ForOp(run.Op, in.rows)
	if err != nil {
		return nil, 0, fmt.Errorf("spec_tree_verify: %w", err)
	}
	rows, n, width := in.rows, in.nodes, in.width
	trials := max(run.Params.Trials, 1)
	out := &engine.Output{
		TreePath:     engine.NewTensor("tree_path", engine.I32, rows, width),
		TreeTokens:   engine.NewTensor("tree_tokens", engine.I32, rows, width),
		TreeAccepted: engine.NewTensor("tree_accepted", engine.I32, rows),
	}
	if trials > 1 {
		out.TreePathTrials = engine.NewTensor("tree_path_trials", engine.I32, trials, rows, width)
		out.TreeTrials = engine.NewTensor("tree_trials", engine.I32, trials, rows, width)
	}
	traced := min(trials, maxTraceTrials)
	out.TreeTrace = &engine.TreeTrace{Trials: traced, Rows: rows, Nodes: n, Step: make([]engine.TreeStep, traced*rows*n)}

	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		tree := treeRow(run, rp, s, in, r)
		path := make([]int32, width)
		tokens := make([]int32, width)
		for d := range trials {
			if d%ctxCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			var trace []engine.TreeStep
			if d < traced {
				at := (d*rows + r) * n
				trace = out.TreeTrace.Step[at : at+n]
			}
			accepted := tree.Verify(philox.NewStream(rp.Seed[r], rp.Offset[r], r, d), path, tokens, trace)
			if d == 0 {
				for i := range width {
					putInt32(out.TreePath, r*width+i, path[i])
					putInt32(out.TreeTokens, r*width+i, tokens[i])
				}
				putInt32(out.TreeAccepted, r, int32(accepted))
			}
			if out.TreeTrials != nil {
				for i := range width {
					putInt32(out.TreePathTrials, (d*rows+r)*width+i, path[i])
					putInt32(out.TreeTrials, (d*rows+r)*width+i, tokens[i])
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.TargetLogits, run.Candidates, run.NextToken, run.NextSibling, run.DraftProbs,
		out.TreePath, out.TreeTokens, out.TreeAccepted, out.TreePathTrials, out.TreeTrials) +
		int64(rows)*run.Op.Spec().Kernel.Bytes()
	return out, bytes, nil
}

// treeInput is a spec_tree_verify run's inputs, checked: its trees, its
// candidates as int32, and its sizes (width = the deepest path plus one).
type treeInput struct {
	rows, nodes, vocab, width int
	trees                     []*engine.Tree
	tokens                    []int32
}

// treeInputs checks a spec_tree_verify run's tensors and trees (as both
// backends do): malformed tensors wrap engine.ErrUnsupported, a tree that
// breaks the layout is its *engine.TreeError, and a candidate outside the
// vocabulary on a node the root reaches is an error naming the row and
// the node.
func treeInputs(run *engine.Run) (*treeInput, error) {
	if err := engine.CheckTensor(run.TargetLogits, "target_logits", 3, true); err != nil {
		return nil, err
	}
	if err := engine.CheckTensor(run.Candidates, "candidates", 2, false); err != nil {
		return nil, err
	}
	in := &treeInput{rows: run.TargetLogits.Dim(0), nodes: run.TargetLogits.Dim(1), vocab: run.TargetLogits.Dim(2)}
	if run.Candidates.Dim(0) != in.rows || run.Candidates.Dim(1) != in.nodes {
		return nil, fmt.Errorf("spec_tree_verify: target_logits %s and candidates %s, want [B, N, V] and [B, N]: %w",
			run.TargetLogits.ShapeString(), run.Candidates.ShapeString(), engine.ErrUnsupported)
	}
	if in.nodes < 1 || in.vocab < 1 {
		return nil, fmt.Errorf("spec_tree_verify: target_logits %s has no nodes or no tokens: %w", run.TargetLogits.ShapeString(), engine.ErrUnsupported)
	}
	if run.NextToken != nil && (run.NextToken.Dim(0) != in.rows || run.NextToken.Dim(1) != in.nodes) {
		return nil, fmt.Errorf("spec_tree_verify: retrive_next_token %s, want [%d, %d]: %w", run.NextToken.ShapeString(), in.rows, in.nodes, engine.ErrUnsupported)
	}
	trees, err := run.Trees()
	if err != nil {
		return nil, err
	}
	if q := run.DraftProbs; q != nil {
		if err := engine.CheckTensor(q, "draft_probs", 3, true); err != nil {
			return nil, err
		}
		if q.Dim(0) != in.rows || q.Dim(1) != in.nodes || q.Dim(2) != in.vocab {
			return nil, fmt.Errorf("spec_tree_verify: draft_probs %s, want [%d, %d, %d]: %w", q.ShapeString(), in.rows, in.nodes, in.vocab, engine.ErrUnsupported)
		}
	}
	in.trees = trees
	in.tokens = make([]int32, in.rows*in.nodes)
	for r, t := range trees {
		in.width = max(in.width, t.MaxDepth+1)
		for node := range in.nodes {
			x := run.Candidates.Int(r*in.nodes + node)
			if node > 0 && t.Reached(node) && (x < 0 || x >= int64(in.vocab)) {
				return nil, fmt.Errorf("spec_tree_verify: candidates: row %d, node %d holds token %d, outside [0, %d)", r, node, x, in.vocab)
			}
			if x == int64(int32(x)) {
				in.tokens[r*in.nodes+node] = int32(x)
			}
		}
	}
	return in, nil
}

// treeRow builds row r's SpecTree over the run's tensors: each node's
// target is the renorm of its target logits (targetRow), its draft the
// row of draft_probs, read when a trial first reaches the node.
func treeRow(run *engine.Run, rp *engine.KernelParams, s *scratch, in *treeInput, r int) *SpecTree {
	n, v := in.nodes, in.vocab
	target := func(node int, p []float32) bool {
		return targetRow(run, rp, s, r, (r*n+node)*v, p)
	}
	var draft func(int, []float32)
	if run.DraftProbs != nil {
		draft = func(node int, q []float32) { run.DraftProbs.Floats32((r*n+node)*v, q) }
	}
	return NewSpecTree(in.trees[r], in.tokens[r*n:(r+1)*n], v, target, draft)
}
