package cuda

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
)

func TestGPUDevice(t *testing.T) {
	b := gpuBackend(t)
	d := b.Device()
	t.Logf("device %q, %d SMs, %.1f GiB, L2 %d MiB, copy bandwidth %.0f GB/s", d.Name, d.SMs,
		float64(d.MemoryBytes)/(1<<30), b.L2Bytes()>>20, d.CopyBandwidth/1e9)
	if d.Backend != "cuda" || d.Name == "" || d.SMs <= 0 || d.MemoryBytes <= 0 || d.CopyBandwidth < 1e10 {
		t.Errorf("implausible device %+v", d)
	}
}

func TestGPUArgmax(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	for _, s := range grid(true) {
		t.Run(s.String(), func(t *testing.T) {
			x, invalid := logits(rng, s.dtype, s.rows, s.vocab, true)
			run := &engine.Run{Op: engine.OpArgmax, Logits: x}
			gpu, host := runBoth(t, run)
			sameBits(t, "tokens", gpu.Tokens, host.Tokens)
			// argmax treats +Inf as a maximum: only NaN and all -inf rows fail.
			bad := map[int]bool{}
			for r := range invalid {
				if host.Tokens.Int(r) < 0 {
					bad[r] = true
				}
			}
			judge(t, run, gpu, host, bad)
		})
	}
}

func TestGPUSoftmax(t *testing.T) {
	b := gpuBackend(t)
	rng := newRand(t)
	for _, s := range grid(true) {
		t.Run(s.String(), func(t *testing.T) {
			x, invalid := logits(rng, s.dtype, s.rows, s.vocab, true)
			run := &engine.Run{Op: engine.OpSoftmax, Logits: x, Params: params(rng, s.rows, s.vocab, false)}
			gpu, host := runBoth(t, run)
			judge(t, run, gpu, host, invalid)
			for r := range invalid {
				for i := range s.vocab {
					if v := gpu.Probs.Float(r*s.vocab + i); !math.IsNaN(v) {
						t.Fatalf("row %d has no distribution but token %d has probability %v", r, i, v)
					}
				}
			}
			// Greedy rows are one-hot at engine/cpu's argmax, exactly.
			for r, temp := range run.Params.Temperature {
				if temp == 0 && !invalid[r] {
					for i := range s.vocab {
						if g, h := gpu.Probs.Float(r*s.vocab+i), host.Probs.Float(r*s.vocab+i); g != h {
							t.Fatalf("greedy row %d token %d: cuda %v, cpu %v", r, i, g, h)
						}
					}
				}
			}
			if s.dtype == engine.F32 && s.rows <= 7 {
				in, err := b.run(context.Background(), run, true)
				if err != nil {
					t.Fatalf("in-place softmax: %v", err)
				}
				sameBits(t, "in-place probs", in.Probs, gpu.Probs)
			}
		})
	}
}

// TestGPUSoftmaxOneRow checks softmax of a single row (B=1, the cluster
// kernel's one-row shapes, including chunks held in registers) against
// engine/cpu for each kind of row: plain, greedy (T = 0, one-hot at the
// first maximum exactly), extreme temperatures, masked and rising rows,
// and rows without a distribution (NaN, +Inf, all -Inf: NaN everywhere).
func TestGPUSoftmaxOneRow(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	kinds := []struct {
		name    string
		kind    int // fillRow's kind
		temp    float64
		invalid bool
	}{
		{"plain", 0, 1, false},
		{"greedy", 2, 0, false},
		{"cold", 3, 1e-4, false},
		{"hot", 0, 100, false},
		{"masked", 1, 0.7, false},
		{"rising", 8, 1, false},
		{"nan", 5, 1, true},
		{"nan greedy", 5, 0, true},
		{"inf", 6, 1, true},
		{"all -inf", 7, 1, true},
	}
	shapes := []shape{{engine.BF16, 1, 128256}, {engine.BF16, 1, 151936}, {engine.F16, 1, 128256},
		{engine.F32, 1, 128256}, {engine.BF16, 1, 111}, {engine.F32, 1, 3}}
	for _, s := range shapes {
		for _, k := range kinds {
			t.Run(s.String()+"/"+k.name, func(t *testing.T) {
				x := engine.NewTensor("logits", s.dtype, 1, s.vocab)
				fillRow(rng, x, 0, s.vocab, k.kind)
				p := params(rng, 1, s.vocab, false)
				p.Temperature[0] = k.temp
				invalid := map[int]bool{}
				if k.invalid {
					invalid[0] = true
				}
				run := &engine.Run{Op: engine.OpSoftmax, Logits: x, Params: p}
				gpu, host := runBoth(t, run)
				judge(t, run, gpu, host, invalid)
				for i := range s.vocab {
					g, h := gpu.Probs.Float(i), host.Probs.Float(i)
					switch {
					case k.invalid && !math.IsNaN(g):
						t.Fatalf("the row has no distribution but token %d has probability %v", i, g)
					case !k.invalid && k.temp == 0 && g != h:
						t.Fatalf("greedy token %d: cuda %v, cpu %v", i, g, h)
					}
				}
			})
		}
	}
}

