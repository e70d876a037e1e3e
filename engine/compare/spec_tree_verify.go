package compare

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
)

// treeTrial is one trial of a tree verifier: the accepted path's nodes and
// the emitted tokens, as written (width entries each).
type treeTrial struct {
	path, tokens []int64
}

// judgeTree judges row r of a draft tree's output: the structural rules of
// SEMANTICS.md "Judging" on tree_path and tree_tokens (with tree_accepted
// when present) and on every trial of tree_path_trials and tree_trials,
// then the statistics of the trials that keep the rules (treeTrialStats):
// those of the trials tensors when the output has them, else the one trial
// of tree_tokens.
func (w *worker) judgeTree(p *plan, r int, rep *engine.RowReport) {
	s := w.treeRef(r, p.eps)
	if s.Invalid != "" {
		invalidRow(rep, r, s.Invalid, s.InvalidRule)
		return
	}
	slack := treeSlack(s, p.depth)
	p.slack[r] = slack
	var trials []treeTrial
	if p.tree {
		t := readTreeTrial(p.out.TreePath, p.out.TreeTokens, r)
		var accepted *int64
		if a := p.out.TreeAccepted; a != nil {
			x := a.Int(r)
			accepted = &x
		}
		if rule, msg, tok := treeProblem(s, slack, t, accepted, w.j.vocab); msg != "" {
			rep.AddFinding(violation(rule, tok, "row %d: %s", r, msg))
		} else if !p.treeTrials {
			trials = []treeTrial{t}
		}
	}
	if p.treeTrials {
		n := p.out.TreeTrials.Dim(0)
		failed, first := 0, ""
		var firstRule engine.Rule
		firstTok := -1
		for d := range n {
			t := readTreeTrial(p.out.TreePathTrials, p.out.TreeTrials, d*w.j.rows+r)
			if rule, msg, tok := treeProblem(s, slack, t, nil, w.j.vocab); msg != "" {
				if failed == 0 {
					first, firstRule, firstTok = fmt.Sprintf("trial %d: %s", d, msg), rule, tok
				}
				failed++
				continue
			}
			trials = append(trials, t)
		}
		if failed > 0 {
			rep.AddFinding(violation(firstRule, firstTok, "row %d: %d of %d trials break the rules; first, %s (the statistics count the other %d)", r, failed, n, first, n-failed))
		}
	}
	if len(trials) > 0 {
		w.treeTrialStats(p, s, slack, trials, r, rep)
	}
}

// readTreeTrial reads row i (of the flattened leading dimensions) of a
// path tensor and a token tensor of the same width.
func readTreeTrial(path, tokens *engine.Tensor, i int) treeTrial {
	width := path.Dim(len(path.Shape) - 1)
	t := treeTrial{path: make([]int64, width), tokens: make([]int64, width)}
	for j := range width {
		t.path[j] = path.Int(i*width + j)
		t.tokens[j] = tokens.Int(i*width + j)
	}
	return t
}

// accepted returns the number of tokens t accepted: its path's nodes less
// the root.
func (t treeTrial) accepted() int {
	a := 0
	for a+1 < len(t.path) && t.path[a+1] != -1 {
		a++
	}
	return a
}

// treeSlack returns the relative band around the acceptance probability
// at each depth (acceptSlack plus the greatest share of boundary mass among
// the targets of the depth's nodes, which a sampler may keep or drop
// unseen), for depths 0..d-1.
func treeSlack(s *ref.TreeRef, d int) []float64 {
	slack := make([]float64, d)
	for i := range slack {
		slack[i] = acceptSlack
	}
	for u := range s.Target {
		k := s.Tree.Depth[u]
		if k < 0 || k >= d || len(s.Target[u].Class) == 0 {
			continue
		}
		slack[k] = math.Max(slack[k], acceptSlack+boundaryShare(&s.Target[u]))
	}
	return slack
}

