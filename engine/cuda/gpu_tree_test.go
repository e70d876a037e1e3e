package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
)

// requireTree skips a spec_tree_verify test where the kernel library was
// built without the tree kernel (make kernels SV_TREE=0), unless
// SAMPVIZ_REQUIRE_TREE=1 makes that a failure.
func requireTree(t *testing.T) {
	t.Helper()
	b := gpuBackend(t)
	b.mu.Lock()
	ok := b.treeKernel
	b.mu.Unlock()
	if ok {
		return
	}
	if os.Getenv("SAMPVIZ_REQUIRE_TREE") == "1" {
		t.Fatal("SAMPVIZ_REQUIRE_TREE=1 but the kernel library has no tree kernel (built with SV_TREE=0)")
	}
	t.Skip("the kernel library was built with SV_TREE=0: no tree kernel")
}

// randomLinks returns the links (first child, next sibling) of a random
// tree of n reached nodes and pad nodes the root does not reach, spread
// among them: each node's parent is an earlier node, often a recent one
// (deep paths), never one that already has maxKids children (0: no limit);
// siblings are linked in random order.
func randomLinks(rng *rand.Rand, n, pad, maxKids int) (next, sibling []int64) {
	total := n + pad
	// pos[i] is real node i's index: increasing, so children stay after
	// their parents; the others are padding.
	pos := make([]int, 0, n)
	pos = append(pos, 0)
	for _, i := range rng.Perm(total - 1)[:n-1] {
		pos = append(pos, i+1)
	}
	sortInts(pos)
	kids := make([][]int, n)
	for c := 1; c < n; c++ {
		p := rng.IntN(c)
		if rng.IntN(2) == 0 {
			p = max(0, c-1-rng.IntN(3))
		}
		if maxKids > 0 && len(kids[p]) >= maxKids {
			p = c - 1 // has no children yet
		}
		kids[p] = append(kids[p], c)
	}
	next, sibling = make([]int64, total), make([]int64, total)
	for i := range next {
		next[i], sibling[i] = -1, -1
	}
	for u, ks := range kids {
		rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		for j, c := range ks {
			if j == 0 {
				next[pos[u]] = int64(pos[c])
			} else {
				sibling[pos[ks[j-1]]] = int64(pos[c])
			}
		}
	}
	return next, sibling
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// treeRun builds a spec_tree_verify run on the tree of links next and
// sibling (the same for every row): fresh random target logits per node
// (logits' kinds; now and then one node without a distribution), draft
// distributions of qdtype close to each node's target or not (invalid:
// one-hot drafts), and candidates that are the parent's argmax, a sibling's
// token again, a draw from the parent's draft distribution, a uniform token
// (or, with dup false and one-hot drafts, distinct from their siblings').
// Padding nodes and the root hold tokens outside the vocabulary now and
// then: nothing may read them. It returns the run and the rows whose tree
// reaches a node without a distribution.
func treeRun(rng *rand.Rand, dtype engine.DType, rows, vocab int, next, sibling []int64, trials int, qdtype engine.DType, dup bool) (*engine.Run, map[int]bool) {
	nodes := len(next)
	tree, err := engine.ParseTree(next, sibling)
	if err != nil {
		panic(err)
	}
	flat, _ := logits(rng, dtype, rows*nodes, vocab, false)
	target := &engine.Tensor{Name: "target_logits", DType: dtype, Shape: []int{rows, nodes, vocab}, Data: flat.Data}
	invalid := map[int]bool{}
	for r := range rows {
		if rows > 1 && rng.IntN(4) == 0 {
			n := rng.IntN(nodes)
			base := (r*nodes + n) * vocab
			if rng.IntN(2) == 0 {
				target.SetFloat(base+rng.IntN(vocab), math.NaN())
			} else {
				for i := range vocab {
					target.SetFloat(base+i, math.Inf(-1))
				}
			}
			if tree.Reached(n) {
				invalid[r] = true
			}
		}
	}
	var q *engine.Tensor
	if qdtype != engine.DTypeInvalid {
		q = engine.NewTensor("draft_probs", qdtype, rows, nodes, vocab)
	}
	cand := make([]int64, rows*nodes)
	seeds := make([]uint64, rows)
	for r := range seeds {
		seeds[r] = rng.Uint64()
	}
	var wg sync.WaitGroup
	per := (rows + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	for lo := 0; lo < rows; lo += per {
		hi := min(rows, lo+per)
		wg.Go(func() {
			for r := lo; r < hi; r++ {
				treeRow(rand.New(rand.NewPCG(seeds[r], uint64(r))), target, q, tree, cand, r, dup)
			}
		})
	}
	wg.Wait()
	p := params(rng, rows, vocab, true)
	p.Trials = trials
	links := func(name string, v []int64) *engine.Tensor {
		all := make([]int64, 0, rows*nodes)
		for range rows {
			all = append(all, v...)
		}
		return engine.FromInts(name, engine.I32, []int{rows, nodes}, all)
	}
	return &engine.Run{
		Op:           engine.OpSpecTreeVerify,
		TargetLogits: target,
		Candidates:   engine.FromInts("candidates", engine.I64, []int{rows, nodes}, cand),
		NextToken:    links("retrive_next_token", next),
		NextSibling:  links("retrive_next_sibling", sibling),
		DraftProbs:   q,
		Params:       p,
	}, invalid
}

// treeRow fills row r's draft distributions (when q is not nil) and
// candidates (treeRun).
func treeRow(rng *rand.Rand, target, q *engine.Tensor, tree *engine.Tree, cand []int64, r int, dup bool) {
	nodes, vocab := target.Dim(1), target.Dim(2)
	x := make([]float64, vocab)
	argmax := make([]int, nodes)
	var qrow []float64
	if q != nil {
		qrow = make([]float64, nodes*vocab)
	}
	for n := range nodes {
		base := (r*nodes + n) * vocab
		target.Floats64(base, x)
		best, m := 0, math.Inf(-1)
		for i, v := range x {
			if v > m { // NaN never is
				best, m = i, v
			}
		}
		argmax[n] = best
		if q == nil {
			continue
		}
		// Close to the target (a tempered softmax with noise) or unrelated.
		a, sigma := 0.5+rng.Float64(), 0.3+2*rng.Float64()
		if rng.IntN(3) == 0 {
			a = 0
		}
		sum := 0.0
		w := qrow[n*vocab : (n+1)*vocab]
		for i, v := range x {
			e := -1e3 // non-finite logits (and rows without a maximum) weigh little
			if !math.IsNaN(v) && !math.IsInf(v, 0) && !math.IsInf(m, 0) {
				e = a * (v - m)
			}
			w[i] = math.Exp(e + sigma*rng.NormFloat64())
			sum += w[i]
		}
		for i := range w {
			if sum > 0 && !math.IsInf(sum, 0) {
				w[i] /= sum
			} else {
				w[i] = 1 / float64(vocab)
			}
			q.SetFloat(base+i, w[i])
		}
	}
	for u := range nodes {
		var used []int64
		for _, c := range tree.Children[u] {
			var tok int64
			switch k := rng.IntN(20); {
			case k < 7:
				tok = int64(argmax[u])
			case k < 10 && len(used) > 0:
				tok = used[rng.IntN(len(used))]
			case k < 15 && q != nil:
				tok = int64(drawFrom(rng, qrow[u*vocab:(u+1)*vocab]))
			default:
				tok = int64(rng.IntN(vocab))
			}
			if !dup && q == nil {
				for tries := 0; contains(used, tok) && tries < 100; tries++ {
					tok = int64(rng.IntN(vocab))
				}
			}
			used = append(used, tok)
			cand[r*nodes+c] = tok
		}
	}
	for n := range nodes {
		if !tree.Reached(n) || n == 0 {
			cand[r*nodes+n] = []int64{-1, int64(vocab) + 7, 0}[rng.IntN(3)]
		}
	}
}

func drawFrom(rng *rand.Rand, w []float64) int {
	u := rng.Float64()
	for i, v := range w {
		if u -= v; u < 0 {
			return i
		}
	}
	return len(w) - 1
}

func contains(a []int64, v int64) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// sameTree runs a spec_tree_verify run on both backends and checks that
// the GPU's paths, tokens, counters and trace equal engine/cpu's bit for
// bit, and that the judge (engine/ref's exact tree laws) agrees.
func sameTree(t *testing.T, run *engine.Run, invalid map[int]bool) {
	t.Helper()
	requireTree(t)
	gpu, host := runBoth(t, run)
	sameBits(t, "tree_path", gpu.TreePath, host.TreePath)
	sameBits(t, "tree_tokens", gpu.TreeTokens, host.TreeTokens)
	sameBits(t, "tree_accepted", gpu.TreeAccepted, host.TreeAccepted)
	sameBits(t, "tree_path_trials", gpu.TreePathTrials, host.TreePathTrials)
	sameBits(t, "tree_trials", gpu.TreeTrials, host.TreeTrials)
	sameTreeTrace(t, gpu.TreeTrace, host.TreeTrace)
	judge(t, run, gpu, host, invalid)
}

func sameTreeTrace(t *testing.T, got, want *engine.TreeTrace) {
	t.Helper()
	if got == nil || want == nil || got.Trials != want.Trials || got.Rows != want.Rows || got.Nodes != want.Nodes {
		t.Fatalf("tree trace shapes: cuda %+v, cpu %+v", treeTraceShape(got), treeTraceShape(want))
	}
	bits := func(f float32) uint32 {
		if f != f {
			return 0x7fc00000
		}
		return math.Float32bits(f)
	}
	bad := 0
	for i := range got.Step {
		g, w := got.Step[i], want.Step[i]
		if g.Tried == w.Tried && bits(g.U) == bits(w.U) && bits(g.P) == bits(w.P) && bits(g.Q) == bits(w.Q) &&
			g.Accepted == w.Accepted && g.Drawn == w.Drawn {
			continue
		}
		if bad < 5 {
			t.Errorf("tree trace step %d (trial %d, row %d, node %d): cuda %+v, cpu %+v", i,
				i/(got.Rows*got.Nodes), i/got.Nodes%got.Rows, i%got.Nodes, g, w)
		}
		bad++
	}
	if bad > 5 {
		t.Errorf("... %d tree trace steps differ", bad)
	}
}

func treeTraceShape(s *engine.TreeTrace) [3]int {
	if s == nil {
		return [3]int{}
	}
	return [3]int{s.Trials, s.Rows, s.Nodes}
}

// treeCase is one spec_tree_verify launch of the GPU tests: target logits
// of shape, a random tree of nodes reached nodes and pad padding nodes
// with at most maxKids children a node (0: any), trials, the draft
// distributions' dtype (invalid: one-hot drafts), and whether one-hot
// siblings may repeat a token.
type treeCase struct {
	shape
	nodes, pad, maxKids, trials int
	q                           engine.DType
	dup                         bool
}

func (c treeCase) String() string {
	return c.shape.String() + "/N" + itoa(c.nodes) + "+" + itoa(c.pad) + "/T" + itoa(c.trials) + "/q" + c.q.String()
}

// TestGPUTree runs spec_tree_verify on fresh random trees (random shapes
// and sibling orders, padding the root does not reach, wide and deep
// nodes), every dtype, vocabularies from 2 to 151936, one-hot drafts with
// and without repeated siblings and draft distributions of every dtype,
// temperatures from greedy to 100 with the filters on and off: every
// output and the trace must equal engine/cpu's bit for bit, and the judge
// (exact tree laws from engine/ref, many trials on small vocabularies)
// must pass every row with a distribution.
func TestGPUTree(t *testing.T) {
	gpuBackend(t)
	requireTree(t)
	rng := newRand(t)
	var cases []treeCase
	if quick() {
		cases = []treeCase{
			{shape{engine.F32, 3, 111}, 12, 2, 4, 300, engine.DTypeInvalid, true},
			{shape{engine.BF16, 2, 4099}, 9, 1, 3, 8, engine.BF16, false},
			{shape{engine.F16, 2, 2}, 5, 0, 3, 50, engine.F32, true},
		}
	} else {
		qs := []engine.DType{engine.DTypeInvalid, engine.DTypeInvalid, engine.F32, engine.BF16, engine.F16}
		for _, d := range allDTypes {
			for _, v := range []int{2, 111, 4099, 32003, 128256, 151936} {
				for _, b := range []int{1, 5} {
					trials := 8
					if v <= 111 {
						trials = 2000
					} else if b == 1 {
						trials = 64
					}
					nodes := 1 + rng.IntN(40)
					if v > 32003 {
						nodes = 1 + rng.IntN(20)
					}
					cases = append(cases, treeCase{shape{d, b, v}, nodes, rng.IntN(3), rng.IntN(6), trials,
						qs[rng.IntN(len(qs))], rng.IntN(2) == 0})
				}
			}
		}
		// One trial (no trials tensors), one node (a lone root), and the
		// batch of the bench with draft distributions.
		cases = append(cases,
			treeCase{shape{engine.BF16, 7, 32000}, 20, 3, 2, 1, engine.DTypeInvalid, false},
			treeCase{shape{engine.F32, 4, 111}, 1, 0, 0, 100, engine.F32, false},
			treeCase{shape{engine.BF16, 16, 32003}, 40, 0, 4, 4, engine.BF16, true})
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			next, sibling := randomLinks(rng, c.nodes, c.pad, c.maxKids)
			run, invalid := treeRun(rng, c.dtype, c.rows, c.vocab, next, sibling, c.trials, c.q, c.dup)
			if rng.IntN(3) == 0 {
				run.Params = params(rng, c.rows, c.vocab, false) // no filter in the launch: the lean prepare
				run.Params.Trials = c.trials
			}
			sameTree(t, run, invalid)
		})
	}
}

