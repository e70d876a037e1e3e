package cpu

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// The shape of a Llama-3 batch: 512 rows of 128256 tokens.
const (
	benchRows  = 512
	benchVocab = 128256
)

// benchRun builds a run of op on 512 x 128256 random BF16 logits.
func benchRun(op engine.Op) *engine.Run {
	rng := rand.New(rand.NewPCG(71, 72))
	flat := make([]float32, benchRows*benchVocab)
	for i := range flat {
		flat[i] = float32(2 * rng.NormFloat64())
	}
	return &engine.Run{
		Op:     op,
		Logits: engine.FromFloat32s("logits", engine.BF16, []int{benchRows, benchVocab}, flat),
		Params: defaultParams(benchRows),
	}
}

// runBench runs run b.N times and reports the achieved bandwidth of the
// ideal byte count.
func runBench(b *testing.B, run *engine.Run) {
	backend := New()
	var bytes int64
	b.ResetTimer()
	for b.Loop() {
		out, err := backend.Run(context.Background(), run)
		if err != nil {
			b.Fatal(err)
		}
		bytes = out.Timing.Bytes
	}
	b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkSoftmaxBF16 is the temperature softmax of 512 x 128256 BF16
// logits.
func BenchmarkSoftmaxBF16(b *testing.B) {
	runBench(b, benchRun(engine.OpSoftmax))
}

// BenchmarkRenormTopKTopP is renorm with top-k 50 and top-p 0.9 on every
// row.
func BenchmarkRenormTopKTopP(b *testing.B) {
	run := benchRun(engine.OpRenorm)
	for r := range benchRows {
		run.Params.TopK[r], run.Params.TopP[r] = 50, 0.9
	}
	runBench(b, run)
}

// BenchmarkSampleRejection draws one token per row by sort-free rejection
// under top-p 0.9.
func BenchmarkSampleRejection(b *testing.B) {
	run := benchRun(engine.OpSample)
	for r := range benchRows {
		run.Params.TopP[r] = 0.9
	}
	runBench(b, run)
}

// BenchmarkSampleDraws makes 10^5 inverse-CDF draws on each of the 512 rows
// (51.2 million draws).
func BenchmarkSampleDraws(b *testing.B) {
	run := benchRun(engine.OpSample)
	run.Params.Draws = 100_000
	runBench(b, run)
	b.ReportMetric(float64(benchRows)*float64(run.Params.Draws)*float64(b.N)/b.Elapsed().Seconds(), "draws/s")
}
