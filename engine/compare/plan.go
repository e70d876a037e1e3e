package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// plan says how one output is judged: which of its tensors, against which
// reference, at which tolerances. problem, when set, says why the output
// cannot be judged at all.
type plan struct {
	out *engine.Output
	rep engine.OutputReport
	tol engine.Tolerances
	// eps is the boundary band of the references (ref.BoundaryEps).
	eps     float64
	problem string

	probs   bool // Probs against softmax or renorm
	renorm  bool // the distribution has the row's filters (every op but softmax)
	tokens  bool // Tokens
	argmax  bool // Tokens are argmax tokens (else sampled)
	samples bool // Samples, or SampleCounts when counts
	counts  bool // the draws are SampleCounts
	spec    bool // SpecTokens (+ SpecEmitted, SpecAccepted)
	trials  bool // SpecTrials
	draft   bool // DraftOut
	logits  bool // Logits against the golden logits (logits_gate)
	// logprobs: Logprobs against the reference log-softmax of kind lpKind;
	// topN is N of a top-N (0: every token's).
	logprobs bool
	topN     int
	lpKind   engine.LogprobsKind
	// otherKind holds, per row of a logprobs output that fails, whether it
	// passes against the other kind's strict reference (1) or not (-1); 0
	// for rows not tried. Each row's entry is written by the worker that
	// judges the row.
	otherKind []int8
	// tree and treeTrials: TreeTokens with TreePath (+ TreeAccepted), and
	// TreeTrials with TreePathTrials; depth is the deepest row's depth.
	tree, treeTrials bool
	depth            int
	// underflow is the reference probability below which a zero output is
	// not a dropped token.
	underflow float64
	// accepted holds, per row, what the run-level check of spec_accepted
	// needs (nil when the output has no spec_accepted). Each row's entry is
	// written by the worker that judges the row.
	accepted []acceptedRow
	// slack holds, per row, the slack of each position's acceptance band
	// (specLaws.slack) for the pooled tests; written like accepted.
	slack [][]float64
	// seeds is the seed rules' state when this output is the one they judge.
	seeds *seedState
	// emittedIsAccepted is set when spec_emitted equals spec_accepted on
	// every real row: a row whose tokens show another accepted prefix is
	// then told that spec_emitted reports the accepted counter.
	emittedIsAccepted bool
}

