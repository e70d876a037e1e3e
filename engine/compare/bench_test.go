package compare

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// benchRun builds the benchmark's run: 512 rows of 128256 bf16 logits,
// normal(0, 3) with about 1% masked, and an f32 output that is the strict
// reference rounded to f32 with a relative noise of 1e-7 (a good kernel).
func benchRun(b *testing.B, op engine.Op, params ...rowParams) (*engine.Run, *engine.Output) {
	b.Helper()
	const rows, vocab = 512, 128256
	rng := rand.New(rand.NewPCG(2026, 1122))
	run := logitsRun(rng, op, engine.BF16, rows, vocab, 3, params...)
	probs := engine.NewTensor("probs", engine.F32, rows, vocab)
	eps := ref.BoundaryEps(DefaultTolerance(engine.BF16).Rtol)
	var ws ref.Workspace
	var d ref.Dist
	for r := range rows {
		f := ref.NoFilter()
		if op != engine.OpSoftmax {
			f = ref.RowFilter(run, r, eps)
		}
		ws.Compute(&d, ref.RowLogits(run, r), ref.Temperature(run, r), f, false)
		for i, p := range d.Probs {
			probs.SetFloat(r*vocab+i, p*(1+1e-7*rng.NormFloat64()))
		}
	}
	return run, &engine.Output{Name: "cpu", Probs: probs}
}

// benchJudge judges the outputs once per iteration and checks they pass.
// It reports the process's CPU seconds per judgement beside the wall time.
func benchJudge(b *testing.B, run *engine.Run, outs ...*engine.Output) {
	b.ResetTimer()
	cpu0, wall0 := processCPU(), time.Now()
	for b.Loop() {
		rep, err := Judge(context.Background(), run, outs, Options{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Pass {
			b.Fatalf("the benchmark's output fails: %v", rep.Outputs[0].Rows[0].Violations)
		}
	}
	b.ReportMetric((processCPU()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(time.Since(wall0).Seconds()/float64(b.N), "wall-s/op")
}

// BenchmarkJudgeSoftmaxBF16 measures the reference plus the comparison of one
// f32 softmax output at B = 512, V = 128256, bf16 logits, temperatures 1
// and below.
func BenchmarkJudgeSoftmaxBF16(b *testing.B) {
	run, out := benchRun(b, engine.OpSoftmax,
		rowParams{temp: 1, Filter: ref.NoFilter()},
		rowParams{temp: 0.7, Filter: ref.NoFilter()},
		rowParams{temp: 0.9, Filter: ref.NoFilter()},
		rowParams{temp: 0.6, Filter: ref.NoFilter()})
	benchJudge(b, run, out)
}

// BenchmarkJudgeRenormBF16 is BenchmarkJudgeSoftmaxBF16 for renorm with a
// mix of top-k, top-p and min-p.
func BenchmarkJudgeRenormBF16(b *testing.B) {
	run, out := benchRun(b, engine.OpRenorm,
		rowParams{temp: 0.7, Filter: ref.Filter{TopK: 50, TopP: 1}},
		rowParams{temp: 1, Filter: ref.Filter{TopP: 0.9}},
		rowParams{temp: 0.8, Filter: ref.Filter{TopK: 100, TopP: 0.95, MinP: 0.05}},
		rowParams{temp: 0.6, Filter: ref.Filter{TopP: 0.8, MinP: 0.1}})
	benchJudge(b, run, out)
}

// BenchmarkJudgeModes measures what more outputs of one kind cost: B = 128
// rows of V = 128256 bf16 logits (normal(0, 3), about 1% masked) at T = 1,
// judged with one bf16 probs output and with eight named ones (probs@m0 to
// probs@m7, mode k the reference scaled by 1 + k/1024 and rounded to bf16:
// distinct modes, each a function of the logit as a kernel's output is).
// The eight share each row's reference, and the report compares every pair
// of them. The last case gives every token its own rounding noise (a
// relative 2^-12), so that no output is uniform per logit pattern and every
// row is measured token by token. docs/PERF.md holds the figures.
func BenchmarkJudgeModes(b *testing.B) {
	const rows, vocab, modes = 128, 128256, 8
	rng := rand.New(rand.NewPCG(2026, 1127))
	run := logitsRun(rng, engine.OpSoftmax, engine.BF16, rows, vocab, 3)
	outputs := func(noise float64) []*engine.Output {
		outs := make([]*engine.Output, modes)
		for k := range outs {
			outs[k] = &engine.Output{Name: fmt.Sprintf("probs@m%d", k), External: true, Probs: engine.NewTensor("probs", engine.BF16, rows, vocab)}
		}
		var ws ref.Workspace
		var d ref.Dist
		for r := range rows {
			ws.Compute(&d, ref.RowLogits(run, r), 1, ref.NoFilter(), false)
			for k, o := range outs {
				for i, p := range d.Probs {
					o.Probs.SetFloat(r*vocab+i, p*(1+float64(k)/1024+noise*float64(rng.IntN(3)-1)))
				}
			}
		}
		return outs
	}
	uniform := outputs(0)
	for _, n := range []int{1, modes} {
		b.Run(fmt.Sprintf("outputs=%d", n), func(b *testing.B) {
			benchJudge(b, run, uniform[:n]...)
		})
	}
	b.Run(fmt.Sprintf("outputs=%d/not-uniform", modes), func(b *testing.B) {
		benchJudge(b, run, outputs(0x1p-12)...)
	})
}