func TestGPURenorm(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	for _, s := range grid(false) {
		t.Run(s.String(), func(t *testing.T) {
			x, invalid := logits(rng, s.dtype, s.rows, s.vocab, true)
			run := &engine.Run{Op: engine.OpRenorm, Logits: x, Params: params(rng, s.rows, s.vocab, true)}
			gpu, host := runBoth(t, run)
			// The normaliser is engine/cpu's Sum in its order: equal bit for bit.
			sameBits(t, "probs", gpu.Probs, host.Probs)
			judge(t, run, gpu, host, invalid)
		})
	}
}

func TestGPUSample(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	methods := []engine.SampleMethod{engine.SampleAuto, engine.SampleInverseCDF, engine.SampleGumbel, engine.SampleRejection}
	for _, s := range grid(false) {
		for _, m := range methods {
			if m != engine.SampleAuto && s.rows > 7 {
				continue
			}
			name := string(m)
			if name == "" {
				name = "auto"
			}
			t.Run(s.String()+"/"+name, func(t *testing.T) {
				x, invalid := logits(rng, s.dtype, s.rows, s.vocab, true)
				p := params(rng, s.rows, s.vocab, true)
				p.Method = m
				run := &engine.Run{Op: engine.OpSample, Logits: x, Params: p}
				gpu, host := runBoth(t, run)
				sameBits(t, "tokens", gpu.Tokens, host.Tokens)
				judge(t, run, gpu, host, invalid)
			})
		}
	}
}

// TestGPUSampleDraws checks the samplers statistically: 10^6 draws per row
// never leave the support, fit the reference distribution, and equal
// engine/cpu's draws for the same seeds.
func TestGPUSampleDraws(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	draws := 1_000_000
	if quick() {
		draws = 2000
	}
	for _, s := range []shape{{engine.F32, 4, 111}, {engine.BF16, 3, 2000}, {engine.F16, 2, 32003}} {
		t.Run(s.String(), func(t *testing.T) {
			x, invalid := logits(rng, s.dtype, s.rows, s.vocab, false)
			p := params(rng, s.rows, s.vocab, true)
			for r := range s.rows {
				p.Temperature[r] = 0.5 + 1.5*rng.Float64() // spread mass over many tokens
			}
			p.Temperature[0] = 0 // one greedy row
			p.Draws = draws
			run := &engine.Run{Op: engine.OpSample, Logits: x, Params: p}
			gpu, host := runBoth(t, run)
			sameBits(t, "tokens", gpu.Tokens, host.Tokens)
			sameDraws(t, run, gpu, host)
			judge(t, run, gpu, host, invalid)
		})
	}
}

