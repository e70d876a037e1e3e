package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// rowKind is a kind of row: fill fills row r of t (vocab tokens) and says
// whether it has no distribution.
type rowKind struct {
	name string
	fill func(rng *rand.Rand, t *engine.Tensor, r, vocab int) (invalid bool)
}

// gumbelRowKinds are the rows of TestGPUSampleGumbel, one a kind, each
// filling row r of t (vocab tokens) and saying whether it has no
// distribution. They aim at the one-read Gumbel kernel's recheck: rows
// where many tokens come near the best approximate score (equal and
// near-tied logits, large magnitudes, which widen its margin), rows its
// bound refuses (huge logits), and rows it hands to the exact path
// (-inf, NaN, +Inf).
var gumbelRowKinds = []rowKind{
	{"normal", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, 2*rng.NormFloat64())
		}
		return false
	}},
	{"equal", func(_ *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, 0.5)
		}
		return false
	}},
	{"equal large", func(_ *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, -3000)
		}
		return false
	}},
	{"near ties", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab { // 1 + k/128: apart by one bf16 step
			t.SetFloat(r*vocab+i, 1+float64(rng.IntN(3))/128)
		}
		return false
	}},
	{"near ties large", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab { // 1024 + 8k: apart by one bf16 step
			t.SetFloat(r*vocab+i, 1024+8*float64(rng.IntN(3)))
		}
		return false
	}},
	{"shifted", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		off := 2e4 * (rng.Float64() - 0.5)
		for i := range vocab {
			t.SetFloat(r*vocab+i, off+4*rng.NormFloat64())
		}
		return false
	}},
	{"huge", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		big := 1e38
		if t.DType == engine.F16 {
			big = 6e4
		}
		for i := range vocab {
			t.SetFloat(r*vocab+i, rng.NormFloat64())
		}
		t.SetFloat(r*vocab+rng.IntN(vocab), big)
		t.SetFloat(r*vocab+rng.IntN(vocab), -big)
		return false
	}},
	{"large", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		big := 1e25 // its margin covers every token: every thread rescans
		if t.DType == engine.F16 {
			big = 3e3
		}
		for i := range vocab {
			t.SetFloat(r*vocab+i, big*rng.NormFloat64())
		}
		return false
	}},
	{"rising", func(_ *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, -3+6*float64(i)/float64(vocab))
		}
		return false
	}},
	{"masked", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		keep := rng.IntN(vocab)
		for i := range vocab {
			v := rng.NormFloat64()
			if i != keep && rng.IntN(2) == 0 {
				v = math.Inf(-1)
			}
			t.SetFloat(r*vocab+i, v)
		}
		return false
	}},
	{"all -inf", func(_ *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, math.Inf(-1))
		}
		return true
	}},
	{"nan", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, rng.NormFloat64())
		}
		t.SetFloat(r*vocab+rng.IntN(vocab), math.NaN())
		return true
	}},
	{"+inf", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		for i := range vocab {
			t.SetFloat(r*vocab+i, rng.NormFloat64())
		}
		t.SetFloat(r*vocab+rng.IntN(vocab), math.Inf(1))
		return true
	}},
}

// TestGPUSampleGumbel checks sample's unfiltered Gumbel-max (single draws,
// the one-read kernel with its exact recheck) token for token against
// engine/cpu on every kind of gumbelRowKinds (several rows of each, fresh
// seeds and offsets), for each dtype, at temperatures 1, 0.3 and 1.7 and
// with greedy rows mixed in, on vocabularies of one token, fewer than a
// group of 8, not a multiple of 8 (rows off 16-byte boundaries), and
// Qwen's 151936.
func TestGPUSampleGumbel(t *testing.T) { unfilteredRowKinds(t, engine.SampleGumbel) }

// TestGPUSampleTable is TestGPUSampleGumbel's rows drawn by the inverse
// CDF (method auto): bf16 rows take table_kernel (a table of fixed-point
// weights over a window of patterns; the huge, large and -inf rows put
// tokens outside it), f16 and f32 rows the lean kernels.
func TestGPUSampleTable(t *testing.T) { unfilteredRowKinds(t, engine.SampleAuto) }

