package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestGPUFastOneRow checks renorm and sample on one row (B=1, the launch
// that splits a row into the most chunks: csrc/fast_layout.cuh) with
// parameters that all take the top-k fast path, on the rows that test its
// edges: ties at the k-th largest logit under both tie rules, a NaN (no
// distribution: the row is flagged to the full path), rows mostly -inf
// (with more and with fewer finite tokens than k), top_k 1 and 256
// (kFastMaxK), a tiny top-p, min-p, a high temperature on float32 logits,
// and the vocabularies that change the layout (151936, and small ones of
// one and of a few chunks). Every output must equal engine/cpu's bit for
// bit, and the judge must pass every row with a distribution.
func TestGPUFastOneRow(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	normal := func(rng *rand.Rand, x *engine.Tensor, vocab int) {
		sigma := 0.5 + 5.5*rng.Float64()
		for i := range vocab {
			x.SetFloat(i, rng.NormFloat64()*sigma)
		}
	}
	ties := func(rng *rand.Rand, x *engine.Tensor, vocab int) { // 60 copies of the top value straddle k = 50
		normal(rng, x, vocab)
		for range 60 {
			x.SetFloat(rng.IntN(vocab), 40)
		}
	}
	masked := func(finite int) func(*rand.Rand, *engine.Tensor, int) {
		return func(rng *rand.Rand, x *engine.Tensor, vocab int) {
			for i := range vocab {
				x.SetFloat(i, math.Inf(-1))
			}
			for range finite {
				x.SetFloat(rng.IntN(vocab), rng.NormFloat64()*3)
			}
		}
	}
	type edge struct {
		name    string
		dtype   engine.DType
		vocab   int
		fill    func(*rand.Rand, *engine.Tensor, int)
		k       int
		topP    float64
		minP    float64
		temp    float64
		ties    engine.TopKTies
		invalid bool // the row has no distribution
	}
	const v = 128256
	edges := []edge{
		{"plain k50 p0.9", engine.BF16, v, normal, 50, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"ties at the k-th keep", engine.BF16, v, ties, 50, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"ties at the k-th lowest index", engine.BF16, v, ties, 50, 1, 0, 0.7, engine.TiesLowestIndex, false},
		{"NaN", engine.BF16, v, func(rng *rand.Rand, x *engine.Tensor, vocab int) {
			normal(rng, x, vocab)
			x.SetFloat(rng.IntN(vocab), math.NaN())
		}, 50, 0.9, 0, 0.7, engine.TiesKeep, true},
		{"-inf but 200", engine.BF16, v, masked(200), 50, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"-inf but 30", engine.BF16, v, masked(30), 50, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"top_k 1", engine.BF16, v, normal, 1, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"top_k 256", engine.BF16, v, normal, 256, 0.9, 0.05, 0.7, engine.TiesLowestIndex, false},
		{"top_p tiny", engine.BF16, v, normal, 50, 1e-6, 0, 0.7, engine.TiesKeep, false},
		{"min_p", engine.F16, v, normal, 50, 0.95, 0.2, 1.3, engine.TiesKeep, false},
		{"T 100 f32", engine.F32, v, normal, 50, 0.9, 0, 100, engine.TiesKeep, false},
		{"V 151936", engine.BF16, 151936, normal, 50, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"V 151936 ties", engine.BF16, 151936, ties, 50, 0.9, 0, 0.7, engine.TiesLowestIndex, false},
		{"V 20000", engine.BF16, 20000, normal, 50, 0.9, 0, 0.7, engine.TiesKeep, false},
		{"V 1000", engine.F32, 1000, normal, 50, 0.9, 0, 0.7, engine.TiesKeep, false},
	}
	if quick() {
		edges = edges[:6]
	}
	for _, e := range edges {
		t.Run(e.name, func(t *testing.T) {
			x := engine.NewTensor("logits", e.dtype, 1, e.vocab)
			e.fill(rng, x, e.vocab)
			invalid := map[int]bool{}
			if e.invalid {
				invalid[0] = true
			}
			p := engine.Params{
				Temperature: []float64{e.temp}, TopK: []int{e.k}, TopP: []float64{e.topP}, MinP: []float64{e.minP},
				Seed: []uint64{rng.Uint64()}, Offset: []uint64{rng.Uint64() >> rng.IntN(64)},
				MaxNgramSize: 3, MaxDraftTokens: 8, Threshold: 1024,
				FilterOrder: engine.TopKFirst, TopKTies: e.ties,
			}
			rp, err := resolveParams(&p, 1, e.vocab, engine.NeedTemperature|engine.NeedFilters|engine.NeedSeeds)
			if err != nil || rp.flags&flagAllFast == 0 {
				t.Fatalf("parameters not all fast (%v): the case no longer reaches the fast path", err)
			}
			renorm := &engine.Run{Op: engine.OpRenorm, Logits: x, Params: p}
			gpu, host := runBoth(t, renorm)
			sameBits(t, "renorm probs", gpu.Probs, host.Probs)
			judge(t, renorm, gpu, host, invalid)
			for range 3 { // three draws from the same row
				p.Seed = []uint64{rng.Uint64()}
				sample := &engine.Run{Op: engine.OpSample, Logits: x, Params: p}
				gpu, host = runBoth(t, sample)
				sameBits(t, "sample tokens", gpu.Tokens, host.Tokens)
				judge(t, sample, gpu, host, invalid)
			}
		})
	}
}