// specRun builds a spec_verify run: target logits [B, K+1, V], drafts drawn
// from the draft distributions (random softmaxes, or one-hot), and trials.
func specRun(rng *rand.Rand, dtype engine.DType, rows, k, vocab, trials int, qdtype engine.DType) (*engine.Run, map[int]bool) {
	flat, bad := logits(rng, dtype, rows*(k+1), vocab, true)
	target := &engine.Tensor{Name: "target_logits", DType: dtype, Shape: []int{rows, k + 1, vocab}, Data: flat.Data}
	invalid := map[int]bool{}
	for r := range bad {
		invalid[r/(k+1)] = true
	}
	drafts := engine.NewTensor("draft_tokens", engine.I32, rows, k)
	var q *engine.Tensor
	if qdtype != engine.DTypeInvalid {
		q = engine.NewTensor("draft_probs", qdtype, rows, k, vocab)
	}
	w := make([]float64, vocab)
	for i := range rows * k {
		scale := 0.5 + 3*rng.Float64()
		sum := 0.0
		for j := range w {
			w[j] = math.Exp(rng.NormFloat64() * scale)
			sum += w[j]
		}
		u, tok := rng.Float64()*sum, vocab-1
		for j, acc := 0, 0.0; j < vocab; j++ {
			acc += w[j]
			if u < acc {
				tok = j
				break
			}
		}
		drafts.SetInt(i, int64(tok))
		if q != nil {
			for j := range w {
				q.SetFloat(i*vocab+j, w[j]/sum)
			}
		}
	}
	p := params(rng, rows, vocab, true)
	p.Trials = trials
	return &engine.Run{Op: engine.OpSpecVerify, TargetLogits: target, DraftTokens: drafts, DraftProbs: q, Params: p}, invalid
}

// specCase is one spec_verify launch of the GPU tests: target logits of
// shape, k drafts a row, trials, the draft distributions' dtype (invalid
// for one-hot drafts), and with mixed filters on every other row only.
type specCase struct {
	shape
	k, trials int
	q         engine.DType
	mixed     bool
}

func TestGPUSpecVerify(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	var cases []specCase
	if quick() {
		cases = []specCase{{shape{engine.F32, 2, 111}, 3, 20, engine.F32, false}, {shape{engine.BF16, 3, 2}, 2, 5, engine.DTypeInvalid, false}}
	} else {
		for _, d := range allDTypes {
			for _, v := range []int{2, 111, 32003, 128256} {
				for _, b := range []int{1, 7, 128} {
					if b == 128 && v != 32003 {
						continue
					}
					trials := 1
					if v <= 111 {
						trials = 2000
					} else if b == 1 {
						trials = 64
					}
					q := []engine.DType{engine.DTypeInvalid, engine.F32, engine.BF16, engine.F16}[rng.IntN(4)]
					cases = append(cases, specCase{shape{d, b, v}, 1 + rng.IntN(5), trials, q, false})
				}
			}
		}
	}
	for _, c := range cases {
		name := c.shape.String() + "/K" + itoa(c.k) + "/T" + itoa(c.trials) + "/q" + c.q.String()
		t.Run(name, func(t *testing.T) {
			run, invalid := specRun(rng, c.dtype, c.rows, c.k, c.vocab, c.trials, c.q)
			sameSpec(t, run, invalid)
		})
	}
}

// sameSpec runs a spec_verify run on both backends and checks that the
// GPU's tokens, counters and trace equal engine/cpu's bit for bit, and
// that the judge agrees.
func sameSpec(t *testing.T, run *engine.Run, invalid map[int]bool) {
	t.Helper()
	gpu, host := runBoth(t, run)
	sameBits(t, "spec_tokens", gpu.SpecTokens, host.SpecTokens)
	sameBits(t, "spec_emitted", gpu.SpecEmitted, host.SpecEmitted)
	sameBits(t, "spec_accepted", gpu.SpecAccepted, host.SpecAccepted)
	sameBits(t, "spec_trials", gpu.SpecTrials, host.SpecTrials)
	sameTrace(t, gpu.Trace, host.Trace)
	judge(t, run, gpu, host, invalid)
}