// TestGPUSampleTopP is TestGPUSampleTable's rows, and a row whose top-p cut
// falls among the tokens of magnitudes below the pattern window, under
// top-p alone (0.9, 0.5, 0.99, 0.2 and off, a row each in turn): bf16 rows
// take topp_held_kernel where V is a multiple of 8 (on sm_90) and the rows
// one wave of its clusters, else topp_kernel (the SV_TOP_P_ONLY hint; two
// reads of the row where its maximum is within 100 T of 0, three for the
// huge and large rows and the lump row's many tokens below the window),
// which answer invalid rows themselves and leave a row whose cut falls in
// the lump (and, held, a greedy row) to the full-row kernel after them;
// f16 and f32 rows take the fast path and the full-row kernel.
func TestGPUSampleTopP(t *testing.T) {
	kinds := append(gumbelRowKinds[:len(gumbelRowKinds):len(gumbelRowKinds)], rowKind{"lump", func(rng *rand.Rand, t *engine.Tensor, r, vocab int) bool {
		// One token at 8, the others at magnitudes far below the window
		// (about 2^-60): at T near 1 their mass, e^-8 each, holds top-p's
		// cut.
		for i := range vocab {
			t.SetFloat(r*vocab+i, math.Ldexp(rng.NormFloat64(), -60))
		}
		t.SetFloat(r*vocab+rng.IntN(vocab), 8)
		return false
	}})
	rowKinds(t, engine.SampleAuto, kinds, []float64{0.9, 0.5, 0.99, 0.2, 1})
}

// unfilteredRowKinds runs gumbelRowKinds' rows through sample without
// filters, one draw a row, by method, and compares every token with
// engine/cpu's.
func unfilteredRowKinds(t *testing.T, method engine.SampleMethod) {
	rowKinds(t, method, gumbelRowKinds, nil)
}

// rowKinds runs rows of kinds through sample, one draw a row, by method,
// with top-p alone from topP (row r's is topP[r % len(topP)]) or without
// filters (topP nil), and compares every token with engine/cpu's.
func rowKinds(t *testing.T, method engine.SampleMethod, kinds []rowKind, topP []float64) {
	gpuBackend(t)
	rng := newRand(t)
	cases := []struct {
		dtype engine.DType
		vocab int
		temp  float64 // 0: a mix of 1, 0.3, 1.7 and greedy rows
		reps  int     // rows of each kind
	}{
		{engine.BF16, 1, 1, 2},
		{engine.BF16, 8, 0, 2}, // top-p alone: held in a cluster, three of whose four blocks hold nothing
		{engine.F16, 7, 0.3, 2},
		{engine.F32, 7, 1.7, 2},
		{engine.BF16, 129, 0, 3},
		{engine.BF16, 4096, 1, 12}, // more rows than a wave of clusters: top-p alone takes topp_kernel
		{engine.F16, 129, 1, 3},
		{engine.F32, 129, 0.3, 3},
		{engine.BF16, 4096, 1.7, 3},
		{engine.F32, 4099, 0, 3},
		{engine.BF16, 32003, 0.3, 2},
		{engine.F16, 32003, 1, 2},
		{engine.BF16, 128256, 1, 2},
		{engine.BF16, 151936, 0.3, 2},
		{engine.F16, 151936, 1.7, 2},
		{engine.F32, 151936, 0, 2},
	}
	if quick() {
		cases = cases[:11]
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/V%d/T%g", c.dtype, c.vocab, c.temp), func(t *testing.T) {
			rows := c.reps * len(kinds)
			x := engine.NewTensor("logits", c.dtype, rows, c.vocab)
			invalid := map[int]bool{}
			for r := range rows {
				if kinds[r%len(kinds)].fill(rng, x, r, c.vocab) {
					invalid[r] = true
				}
			}
			p := params(rng, rows, c.vocab, false)
			p.Method = method
			for r := range rows {
				p.Temperature[r] = c.temp
				if c.temp == 0 {
					p.Temperature[r] = []float64{1, 0.3, 1.7, 0}[(r/len(kinds)+r)%4]
				}
				if topP != nil {
					p.TopP[r] = topP[r%len(topP)]
				}
			}
			run := &engine.Run{Op: engine.OpSample, Logits: x, Params: p}
			gpu, host := runBoth(t, run)
			sameBits(t, "tokens", gpu.Tokens, host.Tokens)
			judge(t, run, gpu, host, invalid)
		})
	}
}
