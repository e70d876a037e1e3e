package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/philox"
)

// treeModel is csrc/spec_tree_verify.cu's decomposition of tree
// verification, in Go: the node kernel leaves per node only the children's
// thresholds and q(x), whether R_1 fell back to Weight(p), and the applied
// cuts; the walk recomputes the stop node's residual token by token from
// them and draws as draw_stop does (the residual, or Weight(p) where it is
// all 0 or the node is a leaf). Under one-hot drafts it takes the kernel's
// shortcuts for rows with a table (p <= 1 everywhere): Z_1 is the sum of
// Weight(p) less Weight(p(x_1)), and the residual is Weight(p) with x_1
// (unless R_1 fell back) and the cut tokens zeroed. TestTreeKernelModel checks that this
// decomposition draws what engine/cpu's SpecTree draws, which keeps the
// kernel's arithmetic honest on machines without a GPU (the GPU suite
// checks the kernel itself).
type treeModel struct {
	tree   *engine.Tree
	tokens []int32
	p, q   [][]float32 // q nil: one-hot drafts
	valid  []bool
	thr    []float32
	qx     []float32
	fb     []bool
	cuts   [][]uint64
}

// modelResidual is the kernel's TreeResidual.
func modelResidual(v int, p, q float32, x1 int32, full, fb bool, cuts []uint64) uint64 {
	q1 := q
	if !full {
		q1 = 0
		if int32(v) == x1 {
			q1 = 1
		}
	}
	r := philox.Weight(float32(p - q1))
	if fb {
		r = philox.Weight(p)
	}
	for _, c := range cuts {
		if full {
			k := modelCut(c, q)
			if k < r {
				r -= k
			} else {
				r = 0
			}
		} else if uint64(v) == c {
			r = 0
		}
	}
	return r
}

func modelCut(z uint64, q float32) uint64 {
	switch {
	case !(q > 0):
		return 0
	case q >= 1:
		return z
	}
	return uint64(float64(z) * float64(q))
}

// nodes is tree_node_kernel over every node.
func (m *treeModel) nodes() {
	n := len(m.tokens)
	m.thr, m.qx = make([]float32, n), make([]float32, n)
	m.fb, m.cuts = make([]bool, n), make([][]uint64, n)
	full := m.q != nil
	for u := range n {
		kids := m.tree.Children[u]
		if len(kids) == 0 {
			continue
		}
		qAt := func(v int32) float32 {
			if full {
				return m.q[u][v]
			}
			return 0
		}
		for _, c := range kids {
			m.qx[c] = 1
			if full {
				m.qx[c] = qAt(m.tokens[c])
			}
			if !m.valid[u] {
				m.thr[c] = float32(math.NaN())
			}
		}
		if !m.valid[u] {
			continue
		}
		p := m.p[u]
		x1 := m.tokens[kids[0]]
		m.thr[kids[0]] = p[x1]
		if len(kids) < 2 {
			continue
		}
		var cuts []uint64
		fb := false
		total := func() (z uint64) {
			for v := range p {
				z += modelResidual(v, p[v], qAt(int32(v)), x1, full, fb, cuts)
			}
			return z
		}
		var z uint64
		if !full {
			// tree_node_kernel's table path: R_1 is Weight(p) but 0 at x_1.
			var all uint64
			for v := range p {
				all += philox.Weight(p[v])
			}
			if z = all - philox.Weight(p[x1]); z == 0 {
				fb, z = true, all
			}
		} else if z = total(); z == 0 {
			fb = true
			z = total()
		}
		for _, c := range kids[1:] {
			x := m.tokens[c]
			rx := modelResidual(int(x), p[x], qAt(x), x1, full, fb, cuts)
			m.thr[c] = float32(float64(rx) / float64(z))
			if !full {
				if z > rx {
					z -= rx
					cuts = append(cuts, uint64(x))
				}
				continue
			}
			var next uint64
			for v := range p {
				r, k := modelResidual(v, p[v], qAt(int32(v)), x1, full, fb, cuts), modelCut(z, qAt(int32(v)))
				if k < r {
					next += r - k
				}
			}
			if next != 0 {
				cuts = append(cuts, z)
				z = next
			}
		}
		m.fb[u], m.cuts[u] = fb, cuts
	}
}

// walk is tree_walk_kernel for one trial.
func (m *treeModel) walk(st philox.Stream, path, tokens []int32, steps []engine.TreeStep) int {
	for i := range path {
		path[i], tokens[i] = -1, -1
	}
	for i := range steps {
		steps[i] = engine.TreeStep{Drawn: -1}
	}
	u, acc := 0, 0
	path[0] = 0
	for acc+1 < len(path) {
		next := -1
		for _, c := range m.tree.Children[u] {
			x := philox.U01(st.Block(uint64(2 * (c - 1)))[0])
			ok := float32(x*m.qx[c]) < m.thr[c]
			steps[c] = engine.TreeStep{Tried: true, U: x, P: m.thr[c], Q: m.qx[c], Accepted: ok, Drawn: -1}
			if ok {
				next = c
				break
			}
		}
		if next < 0 {
			break
		}
		tokens[acc] = m.tokens[next]
		acc++
		path[acc] = int32(next)
		u = next
	}
	drawn := int32(-1)
	if m.valid[u] {
		kids := m.tree.Children[u]
		p := m.p[u]
		x1 := int32(-1)
		if len(kids) > 0 {
			x1 = m.tokens[kids[0]]
		}
		w := make([]uint64, len(p))
		var total uint64
		if len(kids) > 0 && m.q == nil {
			// tree_walk_kernel's table path: Weight(p), with x_1 (unless R_1
			// fell back) and the cut tokens zeroed.
			zero := map[int]bool{}
			if len(kids) == 1 || !m.fb[u] {
				zero[int(x1)] = true
			}
			if len(kids) > 1 {
				for _, c := range m.cuts[u] {
					zero[int(c)] = true
				}
			}
			for v := range p {
				if !zero[v] {
					w[v] = philox.Weight(p[v])
					total += w[v]
				}
			}
		} else if len(kids) > 0 {
			for v := range p {
				q := float32(0)
				if m.q != nil {
					q = m.q[u][v]
				}
				w[v] = modelResidual(v, p[v], q, x1, m.q != nil, m.fb[u], m.cuts[u])
				total += w[v]
			}
		}
		if total == 0 {
			for v := range p {
				w[v] = philox.Weight(p[v])
				total += w[v]
			}
		}
		if total > 0 {
			t := philox.Pick(st.U64(uint64(2*u+1)), total)
			var run uint64
			for v := range w {
				if run += w[v]; run > t {
					drawn = int32(v)
					break
				}
			}
		}
	}
	tokens[acc] = drawn
	steps[u].Drawn = drawn
	return acc
}

