package ref

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
)

// treeRun builds a one-row spec_tree_verify run from target logits [N][V],
// candidates [N], the links and draft probs [N][V] (nil: one-hot).
func treeRun(target [][]float64, tokens, next, sibling []int64, q [][]float64) *engine.Run {
	n, v := len(target), len(target[0])
	run := &engine.Run{
		Op:           engine.OpSpecTreeVerify,
		TargetLogits: engine.FromFloat64s("target_logits", engine.F64, []int{1, n, v}, slices.Concat(target...)),
		Candidates:   engine.FromInts("candidates", engine.I64, []int{1, n}, tokens),
		NextToken:    engine.FromInts("retrive_next_token", engine.I64, []int{1, n}, next),
		NextSibling:  engine.FromInts("retrive_next_sibling", engine.I64, []int{1, n}, sibling),
		Params:       engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}},
	}
	if q != nil {
		run.DraftProbs = engine.FromFloat64s("draft_probs", engine.F64, []int{1, n, v}, slices.Concat(q...))
	}
	return run
}

// randomRows returns n rows of v normal logits with standard deviation
// sigma, and n random distributions.
func randomRows(rng *rand.Rand, n, v int, sigma float64) (logits, dists [][]float64) {
	for range n {
		x, y := make([]float64, v), make([]float64, v)
		for j := range x {
			x[j], y[j] = sigma*rng.NormFloat64(), sigma*rng.NormFloat64()
		}
		logits, dists = append(logits, x), append(dists, softmaxOf(y))
	}
	return logits, dists
}

// TestSpecTreeVerifyChain checks that a chain written as a tree has
// spec_verify's laws: the accepted depth is the emitted length, and each
// position's token law is the chain's.
func TestSpecTreeVerifyChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const k, v = 4, 12
	for _, oneHot := range []bool{true, false} {
		target, q := randomRows(rng, k+1, v, 1.5)
		drafts := make([]int64, k)
		for i := range drafts {
			drafts[i] = int64(rng.IntN(v))
		}
		var sq [][]float64
		if !oneHot {
			sq = q[:k]
		} else {
			q = nil
		}
		next, sibling := make([]int64, k+1), make([]int64, k+1)
		for i := range next {
			next[i], sibling[i] = int64(i+1), -1
		}
		next[k] = -1
		spec := SpecVerify(specRun(target, drafts, sq), 0, 1e-5)
		tree := SpecTreeVerify(treeRun(target, append([]int64{0}, drafts...), next, sibling, q), 0, 1e-5)
		if spec.Invalid != "" || tree.Invalid != "" {
			t.Fatalf("invalid: spec %q, tree %q", spec.Invalid, tree.Invalid)
		}
		for d := range k + 1 {
			if math.Abs(tree.Depth[d]-spec.Emitted[d]) > 1e-12 {
				t.Errorf("one-hot %v: P(depth %d) = %g, spec_verify's P(emitted %d) = %g", oneHot, d, tree.Depth[d], d, spec.Emitted[d])
			}
			for j := range v {
				if math.Abs(tree.Position[d][j]-spec.Position[d][j]) > 1e-12 {
					t.Fatalf("one-hot %v: position %d token %d: tree %g, spec_verify %g", oneHot, d, j, tree.Position[d][j], spec.Position[d][j])
				}
			}
		}
		if math.Abs(tree.MeanAccepted-(sum(spec.Emitted[1:], func(j int) float64 { return float64(j + 1) }))) > 1e-12 {
			t.Errorf("one-hot %v: mean accepted %g", oneHot, tree.MeanAccepted)
		}
	}
}

// sum returns Σ_j x[j]·w(j).
func sum(x []float64, w func(j int) float64) float64 {
	var s float64
	for j, v := range x {
		s += v * w(j)
	}
	return s
}

// TestSpecTreeVerifyOneHotLossless checks that with one-hot drafts and
// distinct siblings the token at each position follows the targets: the
// first is the root's target, and every depth's law sums to one.
func TestSpecTreeVerifyOneHotLossless(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	const v = 16
	next, sibling := samplertest.KaryTree(3, 2)
	n := len(next)
	target, _ := randomRows(rng, n, v, 1.5)
	tokens := make([]int64, n)
	for u := range n {
		perm := rng.Perm(v)
		j := 0
		for c := next[u]; c != -1; c = sibling[c] {
			tokens[c] = int64(perm[j])
			j++
		}
	}
	s := SpecTreeVerify(treeRun(target, tokens, next, sibling, nil), 0, 1e-5)
	if s.Invalid != "" {
		t.Fatal(s.Invalid)
	}
	if s.TargetTV > 1e-12 {
		t.Errorf("first token %g from the root's target, want 0", s.TargetTV)
	}
	var total float64
	for _, d := range s.Depth {
		total += d
	}
	if math.Abs(total-1) > 1e-12 {
		t.Errorf("depth law sums to %g", total)
	}
	for k, pos := range s.Position {
		if z := sum(pos, func(int) float64 { return 1 }); math.Abs(z-1) > 1e-12 {
			t.Errorf("position %d law sums to %g", k, z)
		}
	}
}

// TestSpecTreeVerifyMatchesSimulation compares the laws with samplertest's
// independent float64 verifier over many trials: the accepted depth and the
// first token, with draft distributions and one-hot drafts.
func TestSpecTreeVerifyMatchesSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(95, 96))
	const v, trials = 8, 200000
	next, sibling := samplertest.KaryTree(2, 3)
	n := len(next)
	for _, oneHot := range []bool{true, false} {
		target, q := randomRows(rng, n, v, 1)
		tokens := make([]int64, n)
		for c := 1; c < n; c++ {
			tokens[c] = int64(rng.IntN(v)) // siblings may repeat a token
		}
		if oneHot {
			q = nil
		}
		s := SpecTreeVerify(treeRun(target, tokens, next, sibling, q), 0, 1e-5)
		if s.Invalid != "" {
			t.Fatal(s.Invalid)
		}
		sim := &samplertest.Tree{Next: next, Sibling: sibling, Tokens: tokens, Draft: q}
		for _, x := range target {
			sim.Target = append(sim.Target, softmaxOf(x))
		}
		depth := make([]float64, len(s.Depth))
		first := make([]float64, v)
		for range trials {
			path, toks := sim.Trial(rng, len(s.Depth))
			a := 0
			for a+1 < len(path) && path[a+1] != -1 {
				a++
			}
			depth[a]++
			first[toks[0]]++
		}
		check := func(what string, got, want []float64) {
			for j := range want {
				sd := math.Sqrt(want[j] * (1 - want[j]) / trials)
				if d := got[j]/trials - want[j]; math.Abs(d) > 5*sd+1e-9 {
					t.Errorf("one-hot %v: %s %d: simulated %.5f, law %.5f (%.1f sd)", oneHot, what, j, got[j]/trials, want[j], d/sd)
				}
			}
		}
		check("depth", depth, s.Depth)
		check("first token", first, s.Position[0])
	}
}
