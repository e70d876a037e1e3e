package cpu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
)

// treeCase is a spec_tree_verify input in float32: per row and node the
// target logits and (nil: one-hot) the draft distribution, the candidate
// tokens, and one layout of links shared by every row.
type treeCase struct {
	target        [][][]float32
	q             [][][]float32
	tokens        [][]int64
	next, sibling []int64
}

// randomTree builds rows of random targets on the tree of links next and
// sibling, with candidates drawn from the parent's draft distribution (or
// uniformly for one-hot drafts; siblings then differ).
func randomTree(rng *rand.Rand, rows, vocab int, next, sibling []int64, oneHot bool) treeCase {
	n := len(next)
	c := treeCase{next: next, sibling: sibling, target: make([][][]float32, rows), tokens: make([][]int64, rows)}
	if !oneHot {
		c.q = make([][][]float32, rows)
	}
	for r := range rows {
		c.tokens[r] = make([]int64, n)
		for range n {
			c.target[r] = append(c.target[r], randomLogits(rng, vocab, 1.5))
			if !oneHot {
				c.q[r] = append(c.q[r], randomDistribution(rng, vocab, 1.5))
			}
		}
		for u := range n {
			used := map[int64]bool{}
			for ch := next[u]; ch != -1; ch = sibling[ch] {
				x := int64(rng.IntN(vocab))
				if oneHot {
					for used[x] {
						x = int64(rng.IntN(vocab))
					}
					used[x] = true
				} else {
					x = int64(drawFloat(rng, c.q[r][u]))
				}
				c.tokens[r][ch] = x
			}
		}
	}
	return c
}

// run builds the spec_tree_verify run of c with inputs stored as dtype.
func (c treeCase) run(dtype engine.DType, p engine.Params, trials int) *engine.Run {
	rows, n, vocab := len(c.target), len(c.next), len(c.target[0][0])
	var target, q []float32
	var tokens, next, sibling []int64
	for r := range rows {
		for _, x := range c.target[r] {
			target = append(target, x...)
		}
		if c.q != nil {
			for _, d := range c.q[r] {
				q = append(q, d...)
			}
		}
		tokens = append(tokens, c.tokens[r]...)
		next = append(next, c.next...)
		sibling = append(sibling, c.sibling...)
	}
	p.Trials = trials
	run := &engine.Run{
		Source:       "test",
		Op:           engine.OpSpecTreeVerify,
		TargetLogits: engine.FromFloat32s("target_logits", dtype, []int{rows, n, vocab}, target),
		Candidates:   engine.FromInts("candidates", engine.I64, []int{rows, n}, tokens),
		NextToken:    engine.FromInts("retrive_next_token", engine.I32, []int{rows, n}, next),
		NextSibling:  engine.FromInts("retrive_next_sibling", engine.I32, []int{rows, n}, sibling),
		Params:       p,
	}
	if c.q != nil {
		run.DraftProbs = engine.FromFloat32s("draft_probs", dtype, []int{rows, n, vocab}, q)
	}
	return run
}

// chainLinks returns the links of a chain of k drafts written as a tree.
func chainLinks(k int) (next, sibling []int64) {
	next, sibling = make([]int64, k+1), make([]int64, k+1)
	for i := range next {
		next[i], sibling[i] = int64(i+1), -1
	}
	next[k] = -1
	return next, sibling
}

// filteredParams gives rows a mix of temperatures and filters: greedy,
// top-k, top-p, min-p and none.
func filteredParams(rows int) engine.Params {
	p := defaultParams(rows)
	for r := range rows {
		switch r % 5 {
		case 0:
			p.Temperature[r] = 0
		case 1:
			p.Temperature[r], p.TopK[r] = 0.7, 20
		case 2:
			p.TopP[r] = 0.8
		case 3:
			p.MinP[r] = 0.05
		}
	}
	return p
}

// TestSpecTreeChainIsSpecVerify writes chains as trees: node i+1 is the
// only child of node i, with the draft of position i. The tree verifier
// must draw exactly spec_verify's tokens, count its emitted length, and
// trace its tests, trial for trial.
func TestSpecTreeChainIsSpecVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	const rows, k, vocab, trials = 10, 4, 200, 60
	for _, dtype := range []engine.DType{engine.F32, engine.BF16} {
		for _, oneHot := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/one-hot=%v", dtype, oneHot), func(t *testing.T) {
				sc := randomSpec(rng, rows, k, vocab, oneHot)
				next, sibling := chainLinks(k)
				tc := treeCase{next: next, sibling: sibling, target: sc.target, tokens: make([][]int64, rows)}
				if !oneHot {
					tc.q = make([][][]float32, rows)
				}
				for r := range rows {
					tc.tokens[r] = append([]int64{0}, sc.drafts[r]...)
					if !oneHot {
						tc.q[r] = append(append([][]float32(nil), sc.q[r]...), randomDistribution(rng, vocab, 1))
					}
				}
				p := filteredParams(rows)
				specRun := sc.run(dtype, trials)
				specRun.Params = p
				specRun.Params.Trials = trials
				spec := mustRun(t, specRun)
				tree := mustRun(t, tc.run(dtype, p, trials))
				if got, want := tree.TreeTrials.Ints(), spec.SpecTrials.Ints(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("tree tokens differ from spec_verify's:\n tree %v\n spec %v", got[:3*(k+1)], want[:3*(k+1)])
				}
				if got, want := tree.TreeAccepted.Ints(), spec.SpecEmitted.Ints(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("tree_accepted %v, spec_emitted %v", got, want)
				}
				for d := range tree.TreeTrace.Trials {
					for r := range rows {
						for i := range k {
							ts, ss := tree.TreeTrace.At(d, r, i+1), spec.Trace.At(d, r, i)
							if !ts.Tried {
								break
							}
							if ts.U != ss.U || ts.P != ss.P || ts.Q != ss.Q || ts.Accepted != ss.Accepted {
								t.Fatalf("trial %d row %d position %d: tree step %+v, spec step %+v", d, r, i, *ts, *ss)
							}
						}
					}
				}
			})
		}
	}
}