// treeProblem checks one trial against the structural rules and returns
// the rule broken, a message without the row, and the token it is about,
// or an empty message: the path starts at the root and follows parent
// links, each accepted token is its node's candidate and could be accepted,
// one drawn token with mass where the walk stopped follows the accepted
// ones, and both are -1 after. accepted, when not nil, is tree_accepted.
func treeProblem(s *ref.TreeRef, slack []float64, t treeTrial, accepted *int64, v int) (engine.Rule, string, int) {
	n := len(s.Tokens)
	for j, x := range t.tokens {
		if x < -1 || x >= int64(v) {
			return engine.RuleTokenRange, fmt.Sprintf("token %d at position %d is outside [-1, %d)", x, j, v), int(x)
		}
	}
	for j, x := range t.path {
		if x < -1 || x >= int64(n) {
			return engine.RuleStructure, fmt.Sprintf("node %d at position %d of the path is outside the tree's nodes [0, %d)", x, j, n), -1
		}
	}
	if t.path[0] != 0 {
		return engine.RuleStructure, fmt.Sprintf("the path starts at node %d, not at the root 0", t.path[0]), -1
	}
	a := t.accepted()
	for j := a + 1; j < len(t.path); j++ {
		if t.path[j] != -1 {
			return engine.RuleStructure, fmt.Sprintf("node %d at position %d of the path follows the -1 fill at position %d", t.path[j], j, a+1), -1
		}
	}
	for j := 1; j <= a; j++ {
		c, parent := int(t.path[j]), int(t.path[j-1])
		if s.Tree.Parent[c] != parent {
			return engine.RuleStructure, fmt.Sprintf("node %d at position %d of the path is not a child of node %d", c, j, parent), -1
		}
		x := s.Tokens[c]
		if t.tokens[j-1] != x {
			return engine.RuleStructure, fmt.Sprintf("token %d at position %d is not the candidate %d of node %d, yet the path goes through it", t.tokens[j-1], j-1, x, c), int(t.tokens[j-1])
		}
		if s.Accept[c] == 0 && s.Target[parent].Class[x] != ref.Boundary {
			return engine.RuleAcceptance, fmt.Sprintf("node %d (token %d) was accepted, but its acceptance probability is 0", c, x), int(x)
		}
	}
	drawn := t.tokens[a]
	if drawn == -1 {
		return engine.RuleStructure, fmt.Sprintf("no token follows the %d accepted (position %d is -1; a verifier always emits the token drawn where it stops)", a, a), -1
	}
	for j := a + 1; j < len(t.tokens); j++ {
		if t.tokens[j] != -1 {
			return engine.RuleStructure, fmt.Sprintf("token %d at position %d follows the drawn token at position %d", t.tokens[j], j, a), int(t.tokens[j])
		}
	}
	u := int(t.path[a])
	if !drawnOK(s, slack, u, int(drawn)) {
		what := "the residual the rejected children left"
		if len(s.Tree.Children[u]) == 0 {
			what = "the target (node %d is a leaf)"
			what = fmt.Sprintf(what, u)
		}
		return engine.RuleSupport, fmt.Sprintf("the token %d drawn where the walk stopped, at node %d, has zero mass under %s", drawn, u, what), int(drawn)
	}
	if accepted != nil && *accepted != int64(a) {
		return engine.RuleStructure, fmt.Sprintf("tree_accepted is %d, but the path accepts %d tokens", *accepted, a), -1
	}
	return "", "", -1
}

// drawnOK reports whether token t may be drawn where the walk stops at
// node u: it has mass under the final residual, or is a boundary token of
// u's target, or (draft distributions) its target probability reaches its
// draft probability within the depth's slack, where float32 rounding can
// leave it a residual that float64 gives none.
func drawnOK(s *ref.TreeRef, slack []float64, u, t int) bool {
	if s.Final[u][t] > 0 || s.Target[u].Class[t] == ref.Boundary {
		return true
	}
	pt := s.Target[u].Probs[t]
	if s.Draft == nil || s.Draft[u] == nil || !(pt > 0) {
		return false
	}
	w := acceptSlack
	if d := s.Tree.Depth[u]; d < len(slack) {
		w = slack[d]
	}
	return pt >= s.Draft[u][t]*(1-w)
}