// newPlan checks out against the run and decides what to judge.
func newPlan(j *judge, i int, out *engine.Output) *plan {
	run := j.run
	p := &plan{out: out, renorm: run.Op != engine.OpSoftmax, underflow: underflowBelow(engine.F32)}
	p.rep = engine.OutputReport{Name: out.Name, External: out.External, Timing: out.Timing}
	if p.rep.Name == "" {
		p.rep.Name = fmt.Sprintf("output %d", i)
	}
	b, v, k := j.rows, j.vocab, run.DraftLen()
	var problems []string
	fail := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	spec := run.Op.Spec()
	// judges says whether the op judges the output tensor called name (the
	// op table's Outputs), and says why not when it does not.
	judges := func(name string) bool {
		if spec == nil || !spec.Judges(name) {
			fail("%s cannot be judged for %s", name, run.Op)
			return false
		}
		return true
	}
	needLogits := func(what string) bool {
		if !judges(what) {
			return false
		}
		if run.Logits == nil || len(run.Logits.Shape) != 2 {
			fail("%s need [B, V] logits to be judged", what)
			return false
		}
		return true
	}
	outDType := engine.I32
	if t := out.Probs; t != nil && needLogits("probs") {
		switch {
		case !t.DType.IsFloat():
			fail("probs have dtype %v, want a float dtype", t.DType)
		case !shapeIs(t, b, v):
			fail("probs have shape %s, want [%d, %d]", t.ShapeString(), b, v)
		default:
			p.probs = true
			outDType = t.DType
			p.underflow = underflowBelow(t.DType)
		}
	}
	if t := out.Tokens; t != nil && needLogits("tokens") {
		switch {
		case !t.DType.IsInt():
			fail("tokens have dtype %v, want an integer dtype", t.DType)
		case t.NumElements() != b:
			fail("tokens have shape %s, want [%d]", t.ShapeString(), b)
		default:
			p.tokens, p.argmax = true, run.Op == engine.OpArgmax
		}
	}
	if out.Samples != nil && out.SampleCounts != nil {
		// One of the two would be judged and the other never looked at.
		fail("it holds both samples and sample_counts, want one of the two (its draws listed or counted)")
	}
	if t := out.Samples; t != nil && needLogits("samples") {
		switch {
		case !t.DType.IsInt():
			fail("samples have dtype %v, want an integer dtype", t.DType)
		case len(t.Shape) != 2 || t.Dim(0) != b || t.Dim(1) < 1:
			fail("samples have shape %s, want [%d, N]", t.ShapeString(), b)
		default:
			p.samples = true
		}
	}
	if t := out.SampleCounts; t != nil && out.Samples == nil && needLogits("sample_counts") {
		switch {
		case !t.DType.IsInt():
			fail("sample_counts have dtype %v, want an integer dtype", t.DType)
		case !shapeIs(t, b, v):
			fail("sample_counts have shape %s, want [%d, %d]", t.ShapeString(), b, v)
		case out.SampleDraws < 0:
			fail("sample_counts come from %d draws a row, want at least 0", out.SampleDraws)
		default:
			if out.External { // ours are counts by construction
				if why := countsProblem(t, v); why != "" {
					fail("%s", why)
					break
				}
			}
			p.samples, p.counts = true, true
		}
	}
	specOK := func(what string) bool {
		if !judges(what) {
			return false
		}
		if run.TargetLogits == nil || run.DraftTokens == nil {
			fail("%s need a spec_verify run with target_logits and draft_tokens", what)
			return false
		}
		return true
	}
	if t := out.SpecTokens; t != nil && specOK("spec_tokens") {
		switch {
		case !t.DType.IsInt() || !shapeIs(t, b, k+1):
			fail("spec_tokens have dtype %v and shape %s, want integers [%d, %d]", t.DType, t.ShapeString(), b, k+1)
		case out.SpecEmitted != nil && out.SpecEmitted.NumElements() != b:
			fail("spec_emitted has shape %s, want [%d]", out.SpecEmitted.ShapeString(), b)
		case out.SpecAccepted != nil && out.SpecAccepted.NumElements() != b:
			fail("spec_accepted has shape %s, want [%d]", out.SpecAccepted.ShapeString(), b)
		default:
			p.spec = true
		}
	}
	if t := out.SpecTrials; t != nil && specOK("spec_trials") {
		if !t.DType.IsInt() || len(t.Shape) != 3 || t.Dim(0) < 1 || t.Dim(1) != b || t.Dim(2) != k+1 {
			fail("spec_trials have dtype %v and shape %s, want integers [T, %d, %d]", t.DType, t.ShapeString(), b, k+1)
		} else {
			p.trials = true
		}
	}
	p.planTree(run, b, judges, fail)
	if t := out.DraftOut; t != nil && judges("draft_out") {
		switch {
		case j.run.InputIDs == nil || j.run.InputIDsLen == nil || j.run.PreIDs == nil || j.run.StepIdx == nil:
			fail("draft_out needs an ngram_match run with input_ids, input_ids_len, pre_ids and step_idx")
		case !t.DType.IsInt() || len(t.Shape) != 2 || t.Dim(0) != b:
			fail("draft_out has dtype %v and shape %s, want integers [%d, D]", t.DType, t.ShapeString(), b)
		case j.run.Params.NgramSemantics.FastDeploy() && t.Dim(1) != j.run.Params.MaxDraftTokens+1:
			fail("draft_out has shape %s, but FastDeploy's draft buffer is [%d, max_draft_tokens + 1 = %d]", t.ShapeString(), b, j.run.Params.MaxDraftTokens+1)
		case out.SeqLensThisTime != nil && (!out.SeqLensThisTime.DType.IsInt() || out.SeqLensThisTime.NumElements() != b):
			fail("seq_lens_this_time_out has dtype %v and shape %s, want integers [%d]", out.SeqLensThisTime.DType, out.SeqLensThisTime.ShapeString(), b)
		case out.SeqLensThisTime != nil && !j.run.Params.NgramSemantics.FastDeploy():
			fail("seq_lens_this_time_out is FastDeploy's output: give ngram_semantics fastdeploy or fastdeploy_hybrid to judge it")
		default:
			p.draft = true
		}
	}
	if t := out.Logits; t != nil && needLogits("logits") {
		switch {
		case !t.DType.IsFloat():
			fail("logits have dtype %v, want a float dtype", t.DType)
		case !shapeIs(t, b, v):
			fail("logits have shape %s, want [%d, %d]", t.ShapeString(), b, v)
		default:
			p.logits = true
			outDType = t.DType
		}
	}
	if t := out.Logprobs; t != nil && needLogits("logprobs") {
		ids := out.LogprobTokenIDs
		switch {
		case !t.DType.IsFloat():
			fail("logprobs have dtype %v, want a float dtype", t.DType)
		case ids == nil && !shapeIs(t, b, v):
			fail("logprobs have shape %s, want [%d, %d], or [%d, N] with logprob_token_ids", t.ShapeString(), b, v, b)
		case ids != nil && (len(t.Shape) != 2 || t.Dim(0) != b || t.Dim(1) < 1 || t.Dim(1) > v):
			fail("logprobs have shape %s, want [%d, N] with N in [1, %d] beside logprob_token_ids", t.ShapeString(), b, v)
		case ids != nil && (!ids.DType.IsInt() || !shapeIs(ids, t.Shape...)):
			fail("logprob_token_ids have dtype %v and shape %s, want integers %s", ids.DType, ids.ShapeString(), t.ShapeString())
		default:
			p.logprobs = true
			if ids != nil {
				p.topN = t.Dim(1)
			}
			p.lpKind = out.LogprobsKind
			if p.lpKind == "" {
				p.lpKind = engine.LogprobsRaw
			}
			outDType = t.DType
		}
	}
	switch {
	case p.logits:
		p.rep.Kind = "logits"
	case p.probs:
		p.rep.Kind = "probs"
	case p.logprobs:
		p.rep.Kind = "logprobs"
	case p.spec || p.trials:
		p.rep.Kind = "spec"
	case p.tree || p.treeTrials:
		p.rep.Kind = "tree"
	case p.samples:
		p.rep.Kind = "samples"
	case p.tokens:
		p.rep.Kind = "tokens"
	case p.draft:
		p.rep.Kind = "draft"
	case len(problems) == 0:
		fail("the output holds nothing to judge")
	}
	p.tol = TolerancesFor(run.InputDType(), outDType, j.o)
	p.eps = ref.BoundaryEps(p.tol.Strict.Rtol)
	if p.logprobs {
		// The boundary band is a probability output's of the same dtypes;
		// the values are judged on the log scale.
		p.tol = LogprobTolerancesFor(outDType, j.o)
		p.rep.Logprobs = &engine.LogprobsInfo{Kind: p.lpKind, TopN: p.topN}
		p.otherKind = make([]int8, b)
	}
	if len(problems) > 0 {
		p.probs, p.tokens, p.samples, p.counts, p.spec, p.trials, p.draft, p.logits = false, false, false, false, false, false, false, false
		p.logprobs, p.rep.Logprobs, p.otherKind = false, nil, nil
		p.tree, p.treeTrials = false, false
		p.problem = strings.Join(problems, "; ")
		p.rep.Notes = append(p.rep.Notes, fmt.Sprintf("%s cannot be judged: %s", p.rep.Name, p.problem))
	}
	if p.tokens && !p.argmax && !p.samples {
		p.rep.Notes = append(p.rep.Notes, "one sampled token per row is weak evidence: a biased sampler still lands on the support; many draws per row (samples) are judged statistically")
	}
	if p.spec && !p.trials {
		p.rep.Notes = append(p.rep.Notes, "one trial per row (spec_tokens) is weak evidence: each row is judged on its structure, and acceptance by position is tested pooled over the rows; many trials per row (spec_trials) test each row's acceptance, emitted lengths and the lossless rule")
	}
	if p.spec && out.SpecAccepted != nil {
		p.accepted = make([]acceptedRow, b)
		p.emittedIsAccepted = out.SpecEmitted != nil && sameCounters(run, out.SpecEmitted, out.SpecAccepted)
	}
	if p.tree && !p.treeTrials {
		p.rep.Notes = append(p.rep.Notes, "one trial per row (tree_tokens) is weak evidence: each row is judged on its structure, and acceptance by depth is tested pooled over the rows; many trials per row (tree_trials with tree_path_trials) test each row's acceptance, accepted tokens and the lossless rule")
	}
	if p.spec || p.trials || p.tree || p.treeTrials {
		p.slack = make([][]float64, b)
	}
	return p
}

