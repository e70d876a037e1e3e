package compare

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// Agreement between outputs (docs/SEMANTICS.md "Agreement between
// outputs"): outputs of a seeded op whose modes declare the same seed and
// offset on a row must draw the same tokens there (a difference fails the
// row of the later output, judged by the worker as the row is judged);
// every other pair of outputs of one kind is compared for the report
// (argmax flips, drift), after the rows are judged.

// seeded reports whether the op's outputs are seeded draws, which modes
// that declare one seed must repeat.
func seeded(op engine.Op) bool { return op == engine.OpSample || op == engine.OpSpecVerify }

// drawKind reports whether plan p holds draws (tokens, samples, spec);
// draws known only as counts are no sequence to compare.
func drawKind(p *plan) bool { return p.tokens || (p.samples && !p.counts) || p.spec || p.trials }

// rowDraws returns row r of p's draws into dst: its token, its samples, its
// spec_tokens, or its spec_trials one trial after the other.
func rowDraws(p *plan, r int, dst []int64) []int64 {
	dst = dst[:0]
	o := p.out
	switch {
	case p.samples && !p.counts:
		n := o.Samples.Dim(1)
		for k := range n {
			dst = append(dst, o.Samples.Int(r*n+k))
		}
	case p.spec:
		n := o.SpecTokens.Dim(1)
		for k := range n {
			dst = append(dst, o.SpecTokens.Int(r*n+k))
		}
	case p.trials:
		t, b, n := o.SpecTrials.Dim(0), o.SpecTrials.Dim(1), o.SpecTrials.Dim(2)
		for i := range t {
			for k := range n {
				dst = append(dst, o.SpecTrials.Int((i*b+r)*n+k))
			}
		}
	case p.tokens:
		dst = append(dst, o.Tokens.Int(r))
	}
	return dst
}

// partAt returns the first draw where a and b differ (over the draws both
// hold), or -1.
func partAt(a, b []int64) int {
	for k := range min(len(a), len(b)) {
		if a[k] != b[k] {
			return k
		}
	}
	return -1
}

// drawAt says which draw of a row of p is draw k (" at draw 3"), or ""
// for the one token of a row.
func drawAt(p *plan, k int) string {
	switch {
	case p.samples:
		return fmt.Sprintf(" at draw %d", k)
	case p.spec:
		return fmt.Sprintf(" at position %d", k)
	case p.trials:
		n := p.out.SpecTrials.Dim(2)
		return fmt.Sprintf(" at trial %d, position %d", k/n, k%n)
	}
	return ""
}

// agree compares row r's draws of every output whose mode declares a seed
// with those of the first earlier output of its kind that declares the
// same seed and offset on the row, failing the row when they part; then it
// compares the float outputs' pairs.
func (w *worker) agree(r int, reports []*engine.RowReport) {
	w.comparePairs(r)
	if !seeded(w.j.run.Op) {
		return
	}
	plans := w.j.plans
	for i, p := range plans {
		rep := reports[i]
		if rep == nil || rep.Padding || !drawKind(p) || p.out.Declared == nil {
			continue
		}
		for j := range i {
			q := plans[j]
			if reports[j] == nil || q.rep.Kind != p.rep.Kind || q.out.Declared == nil || !q.out.Declared.Same(p.out.Declared, r) {
				continue
			}
			w.drawsA, w.drawsB = rowDraws(q, r, w.drawsA), rowDraws(p, r, w.drawsB)
			if k := partAt(w.drawsA, w.drawsB); k >= 0 {
				d := p.out.Declared
				rep.AddFinding(violation(engine.RuleAgreement, int(w.drawsB[k]), "row %d: %s drew token %d%s where %s, declaring the same seed %d and offset %d, drew token %d",
					r, p.rep.Name, w.drawsB[k], drawAt(p, k), q.rep.Name, d.Seed[r], d.Offset[r], w.drawsA[k]))
			}
			break
		}
	}
}