// treeTrialStats computes the statistics of row r's trials against the
// exact laws s, fills rep.Spec (by depth) and rep.Tree, and adds a
// violation for each test that fails: the acceptance at each depth, the
// histogram of accepted tokens, and the tokens at each position of the
// emitted path. The tests share the p-value threshold (Bonferroni), as
// spec_verify's do.
func (w *worker) treeTrialStats(p *plan, s *ref.TreeRef, slack []float64, trials []treeTrial, r int, rep *engine.RowReport) {
	d, v := p.depth, w.j.vocab
	thr := p.tol.PValue
	var tests []rowTest
	n := len(trials)
	hist := make([]int64, d+1)
	counts := make([][]int64, d+1)
	reached := make([]int, len(s.Tokens))
	var acceptedSum int
	for _, t := range trials {
		a := t.accepted()
		hist[a]++
		acceptedSum += a
		for j := 0; j <= a; j++ {
			if counts[j] == nil {
				counts[j] = make([]int64, v)
			}
			counts[j][t.tokens[j]]++
			reached[t.path[j]]++
		}
	}
	law := func(k int) float64 { // P(A = k)
		if k < len(s.Depth) {
			return s.Depth[k]
		}
		return 0
	}
	reach := func(k int) float64 { // P(A >= k)
		if k < len(s.ReachDepth) {
			return s.ReachDepth[k]
		}
		return 0
	}

	st := &engine.SpecStats{Trials: n, Positions: make([]engine.PositionRate, d), Emitted: make([]int, d+1), EmittedTheory: make([]engine.Float, d+1)}
	atLeast := n
	for k := range d {
		more := atLeast - int(hist[k])
		a := 0.0
		if reach(k) > 0 {
			a = reach(k+1) / reach(k)
		}
		rate := 0.0
		if atLeast > 0 {
			rate = float64(more) / float64(atLeast)
		}
		lo, hi := stats.Wilson(more, atLeast, stats.Z95)
		pv := acceptanceP(more, atLeast, a, slack[k])
		st.Positions[k] = engine.PositionRate{Position: k, Reached: atLeast, Accepted: more, Rate: engine.Float(rate),
			Lo: engine.Float(lo), Hi: engine.Float(hi), Theory: engine.Float(a), PValue: engine.Float(pv)}
		if atLeast > 0 {
			k, reachedK := k, atLeast
			tests = append(tests, rowTest{rule: engine.RuleAcceptance, p: pv, tok: -1, msg: func(float64) string {
				which := fmt.Sprintf("of the %d trials that accepted %d tokens accepted one more", reachedK, k)
				if k == 0 {
					which = fmt.Sprintf("of the %d trials accepted a first token", reachedK)
				}
				return fmt.Sprintf("depth %d: %s %s (95%% CI %s–%s), theory %s (%s)", k, engine.FormatPercent(rate), which, engine.FormatPercent(lo), engine.FormatPercent(hi), engine.FormatPercent(a), engine.StoredPText(pv))
			}})
		}
		atLeast = more
	}
	theory := make([]float64, d+1)
	lengths := make([]float64, d+1)
	for k := range theory {
		theory[k] = law(k)
		st.Emitted[k] = int(hist[k])
		st.EmittedTheory[k] = engine.Float(theory[k])
		// A share acceptSlack spread over the depths keeps a float32
		// rejection where theory accepts surely from being impossible.
		lengths[k] = (1-acceptSlack)*theory[k] + acceptSlack/float64(d+1)
	}
	st.MeanAcceptanceLength = engine.Float(1 + float64(acceptedSum)/float64(n))
	st.TheoryMeanAcceptanceLength = engine.Float(1 + s.MeanAccepted)
	st.EmittedPValue = 1
	if ef, err := stats.GoodnessOfFit(hist, lengths, stats.FitOptions{Label: "length"}); err == nil {
		st.EmittedPValue = engine.Float(ef.PValue)
		tests = append(tests, rowTest{rule: engine.RuleAcceptance, p: ef.PValue, tok: -1, msg: func(threshold float64) string {
			return fmt.Sprintf("the accepted tokens of %d trials do not follow their exact law (G-test %s < %s): %s",
				n, engine.PText(ef.PValue, ef.LogPValue), engine.FormatSig(threshold, 2), lengthTable(hist, theory))
		}})
	}

	// The lossless check: the tokens at each position of the emitted path.
	st.Lossless = make([]engine.Fit, d+1)
	tr := &engine.TreeStats{Trials: n, Reached: reached, ReachTheory: floats(s.Reach),
		Accepted: engine.Float(float64(acceptedSum) / float64(n)), Theory: engine.Float(s.MeanAccepted), TargetTV: engine.Float(s.TargetTV)}
	if s.MeanAccepted > 0 {
		tr.Excess = engine.Float(float64(tr.Accepted)/s.MeanAccepted - 1)
	}
	pos := make([]float64, v)
	for j := range d + 1 {
		if counts[j] == nil || j >= len(s.Position) {
			st.Lossless[j] = engine.Fit{PValue: 1}
			continue
		}
		positionLaw(s, j, pos)
		f, err := stats.GoodnessOfFit(counts[j], pos, stats.FitOptions{})
		if err != nil {
			st.Lossless[j] = engine.Fit{PValue: 1}
			rep.AddFinding(note(engine.RuleFit, -1, "row %d: position %d: no goodness of fit: %v", r, j, err))
			continue
		}
		st.Lossless[j] = engineFit(&f, thr)
		if j == 0 {
			tr.FirstTV, tr.FirstTVBound = engine.Float(f.TV), engine.Float(f.TVBound)
		}
		what := fmt.Sprintf("position %d: the %d tokens of the trials that accepted at least %d", j, f.Draws, j)
		if j == 0 {
			what = fmt.Sprintf("position 0: the first tokens of the %d trials", f.Draws)
		}
		t := rowTest{rule: engine.RuleFit, p: f.PValue, tok: f.Worst.Token, msg: func(threshold float64) string {
			return fitSentence(&f, what, "exact tree speculative sampling", threshold)
		}}
		if f.ZeroMassTotal > 0 {
			z := f.ZeroMassDraws[0]
			t.hard = fmt.Sprintf("%s: %d have zero mass under exact tree speculative sampling (first, token %d drawn %d times)",
				what, f.ZeroMassTotal, z.Token, z.Count)
			t.tok = z.Token
		}
		tests = append(tests, t)
	}
	rep.Spec, rep.Tree = st, tr
	reportTests(rep, r, tests, thr)
}

