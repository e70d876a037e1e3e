package compare

import (
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// BenchmarkMeasureRow measures the hot loop alone on one softmax row of
// 128256 tokens: against the reference the output was made from (strict),
// and against one that differs by percents (native at T = 0.7).
func BenchmarkMeasureRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	run := logitsRun(rng, engine.OpSoftmax, engine.BF16, 1, 128256, 3, rowParams{temp: 0.7, Filter: ref.NoFilter()})
	strict, native := ref.Softmax(run, 0, false), ref.Softmax(run, 0, true)
	out := make([]float64, len(strict.Probs))
	for i, p := range strict.Probs {
		out[i] = float64(float32(p * (1 + 1e-7*rng.NormFloat64())))
	}
	v := len(out)
	buf := newRowBuffers(v)
	for _, c := range []struct {
		name string
		d    *ref.Dist
	}{{"strict", &strict}, {"native", &native}} {
		b.Run(c.name, func(b *testing.B) {
			var m measurement
			scan := scanOutput(out)
			for b.Loop() {
				measure(&m, out, &scan, c.d.Probs, c.d.Base, c.d.Class, c.d.Argmax, false, DefaultTolerance(engine.BF16), 0x1p-126, buf)
				m.clearHists(buf)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*v), "ns/token")
		})
		b.Run(c.name+"/percentiles", func(b *testing.B) {
			var m measurement
			scan := scanOutput(out)
			measure(&m, out, &scan, c.d.Probs, c.d.Base, c.d.Class, c.d.Argmax, false, DefaultTolerance(engine.BF16), 0x1p-126, buf)
			for b.Loop() {
				buf.sel.percentiles(buf.absBits[:v], v, buf.absHist, m.loAbs, m.topAbs, &m.drift.Abs)
				buf.sel.percentiles(buf.relBits[:v], v, buf.relHist, m.loRel, m.topRel, &m.drift.Rel)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*v), "ns/token")
		})
	}
	b.Run("reference", func(b *testing.B) {
		var ws ref.Workspace
		var d ref.Dist
		for b.Loop() {
			ws.Compute(&d, ref.RowLogits(run, 0), 0.7, ref.NoFilter(), true)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*v), "ns/token")
	})
}
