package lesson

import (
	"context"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/philox"
)

// TreeLesson is the state of the tree teaching mode, all of it in the
// URL: which trial of the row to step through, with which seed, and how
// many steps have been shown.
type TreeLesson struct {
	// Trial is the trial (the Philox draw index) whose verification is
	// stepped through; trial t of our backend on the row's seed is the
	// same verification.
	Trial int
	// Seed seeds the Philox stream (nil: the row's seed).
	Seed *uint64
	// Steps is how many steps are shown (0: all of them).
	Steps int
}

// TreeState is one verification of a draft tree, node by node and sibling
// by sibling, as the CPU twin makes it (engine/cpu SpecTree: the same
// uniforms, thresholds and draw as the kernels), with the residual before
// and after each test in float64 on the tokens worth drawing.
type TreeState struct {
	Row   int    `json:"row"`
	Trial int    `json:"trial"`
	Seed  uint64 `json:"seed"`
	// Nodes is N, Vocab V; OneHot says each child's draft is one-hot at its
	// token (the dump has no draft_probs).
	Nodes  int  `json:"nodes"`
	Vocab  int  `json:"vocab"`
	OneHot bool `json:"one_hot"`
	// Invalid says why nothing can be taught (the rest is then empty).
	Invalid string `json:"invalid,omitempty"`
	// Parent, Children and Candidates are the tree, for drawing it:
	// node n's parent (-1 for the root and for nodes the root does not
	// reach), its children in sibling order, and its candidate token.
	Parent     []int   `json:"parent"`
	Children   [][]int `json:"children"`
	Candidates []int   `json:"candidates"`
	// Path and Tokens are the trial's accepted path (the root first) and
	// emitted tokens (the accepted nodes' tokens, then the drawn one);
	// Accepted is the number of accepted tokens.
	Path     []int `json:"path"`
	Tokens   []int `json:"tokens"`
	Accepted int   `json:"accepted"`
	// Steps are the tests in the order the walk makes them, then the draw;
	// Total is how many there are (Steps holds the first TreeLesson.Steps
	// of them, or all).
	Steps []TreeStep `json:"steps"`
	Total int        `json:"total"`
	// Text is the visible text of the token ids above, when the run has a
	// tokenizer (NameTokens).
	Text map[int64]string `json:"text,omitempty"`
}

// NameTokens fills st.Text with the visible text of every token id the
// lesson shows (name gives it, false for an id it does not define).
func (st *TreeState) NameTokens(name func(id int64) (string, bool)) {
	if name == nil {
		return
	}
	text := map[int64]string{}
	add := func(id int) {
		if id < 0 {
			return
		}
		if s, ok := name(int64(id)); ok {
			text[int64(id)] = s
		}
	}
	for _, t := range st.Tokens {
		add(t)
	}
	for n, t := range st.Candidates {
		if n == 0 || st.Parent[n] >= 0 {
			add(t)
		}
	}
	for _, s := range st.Steps {
		add(s.Token)
		add(s.Drawn)
		for _, r := range s.Before {
			add(r.Token)
		}
		for _, r := range s.After {
			add(r.Token)
		}
	}
	if len(text) > 0 {
		st.Text = text
	}
}

// TreeStep is one step of a tree lesson: the test of one child at the
// walk's current node, or (Child -1) the draw where the walk stopped.
type TreeStep struct {
	// Step counts from 1.
	Step int `json:"step"`
	// Node is the walk's current node; Child the child tested (-1 for the
	// draw), Sibling its place among the node's children, Token its token.
	Node    int `json:"node"`
	Child   int `json:"child"`
	Sibling int `json:"sibling"`
	Token   int `json:"token"`
	// U, P and Q are the test as the kernels make it: accepted iff
	// float32(U·Q) < P, with P the residual probability of the token (the
	// target's for a first child) and Q its draft probability.
	U        engine.Float `json:"u"`
	P        engine.Float `json:"p"`
	Q        engine.Float `json:"q"`
	Accepted bool         `json:"accepted"`
	// Drawn is the token drawn at the draw step (-1 otherwise).
	Drawn int `json:"drawn"`
	// Before is the residual the test is made against, After the residual
	// a rejection leaves (nil when accepted): the node's target beside it
	// on its most probable tokens and its children's. At the draw, Before
	// is the distribution drawn from.
	Before []Residual `json:"before"`
	After  []Residual `json:"after,omitempty"`
}

