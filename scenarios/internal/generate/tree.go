package generate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// treeTrials is the number of trials the tree scenarios run per row, ours
// and the dump's: at 400 a lossless verifier's first-token distribution
// stays within about 0.1 of its law in total variation, and the planted
// faults below move acceptance rates by 0.2 or more.
const treeTrials = 400

// treeRow is one row of a spec_tree_verify dump: each node's target
// distribution and candidate token, and (nil for one-hot drafts) each
// node's draft distribution.
type treeRow struct {
	p      [][]float64
	q      [][]float64
	tokens []int64
}

// treeDump is a batch of rows on one tree layout.
type treeDump struct {
	next, sibling []int64
	rows          []treeRow
	params        []samplertest.Params
}

// tensors returns the dump's inputs: target logits log(p) as F32,
// candidates, the links, per-row temperature and filters, and draft probs
// as F32 when the rows have them.
func (d treeDump) tensors() []*engine.Tensor {
	b, n, v := len(d.rows), len(d.next), len(d.rows[0].p[0])
	var logits, probs []float64
	var tokens []int64
	for _, r := range d.rows {
		for _, p := range r.p {
			logits = append(logits, logProbs(p)...)
		}
		for _, q := range r.q {
			probs = append(probs, q...)
		}
		tokens = append(tokens, r.tokens...)
	}
	ts := []*engine.Tensor{
		f64("target_logits", engine.F32, []int{b, n, v}, logits),
		i64("candidates", []int{b, n}, tokens),
		i64("retrive_next_token", []int{b, n}, slices.Repeat(d.next, b)),
		i64("retrive_next_sibling", []int{b, n}, slices.Repeat(d.sibling, b)),
	}
	if d.rows[0].q != nil {
		ts = append(ts, f64("draft_probs", engine.F32, []int{b, n, v}, probs))
	}
	if d.params != nil {
		temp, topK := make([]float64, b), make([]int64, b)
		for r, p := range d.params {
			temp[r], topK[r] = p.Temperature, int64(p.TopK)
		}
		ts = append(ts, f64("temperature", engine.F32, []int{b}, temp), i64("top_k", []int{b}, topK))
	}
	return ts
}

// simulate runs every row's verifier (samplertest.Tree with mistake, on the
// targets the dump's logits give under the row's parameters) trials times
// and returns tree_trials and tree_path_trials.
func (d treeDump) simulate(rng *rand.Rand, mistake samplertest.TreeMistake, trials int) []*engine.Tensor {
	b, depth := len(d.rows), 0
	tree, err := engine.ParseTree(d.next, d.sibling)
	if err == nil {
		depth = tree.MaxDepth
	}
	width := depth + 1
	sims := make([]*samplertest.Tree, b)
	for r, row := range d.rows {
		s := &samplertest.Tree{Next: d.next, Sibling: d.sibling, Tokens: row.tokens, Draft: row.q, Mistake: mistake,
			ThresholdSingle: 0.5, ThresholdAcc: 1}
		pr := samplertest.NoFilter()
		if d.params != nil {
			pr = d.params[r]
		}
		for _, p := range row.p {
			s.Target = append(s.Target, samplertest.Filter(samplertest.Softmax(rounded(logProbs(p), engine.F32), pr.Temperature), pr))
		}
		sims[r] = s
	}
	paths, toks := make([]int64, 0, trials*b*width), make([]int64, 0, trials*b*width)
	for range trials {
		for _, s := range sims {
			path, t := s.Trial(rng, width)
			paths, toks = append(paths, path...), append(toks, t...)
		}
	}
	return []*engine.Tensor{
		i64("tree_path_trials", []int{trials, b, width}, paths),
		i64("tree_trials", []int{trials, b, width}, toks),
	}
}

