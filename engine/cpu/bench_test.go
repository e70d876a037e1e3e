package cpu

import (
	"context"
	"math/rand/v2"
	"slices"
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

// BenchmarkSpecTreeVerify verifies 64 rows of a 64-node draft tree (two
// one-hot children a node over five levels, one node unreached) over
// 128256 BF16 tokens, 1000 trials a row; each child's token is one of its
// parent's two most probable, so that trials go deep and most nodes are
// prepared.
func BenchmarkSpecTreeVerify(b *testing.B) {
	const rows, n = 64, 64
	rng := rand.New(rand.NewPCG(73, 74))
	next, sibling := make([]int64, n), make([]int64, n)
	for i := range next {
		next[i], sibling[i] = -1, -1
		if 2*i+1 < n-1 {
			next[i] = int64(2*i + 1)
			sibling[2*i+1] = int64(2*i + 2)
		}
	}
	target := make([]float32, rows*n*benchVocab)
	for i := range target {
		target[i] = float32(2 * rng.NormFloat64())
	}
	tokens := make([]int64, rows*n)
	for r := range rows {
		for u := range n {
			x := target[(r*n+u)*benchVocab : (r*n+u+1)*benchVocab]
			first, second := 0, 1
			for j, v := range x {
				switch {
				case v > x[first]:
					first, second = j, first
				case j != first && v > x[second]:
					second = j
				}
			}
			if c := next[u]; c >= 0 {
				tokens[r*n+int(c)], tokens[r*n+int(c)+1] = int64(first), int64(second)
			}
		}
	}
	p := defaultParams(rows)
	p.Trials = 1000
	run := &engine.Run{
		Op:           engine.OpSpecTreeVerify,
		TargetLogits: engine.FromFloat32s("target_logits", engine.BF16, []int{rows, n, benchVocab}, target),
		Candidates:   engine.FromInts("candidates", engine.I32, []int{rows, n}, tokens),
		NextToken:    engine.FromInts("retrive_next_token", engine.I32, []int{rows, n}, slices.Repeat(next, rows)),
		NextSibling:  engine.FromInts("retrive_next_sibling", engine.I32, []int{rows, n}, slices.Repeat(sibling, rows)),
		Params:       p,
	}
	backend := New()
	b.ResetTimer()
	for b.Loop() {
		if _, err := backend.Run(context.Background(), run); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