// TestGPUSpecUnfiltered runs spec_verify launches in which no row has a
// filter on, which the random parameters of TestGPUSpecVerify almost never
// give a whole launch: the lean prepare and chain kernels with the bf16
// rows' tables (csrc/ptable.cuh; rows 16-byte aligned and not, short rows
// with a partial last chunk, and long aligned ones with one in a launch
// too big for the split prepare, which the lean prepare's staged Sum
// takes; the chain's table of fixed-point weights under
// one-hot drafts, of p under draft distributions), the exact path of f16
// and f32 rows, and the split prepare of small launches; with temperatures
// from 1e-4 to 100, rows shifted far from zero, masks, ties and NaN rows.
// One case mixes filtered and unfiltered rows, so the filtered chain draws
// unfiltered rows from a table too.
func TestGPUSpecUnfiltered(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	cases := []specCase{
		{shape{engine.BF16, 128, 32003}, 3, 2, engine.DTypeInvalid, false},
		{shape{engine.BF16, 16, 128256}, 8, 4, engine.DTypeInvalid, false},
		{shape{engine.BF16, 16, 128256}, 8, 2, engine.BF16, false},
		{shape{engine.BF16, 128, 32003}, 2, 2, engine.DTypeInvalid, true},
		{shape{engine.F16, 64, 32000}, 2, 2, engine.DTypeInvalid, false},
		{shape{engine.F32, 40, 111}, 3, 500, engine.F32, false},
		{shape{engine.BF16, 2, 128256}, 4, 16, engine.DTypeInvalid, false},
		{shape{engine.BF16, 128, 32000}, 3, 2, engine.F16, false},
		{shape{engine.BF16, 3, 151936}, 2, 8, engine.DTypeInvalid, false},
		{shape{engine.F16, 2, 128256}, 4, 16, engine.DTypeInvalid, false},
		{shape{engine.BF16, 64, 32003}, 3, 1, engine.DTypeInvalid, false},
		{shape{engine.BF16, 40, 4100}, 3, 1, engine.BF16, false},
		{shape{engine.BF16, 300, 4100}, 1, 1, engine.DTypeInvalid, false},
		{shape{engine.BF16, 50, 1000}, 2, 1, engine.DTypeInvalid, false},
		{shape{engine.BF16, 48, 151936}, 2, 1, engine.DTypeInvalid, false},
	}
	if quick() {
		cases = []specCase{cases[0], cases[1], cases[4]}
	}
	for _, c := range cases {
		name := c.shape.String() + "/K" + itoa(c.k) + "/q" + c.q.String()
		if c.mixed {
			name += "/mixed"
		}
		t.Run(name, func(t *testing.T) {
			run, invalid := specRun(rng, c.dtype, c.rows, c.k, c.vocab, c.trials, c.q)
			if !c.mixed {
				run.Params = params(rng, c.rows, c.vocab, false)
				run.Params.Trials = c.trials
			} else {
				for r := 0; r < c.rows; r += 2 {
					run.Params.TopK[r], run.Params.TopP[r], run.Params.MinP[r] = 0, 1, 0
				}
			}
			sameSpec(t, run, invalid)
		})
	}
}

// TestGPUFastSmallBatches runs the fast path's small-batch launches, which
// the random parameters of the tests above reach only now and then: every
// row's parameters take the top-k fast path (the SV_ALL_FAST hint), so a
// batch of at most ~50 rows runs fast kernels that serve the rows they flag
// themselves (NaN, ties, rising rows), as clusters of a row's chunks where
// the row has 8 to 16 of them (V=128256: B=1 and 7 take 16, B=33 12, B=50
// 8; V=151936 takes 19, no cluster).
func TestGPUFastSmallBatches(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	shapes := []shape{{engine.BF16, 1, 128256}, {engine.F16, 7, 128256}, {engine.F32, 33, 128256},
		{engine.BF16, 50, 128256}, {engine.BF16, 1, 151936}}
	if quick() {
		shapes = shapes[:2]
	}
	fast := func(p engine.Params, vocab int) engine.Params {
		for r := range p.TopK {
			if p.Temperature[r] == 0 {
				p.Temperature[r] = 0.7
			}
			p.TopK[r] = []int{1, 2, 5, 50, 256}[rng.IntN(5)]
		}
		p.FilterOrder = engine.TopKFirst
		rp, err := resolveParams(&p, len(p.TopK), vocab, engine.NeedTemperature|engine.NeedFilters|engine.NeedSeeds)
		if err != nil || rp.flags&flagAllFast == 0 {
			t.Fatalf("parameters not all fast (%v): the test no longer reaches the small-batch launches", err)
		}
		return p
	}
	for _, s := range shapes {
		t.Run(s.String(), func(t *testing.T) {
			x, invalid := logits(rng, s.dtype, s.rows, s.vocab, true)
			renorm := &engine.Run{Op: engine.OpRenorm, Logits: x, Params: fast(params(rng, s.rows, s.vocab, true), s.vocab)}
			gpu, host := runBoth(t, renorm)
			sameBits(t, "renorm probs", gpu.Probs, host.Probs)
			judge(t, renorm, gpu, host, invalid)

			sample := &engine.Run{Op: engine.OpSample, Logits: x, Params: fast(params(rng, s.rows, s.vocab, true), s.vocab)}
			gpu, host = runBoth(t, sample)
			sameBits(t, "sample tokens", gpu.Tokens, host.Tokens)
			judge(t, sample, gpu, host, invalid)

			k := 1 + rng.IntN(4)
			spec, invalid := specRun(rng, s.dtype, max(1, s.rows/(k+1)), k, s.vocab, 8, engine.DTypeInvalid)
			spec.Params = fast(spec.Params, s.vocab)
			sameSpec(t, spec, invalid)
		})
	}
}

