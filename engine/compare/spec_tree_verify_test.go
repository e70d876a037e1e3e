package compare

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/samplertest"
)

// treeJudgeRun builds a spec_tree_verify run of b rows on the tree of
// topk and depth over v tokens: normal logits, the root's first child
// given target probability about 0.6 (so that relaxed thresholds show),
// distinct sibling candidates, and with q draft distributions at every
// node. It returns the run and each row's float64 simulation of mistake.
func treeJudgeRun(rng *rand.Rand, b, v, topk, depth int, q bool, mistake samplertest.TreeMistake) (*engine.Run, []*samplertest.Tree) {
	next, sibling := samplertest.KaryTree(topk, depth)
	n := len(next)
	logits := make([]float64, b*n*v)
	for i := range logits {
		logits[i] = 1.2 * rng.NormFloat64()
	}
	tokens := make([]int64, b*n)
	var probs []float64
	for r := range b {
		for u := range n {
			perm := rng.Perm(v)
			j := 0
			for c := next[u]; c != -1; c = sibling[c] {
				tokens[r*n+int(c)] = int64(perm[j])
				j++
			}
		}
		x := tokens[r*n+int(next[0])]
		logits[(r*n)*v+int(x)] += 4 // about 0.6 of the root's mass
	}
	run := &engine.Run{
		Source: "test", Op: engine.OpSpecTreeVerify,
		TargetLogits: engine.FromFloat64s("target_logits", engine.F32, []int{b, n, v}, logits),
		Candidates:   engine.FromInts("candidates", engine.I64, []int{b, n}, tokens),
		NextToken:    engine.FromInts("retrive_next_token", engine.I64, []int{b, n}, slices.Repeat(next, b)),
		NextSibling:  engine.FromInts("retrive_next_sibling", engine.I64, []int{b, n}, slices.Repeat(sibling, b)),
	}
	if q {
		probs = make([]float64, b*n*v)
		for i := 0; i < len(probs); i += v {
			y := make([]float64, v)
			for j := range y {
				y[j] = rng.NormFloat64()
			}
			copy(probs[i:], samplertest.Softmax(y, 1))
		}
		run.DraftProbs = engine.FromFloat64s("draft_probs", engine.F32, []int{b, n, v}, probs)
	}
	p := &run.Params
	for r := range b {
		p.Temperature = append(p.Temperature, 1)
		p.TopK, p.TopP, p.MinP = append(p.TopK, 0), append(p.TopP, 1), append(p.MinP, 0)
		p.Seed, p.Offset = append(p.Seed, uint64(r)), append(p.Offset, 0)
	}
	sims := make([]*samplertest.Tree, b)
	x := make([]float64, v)
	for r := range b {
		s := &samplertest.Tree{Next: next, Sibling: sibling, Tokens: tokens[r*n : (r+1)*n], Mistake: mistake, ThresholdSingle: 0.5, ThresholdAcc: 1}
		for u := range n {
			run.TargetLogits.Floats64((r*n+u)*v, x)
			s.Target = append(s.Target, samplertest.Softmax(x, 1))
			if q {
				d := make([]float64, v)
				run.DraftProbs.Floats64((r*n+u)*v, d)
				s.Draft = append(s.Draft, d)
			}
		}
		sims[r] = s
	}
	return run, sims
}

// simulatedTrials runs every row's simulation trials times as an external
// output named after tree_trials.
func simulatedTrials(rng *rand.Rand, sims []*samplertest.Tree, trials, width int) *engine.Output {
	b := len(sims)
	paths, toks := make([]int64, trials*b*width), make([]int64, trials*b*width)
	for d := range trials {
		for r, s := range sims {
			path, t := s.Trial(rng, width)
			copy(paths[(d*b+r)*width:], path)
			copy(toks[(d*b+r)*width:], t)
		}
	}
	return &engine.Output{Name: "tree_trials", External: true,
		TreeTrials:     engine.FromInts("tree_trials", engine.I32, []int{trials, b, width}, toks),
		TreePathTrials: engine.FromInts("tree_path_trials", engine.I32, []int{trials, b, width}, paths)}
}