// TestGPUTreeShapes runs the trees of issue 28's bench and scenarios (full
// k-ary trees: wide and shallow, deep and narrow), a node of more children
// than a warp has lanes (the walk tests them 32 at a time) with repeated
// tokens, and greedy rows only (the path follows the argmax).
func TestGPUTreeShapes(t *testing.T) {
	gpuBackend(t)
	requireTree(t)
	rng := newRand(t)
	wide := func() (next, sibling []int64) {
		// The root has 40 children, its first child 5, its 35th child 3.
		n := 1 + 40 + 5 + 3
		next, sibling = make([]int64, n), make([]int64, n)
		for i := range next {
			next[i], sibling[i] = -1, -1
		}
		next[0] = 1
		for c := 1; c < 40; c++ {
			sibling[c] = int64(c + 1)
		}
		next[1] = 41
		for c := 41; c < 45; c++ {
			sibling[c] = int64(c + 1)
		}
		next[35] = 46
		sibling[46], sibling[47] = 47, 48
		return next, sibling
	}
	type shapeCase struct {
		name   string
		links  func() ([]int64, []int64)
		s      shape
		trials int
		q      engine.DType
		greedy bool
	}
	kary := func(topk, depth int) func() ([]int64, []int64) {
		return func() ([]int64, []int64) { return samplertest.KaryTree(topk, depth) }
	}
	cases := []shapeCase{
		{"topk4 depth2", kary(4, 2), shape{engine.F32, 3, 111}, 2000, engine.DTypeInvalid, false},
		{"topk2 depth5", kary(2, 5), shape{engine.BF16, 3, 111}, 2000, engine.BF16, false},
		{"wide root", wide, shape{engine.F32, 2, 111}, 1000, engine.DTypeInvalid, false},
		{"wide root q", wide, shape{engine.F16, 2, 4099}, 200, engine.F32, false},
		{"greedy", kary(3, 3), shape{engine.BF16, 4, 32003}, 16, engine.BF16, true},
	}
	if !quick() {
		cases = append(cases,
			shapeCase{"bench one-hot", kary(4, 3), shape{engine.BF16, 64, 128256}, 2, engine.DTypeInvalid, false},
			shapeCase{"bench q", kary(2, 5), shape{engine.BF16, 16, 128256}, 2, engine.BF16, false},
			shapeCase{"qwen", kary(2, 4), shape{engine.BF16, 3, 151936}, 32, engine.F16, false})
	} else {
		cases = cases[:4]
	}
	for _, c := range cases {
		t.Run(c.name+"/"+c.s.String(), func(t *testing.T) {
			next, sibling := c.links()
			run, invalid := treeRun(rng, c.s.dtype, c.s.rows, c.s.vocab, next, sibling, c.trials, c.q, true)
			if c.greedy {
				for r := range c.s.rows {
					run.Params.Temperature[r] = 0
				}
			}
			sameTree(t, run, invalid)
		})
	}
}