// TestGPUPatternRows checks the full-row kernels' pattern path
// (csrc/patterns.cuh: 16-bit rows served by distinct value) on the rows
// that test its edges, with top-p alone (the fast path takes none of them),
// each row beside a plain one: a finite value repeated past its 16-bit
// counter (the row falls back to the per-token path), more distinct values
// than its tables hold (f16, wide; falls back too), a row of one finite
// token among -inf, +0 and -0 tied at the top with min-p on, ties at the
// top-p cut under lowest_index top-k ties, and rows without a distribution.
// Every output must equal engine/cpu's bit for bit.
func TestGPUPatternRows(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	const vocab = 128256
	type edge struct {
		name  string
		dtype engine.DType
		fill  func(t *engine.Tensor, base int)
	}
	edges := []edge{
		{"counter overflow", engine.BF16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, -1) // 7 in 8 tokens: 112224 copies
				if i%8 == 0 {
					x.SetFloat(base+i, rng.NormFloat64())
				}
			}
		}},
		{"too many distinct values", engine.F16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, rng.NormFloat64()*8)
			}
		}},
		{"one finite token", engine.BF16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, math.Inf(-1))
			}
			x.SetFloat(base+rng.IntN(vocab), 3)
		}},
		{"signed zeros at the top", engine.BF16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, -math.Abs(rng.NormFloat64())*3)
			}
			x.SetFloat(base+5, 0)
			x.SetFloat(base+9, math.Copysign(0, -1))
		}},
		{"ties at the cut", engine.BF16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, math.Round(rng.NormFloat64()*2)/4)
			}
		}},
		{"NaN", engine.BF16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, rng.NormFloat64())
			}
			x.SetFloat(base+rng.IntN(vocab), math.NaN())
		}},
		{"all -inf", engine.BF16, func(x *engine.Tensor, base int) {
			for i := range vocab {
				x.SetFloat(base+i, math.Inf(-1))
			}
		}},
	}
	for _, e := range edges {
		t.Run(e.name, func(t *testing.T) {
			x := engine.NewTensor("logits", e.dtype, 2, vocab)
			e.fill(x, 0)
			for i := range vocab {
				x.SetFloat(vocab+i, rng.NormFloat64()*2)
			}
			invalid := map[int]bool{0: e.name == "NaN" || e.name == "all -inf"}
			for _, ties := range []engine.TopKTies{engine.TiesKeep, engine.TiesLowestIndex} {
				p := params(rng, 2, vocab, true)
				p.TopKTies = ties
				for r := range 2 {
					p.Temperature[r] = []float64{0.7, 1, 1.3}[rng.IntN(3)]
					p.TopK[r], p.TopP[r], p.MinP[r] = 0, 0.9, 0
				}
				if ties == engine.TiesLowestIndex { // the top-k cut's tie rule, beyond the fast path's k
					p.TopK[0] = 1000
				}
				if e.name == "signed zeros at the top" {
					p.MinP[0] = 0.5
				}
				for _, op := range []engine.Op{engine.OpRenorm, engine.OpSample} {
					run := &engine.Run{Op: op, Logits: x, Params: p}
					gpu, host := runBoth(t, run)
					if op == engine.OpRenorm {
						sameBits(t, "renorm probs", gpu.Probs, host.Probs)
					} else {
						sameBits(t, "sample tokens", gpu.Tokens, host.Tokens)
					}
					judge(t, run, gpu, host, invalid)
				}
			}
		})
	}
}

