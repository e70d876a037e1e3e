package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
)

// judgedRuns returns random runs of every op with inputs stored as dtype,
// with filters, greedy rows, many draws and many trials.
func judgedRuns(rng *rand.Rand, dtype engine.DType) []*engine.Run {
	const rows, vocab = 8, 3000
	filtered := func(run *engine.Run) *engine.Run {
		p := &run.Params
		for r := range rows {
			p.Temperature[r] = []float64{1, 0.7, 0, 1.5}[r%4]
			p.TopK[r] = []int{0, 40, 0, 500}[r%4]
			p.TopP[r] = []float64{1, 0.9, 1, 0.8}[(r/2)%4]
			p.MinP[r] = []float64{0, 0, 0.02, 0}[(r/3)%4]
		}
		return run
	}
	op := func(o engine.Op) *engine.Run {
		run := sampleRun(rng, dtype, rows, vocab)
		run.Op = o
		return filtered(run)
	}
	draws := op(engine.OpSample)
	draws.Params.Draws = 20_000
	joint := op(engine.OpRenorm)
	joint.Params.FilterOrder, joint.Params.TopKTies = engine.Joint, engine.TiesLowestIndex
	gumbel := op(engine.OpSample)
	gumbel.Params.Method = engine.SampleGumbel

	spec := randomSpec(rng, 4, 3, 400, false).run(dtype, 2000)
	oneHot := randomSpec(rng, 4, 3, 400, true).run(dtype, 2000)
	for r := range 4 {
		oneHot.Params.TopK[r] = 100
	}

	prompts, generated := make([][]int64, rows), make([][]int64, rows)
	for r := range rows {
		for range 5 + rng.IntN(60) {
			prompts[r] = append(prompts[r], int64(rng.IntN(8)))
		}
		for range 1 + rng.IntN(15) {
			generated[r] = append(generated[r], int64(rng.IntN(8)))
		}
	}
	ngram := ngramRun(prompts, generated, engine.I64, 3, 6, 30)

	return []*engine.Run{
		op(engine.OpArgmax), op(engine.OpSoftmax), op(engine.OpRenorm), joint,
		op(engine.OpSample), gumbel, draws, spec, oneHot, ngram,
	}
}

// TestJudgePassesCPUOutputs runs engine/compare's judge on this backend's
// outputs for random runs of every op: the reference must find nothing
// wrong.
func TestJudgePassesCPUOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("judges thousands of draws")
	}
	rng := rand.New(rand.NewPCG(81, 82))
	for _, dtype := range floatDTypes {
		for _, run := range judgedRuns(rng, dtype) {
			name := fmt.Sprintf("%s %s draws=%d trials=%d %s", dtype, run.Op, run.Params.Draws, run.Params.Trials, run.Params.Method)
			t.Run(name, func(t *testing.T) {
				out := mustRun(t, run)
				report, err := compare.Judge(context.Background(), run, []*engine.Output{out}, compare.Options{}, nil)
				if err != nil {
					t.Fatalf("Judge: %v", err)
				}
				if report.Pass {
					return
				}
				for _, o := range report.Outputs {
					for _, n := range o.Notes {
						t.Logf("note: %s", n)
					}
					for _, row := range o.Rows {
						for _, v := range row.Violations {
							t.Errorf("%s", v)
						}
					}
				}
				t.Errorf("the judge failed the cpu output")
			})
		}
	}
}