// positionLaw writes into dst the law the tokens at position j are fitted
// to: the exact law, with a share residualNoise given to the targets of
// the depth's nodes over every token they do not drop (boundary tokens
// included), so that float32 rounding of a residual, or a boundary token a
// sampler keeps, is never an impossible draw.
func positionLaw(s *ref.TreeRef, j int, dst []float64) {
	for t := range dst {
		dst[t] = 0
	}
	var z float64
	for u, dist := range s.Target {
		if s.Tree.Depth[u] != j || len(dist.Class) == 0 {
			continue
		}
		var kept float64
		for t, c := range dist.Class {
			if c != ref.Dropped {
				kept += dist.Base[t]
			}
		}
		if !(kept > 0) {
			continue
		}
		for t, c := range dist.Class {
			if c != ref.Dropped {
				dst[t] += s.Reach[u] * dist.Base[t] / kept
			}
		}
		z += s.Reach[u]
	}
	for t, x := range s.Position[j] {
		dst[t] = (1-residualNoise)*x + residualNoise*dst[t]/z
	}
}

// treeSummary pools a tree output's rows (or.Tree, trial weighted) and
// says in words how far the output is from the lossless rule: the accepted
// tokens against exact tree sampling, and the first token's distance from
// its law. It is a run-level violation when the output already fails a
// statistical test, a note otherwise.
func treeSummary(or *engine.OutputReport) {
	pool := &engine.TreeStats{}
	var rows int
	var bound, targetTV float64
	for i := range or.Rows {
		t := or.Rows[i].Tree
		if t == nil || t.Trials == 0 {
			continue
		}
		rows++
		w := float64(t.Trials)
		pool.Trials += t.Trials
		pool.Accepted += engine.Float(w) * t.Accepted
		pool.Theory += engine.Float(w) * t.Theory
		pool.FirstTV += engine.Float(w) * t.FirstTV
		bound += w * float64(t.FirstTVBound)
		targetTV += w * float64(t.TargetTV)
	}
	if pool.Trials == 0 {
		return
	}
	n := engine.Float(pool.Trials)
	pool.Accepted /= n
	pool.Theory /= n
	pool.FirstTV /= n
	pool.FirstTVBound = engine.Float(math.Min(1, bound/float64(n)))
	pool.TargetTV = engine.Float(targetTV / float64(n))
	if pool.Theory > 0 {
		pool.Excess = pool.Accepted/pool.Theory - 1
	}
	or.Tree = pool
	more := "more"
	if pool.Excess < 0 {
		more = "fewer"
	}
	law := "its lossless law"
	if pool.TargetTV < 1e-9 {
		law = "the target (its lossless law here)"
	}
	msg := fmt.Sprintf("accepts %s %s tokens than the lossless rule (%s a trial where exact tree sampling gives %s, over %d trials of %s); the first emitted token is %s from %s in total variation (a lossless verifier stays under %s)",
		engine.FormatPercent(math.Abs(float64(pool.Excess))), more, engine.FormatSig(float64(pool.Accepted), 3), engine.FormatSig(float64(pool.Theory), 3), pool.Trials, plural(rows, "row"),
		engine.FormatSig(float64(pool.FirstTV), 2), law, engine.FormatSig(float64(pool.FirstTVBound), 2))
	failed := len(or.Violations) > 0
	for _, r := range or.Rows {
		failed = failed || (r.PValue != nil && !r.Pass)
	}
	if failed {
		runViolation(or, "%s", msg)
		return
	}
	or.Notes = append(or.Notes, msg)
}