// distinctChildren gives every node's children distinct tokens of [0, v),
// drawn uniformly: what a top-k drafter proposes.
func distinctChildren(rng *rand.Rand, next, sibling []int64, v int) []int64 {
	tokens := make([]int64, len(next))
	for u := range next {
		perm := rng.Perm(v)
		j := 0
		for c := next[u]; c != -1; c = sibling[c] {
			tokens[c] = int64(perm[j])
			j++
		}
	}
	return tokens
}

// sharpened returns a softmax of normal logits with extra mass on the
// children's tokens of node u, so that drafts are often accepted.
func sharpened(rng *rand.Rand, v int, tokens []int64, next, sibling []int64, u int) []float64 {
	x := normals(rng, v, 1)
	for c := next[u]; c != -1; c = sibling[c] {
		x[tokens[c]] += 1.5 + rng.Float64()
	}
	return samplertest.Softmax(x, 1)
}

// treeWide is a wide, shallow draft tree (four children a node, two
// levels: 21 nodes) with one-hot drafts, as a top-k drafter builds it.
// The rows mix temperatures and top-k; the dump's tree_trials come from a
// lossless verifier, so it and ours both pass.
func treeWide() (*scenario, error) {
	const rows, v = 8, 32
	rng := newRand(2828)
	next, sibling := samplertest.KaryTree(4, 2)
	d := treeDump{next: next, sibling: sibling}
	for r := range rows {
		row := treeRow{tokens: distinctChildren(rng, next, sibling, v)}
		for u := range next {
			row.p = append(row.p, sharpened(rng, v, row.tokens, next, sibling, u))
		}
		d.rows = append(d.rows, row)
		p := samplertest.NoFilter()
		if r%2 == 1 {
			p.Temperature, p.TopK = 0.8, 12
		}
		d.params = append(d.params, p)
	}
	return d.lossless(rng, scenarios.Config{
		Name:    "tree-wide",
		Title:   "Tree speculative sampling: a wide, shallow tree",
		Summary: "Four one-hot drafts a node over two levels (21 nodes): each child is tried against the target less the siblings rejected before it, and the first token still follows the target exactly.",
	}), nil
}

// treeDeep is a deep, narrow draft tree (two children a node, five levels:
// 63 nodes) with draft distributions: each node's children are drawn from
// its draft, and a rejection leaves max(residual - q, 0). The dump's
// tree_trials come from a lossless verifier; both pass.
func treeDeep() (*scenario, error) {
	const rows, v = 4, 32
	rng := newRand(2929)
	next, sibling := samplertest.KaryTree(2, 5)
	d := treeDump{next: next, sibling: sibling}
	for range rows {
		row := treeRow{tokens: make([]int64, len(next))}
		for range next {
			p := samplertest.Softmax(normals(rng, v, 1.5), 1)
			q := make([]float64, v)
			for j, x := range p { // a drafter near the target
				q[j] = x * math.Exp(0.5*rng.NormFloat64())
			}
			row.p, row.q = append(row.p, p), append(row.q, rounded(normalise(q), engine.F32))
		}
		for u := range next {
			for c := next[u]; c != -1; c = sibling[c] {
				row.tokens[c] = int64(draw(normalise(row.q[u]), rng.Float64()))
			}
		}
		d.rows = append(d.rows, row)
	}
	return d.lossless(rng, scenarios.Config{
		Name:    "tree-deep",
		Title:   "Tree speculative sampling: a deep, narrow tree with draft probabilities",
		Summary: "Two drafts a node over five levels (63 nodes), drawn from the drafter's distributions: acceptance by depth, the accepted tokens and every path position follow their exact laws.",
	}), nil
}

// lossless returns the scenario of d whose dump holds tree_trials from a
// lossless verifier: it and ours both pass.
func (d treeDump) lossless(rng *rand.Rand, cfg scenarios.Config) *scenario {
	cfg.Op, cfg.View = engine.OpSpecTreeVerify, "/rows/0"
	cfg.Overrides = scenarios.Overrides{Trials: intp(treeTrials)}
	cfg.Expect = scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
		{Name: "cpu", Pass: true},
		{Name: "tree_trials", Pass: true},
	}}
	return &scenario{cfg: cfg, tensors: append(d.tensors(), d.simulate(rng, samplertest.TreeCorrect, treeTrials)...)}
}