// modelDistribution is a random float32 distribution over vocab tokens of
// a varied kind: spread, sparse, with ties, or one-hot.
func modelDistribution(rng *rand.Rand, vocab int) []float32 {
	w := make([]float64, vocab)
	sum := 0.0
	kind := rng.IntN(5)
	for i := range w {
		switch kind {
		case 0:
			w[i] = math.Exp(2 * rng.NormFloat64())
		case 1:
			if rng.IntN(4) == 0 {
				w[i] = rng.Float64()
			}
		case 2:
			w[i] = float64(1 + rng.IntN(3))
		case 3:
			w[i] = math.Exp(6 * rng.NormFloat64())
		}
		sum += w[i]
	}
	if sum == 0 || kind == 4 {
		for i := range w {
			w[i] = 0
		}
		w[rng.IntN(vocab)], sum = 1, 1
	}
	p := make([]float32, vocab)
	for i := range w {
		p[i] = float32(w[i] / sum)
	}
	return p
}

// TestTreeKernelModel checks treeModel against engine/cpu's SpecTree on
// random trees (random shapes and sibling orders, padding, repeated
// sibling tokens, nodes without a distribution), one-hot drafts and draft
// distributions, over many trials: the same paths, tokens, counts and
// trace, trial for trial.
func TestTreeKernelModel(t *testing.T) {
	rng := newRand(t)
	for c := range 60 {
		vocab := []int{2, 5, 17, 64}[rng.IntN(4)]
		nodes := 1 + rng.IntN(24)
		full := rng.IntN(2) == 0
		t.Run(fmt.Sprintf("%d/V%d/N%d/full=%v", c, vocab, nodes, full), func(t *testing.T) {
			next, sibling := randomLinks(rng, nodes, rng.IntN(3), rng.IntN(8))
			tree, err := engine.ParseTree(next, sibling)
			if err != nil {
				t.Fatal(err)
			}
			n := len(next)
			m := &treeModel{tree: tree, tokens: make([]int32, n), p: make([][]float32, n), valid: make([]bool, n)}
			if full {
				m.q = make([][]float32, n)
			}
			for u := range n {
				m.p[u], m.valid[u] = modelDistribution(rng, vocab), rng.IntN(12) != 0
				if full {
					m.q[u] = modelDistribution(rng, vocab)
				}
				var used []int32
				for _, ch := range tree.Children[u] {
					x := int32(rng.IntN(vocab))
					switch k := rng.IntN(4); {
					case k == 0 && len(used) > 0:
						x = used[rng.IntN(len(used))]
					case k == 1: // the target's most likely token: deep paths
						for v := range vocab {
							if m.p[u][v] > m.p[u][x] {
								x = int32(v)
							}
						}
					}
					used = append(used, x)
					m.tokens[ch] = x
				}
			}
			target := func(u int, p []float32) bool {
				if !m.valid[u] {
					for i := range p {
						p[i] = float32(math.NaN())
					}
					return false
				}
				copy(p, m.p[u])
				return true
			}
			var draft func(int, []float32)
			if full {
				draft = func(u int, q []float32) { copy(q, m.q[u]) }
			}
			twin := cpu.NewSpecTree(tree, m.tokens, vocab, target, draft)
			m.nodes()
			width := tree.MaxDepth + 1
			wp, wt, gp, gt := make([]int32, width), make([]int32, width), make([]int32, width), make([]int32, width)
			ws, gs := make([]engine.TreeStep, n), make([]engine.TreeStep, n)
			seed := rng.Uint64()
			for d := range 300 {
				st := philox.NewStream(seed, 17, c, d)
				wa := twin.Verify(st, wp, wt, ws)
				ga := m.walk(st, gp, gt, gs)
				if wa != ga || fmt.Sprint(wp, wt) != fmt.Sprint(gp, gt) {
					t.Fatalf("trial %d: model accepted %d, path %v, tokens %v; cpu %d, %v, %v", d, ga, gp, gt, wa, wp, wt)
				}
				for i := range ws {
					g, w := gs[i], ws[i]
					same := g.Tried == w.Tried && g.Accepted == w.Accepted && g.Drawn == w.Drawn && g.U == w.U && g.Q == w.Q &&
						(g.P == w.P || g.P != g.P && w.P != w.P)
					if !same {
						t.Fatalf("trial %d node %d: model step %+v, cpu %+v", d, i, g, w)
					}
				}
			}
		})
	}
}
