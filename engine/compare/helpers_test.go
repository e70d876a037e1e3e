package compare

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// rowParams are one row's sampling parameters in a test run.
type rowParams struct {
	temp float64
	ref.Filter
}

// logitsRun builds a run of b rows of v normal(0, sigma) logits stored in
// dtype, with about 1% of tokens masked, and per-row parameters from params
// (cycled).
func logitsRun(rng *rand.Rand, op engine.Op, dtype engine.DType, b, v int, sigma float64, params ...rowParams) *engine.Run {
	x := make([]float64, b*v)
	for i := range x {
		x[i] = rng.NormFloat64() * sigma
		if rng.IntN(100) == 0 {
			x[i] = math.Inf(-1)
		}
	}
	run := &engine.Run{Source: "test", Op: op, Logits: engine.FromFloat64s("logits", dtype, []int{b, v}, x)}
	if len(params) == 0 {
		params = []rowParams{{temp: 1, Filter: ref.NoFilter()}}
	}
	p := &run.Params
	for r := range b {
		rp := params[r%len(params)]
		p.Temperature = append(p.Temperature, rp.temp)
		p.TopK = append(p.TopK, rp.TopK)
		p.TopP = append(p.TopP, rp.TopP)
		p.MinP = append(p.MinP, rp.MinP)
		p.Seed = append(p.Seed, uint64(r))
		p.Offset = append(p.Offset, 0)
		p.FilterOrder, p.TopKTies = rp.Order, rp.Ties
	}
	if p.FilterOrder == "" {
		p.FilterOrder = engine.TopKFirst
	}
	if p.TopKTies == "" {
		p.TopKTies = engine.TiesKeep
	}
	return run
}

// refProbs returns the reference of every row (strict or native, softmax or
// renorm per the op) as flat float64 values, with boundary band eps.
func refProbs(run *engine.Run, native bool, eps float64) []float64 {
	b, v := run.Rows(), run.Vocab()
	out := make([]float64, 0, b*v)
	for r := range b {
		var d ref.Dist
		if run.Op == engine.OpSoftmax {
			d = ref.Softmax(run, r, native)
		} else {
			d = ref.Renorm(run, r, native, eps)
		}
		if !d.Valid() {
			for range v {
				out = append(out, math.NaN())
			}
			continue
		}
		out = append(out, d.Probs...)
	}
	return out
}

// probsOutput packages flat probabilities as a float output of dtype.
func probsOutput(run *engine.Run, dtype engine.DType, p []float64) *engine.Output {
	return &engine.Output{Name: "test", Probs: engine.FromFloat64s("probs", dtype, []int{run.Rows(), run.Vocab()}, p)}
}

// judge runs Judge with the default options and fails the test on error.
func judgeRun(t testing.TB, run *engine.Run, outs ...*engine.Output) *engine.Report {
	t.Helper()
	rep, err := Judge(context.Background(), run, outs, Options{}, nil)
	if err != nil {
		t.Fatalf("Judge: %v", err)
	}
	return rep
}

// failedRows returns the rows of an output report that failed.
func failedRows(o engine.OutputReport) []int {
	var rows []int
	for _, r := range o.Rows {
		if !r.Pass {
			rows = append(rows, r.Row)
		}
	}
	return rows
}

// hasRule reports whether a row holds a violation of rule.
func hasRule(r engine.RowReport, rule engine.Rule) bool {
	for _, f := range r.Findings {
		if f.Rule == rule && f.Severity == engine.Violation {
			return true
		}
	}
	return false
}