// treeTwins builds rows of the seven-node tree (two children a node, two
// levels) with one-hot drafts, in which both children of the root lead to
// the same subtree: nodes 1 and 2 share their target and their children's
// tokens, and the four leaves share theirs. Which child of the root a trial
// accepts then changes nothing below it, so a fault at the root shows in
// the tests at the root alone. first and second are the root's children's
// target probabilities, low and high those of nodes 1 and 2's children.
func treeTwins(rng *rand.Rand, rows, v int, first, second, high, low float64) treeDump {
	next, sibling := samplertest.KaryTree(2, 2)
	d := treeDump{next: next, sibling: sibling}
	for range rows {
		perm := rng.Perm(v)
		a, b, c, e := perm[0], perm[1], perm[2], perm[3]
		root := spread(rng, v, perm[4:12], 1-first-second)
		root[a], root[b] = first, second
		mid := spread(rng, v, perm[4:12], 1-high-low)
		mid[c], mid[e] = high, low
		leaf := spread(rng, v, perm[2:14], 1)
		d.rows = append(d.rows, treeRow{
			p:      [][]float64{root, mid, mid, leaf, leaf, leaf, leaf},
			tokens: []int64{0, int64(a), int64(b), int64(c), int64(e), int64(c), int64(e)},
		})
	}
	return d
}

// treeSiblingBug plants the fault of a verifier that tests every sibling
// against the node's original target p instead of the residual its
// rejected siblings left: the second child (target probability 0.4 after
// a first of 0.5) is accepted with 0.5·0.4 = 0.2 instead of 0.4, so the
// first token comes out 0.2 too rarely and 0.2 more of the trials stop at
// the root. Every row fails the acceptance tests and the lossless fit.
func treeSiblingBug() (*scenario, error) {
	return treeFault(scenarios.Config{
		Name:    "tree-sibling-bug",
		Title:   "Tree speculative sampling: a sibling tested against the original target",
		Summary: "A verifier that tries the second child against p instead of the residual accepts it half as often as it should: not lossless, on every row.",
	}, 3030, [4]float64{0.5, 0.4, 0.5, 0.4}, samplertest.SiblingAgainstTarget)
}

// treeRelaxed is sgl-kernel's tree verifier run with threshold_single 0.5:
// a child whose target probability reaches 0.5 is accepted whatever the
// coin. The root's first child has probability 0.6, so it is accepted in
// every trial instead of 60% of them; below the root no child reaches 0.5
// and the coin rule is lossless. Every row fails the acceptance tests and
// the lossless fit of the first token, and the output's summary says how
// many more tokens it accepts than the lossless rule.
func treeRelaxed() (*scenario, error) {
	return treeFault(scenarios.Config{
		Name:    "tree-relaxed-thresholds",
		Title:   "Tree speculative sampling: SGLang's relaxed thresholds",
		Summary: "With threshold_single 0.5 a child of target probability 0.6 is always accepted: the engine accepts about a quarter more tokens than the lossless rule, and its first token is 0.4 from the target.",
	}, 3131, [4]float64{0.6, 0.2, 0.3, 0.15}, samplertest.RelaxedThresholds)
}