func itoa(n int) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func sameTrace(t *testing.T, got, want *engine.SpecTrace) {
	t.Helper()
	if got == nil || want == nil || got.Trials != want.Trials || got.Rows != want.Rows || got.Steps != want.Steps {
		t.Fatalf("trace shapes: cuda %+v, cpu %+v", shapeOf(got), shapeOf(want))
	}
	bits := func(f float32) uint32 {
		if f != f {
			return 0x7fc00000
		}
		return math.Float32bits(f)
	}
	bad := 0
	for i := range got.Step {
		g, w := got.Step[i], want.Step[i]
		if g.Draft == w.Draft && bits(g.U) == bits(w.U) && bits(g.P) == bits(w.P) && bits(g.Q) == bits(w.Q) &&
			g.Accepted == w.Accepted && g.Resampled == w.Resampled {
			continue
		}
		if bad < 5 {
			t.Errorf("trace step %d (trial %d, row %d, position %d): cuda %+v, cpu %+v", i,
				i/(got.Rows*got.Steps), i/got.Steps%got.Rows, i%got.Steps, g, w)
		}
		bad++
	}
	if bad > 5 {
		t.Errorf("... %d trace steps differ", bad)
	}
}

func shapeOf(s *engine.SpecTrace) [3]int {
	if s == nil {
		return [3]int{}
	}
	return [3]int{s.Trials, s.Rows, s.Steps}
}

func TestGPUNgramMatch(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	type ngramCase struct{ rows, l, m, alphabet, maxDraft, threshold, maxNgram int }
	cases := []ngramCase{{1, 50, 10, 4, 8, 1024, 3}, {7, 300, 40, 6, 5, 12, 3}, {128, 4096, 512, 40, 8, 300, 4}, {33, 2000, 100, 1000, 0, 1024, 3}}
	if quick() {
		cases = cases[:2]
	}
	for _, c := range cases {
		t.Run("B"+itoa(c.rows)+"/L"+itoa(c.l), func(t *testing.T) {
			in := engine.NewTensor("input_ids", engine.I64, c.rows, c.l)
			inLen := engine.NewTensor("input_ids_len", engine.I32, c.rows)
			pre := engine.NewTensor("pre_ids", engine.I32, c.rows, c.m)
			step := engine.NewTensor("step_idx", engine.I64, c.rows)
			for r := range c.rows {
				n, s := rng.IntN(c.l+1), rng.IntN(c.m+1)
				if r%5 == 0 {
					s = 0
				}
				inLen.SetInt(r, int64(n))
				step.SetInt(r, int64(s))
				for i := range c.l {
					in.SetInt(r*c.l+i, int64(rng.IntN(c.alphabet)))
				}
				for i := range c.m {
					v := int64(rng.IntN(c.alphabet))
					if i < s && n > 8 && rng.IntN(3) == 0 { // copy a stretch of the prompt
						v = in.Int(r*c.l + rng.IntN(n))
					}
					pre.SetInt(r*c.m+i, v)
				}
			}
			run := &engine.Run{Op: engine.OpNgramMatch, InputIDs: in, InputIDsLen: inLen, PreIDs: pre, StepIdx: step,
				Params: engine.Params{MaxNgramSize: c.maxNgram, MaxDraftTokens: c.maxDraft, Threshold: c.threshold}}
			gpu, host := runBoth(t, run)
			sameBits(t, "draft_out", gpu.DraftOut, host.DraftOut)
			judge(t, run, gpu, host, nil)
		})
	}
}

// TestGPUFaults plants real faults: a kernel that writes out of bounds (a
// sticky illegal address), one that never ends (the watchdog), and a
// crashing worker; each fails its run with its typed error and the next run
// works on a fresh worker.
func TestGPUFaults(t *testing.T) {
	gpuBackend(t) // skip without a GPU
	rng := newRand(t)
	opts := testOptions(kernelsForTest())
	opts.Watchdog = 5 * time.Second
	b, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tests := []struct {
		fault string
		kind  error
	}{
		{"out_of_bounds", ErrDeviceFault},
		{"spin", ErrHung},
		{"crash", ErrCrashed},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			checkArgmax(t, b, rng)
			err := b.injectFault(context.Background(), tt.fault, 5*time.Second)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("fault %s: %v, want %v", tt.fault, err, tt.kind)
			}
			t.Logf("fault %s: %v", tt.fault, err)
			checkArgmax(t, b, rng)
		})
	}
}