// Residual is one token of a node's residual beside its target.
type Residual struct {
	Token    int          `json:"token"`
	Target   engine.Float `json:"target"`
	Residual engine.Float `json:"residual"`
}

// treeTopShown is how many of a node's most probable tokens a step lists
// beside its children's.
const treeTopShown = 12

// TeachTree steps through trial l.Trial of row r of a spec_tree_verify
// run. A run that is not spec_tree_verify, or a row or trial out of range,
// gives an *Error; ctx's end, ctx's error.
func TeachTree(ctx context.Context, run *engine.Run, r int, l TreeLesson) (*TreeState, error) {
	if run.Op != engine.OpSpecTreeVerify || run.TargetLogits == nil || run.Candidates == nil {
		return nil, &Error{Msg: fmt.Sprintf("The tree teaching mode steps through a draft tree's verification, and %s is a %s dump, not spec_tree_verify.", run.Source, run.Op)}
	}
	if r < 0 || r >= run.Rows() {
		return nil, &Error{Msg: fmt.Sprintf("There is no row %d: this run has rows 0 to %d.", r, run.Rows()-1)}
	}
	if l.Trial < 0 || l.Trial > engine.MaxTrials || l.Steps < 0 {
		return nil, &Error{Msg: fmt.Sprintf("Trial must be in [0, %d] and steps at least 0, not trial %d and %d steps.", engine.MaxTrials, l.Trial, l.Steps)}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tree, err := run.Tree(r)
	if err != nil {
		return nil, &Error{Msg: sentence(err.Error())}
	}
	n, v := run.Nodes(), run.Vocab()
	st := &TreeState{Row: r, Trial: l.Trial, Nodes: n, Vocab: v, OneHot: run.DraftProbs == nil}
	if r < len(run.Params.Seed) {
		st.Seed = run.Params.Seed[r]
	}
	if l.Seed != nil {
		st.Seed = *l.Seed
	}
	kp, err := run.Params.ForOp(run.Op, run.Rows())
	if err != nil {
		return nil, &Error{Msg: sentence(err.Error())}
	}
	tokens := make([]int32, n)
	st.Parent = append([]int(nil), tree.Parent...)
	for i := range n {
		tokens[i] = int32(run.Candidates.Int(r*n + i))
		st.Children = append(st.Children, append([]int{}, tree.Children[i]...))
		st.Candidates = append(st.Candidates, int(tokens[i]))
		if x := tokens[i]; i > 0 && tree.Reached(i) && (x < 0 || int(x) >= v) {
			st.Invalid = fmt.Sprintf("Node %d's candidate %d is outside the vocabulary [0, %d).", i, x, v)
			return st, nil
		}
	}
	targets := make([][]float32, n) // p of each node the walk visits
	target := func(node int, p []float32) bool {
		x, w := make([]float32, v), make([]float32, v)
		run.TargetLogits.Floats32((r*n+node)*v, x)
		t := kp.Temperature[r]
		if !cpu.Weights(x, t, w) {
			return false
		}
		var keep []bool
		if t > 0 && kp.Filtered(r, v) {
			keep = make([]bool, v)
			cpu.Filter(w, kp.TopK[r], kp.TopP[r], kp.MinP[r], kp.Order, kp.Ties, keep)
		}
		cpu.Renorm(w, keep, p)
		targets[node] = append([]float32(nil), p...)
		return true
	}
	var draft func(int, []float32)
	if run.DraftProbs != nil {
		draft = func(node int, q []float32) { run.DraftProbs.Floats32((r*n+node)*v, q) }
	}
	width := tree.MaxDepth + 1
	path, emitted := make([]int32, width), make([]int32, width)
	steps := make([]engine.TreeStep, n)
	st.Accepted = cpu.NewSpecTree(tree, tokens, v, target, draft).Verify(philox.NewStream(st.Seed, offset(run, r), r, l.Trial), path, emitted, steps)
	for i := range width {
		st.Path = append(st.Path, int(path[i]))
		st.Tokens = append(st.Tokens, int(emitted[i]))
	}

	// The walk's steps, node by node, with the residual in float64 on the
	// float32 target the kernels verify against.
	for a := 0; a <= st.Accepted; a++ {
		u := int(path[a])
		p := targets[u]
		if p == nil {
			st.Invalid = fmt.Sprintf("Node %d's target logits have no distribution (a NaN or +Inf logit, or every token masked).", u)
			break
		}
		shown := shownTokens(p, tokens, tree.Children[u])
		res := make([]float64, v)
		for i, x := range p {
			res[i] = float64(x)
		}
		var q []float64
		if run.DraftProbs != nil && len(tree.Children[u]) > 0 {
			q = make([]float64, v)
			run.DraftProbs.Floats64((r*n+u)*v, q)
		}
		for j, c := range tree.Children[u] {
			s := steps[c]
			if !s.Tried {
				break
			}
			step := TreeStep{Step: len(st.Steps) + 1, Node: u, Child: c, Sibling: j, Token: int(tokens[c]),
				U: engine.Float(s.U), P: engine.Float(s.P), Q: engine.Float(s.Q), Accepted: s.Accepted, Drawn: -1,
				Before: residuals(shown, p, res)}
			if !s.Accepted {
				res = nextResidual(res, q, int(tokens[c]))
				step.After = residuals(shown, p, res)
			}
			st.Steps = append(st.Steps, step)
		}
		if a == st.Accepted {
			st.Steps = append(st.Steps, TreeStep{Step: len(st.Steps) + 1, Node: u, Child: -1, Sibling: -1, Token: -1,
				Drawn: int(steps[u].Drawn), Before: residuals(shown, p, res)})
		}
	}
	st.Total = len(st.Steps)
	if l.Steps > 0 && l.Steps < len(st.Steps) {
		st.Steps = st.Steps[:l.Steps]
	}
	return st, nil
}

// offset returns row r's counter offset (0 when the run has none for it).
func offset(run *engine.Run, r int) uint64 {
	if r < len(run.Params.Offset) {
		return run.Params.Offset[r]
	}
	return 0
}

// nextResidual returns normalise(max(res - q, 0)) with q the draft (nil:
// one-hot at x), or res itself when that is all zero.
func nextResidual(res, q []float64, x int) []float64 {
	out := make([]float64, len(res))
	var z float64
	for i, r := range res {
		d := 0.0
		switch {
		case q != nil:
			d = q[i]
		case i == x:
			d = 1
		}
		out[i] = math.Max(r-d, 0)
		z += out[i]
	}
	if !(z > 0) {
		return res
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// shownTokens returns the tokens a node's steps list: its most probable
// under p, then its children's.
func shownTokens(p []float32, tokens []int32, children []int) []int {
	seen := map[int]bool{}
	out := topIndices32(p, treeTopShown, nil)
	for _, t := range out {
		seen[t] = true
	}
	for _, c := range children {
		if t := int(tokens[c]); !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// residuals lists res beside the target p on the tokens shown.
func residuals(shown []int, p []float32, res []float64) []Residual {
	out := make([]Residual, len(shown))
	for i, t := range shown {
		out[i] = Residual{Token: t, Target: engine.Float(p[t]), Residual: engine.Float(res[t])}
	}
	return out
}
