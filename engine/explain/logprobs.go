package explain

import (
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/ref"
)

// LogprobsDetail is one logprobs output on one row, for the row page: its
// values beside the float64 log-softmax of the kind it was judged as
// (docs/SEMANTICS.md "Logprobs"). It shows the reference the judge starts
// from; where the judge renormalises over boundary tokens the output
// decided otherwise, its findings say so.
type LogprobsDetail struct {
	engine.OutputInfo
	// LogprobsKind is "raw" or "processed"; TopN is N of a top-N, 0 for
	// every token's.
	LogprobsKind engine.LogprobsKind `json:"logprobs_kind"`
	TopN         int                 `json:"top_n"`
	// Temperature is the temperature of the reference (1 for raw logprobs
	// and greedy rows); Filtered says whether the row's filters apply to it.
	Temperature float64 `json:"temperature"`
	Filtered    bool    `json:"filtered"`
	// Kept counts the tokens the reference keeps (a finite logprob).
	Kept int `json:"kept"`
	// Tokens are, for every token's logprobs, the top most probable
	// tokens under the reference and then the token with the output's
	// greatest error; for a top-N, its N entries in its order, then the
	// tokens of the reference's N most probable that it leaves out.
	Tokens []LogprobToken `json:"tokens"`
	// Invalid says why the row has no reference ("" when it has one).
	Invalid string `json:"invalid,omitempty"`
}

// LogprobToken is one token of a logprobs output's row.
type LogprobToken struct {
	Token int `json:"token"`
	// Rank is the token's place by reference logprob, 1 for the most
	// probable.
	Rank int `json:"rank"`
	// Ref is the reference logprob, -Inf where the reference drops the
	// token; Value the output's, nil where a top-N does not hold the token;
	// Entry its place in the top-N (-1: not held, or every token's).
	Ref   engine.Float  `json:"ref"`
	Value *engine.Float `json:"value,omitempty"`
	Entry int           `json:"entry"`
	// Allowed is the error the strict tolerance allows at this token, in
	// nats.
	Allowed engine.Float `json:"allowed"`
}

// logprobsDetails describes row r of every logprobs output of outs, on the
// top most probable tokens. eps is the boundary band of the references.
func logprobsDetails(run *engine.Run, outs []*engine.Output, tol *engine.Tolerances, r, top int, eps float64) []LogprobsDetail {
	var ds []LogprobsDetail
	var ws ref.Workspace
	for _, o := range outs {
		if o.Logprobs == nil || len(o.Logprobs.Shape) != 2 || r >= o.Logprobs.Dim(0) {
			continue
		}
		if d, ok := logprobsDetail(&ws, run, o, tol, r, top, eps); ok {
			ds = append(ds, d)
		}
	}
	return ds
}

// logprobsDetail describes row r of one logprobs output; false when the
// output is not one the judge reads (a shape that fits neither form).
func logprobsDetail(ws *ref.Workspace, run *engine.Run, o *engine.Output, tol *engine.Tolerances, r, top int, eps float64) (LogprobsDetail, bool) {
	v := run.Vocab()
	w := o.Logprobs.Dim(1)
	topN := 0
	if ids := o.LogprobTokenIDs; ids != nil {
		if !slices.Equal(ids.Shape, o.Logprobs.Shape) || w < 1 || w > v {
			return LogprobsDetail{}, false
		}
		topN = w
	} else if w != v {
		return LogprobsDetail{}, false
	}
	kind := o.LogprobsKind
	if kind == "" {
		kind = engine.LogprobsRaw
	}
	t := ref.LogprobsTemperature(run, r, kind)
	filtered := run.Op != engine.OpSoftmax && kind == engine.LogprobsProcessed
	d := LogprobsDetail{
		OutputInfo:   engine.OutputInfo{Name: o.Name, External: o.External, Kind: "logprobs"},
		LogprobsKind: kind, TopN: topN, Temperature: t, Filtered: filtered,
	}
	f := ref.NoFilter()
	if filtered {
		f = ref.RowFilter(run, r, eps)
	}
	var dist ref.Dist
	x := ref.RowLogits(run, r)
	ws.Compute(&dist, x, t, f, false)
	var lr ref.LogRow
	if !dist.Valid() {
		d.Invalid = "This row has no reference distribution: " + dist.Invalid + "."
		return d, true
	}
	if !lr.Scaled(x, t, false) {
		d.Invalid = "This row's logits cannot be read into a log-softmax."
		return d, true
	}
	lr.Normalise(func(i int) bool { return ref.KeepsRef(&dist, lr.Z, i) })
	lp := lr.LogProbs
	order := make([]int, v)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case lp[a] > lp[b]:
			return -1
		case lp[a] < lp[b]:
			return 1
		}
		return 0
	})
	rank := make([]int, v)
	for i, tok := range order {
		rank[tok] = i + 1
		if !math.IsInf(lp[tok], -1) {
			d.Kept++
		}
	}
	lt := compare.LogprobTolerancesFor(o.Logprobs.DType, options(tol)).Strict
	atol := compare.LogprobRowAtol(lt, lr.Scale)
	token := func(tok int) LogprobToken {
		return LogprobToken{Token: tok, Rank: rank[tok], Ref: engine.Float(lp[tok]), Entry: -1,
			Allowed: engine.Float(atol + lt.Rtol*math.Abs(lp[tok]))}
	}
	if topN == 0 {
		vals := make([]float64, v)
		o.Logprobs.Floats64(r*v, vals)
		shown := map[int]bool{}
		for _, tok := range order[:min(top, v)] {
			lt := token(tok)
			lt.Value = floatPtr(vals[tok])
			d.Tokens = append(d.Tokens, lt)
			shown[tok] = true
		}
		worst, at := -1.0, -1
		for tok, y := range vals {
			e := math.Abs(y - lp[tok])
			switch {
			case y != y:
				e = math.Inf(1)
			case math.IsInf(y, -1) && math.IsInf(lp[tok], -1):
				e = 0
			case e != e:
				e = math.Inf(1)
			}
			if e > worst {
				worst, at = e, tok
			}
		}
		if at >= 0 && !shown[at] && worst > 0 {
			lt := token(at)
			lt.Value = floatPtr(vals[at])
			d.Tokens = append(d.Tokens, lt)
		}
		return d, true
	}
	vals := make([]float64, topN)
	o.Logprobs.Floats64(r*topN, vals)
	held := map[int]bool{}
	for k := range topN {
		id := o.LogprobTokenIDs.Int(r*topN + k)
		if id < 0 || id >= int64(v) {
			continue // a token outside the vocabulary: the judge's top_n finding says so
		}
		tok := int(id)
		lt := token(tok)
		lt.Value, lt.Entry = floatPtr(vals[k]), k
		d.Tokens = append(d.Tokens, lt)
		held[tok] = true
	}
	for _, tok := range order[:topN] {
		if !held[tok] && !math.IsInf(lp[tok], -1) {
			d.Tokens = append(d.Tokens, token(tok))
		}
	}
	return d, true
}

func floatPtr(x float64) *engine.Float {
	f := engine.Float(x)
	return &f
}
