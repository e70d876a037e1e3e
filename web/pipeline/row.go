package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/web"
)

// cdfPoints bounds the points of a row's CDF: every rank up to cdfDense,
// then log-spaced ranks.
const (
	cdfPoints = 400
	cdfDense  = 64
)

// Row implements web.Runner: row r's strict reference (softmax for softmax
// runs, the filtered distribution otherwise), every probability output's
// values on the top most probable tokens and on its worst token, the CDF
// with the filter cuts, and the tokens the token outputs chose.
func (p *Pipeline) Row(ctx context.Context, job web.Job, r, top int) (*web.RowDetail, error) {
	run, f, err := load(job.DumpPath, job.FileName, job.Params.Overrides())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if r < 0 || r >= run.Rows() {
		return nil, fmt.Errorf("row %d of %d", r, run.Rows())
	}
	ours, of, _, err := readOutputs(job.OutputsPath)
	if err != nil && !errors.Is(err, web.ErrNoOutputs) {
		return nil, err
	}
	if of != nil {
		defer of.Close()
	}
	outs := compare.ExternalOutputs(run)
	if ours != nil {
		outs = append([]*engine.Output{ours}, outs...)
	}
	tr := rowTrace(of, r)
	d := rowDetail(run, outs, tr, job.Tolerances, r, top)
	if d.Spec != nil && tr == nil {
		if ours == nil {
			d.Spec.NoTrace = "The kernels of this run have not stored their outputs, so there is no trace to step through."
		} else {
			d.Spec.NoTrace = "This run's outputs were stored without a trace (by an older sampviz); run it again to step through its trials."
		}
	}
	return d, nil
}

// rowDetail describes row r of run for the row page; tr is our backend's
// trace of the row, nil when there is none.
func rowDetail(run *engine.Run, outs []*engine.Output, tr *web.RowTrace, tol *engine.Tolerances, r, top int) *web.RowDetail {
	v := run.Vocab()
	d := &web.RowDetail{Row: r, Vocab: v, Op: run.Op, Temperature: 1, TopP: 1}
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
	var probs []*engine.Output
	for _, o := range outs {
		if o.Probs != nil && o.Probs.NumElements() == run.Rows()*v {
			probs = append(probs, o)
			d.Probs = append(d.Probs, web.OutputInfo{Name: o.Name, External: o.External, Kind: "probs"})
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
	token := func(t int) web.TokenDetail {
		td := web.TokenDetail{
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
	if run.Op == engine.OpSample {
		d.Samples = sampleDetail(run, outs, r, top, eps)
	}
	return d
}

// cdf samples the cumulative mass of the unfiltered softmax by rank and
// says where each filter cuts it.
func cdf(dist *ref.Dist, order []int, d *web.RowDetail) ([]web.CDFPoint, web.Cuts) {
	v := len(order)
	var cuts web.Cuts
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
	var pts []web.CDFPoint
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
			pts = append(pts, web.CDFPoint{Rank: i + 1, Mass: engine.Float(math.Min(mass, 1))})
		}
	}
	return pts, cuts
}

// ngramDetail describes how row r of an ngram_match run was drafted, and
// what each output drafted; nil when the run lacks an input.
func ngramDetail(run *engine.Run, outs []*engine.Output, r int) *web.NgramDetail {
	rows := ref.NgramRows(run)
	if r >= len(rows) {
		return nil
	}
	nr := rows[r]
	p := run.Params
	d := &web.NgramDetail{
		Prompt: nr.Prompt, Generated: nr.Generated, MaxNgram: p.MaxNgramSize,
		N: nr.N, Source: nr.Source, Start: nr.Start,
		Budget: nr.Budget, Limit: nr.Limit, MaxDraftTokens: p.MaxDraftTokens,
		Reference: nr.Draft,
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
		for len(toks) > 0 && toks[len(toks)-1] == -1 {
			toks = toks[:len(toks)-1]
		}
		d.Drafts = append(d.Drafts, web.NamedDraft{OutputInfo: web.OutputInfo{Name: o.Name, External: o.External, Kind: "draft"}, Tokens: toks})
	}
	return d
}
