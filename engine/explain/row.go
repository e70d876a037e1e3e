package explain

import (
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/ref"
)

// cdfPoints bounds the points of a row's CDF: every rank up to cdfDense,
// then log-spaced ranks.
const (
	cdfPoints = 400
	cdfDense  = 64
)

// Row describes row r of run for the row page: its strict reference
// (softmax for softmax runs, the filtered distribution otherwise), every
// probability output's values on the top most probable tokens and on its
// worst token, the CDF with the filter cuts, the tokens the token outputs
// chose, the sample histograms of a sample row drawn many times, the laws of
// a spec_verify row with tr (our backend's trace of the row, nil when there
// is none), the laws of a spec_tree_verify row's tree with tt (our
// backend's trace of it, nil when there is none), how an ngram_match
// row was drafted, and every logprobs output beside its reference
// log-softmax. tol replaces the dtype defaults when not nil (a negative
// part keeps the default's); outs are every output, ours first.
func Row(run *engine.Run, outs []*engine.Output, tr *RowTrace, tt *TreeTrace, tol *engine.Tolerances, r, top int) *RowDetail {
	v := run.Vocab()
	d := &RowDetail{Row: r, Vocab: v, Op: run.Op, Temperature: 1, TopP: 1}
	if pp := run.Params; r < len(pp.Temperature) {
		d.Temperature, d.TopK, d.TopP, d.MinP = pp.Temperature[r], pp.TopK[r], pp.TopP[r], pp.MinP[r]
	}
	for _, o := range outs {
		if o.Tokens != nil && r < o.Tokens.NumElements() {
			if d.Chosen == nil {
				d.Chosen = map[string]int64{}
			}
			d.Chosen[o.Name] = o.Tokens.Int(r)
		}
	}
	tols := compare.TolerancesFor(run.InputDType(), engine.F32, options(tol))
	eps := ref.BoundaryEps(tols.Strict.Rtol)
	if run.Op == engine.OpSpecVerify && run.TargetLogits != nil && run.DraftTokens != nil {
		d.Spec = specDetail(run, r, eps, tr)
		return d
	}
	if run.Op == engine.OpSpecTreeVerify && run.TargetLogits != nil && run.Candidates != nil {
		if tt != nil && checkTreeTrace(tt, run.Nodes()) != "" {
			tt = nil
		}
		d.Tree = treeDetail(run, outs, tt, r, eps)
		return d
	}
	if run.Op == engine.OpNgramMatch {
		d.Ngram = ngramDetail(run, outs, r)
		return d
	}
	if run.Logits == nil {
		return d
	}
	var dist ref.Dist
	if run.Op == engine.OpSoftmax {
		dist = ref.Softmax(run, r, false)
	} else {
		dist = ref.Renorm(run, r, false, eps)
	}
	if !dist.Valid() {
		d.Invalid = "This row has no reference distribution: " + dist.Invalid + "."
		return d
	}
	d.Logprobs = logprobsDetails(run, outs, tol, r, top, eps)
	var probs []*engine.Output
	for _, o := range outs {
		if o.Probs != nil && o.Probs.NumElements() == run.Rows()*v {
			probs = append(probs, o)
			d.Probs = append(d.Probs, engine.OutputInfo{Name: o.Name, External: o.External, Kind: "probs"})
		}
	}
	values := make([][]float64, len(probs))
	for i, o := range probs {
		values[i] = make([]float64, v)
		o.Probs.Floats64(r*v, values[i])
	}
	order := dist.Top(v)
	rank := make([]int, v)
	for i, t := range order {
		rank[t] = i + 1
	}
	token := func(t int) TokenDetail {
		td := TokenDetail{
			Token: t, Rank: rank[t], Base: engine.Float(dist.Base[t]), Ref: engine.Float(dist.Probs[t]),
			Class:   dist.Class[t].String(),
			Allowed: engine.Float(tols.Strict.Atol + tols.Strict.Rtol*math.Abs(dist.Probs[t])),
		}
		for i := range probs {
			td.Values = append(td.Values, engine.Float(values[i][t]))
		}
		return td
	}
	shown := map[int]bool{}
	for _, t := range order[:min(top, v)] {
		d.Tokens = append(d.Tokens, token(t))
		shown[t] = true
	}
	for i := range probs {
		worst, at := -1.0, -1
		for t, x := range values[i] {
			e := math.Abs(x - dist.Probs[t])
			if e != e {
				e = math.Inf(1)
			}
			if e > worst {
				worst, at = e, t
			}
		}
		if at >= 0 && !shown[at] {
			d.Worst = append(d.Worst, token(at))
			shown[at] = true
		}
	}
	d.CDF, d.Cuts = cdf(&dist, order, d)
	for i, o := range probs {
		d.Cuts.Outputs = append(d.Cuts.Outputs, outputCut(o.Name, values[i], &dist, order))
	}
	if run.Op == engine.OpSample {
		d.Samples = sampleDetail(run, outs, r, top, eps)
	}
	return d
}