// sameCounters reports whether spec_emitted and spec_accepted hold the same
// value on every real row of run.
func sameCounters(run *engine.Run, emitted, accepted *engine.Tensor) bool {
	for r := range emitted.NumElements() {
		if !run.Padding(r) && emitted.Int(r) != accepted.Int(r) {
			return false
		}
	}
	return true
}

// planTree decides how a draft tree's output is judged: tree_tokens with
// tree_path, and tree_trials with tree_path_trials, each pair of one shape
// wide enough for the deepest row's path and its drawn token.
func (p *plan) planTree(run *engine.Run, b int, judges func(string) bool, fail func(string, ...any)) {
	out := p.out
	if out.TreeTokens == nil && out.TreePath == nil && out.TreeTrials == nil && out.TreePathTrials == nil {
		return
	}
	name := "tree_tokens"
	if out.TreeTokens == nil && out.TreePath == nil {
		name = "tree_trials"
	}
	if !judges(name) {
		return
	}
	trees, err := run.Trees()
	if err != nil || run.TargetLogits == nil || run.Candidates == nil {
		fail("%s need a spec_tree_verify run with target_logits, candidates and readable tree links", name)
		return
	}
	for _, t := range trees {
		p.depth = max(p.depth, t.MaxDepth)
	}
	pair := func(path, tokens *engine.Tensor, pathName, tokensName string, lead ...int) bool {
		missing := tokensName
		if path == nil {
			missing = pathName
		}
		switch {
		case path == nil || tokens == nil:
			fail("%s and %s are judged together (the path's nodes and the emitted tokens), and the output lacks %s", pathName, tokensName, missing)
		case !path.DType.IsInt() || !tokens.DType.IsInt() || engine.FormatShape(path.Shape) != engine.FormatShape(tokens.Shape):
			fail("%s (%v %s) and %s (%v %s) must be integers of one shape", pathName, path.DType, path.ShapeString(), tokensName, tokens.DType, tokens.ShapeString())
		case len(path.Shape) != len(lead)+1 || !shapeIs(path, slices.Concat(lead, []int{path.Dim(len(lead))})...):
			fail("%s has shape %s, want [%sP]", pathName, path.ShapeString(), dimsText(lead))
		case path.Dim(len(lead)) < p.depth+1:
			fail("%s has %d positions, but the deepest tree's path and its drawn token need %d", pathName, path.Dim(len(lead)), p.depth+1)
		default:
			return true
		}
		return false
	}
	if out.TreeTokens != nil || out.TreePath != nil {
		p.tree = pair(out.TreePath, out.TreeTokens, "tree_path", "tree_tokens", b)
		if a := out.TreeAccepted; p.tree && a != nil && (!a.DType.IsInt() || a.NumElements() != b) {
			fail("tree_accepted has dtype %v and shape %s, want integers [%d]", a.DType, a.ShapeString(), b)
			p.tree = false
		}
	}
	if out.TreeTrials != nil || out.TreePathTrials != nil {
		t := out.TreeTrials
		if t == nil {
			t = out.TreePathTrials
		}
		p.treeTrials = len(t.Shape) == 3 && pair(out.TreePathTrials, out.TreeTrials, "tree_path_trials", "tree_trials", t.Dim(0), b)
		if len(t.Shape) != 3 {
			fail("tree_trials have shape %s, want [T, %d, P]", t.ShapeString(), b)
		}
	}
}