// agreement compares every pair of outputs of one kind once the rows are
// judged, in report order; draws only between the dump's outputs (our
// sampler's random stream is no engine's).
func (j *judge) agreement(outs []engine.OutputReport) []engine.Agreement {
	var list []engine.Agreement
	pairAt := map[[2]int]*pair{}
	for _, pr := range j.pairs {
		pairAt[[2]int{pr.a, pr.b}] = pr
	}
	for a, pa := range j.plans {
		for b := a + 1; b < len(j.plans); b++ {
			pb := j.plans[b]
			if pa.problem != "" || pb.problem != "" || pa.rep.Kind != pb.rep.Kind {
				continue
			}
			ag := engine.Agreement{Kind: pa.rep.Kind, A: pa.rep.Name, B: pb.rep.Name, FirstRow: -1, FirstDraw: -1, MaxRow: -1, MaxToken: -1, Pass: true}
			switch {
			case pa.tokens && pa.argmax:
				j.argmaxFlips(&ag, pa, pb)
			case drawKind(pa):
				if !pa.out.External || !pb.out.External {
					continue // our sampler's stream is not an engine's
				}
				j.draws(&ag, pa, pb)
			case pa.probs || pa.logits:
				j.drift(&ag, pairAt[[2]int{a, b}], pa, &outs[a], &outs[b])
			case pa.logprobs:
				pr := pairAt[[2]int{a, b}]
				if pr == nil {
					continue // a top-N: the two hold different tokens
				}
				j.drift(&ag, pr, pa, &outs[a], &outs[b])
			default:
				continue
			}
			list = append(list, ag)
		}
	}
	return list
}

// draws compares the draws of two outputs on the real rows: under
// same_draws only the rows where both declare the same seed and offset.
func (j *judge) draws(ag *engine.Agreement, pa, pb *plan) {
	da, db := pa.out.Declared, pb.out.Declared
	ag.Rule = "draws"
	if seeded(j.run.Op) && da != nil && db != nil {
		ag.Rule = "same_draws"
	}
	var a, b []int64
	for r := range j.rows {
		if j.run.Padding(r) || ag.Rule == "same_draws" && !da.Same(db, r) {
			continue
		}
		ag.Compared++
		a, b = rowDraws(pa, r, a), rowDraws(pb, r, b)
		k := partAt(a, b)
		if k < 0 {
			ag.Agree++
			continue
		}
		if ag.FirstRow < 0 {
			ag.FirstRow, ag.FirstDraw = r, k
		}
	}
	ag.Pass = ag.Rule != "same_draws" || ag.Agree == ag.Compared
	switch {
	case ag.Compared == 0 && ag.Rule == "same_draws":
		ag.Message = fmt.Sprintf("%s and %s declare the same seed and offset on no row", ag.A, ag.B)
	case ag.FirstRow < 0:
		ag.Message = fmt.Sprintf("%s and %s draw the same tokens on all %s compared", ag.A, ag.B, plural(ag.Compared, "row"))
	default:
		ag.Message = fmt.Sprintf("%s and %s draw the same tokens on %d of %s compared; they first part on row %d%s",
			ag.A, ag.B, ag.Agree, plural(ag.Compared, "row"), ag.FirstRow, drawAt(pb, ag.FirstDraw))
	}
	switch {
	case ag.Rule == "same_draws" && ag.FirstRow >= 0:
		ag.Message += ", though they declare the same seed and offset"
	case ag.Rule == "draws" && seeded(j.run.Op):
		ag.Message += "; nothing holds them to the same draws unless their modes declare one seed (seed@MODE)"
	}
}