// treeFault builds a scenario of eight treeTwins rows (V = 32, the
// children's target probabilities probs: the root's first and second, then
// the subtrees') whose dump holds tree_trials from a verifier with mistake:
// it fails every row on acceptance and on the lossless fit, ours passes.
func treeFault(cfg scenarios.Config, seed uint64, probs [4]float64, mistake samplertest.TreeMistake) (*scenario, error) {
	const rows, v = 8, 32
	rng := newRand(seed)
	d := treeTwins(rng, rows, v, probs[0], probs[1], probs[2], probs[3])
	var failing []scenarios.RowRules
	for r := range rows {
		failing = append(failing, fail(r, engine.RuleAcceptance, engine.RuleFit))
	}
	cfg.Op, cfg.View = engine.OpSpecTreeVerify, "/rows/0"
	cfg.Overrides = scenarios.Overrides{Trials: intp(treeTrials)}
	cfg.Expect = scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
		{Name: "cpu", Pass: true},
		{Name: "tree_trials", Pass: false, Failing: failing},
	}}
	return &scenario{cfg: cfg, tensors: append(d.tensors(), d.simulate(rng, mistake, treeTrials)...)}, nil
}

// treeChain writes spec_verify rows as trees: node i+1 is the only child of
// node i and holds the draft of position i, with the drafter's
// distributions. The dump's tree outputs are what our spec_verify draws for
// the same seeds (recorded with engine/cpu: tree_path, tree_tokens and
// tree_accepted of trial 0, and every trial), which a tree verifier must
// draw again exactly (the scenarios' tests check it, and the GPU suite
// checks the kernels against engine/cpu).
func treeChain() (*scenario, error) {
	const rows, k, v = 8, 4, 32
	rng := newRand(3232)
	next, sibling := make([]int64, k+1), make([]int64, k+1)
	for i := range next {
		next[i], sibling[i] = int64(i+1), -1
	}
	next[k] = -1
	d := treeDump{next: next, sibling: sibling}
	var spec []specRow
	for range rows {
		var s specRow
		row := treeRow{tokens: make([]int64, k+1)}
		for i := range k + 1 {
			p := samplertest.Softmax(normals(rng, v, 1.5), 1)
			q := make([]float64, v)
			for j, x := range p {
				q[j] = x * math.Exp(0.7*rng.NormFloat64())
			}
			q = rounded(normalise(q), engine.F32)
			row.p, row.q, s.p = append(row.p, p), append(row.q, q), append(s.p, p)
			if i < k {
				x := draw(normalise(q), rng.Float64())
				s.drafts, s.q = append(s.drafts, x), append(s.q, q)
				row.tokens[i+1] = int64(x)
			}
		}
		d.rows, spec = append(d.rows, row), append(spec, s)
	}
	over := scenarios.Overrides{Trials: intp(treeTrials)}
	run, err := loadRun("tree-chain spec", specTensors(spec), map[string]string{"op": string(engine.OpSpecVerify)}, over.Engine())
	if err != nil {
		return nil, err
	}
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		return nil, fmt.Errorf("tree-chain: record spec_verify's draws: %w", err)
	}
	all := out.SpecTrials.Ints()
	paths := make([]int64, len(all))
	for i := 0; i < len(all); i += k + 1 {
		a := 0
		for a < k && all[i+a+1] != -1 {
			a++
		}
		for j := range k + 1 {
			paths[i+j] = -1
			if j <= a {
				paths[i+j] = int64(j)
			}
		}
	}
	recorded := []*engine.Tensor{
		i64("tree_path", []int{rows, k + 1}, paths[:rows*(k+1)]),
		i64("tree_tokens", []int{rows, k + 1}, out.SpecTokens.Ints()),
		i64("tree_accepted", []int{rows}, out.SpecEmitted.Ints()),
		i64("tree_path_trials", []int{treeTrials, rows, k + 1}, paths),
		i64("tree_trials", []int{treeTrials, rows, k + 1}, all),
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "tree-chain",
			Title:     "Tree speculative sampling: a chain written as a tree",
			Summary:   "spec_verify's rows as one-child trees: the tree verifier reads the same Philox blocks, thresholds and residuals, so it draws spec_verify's recorded tokens exactly.",
			Op:        engine.OpSpecTreeVerify,
			Overrides: over,
			View:      "/rows/0",
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "tree_tokens", Pass: true},
				{Name: "tree_trials", Pass: true},
			}},
		},
		tensors: append(d.tensors(), recorded...),
	}, nil
}