// TestGPUTreeOneHotLean runs the launches that csrc/dev/tree's split and
// held variants prepare with a cluster a node (bf16 target logits, one-hot
// drafts, no filter in the launch): few nodes and the bench's batch of
// 64 rows, greedy and tempered rows, rows with a node without a
// distribution, repeated sibling tokens and vocabularies from 2 to
// 151936. Every output and the trace must equal engine/cpu's bit for bit,
// whichever prepare the library takes.
func TestGPUTreeOneHotLean(t *testing.T) {
	gpuBackend(t)
	requireTree(t)
	rng := newRand(t)
	type leanCase struct {
		name                string
		links               func() ([]int64, []int64)
		rows, vocab, trials int
	}
	kary := func(topk, depth int) func() ([]int64, []int64) {
		return func() ([]int64, []int64) { return samplertest.KaryTree(topk, depth) }
	}
	random := func(nodes, pad, maxKids int) func() ([]int64, []int64) {
		return func() ([]int64, []int64) { return randomLinks(rng, nodes, pad, maxKids) }
	}
	cases := []leanCase{
		{"topk2 depth5", kary(2, 5), 1, 32003, 64},
		{"random", random(12, 2, 4), 3, 4099, 32},
	}
	if !quick() {
		for _, v := range []int{2, 111, 4099, 32003, 128256, 151936} {
			cases = append(cases, leanCase{"random", random(1+rng.IntN(40), rng.IntN(3), 1+rng.IntN(5)), 1 + rng.IntN(3), v, 64})
		}
		cases = append(cases,
			leanCase{"bench topk2 B=1", kary(2, 5), 1, 128256, 64},
			leanCase{"topk4 depth2", kary(4, 2), 5, 32003, 16},
			leanCase{"bench topk2 B=64", kary(2, 5), 64, 128256, 2})
	}
	for _, c := range cases {
		t.Run(c.name+"/"+shape{engine.BF16, c.rows, c.vocab}.String(), func(t *testing.T) {
			next, sibling := c.links()
			run, invalid := treeRun(rng, engine.BF16, c.rows, c.vocab, next, sibling, c.trials, engine.DTypeInvalid, rng.IntN(2) == 0)
			run.Params = params(rng, c.rows, c.vocab, false) // no filter in the launch
			run.Params.Trials = c.trials
			sameTree(t, run, invalid)
		})
	}
}