// argmaxFlips lists the real rows where two argmax outputs pick different
// tokens, each fragile when the input logits at the two tokens are within
// the strict tolerance of each other.
func (j *judge) argmaxFlips(ag *engine.Agreement, pa, pb *plan) {
	ag.Rule = "argmax"
	v := int64(j.vocab)
	for r := range j.rows {
		if j.run.Padding(r) {
			continue
		}
		ag.Compared++
		ta, tb := pa.out.Tokens.Int(r), pb.out.Tokens.Int(r)
		if ta == tb {
			ag.Agree++
			continue
		}
		if ag.FirstRow < 0 {
			ag.FirstRow, ag.FirstDraw = r, 0
		}
		f := engine.Flip{Row: r, Token: int(tb), RefToken: int(ta), Margin: engine.Float(math.Inf(1))}
		if ta >= 0 && ta < v && tb >= 0 && tb < v {
			la, lb := j.run.Logits.Float(r*j.vocab+int(ta)), j.run.Logits.Float(r*j.vocab+int(tb))
			f.Margin = engine.Float(math.Abs(la - lb))
			f.Fragile = pa.tol.Strict.Allows(min(la, lb), max(la, lb))
		}
		ag.Flips = append(ag.Flips, f)
	}
	real := 0
	for _, f := range ag.Flips {
		if !f.Fragile {
			real++
		}
	}
	ag.Pass = real == 0
	ag.Message = fmt.Sprintf("%s and %s pick the same token on %d of %s", ag.A, ag.B, ag.Agree, plural(ag.Compared, "row"))
	if len(ag.Flips) > 0 {
		ag.Message += fmt.Sprintf("; %s (%d real, %d fragile), first on row %d", plural(len(ag.Flips), "flip"), real, len(ag.Flips)-real, ag.FirstRow)
	}
}

// drift reports how far apart two float outputs are elementwise, and for
// logits the rows whose top-1 tokens differ, fragile or real by the golden
// logits.
func (j *judge) drift(ag *engine.Agreement, pr *pair, pa *plan, oa, ob *engine.OutputReport) {
	ag.Rule = "drift"
	if pr == nil {
		return
	}
	t := pr.total()
	ag.Compared, ag.Agree = t.compared, t.equal
	ag.MaxAbs, ag.MeanAbs = floatPtr(t.max), floatPtr(t.mean)
	ag.MaxRow, ag.MaxToken = t.row, t.token
	for r, row := range pr.rows {
		if row.ok && (row.max > 0 || row.nan > 0) && ag.FirstRow < 0 {
			ag.FirstRow = r
		}
	}
	what := "probabilities"
	if ag.Kind == "logprobs" {
		what = "log probabilities"
	}
	if ag.Kind == "logits" {
		what = "logits"
		j.logitFlips(ag, pa, oa, ob)
	}
	if t.compared == 0 {
		ag.Message = fmt.Sprintf("%s and %s share no row to compare", ag.A, ag.B)
		return
	}
	ag.Message = fmt.Sprintf("%s and %s: identical %s on %d of %s; greatest |difference| %s (row %d, token %d), mean %s",
		ag.A, ag.B, what, t.equal, plural(t.compared, "row"), engine.FormatSig(t.max, 2), t.row, t.token, engine.FormatSig(t.mean, 2))
	if len(ag.Flips) > 0 {
		real := 0
		for _, f := range ag.Flips {
			if !f.Fragile {
				real++
			}
		}
		ag.Message += fmt.Sprintf("; their top-1 tokens differ on %s (%d real, %d fragile)", plural(len(ag.Flips), "row"), real, len(ag.Flips)-real)
	}
}

// logitFlips lists the rows where two logits outputs put different tokens
// on top (RowReport.Token), each fragile when the golden logits at the two
// tokens are within what the tolerance allows the row.
func (j *judge) logitFlips(ag *engine.Agreement, pa *plan, oa, ob *engine.OutputReport) {
	var g ref.GateRow
	for k := range min(len(oa.Rows), len(ob.Rows)) {
		ra, rb := &oa.Rows[k], &ob.Rows[k]
		if ra.Token == nil || rb.Token == nil || *ra.Token == *rb.Token {
			continue
		}
		r := ra.Row
		ref.ReadGate(&g, ref.RowLogits(j.run, r))
		la, lb := g.Logits[*ra.Token], g.Logits[*rb.Token]
		ag.Flips = append(ag.Flips, engine.Flip{Row: r, Token: int(*rb.Token), RefToken: int(*ra.Token),
			Margin: engine.Float(math.Abs(la - lb)), Fragile: math.Abs(la-lb) <= gateAllowed(&g, pa.tol.Strict)})
		ag.Pass = ag.Pass && ag.Flips[len(ag.Flips)-1].Fragile
	}
}