func TestTreeJudge(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	const b, v, trials = 6, 24, 3000
	for _, tc := range []struct {
		name    string
		q       bool
		mistake samplertest.TreeMistake
		fails   bool
		excess  bool // accepts more than the lossless rule
	}{
		{"one-hot, lossless", false, samplertest.TreeCorrect, false, false},
		{"draft probs, lossless", true, samplertest.TreeCorrect, false, false},
		{"one-hot, sibling tested against p", false, samplertest.SiblingAgainstTarget, true, false},
		{"one-hot, threshold_single 0.5", false, samplertest.RelaxedThresholds, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, sims := treeJudgeRun(rng, b, v, 3, 2, tc.q, tc.mistake)
			run.Params.Trials = trials
			ours, err := cpu.New().Run(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			ext := simulatedTrials(rng, sims, trials, 3)
			rep := judgeRun(t, run, ours, ext)
			if o := rep.Outputs[0]; !o.Pass {
				t.Errorf("our output fails: %q, rows %v", o.Violations, failedRows(o))
				for _, r := range o.Rows {
					t.Log(r.Violations)
				}
			}
			o := rep.Outputs[1]
			if o.Kind != "tree" {
				t.Errorf("kind %q, want tree", o.Kind)
			}
			if o.Pass == tc.fails {
				t.Errorf("external pass %v, want %v: %q", o.Pass, !tc.fails, o.Violations)
				for _, r := range o.Rows {
					t.Log(r.Violations)
				}
			}
			if o.Tree == nil {
				t.Fatal("no pooled tree statistics")
			}
			if tc.excess != (o.Tree.Excess > 0.05) {
				t.Errorf("excess %.3f, want it above 0.05: %v", float64(o.Tree.Excess), tc.excess)
			}
			if tc.excess && !slices.ContainsFunc(o.Violations, func(s string) bool { return strings.Contains(s, "more tokens than the lossless rule") }) {
				t.Errorf("no sentence on the excess among %q", o.Violations)
			}
		})
	}
}

func TestTreeStructure(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 104))
	run, _ := treeJudgeRun(rng, 1, 16, 2, 2, false, samplertest.TreeCorrect)
	cand := run.Candidates.Ints()
	first := int(run.NextToken.Int(0))        // node 1
	second := int(run.NextSibling.Int(first)) // node 2
	child := int(run.NextToken.Int(first))    // node 3, under node 1
	for _, tc := range []struct {
		name         string
		path, tokens []int64
		rule         engine.Rule
	}{
		{"path not from the root", []int64{1, -1, -1}, []int64{3, -1, -1}, engine.RuleStructure},
		{"not a child", []int64{0, int64(second), int64(child)}, []int64{cand[second], cand[child], 5}, engine.RuleStructure},
		{"token not the candidate", []int64{0, int64(first), -1}, []int64{cand[first] + 1, 5, -1}, engine.RuleStructure},
		{"no drawn token", []int64{0, int64(first), -1}, []int64{cand[first], -1, -1}, engine.RuleStructure},
		// One-hot: every child of the root was rejected, so neither
		// candidate can be drawn there.
		{"drawn a rejected token", []int64{0, -1, -1}, []int64{cand[first], -1, -1}, engine.RuleSupport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &engine.Output{Name: "tree_tokens", External: true,
				TreePath:   engine.FromInts("tree_path", engine.I32, []int{1, 3}, tc.path),
				TreeTokens: engine.FromInts("tree_tokens", engine.I32, []int{1, 3}, tc.tokens)}
			rep := judgeRun(t, run, out)
			if r := rep.Outputs[0].Rows[0]; !hasRule(r, tc.rule) {
				t.Errorf("violations %q, want one of rule %s", r.Violations, tc.rule)
			}
		})
	}
}