// TestSpecTreeLossless checks that with one-hot drafts of distinct sibling
// tokens the first emitted token follows the target at the root, and
// that every emitted path follows the tree.
func TestSpecTreeLossless(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	const vocab, trials = 40, 30000
	next, sibling := samplertest.KaryTree(4, 2)
	c := randomTree(rng, 1, vocab, next, sibling, true)
	// Sharpen the root so that the four children carry most of its mass.
	for ch := next[0]; ch != -1; ch = sibling[ch] {
		c.target[0][0][c.tokens[0][ch]] += 2
	}
	out := mustRun(t, c.run(engine.F32, defaultParams(1), trials))
	width := out.TreeTrials.Dim(2)
	counts := make([]int, vocab)
	tree, err := engine.ParseTree(next, sibling)
	if err != nil {
		t.Fatal(err)
	}
	paths, toks := out.TreePathTrials.Ints(), out.TreeTrials.Ints()
	for d := range trials {
		path, tokens := paths[d*width:(d+1)*width], toks[d*width:(d+1)*width]
		if err := checkTreeTrial(tree, c.tokens[0], path, tokens, vocab); err != nil {
			t.Fatalf("trial %d: %v (path %v, tokens %v)", d, err, path, tokens)
		}
		counts[tokens[0]]++
	}
	p0 := softmax64(c.target[0][0], 1)
	if pv, impossible := chiSquare(counts, p0); pv < 1e-6 || impossible > 0 {
		t.Errorf("first tokens do not follow the target: p = %g, %d impossible", pv, impossible)
	}
}

// checkTreeTrial checks one trial's layout: the path starts at the root and
// follows parent links, the tokens are the path's candidates and then one
// drawn token, and both are -1 after.
func checkTreeTrial(tree *engine.Tree, cand, path, tokens []int64, vocab int) error {
	if path[0] != 0 {
		return fmt.Errorf("path starts at %d", path[0])
	}
	a := 0
	for a+1 < len(path) && path[a+1] != -1 {
		a++
		if n := path[a]; tree.Parent[n] != int(path[a-1]) {
			return fmt.Errorf("node %d at position %d is not a child of %d", n, a, path[a-1])
		}
		if tokens[a-1] != cand[path[a]] {
			return fmt.Errorf("token %d at position %d is not node %d's candidate %d", tokens[a-1], a-1, path[a], cand[path[a]])
		}
	}
	if tokens[a] < 0 || tokens[a] >= int64(vocab) {
		return fmt.Errorf("drawn token %d outside [0, %d)", tokens[a], vocab)
	}
	for i := a + 1; i < len(path); i++ {
		if path[i] != -1 || tokens[i] != -1 {
			return fmt.Errorf("position %d after the path holds node %d, token %d", i, path[i], tokens[i])
		}
	}
	return nil
}

func TestSpecTreeBadTrees(t *testing.T) {
	cases := []struct {
		name          string
		next, sibling []int64
		tensor        string
		node          int
	}{
		{"sibling cycle", []int64{1, -1, -1, -1}, []int64{-1, 2, 3, 1}, "retrive_next_sibling", 3},
		{"sibling leaves the row", []int64{1, -1, -1}, []int64{-1, 7, -1}, "retrive_next_sibling", 1},
		{"child before its parent", []int64{2, -1, 1}, []int64{-1, -1, -1}, "retrive_next_token", 2},
		{"second parent", []int64{1, 2, -1, -1}, []int64{-1, 2, -1, -1}, "retrive_next_token", 1},
		{"root with a sibling", []int64{1, -1}, []int64{1, -1}, "retrive_next_sibling", 0},
	}
	rng := rand.New(rand.NewPCG(85, 86))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := randomTree(rng, 2, 10, []int64{-1}, []int64{-1}, true)
			c.next, c.sibling = tc.next, tc.sibling
			for r := range 2 {
				c.target[r] = nil
				c.tokens[r] = make([]int64, len(tc.next))
				for range tc.next {
					c.target[r] = append(c.target[r], randomLogits(rng, 10, 1))
				}
			}
			_, err := New().Run(context.Background(), c.run(engine.F32, defaultParams(2), 1))
			var te *engine.TreeError
			if !errors.As(err, &te) {
				t.Fatalf("Run: %v, want a *engine.TreeError", err)
			}
			if te.Tensor != tc.tensor || te.Row != 0 || te.Node != tc.node {
				t.Errorf("error %q names %s row %d node %d, want %s row 0 node %d", err, te.Tensor, te.Row, te.Node, tc.tensor, tc.node)
			}
		})
	}
}