// TestGPUTreeChain writes spec_verify chains as trees (node i+1 the only
// child of node i, with the draft of position i; node i's draft
// distribution is position i's): the tree kernel must draw spec_verify's
// tokens, its accepted count must be spec_verify's emitted length, and its
// tests spec_verify's, trial for trial, on the GPU.
func TestGPUTreeChain(t *testing.T) {
	gpuBackend(t)
	requireTree(t)
	rng := newRand(t)
	type chainCase struct {
		specCase
		lean bool // no filter in the launch
	}
	cases := []chainCase{
		{specCase{shape{engine.F32, 4, 111}, 4, 200, engine.DTypeInvalid, false}, false},
		{specCase{shape{engine.BF16, 3, 32003}, 3, 8, engine.BF16, false}, false},
		{specCase{shape{engine.F16, 2, 4099}, 5, 16, engine.F32, false}, false},
		{specCase{shape{engine.BF16, 5, 128256}, 2, 4, engine.DTypeInvalid, false}, true},
	}
	if quick() {
		cases = cases[:2]
	}
	for _, c := range cases {
		name := c.shape.String() + "/K" + itoa(c.k) + "/T" + itoa(c.trials) + "/q" + c.q.String()
		if c.lean {
			name += "/lean"
		}
		t.Run(name, func(t *testing.T) {
			spec, invalid := specRun(rng, c.dtype, c.rows, c.k, c.vocab, c.trials, c.q)
			if c.lean {
				spec.Params = params(rng, c.rows, c.vocab, false)
				spec.Params.Trials = c.trials
			}
			tree := chainTree(spec)
			sameTree(t, tree, invalid)
			ctx := context.Background()
			b := gpuBackend(t)
			so, err := b.Run(ctx, spec)
			if err != nil {
				t.Fatalf("cuda spec_verify: %v", err)
			}
			to, err := b.Run(ctx, tree)
			if err != nil {
				t.Fatalf("cuda spec_tree_verify: %v", err)
			}
			if c.trials > 1 {
				sameBits(t, "tree_trials vs spec_trials", to.TreeTrials, so.SpecTrials)
			} else {
				sameBits(t, "tree_tokens vs spec_tokens", to.TreeTokens, so.SpecTokens)
			}
			sameBits(t, "tree_accepted vs spec_emitted", to.TreeAccepted, so.SpecEmitted)
			bad := 0
			for d := range to.TreeTrace.Trials {
				for r := range c.rows {
					for i := range c.k {
						ts, ss := to.TreeTrace.At(d, r, i+1), so.Trace.At(d, r, i)
						if !ts.Tried {
							break
						}
						if (ts.U != ss.U || ts.P != ss.P || ts.Q != ss.Q || ts.Accepted != ss.Accepted) && !(ts.P != ts.P && ss.P != ss.P) && bad < 5 {
							t.Errorf("trial %d row %d position %d: tree step %+v, spec step %+v", d, r, i, *ts, *ss)
							bad++
						}
					}
				}
			}
		})
	}
}