// outputCut finds where an output's support ends along the reference's
// order (NaN counts as kept: it is not a zero).
func outputCut(name string, values []float64, dist *ref.Dist, order []int) OutputCut {
	c := OutputCut{Name: name}
	mass := 0.0
	for i, t := range order {
		mass += dist.Base[t]
		if values[t] != 0 {
			c.Kept++
			c.Rank, c.Mass = i+1, engine.Float(math.Min(mass, 1))
		}
	}
	return c
}

// cdf samples the cumulative mass of the unfiltered softmax by rank and
// says where each filter cuts it.
func cdf(dist *ref.Dist, order []int, d *RowDetail) ([]CDFPoint, Cuts) {
	v := len(order)
	var cuts Cuts
	if d.TopK > 0 && d.TopK < v {
		cuts.TopKRank = d.TopK
	}
	if dist.TopPCut > 0 {
		cuts.TopPMass = dist.TopPCut
	}
	cuts.MinPProb = dist.MinPThreshold
	for _, p := range dist.Probs {
		if p > 0 {
			cuts.Kept++
		}
	}
	// Ranks to sample: every one up to cdfDense, then log-spaced.
	want := map[int]bool{v: true}
	for k := 1; k <= min(cdfDense, v); k++ {
		want[k] = true
	}
	if v > cdfDense {
		ratio := math.Pow(float64(v)/cdfDense, 1/float64(cdfPoints-cdfDense))
		x := float64(cdfDense)
		for i := 0; i < cdfPoints-cdfDense; i++ {
			x *= ratio
			want[int(math.Round(x))] = true
		}
	}
	var pts []CDFPoint
	mass := 0.0
	for i, t := range order {
		p := dist.Base[t]
		// Top-p keeps a token while the mass before it is under the cut.
		if cuts.TopPMass > 0 && mass < cuts.TopPMass {
			cuts.TopPRank = i + 1
		}
		if cuts.MinPProb > 0 && p >= cuts.MinPProb {
			cuts.MinPRank = i + 1
		}
		mass += p
		if want[i+1] {
			pts = append(pts, CDFPoint{Rank: i + 1, Mass: engine.Float(math.Min(mass, 1))})
		}
	}
	return pts, cuts
}

// ngramDetail describes how row r of an ngram_match run was drafted, and
// what each output drafted; nil when the run lacks an input.
func ngramDetail(run *engine.Run, outs []*engine.Output, r int) *NgramDetail {
	rows := ref.NgramRows(run)
	if r >= len(rows) {
		return nil
	}
	nr := rows[r]
	p := run.Params
	d := &NgramDetail{
		Prompt: nr.Prompt, Generated: nr.Generated, MaxNgram: p.MaxNgramSize,
		N: nr.N, Source: nr.Source, Start: nr.Start,
		Budget: nr.Budget, Limit: nr.Limit, MaxDraftTokens: p.MaxDraftTokens,
		Reference: nr.Draft,
	}
	if p.NgramSemantics.FastDeploy() {
		d.Semantics, d.Offset, d.SeqLen, d.Why = string(p.NgramSemantics), nr.Offset, nr.SeqLen, nr.Why
	}
	for _, o := range outs {
		t := o.DraftOut
		if t == nil || len(t.Shape) != 2 || r >= t.Dim(0) {
			continue
		}
		// The row as written, less its trailing -1 padding (a -1 inside
		// the draft stays, to be seen).
		w := t.Dim(1)
		toks := make([]int64, w)
		for j := range toks {
			toks[j] = t.Int(r*w + j)
		}
		if p.NgramSemantics.FastDeploy() {
			// FastDeploy's buffer: the draft from the reference's offset,
			// as long as the output's seq_lens_this_time says.
			end := len(toks)
			if sl := o.SeqLensThisTime; sl != nil && r < sl.NumElements() {
				end = clampInt(int(sl.Int(r)), nr.Offset, len(toks))
			}
			toks = toks[min(nr.Offset, end):end]
		}
		for len(toks) > 0 && toks[len(toks)-1] == -1 {
			toks = toks[:len(toks)-1]
		}
		d.Drafts = append(d.Drafts, NamedDraft{OutputInfo: engine.OutputInfo{Name: o.Name, External: o.External, Kind: "draft"}, Tokens: toks})
	}
	return d
}

// options turns tolerances into the judge's options (engine/session does
// the same for the judgement, so the row page's bounds are the verdict's).
func options(tol *engine.Tolerances) compare.Options {
	if tol == nil {
		return compare.Options{}
	}
	s, n := tol.Strict, tol.Native
	return compare.Options{Strict: &s, Native: &n, PValue: tol.PValue}
}

// clampInt returns x limited to [lo, hi].
func clampInt(x, lo, hi int) int { return max(lo, min(x, hi)) }