// dimsText writes leading dimensions for a message: "4, 16,".
func dimsText(lead []int) string {
	s := ""
	for _, d := range lead {
		s += fmt.Sprintf("%d, ", d)
	}
	return s
}

// shapeIs reports whether t has exactly the given shape.
func shapeIs(t *engine.Tensor, dims ...int) bool {
	if len(t.Shape) != len(dims) {
		return false
	}
	for i, d := range dims {
		if t.Shape[i] != d {
			return false
		}
	}
	return true
}

// countsProblem says why sample_counts t, [B, v], cannot be counts: its
// first negative count, or its first row whose counts sum past an int64
// (summed, they would wrap and the row would seem to hold no draws); "" when
// they can.
func countsProblem(t *engine.Tensor, v int) string {
	if v <= 0 {
		return ""
	}
	for r := range t.NumElements() / v {
		if p := CountsRowProblem(t, r, v); p != "" {
			return p
		}
	}
	return ""
}

// CountsRowProblem is countsProblem for row r alone: "" when the row's
// counts can be shown and judged as draws.
func CountsRowProblem(t *engine.Tensor, r, v int) string {
	var sum int64
	for tok := range v {
		c := t.Int(r*v + tok)
		if c < 0 {
			return fmt.Sprintf("sample_counts[%d, %d] is %d, want a count >= 0", r, tok, c)
		}
		if sum > math.MaxInt64-c {
			return fmt.Sprintf("sample_counts row %d sums past %d at token %d, want a row's draws to fit in an int64", r, int64(math.MaxInt64), tok)
		}
		sum += c
	}
	return ""
}