// chainTree writes a spec_verify run as the tree of its chain: candidates
// [B, K+1] (the root's unused), node i's draft distribution position i's
// (the leaf's a copy of the last, never read).
func chainTree(spec *engine.Run) *engine.Run {
	rows, k, vocab := spec.DraftTokens.Dim(0), spec.DraftTokens.Dim(1), spec.TargetLogits.Dim(2)
	nodes := k + 1
	cand := make([]int64, rows*nodes)
	next := make([]int64, rows*nodes)
	sibling := make([]int64, rows*nodes)
	for r := range rows {
		for i := range nodes {
			next[r*nodes+i], sibling[r*nodes+i] = int64(i+1), -1
			if i > 0 {
				cand[r*nodes+i] = spec.DraftTokens.Int(r*k + i - 1)
			}
		}
		next[r*nodes+k] = -1
	}
	run := &engine.Run{
		Op:           engine.OpSpecTreeVerify,
		TargetLogits: spec.TargetLogits,
		Candidates:   engine.FromInts("candidates", engine.I32, []int{rows, nodes}, cand),
		NextToken:    engine.FromInts("retrive_next_token", engine.I64, []int{rows, nodes}, next),
		NextSibling:  engine.FromInts("retrive_next_sibling", engine.I64, []int{rows, nodes}, sibling),
		Params:       spec.Params,
	}
	if q := spec.DraftProbs; q != nil {
		t := engine.NewTensor("draft_probs", q.DType, rows, nodes, vocab)
		es := q.DType.Size()
		for r := range rows {
			for i := range nodes {
				src := r*k + min(i, k-1)
				copy(t.Data[(r*nodes+i)*vocab*es:(r*nodes+i+1)*vocab*es], q.Data[src*vocab*es:(src+1)*vocab*es])
			}
		}
		run.DraftProbs = t
	}
	return run
}
