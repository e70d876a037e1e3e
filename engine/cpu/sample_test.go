package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/f32math"
	"github.com/sampviz/sampviz/engine/philox"
)

// rowFilter is one row's filter parameters.
type rowFilter struct {
	k          int
	topP, minP float32
	order      engine.FilterOrder
	ties       engine.TopKTies
}

func (f rowFilter) String() string {
	return fmt.Sprintf("k=%d p=%g min_p=%g %s %s", f.k, f.topP, f.minP, f.order, f.ties)
}

func (f rowFilter) active(v int) bool { return f.k > 0 && f.k < v || f.topP < 1 || f.minP > 0 }

// sampler prepares a row of logits x at temperature temp with filters f and
// returns the function that makes the draw of a stream.
type sampler func(x []float32, temp float32, f rowFilter) func(s philox.Stream) int

// keepFor returns the Filter survivors of a row, or nil when no filter is on.
func keepFor(w []float32, f rowFilter) []bool {
	if !f.active(len(w)) {
		return nil
	}
	keep := make([]bool, len(w))
	Filter(w, f.k, f.topP, f.minP, f.order, f.ties, keep)
	return keep
}

func weightsOf(x []float32, temp float32) []float32 {
	w := make([]float32, len(x))
	Weights(x, temp, w)
	return w
}

var samplers = map[string]sampler{
	"inverse_cdf": func(x []float32, temp float32, f rowFilter) func(philox.Stream) int {
		w := weightsOf(x, temp)
		var c CDF
		c.Reset(w, keepFor(w, f))
		return func(s philox.Stream) int { return c.Draw(s.U64(0)) }
	},
	"gumbel": func(x []float32, temp float32, f rowFilter) func(philox.Stream) int {
		keep := keepFor(weightsOf(x, temp), f)
		return func(s philox.Stream) int { return SampleGumbel(x, temp, keep, s) }
	},
	"rejection": func(x []float32, temp float32, f rowFilter) func(philox.Stream) int {
		w := weightsOf(x, temp)
		keep := keepFor(w, f)
		var r rejection
		return func(s philox.Stream) int { return r.sample(w, keep, f.ties, s) }
	},
}

// biasedSamplers are deliberately wrong; the distribution test must catch
// each of them on the rows where it makes a difference.
var biasedSamplers = []struct {
	name    string
	applies func(f rowFilter) bool
	prepare sampler
}{
	{"temperature 5% too high", func(rowFilter) bool { return true }, func(x []float32, temp float32, f rowFilter) func(philox.Stream) int {
		var c CDF
		c.Reset(weightsOf(x, temp*1.05), keepFor(weightsOf(x, temp), f))
		return func(s philox.Stream) int { return c.Draw(s.U64(0)) }
	}},
	{"ignores the filters", func(f rowFilter) bool { return f.active(64) }, func(x []float32, temp float32, f rowFilter) func(philox.Stream) int {
		var c CDF
		c.Reset(weightsOf(x, temp), nil)
		return func(s philox.Stream) int { return c.Draw(s.U64(0)) }
	}},
	// Tokens of one block get the same noise, so the larger logit of the
	// four always wins: visible where most tokens are kept.
	{"gumbel sharing one word among four tokens", func(f rowFilter) bool { return !f.active(64) }, func(x []float32, temp float32, f rowFilter) func(philox.Stream) int {
		keep := keepFor(weightsOf(x, temp), f)
		m := x[Argmax(x)]
		return func(s philox.Stream) int {
			best, bestScore := -1, float32(math.Inf(-1))
			for i, v := range x {
				if keep != nil && !keep[i] {
					continue
				}
				g := -f32math.Log(-f32math.Log(philox.OpenU01(s.Block(uint64(i / 4))[0])))
				if score := (v-m)/temp + g; best < 0 || score > bestScore {
					best, bestScore = i, score
				}
			}
			return best
		}
	}},
}

// drawCounts makes n draws of row x with streams of draw index 0..n-1.
func drawCounts(x []float32, temp float32, f rowFilter, prepare sampler, n int) []int {
	draw := prepare(x, temp, f)
	counts := make([]int, len(x))
	for d := range n {
		if tok := draw(philox.NewStream(99, 7, 3, d)); tok >= 0 {
			counts[tok]++
		}
	}
	return counts
}

var distributionFilters = []rowFilter{
	{0, 1, 0, engine.TopKFirst, engine.TiesKeep},
	{12, 1, 0, engine.TopKFirst, engine.TiesKeep},
	{0, 0.8, 0, engine.TopKFirst, engine.TiesKeep},
	{0, 1, 0.1, engine.TopKFirst, engine.TiesKeep},
	{20, 0.9, 0.02, engine.Joint, engine.TiesKeep},
	{10, 0.85, 0, engine.TopKFirst, engine.TiesLowestIndex},
}

// TestSamplersFollowTheDistribution draws 10^5 tokens per case with every
// method and compares the counts with the float64 distribution (chi-square,
// p-value threshold 1e-4, fixed seeds: the outcome is deterministic).
func TestSamplersFollowTheDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("10^5 draws per case")
	}
	const draws = 100_000
	const threshold = 1e-4
	rng := rand.New(rand.NewPCG(31, 32))
	x := randomLogits(rng, 64, 1.5)
	x = quantised(x, 0.125) // ties, for the lowest_index case
	x[5] = ninf
	const temp = 0.9
	p := softmax64(x, temp)
	for _, f := range distributionFilters {
		want := restricted(p, filter64(p, f.k, float64(f.topP), float64(f.minP), f.order, f.ties))
		for _, name := range []string{"inverse_cdf", "gumbel", "rejection"} {
			t.Run(name+" "+f.String(), func(t *testing.T) {
				pv, impossible := chiSquare(drawCounts(x, temp, f, samplers[name], draws), want)
				if impossible > 0 || pv < threshold {
					t.Errorf("p-value %.3g (threshold %g), %d draws of filtered tokens", pv, threshold, impossible)
				}
			})
		}
		for _, biased := range biasedSamplers {
			if !biased.applies(f) {
				continue
			}
			t.Run("biased "+biased.name+" "+f.String(), func(t *testing.T) {
				pv, impossible := chiSquare(drawCounts(x, temp, f, biased.prepare, draws), want)
				if impossible == 0 && pv >= threshold {
					t.Errorf("a biased sampler passed: p-value %.3g", pv)
				}
			})
		}
	}
}

func TestSampleInverseCDFByHand(t *testing.T) {
	w := []float32{0.25, 0, 1, 0.5, 0.125}
	keep := []bool{true, true, true, false, true}
	for d := range 50 {
		s := philox.NewStream(5, 0, 0, d)
		// Walk the whole row as the kernel's scan does.
		var total uint64
		for i, v := range w {
			if keep[i] {
				total += philox.Weight(v)
			}
		}
		target := philox.Pick(s.U64(0), total)
		want, sum := -1, uint64(0)
		for i, v := range w {
			if keep[i] {
				sum += philox.Weight(v)
			}
			if sum > target {
				want = i
				break
			}
		}
		if got := SampleInverseCDF(w, keep, s); got != want {
			t.Fatalf("draw %d: %d, want %d", d, got, want)
		}
	}
}

func TestCDFDrawMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	tests := []struct {
		name string
		w    []float32
	}{
		{"one token", []float32{0.75}},
		{"one heavy token among many light ones", append([]float32{1}, weightsOf(randomLogits(rng, 5000, 0.1), 1)[:4999]...)},
		{"skewed row", weightsOf(randomLogits(rng, 20000, 4), 1)},
		{"tokens of zero fixed-point weight", []float32{1e-13, 0.5, 0, 1e-12, 0.25, 1e-20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c CDF
			c.Reset(tt.w, nil)
			us := []uint64{0, 1, math.MaxUint64, 1 << 63, 1<<52 - 1, 1 << 52, 3<<52 - 1}
			for range 20000 {
				us = append(us, rng.Uint64())
			}
			for g := range 300 {
				us = append(us, uint64(g)<<52, uint64(g+1)<<52-1)
			}
			for _, u := range us {
				target := philox.Pick(u, c.Total())
				want, sum := -1, uint64(0)
				for i, v := range tt.w {
					sum += philox.Weight(v)
					if sum > target {
						want = i
						break
					}
				}
				if got := c.Draw(u); got != want {
					t.Fatalf("u=%#x: %d, want %d", u, got, want)
				}
			}
		})
	}
	var empty CDF
	empty.Reset([]float32{0, 1e-15}, nil)
	if got := empty.Draw(12345); got != -1 {
		t.Errorf("Draw on zero total = %d, want -1", got)
	}
}

func TestSampleGumbelByHand(t *testing.T) {
	x := []float32{0.5, -1.25, 2, 1.75, ninf, 0.125}
	keep := []bool{true, true, true, true, true, false}
	const temp = 1.5
	for d := range 50 {
		s := philox.NewStream(6, 11, 2, d)
		want, best := -1, float32(math.Inf(-1))
		for i, v := range x {
			if !keep[i] {
				continue
			}
			u := philox.OpenU01(s.Block(uint64(i / 4))[i%4])
			g := -f32math.Log(-f32math.Log(u))
			score := (v-2)/temp + g
			if want < 0 || score > best {
				want, best = i, score
			}
		}
		if got := SampleGumbel(x, temp, keep, s); got != want {
			t.Fatalf("draw %d: %d, want %d", d, got, want)
		}
	}
}

func TestSampleRejectionByHand(t *testing.T) {
	// Only token 2 (the maximum) survives; the first round draws from
	// everything, later rounds from the tokens ahead of the rejected one.
	w := []float32{0.5, 0.5, 1, 0.25}
	keep := []bool{false, false, true, false}
	for _, ties := range []engine.TopKTies{engine.TiesKeep, engine.TiesLowestIndex} {
		for d := range 20 {
			if got := SampleRejection(w, keep, ties, philox.NewStream(7, 0, 0, d)); got != 2 {
				t.Fatalf("%s draw %d: %d, want 2", ties, d, got)
			}
		}
	}
	// Without filters the first round is the inverse CDF of block 0.
	w = []float32{0.3, 1, 0.7, 0.01}
	for d := range 50 {
		s := philox.NewStream(8, 0, 1, d)
		if got, want := SampleRejection(w, nil, engine.TiesKeep, s), SampleInverseCDF(w, nil, s); got != want {
			t.Fatalf("draw %d: rejection %d, inverse CDF %d", d, got, want)
		}
	}
}

// sampleRun builds a sample run over rows of random logits.
func sampleRun(rng *rand.Rand, dtype engine.DType, rows, vocab int) *engine.Run {
	xs := make([][]float32, rows)
	for r := range xs {
		xs[r] = randomLogits(rng, vocab, 2)
	}
	return logitsRun(engine.OpSample, dtype, xs, defaultParams(rows))
}

func TestSampleSeeds(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, method := range []engine.SampleMethod{engine.SampleInverseCDF, engine.SampleGumbel, engine.SampleRejection} {
		t.Run(string(method), func(t *testing.T) {
			run := sampleRun(rng, engine.F32, 64, 500)
			run.Params.Method = method
			for r := range 64 {
				run.Params.Temperature[r] = 3 // flat enough that rows differ
				run.Params.TopK[r] = 300
			}
			first := mustRun(t, run).Tokens.Ints()
			again := mustRun(t, run).Tokens.Ints()
			for r := range first {
				if first[r] != again[r] {
					t.Fatalf("row %d: same seed gave %d then %d", r, first[r], again[r])
				}
			}
			for _, change := range []struct {
				name  string
				apply func(p *engine.Params)
			}{
				{"seed", func(p *engine.Params) {
					for r := range p.Seed {
						p.Seed[r] += 1000
					}
				}},
				{"offset", func(p *engine.Params) {
					for r := range p.Offset {
						p.Offset[r] = 1 << 20
					}
				}},
			} {
				other := *run
				other.Params.Seed = append([]uint64(nil), run.Params.Seed...)
				other.Params.Offset = append([]uint64(nil), run.Params.Offset...)
				change.apply(&other.Params)
				got := mustRun(t, &other).Tokens.Ints()
				same := 0
				for r := range got {
					if got[r] == first[r] {
						same++
					}
				}
				if same > 16 {
					t.Errorf("another %s drew the same token in %d of 64 rows", change.name, same)
				}
			}
		})
	}
}

func TestSampleRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	const rows, vocab, draws = 12, 700, 2000
	filters := []rowFilter{
		{0, 1, 0, "", ""},
		{5, 1, 0, "", ""},
		{0, 0.5, 0, "", ""},
		{0, 1, 0.2, "", ""},
		{50, 0.7, 0.05, "", ""},
		{1, 1, 0, "", ""},
	}
	for _, dtype := range floatDTypes {
		for _, order := range []engine.FilterOrder{engine.TopKFirst, engine.Joint} {
			for _, ties := range []engine.TopKTies{engine.TiesKeep, engine.TiesLowestIndex} {
				for _, method := range []engine.SampleMethod{engine.SampleAuto, engine.SampleInverseCDF, engine.SampleGumbel, engine.SampleRejection} {
					name := fmt.Sprintf("%s %s %s %q", dtype, order, ties, method)
					t.Run(name, func(t *testing.T) {
						run := sampleRun(rng, dtype, rows, vocab)
						p := &run.Params
						p.Method, p.Draws, p.FilterOrder, p.TopKTies = method, draws, order, ties
						for r := range rows {
							f := filters[r%len(filters)]
							p.TopK[r], p.TopP[r], p.MinP[r] = f.k, float64(f.topP), float64(f.minP)
							p.Temperature[r] = []float64{0.5, 1, 0, 2}[r%4] // rows 2, 6, 10 are greedy
						}
						out := mustRun(t, run)
						checkSampleOutput(t, run, out)
					})
				}
			}
		}
	}
}

// checkSampleOutput checks every token of a sample run: greedy rows give the
// argmax, other rows only tokens their filters keep, and with the inverse
// CDF the first draw is the token.
func checkSampleOutput(t *testing.T, run *engine.Run, out *engine.Output) {
	t.Helper()
	p := run.Params
	rows, vocab := run.Logits.Dim(0), run.Logits.Dim(1)
	if out.Tokens.DType != engine.I32 || out.Tokens.Dim(0) != rows {
		t.Fatalf("tokens %s %s", out.Tokens.DType, out.Tokens.ShapeString())
	}
	if p.Draws > 0 && (out.Samples.DType != engine.I32 || out.Samples.Dim(0) != rows || out.Samples.Dim(1) != p.Draws) {
		t.Fatalf("samples %s %s", out.Samples.DType, out.Samples.ShapeString())
	}
	for r := range rows {
		x := rowFloats(run.Logits, r)
		temp := float32(p.Temperature[r])
		var keep []bool
		if temp > 0 {
			f := rowFilter{p.TopK[r], float32(p.TopP[r]), float32(p.MinP[r]), p.FilterOrder, p.TopKTies}
			keep = keepFor(weightsOf(x, temp), f)
		}
		top := int64(Argmax(x))
		check := func(draw int, tok int64) { // draw -1 is the token
			switch {
			case temp == 0 && tok != top:
				t.Fatalf("row %d (greedy) draw %d: %d, argmax %d", r, draw, tok, top)
			case tok < 0 || tok >= int64(vocab):
				t.Fatalf("row %d draw %d: %d outside [0, %d)", r, draw, tok, vocab)
			case keep != nil && !keep[tok]:
				t.Fatalf("row %d draw %d: %d is filtered out", r, draw, tok)
			}
		}
		check(-1, out.Tokens.Int(r))
		for d := range p.Draws {
			check(d, out.Samples.Int(r*p.Draws+d))
		}
		unfiltered := keep == nil
		if p.Draws > 0 && (p.Method == engine.SampleInverseCDF || p.Method == engine.SampleAuto || p.Method == engine.SampleRejection && unfiltered) {
			if a, b := out.Tokens.Int(r), out.Samples.Int(r*p.Draws); a != b {
				t.Fatalf("row %d: token %d but inverse-CDF draw 0 is %d", r, a, b)
			}
		}
	}
}

func TestSampleInvalidRows(t *testing.T) {
	x := [][]float32{
		{1, nan, 2},
		{1, inf, 2},
		{ninf, ninf, ninf},
		{0.5, 1.5, -2},
	}
	for _, method := range []engine.SampleMethod{engine.SampleAuto, engine.SampleGumbel, engine.SampleRejection} {
		for _, temp := range []float64{0, 1} {
			t.Run(fmt.Sprintf("%q T=%g", method, temp), func(t *testing.T) {
				p := defaultParams(4)
				p.Method, p.Draws = method, 5
				for r := range 4 {
					p.Temperature[r] = temp
					p.TopK[r] = 2
				}
				out := mustRun(t, logitsRun(engine.OpSample, engine.F32, x, p))
				for r := range 3 {
					if tok := out.Tokens.Int(r); tok != -1 {
						t.Errorf("row %d: token %d, want -1", r, tok)
					}
					for d := range 5 {
						if tok := out.Samples.Int(r*5 + d); tok != -1 {
							t.Errorf("row %d draw %d: %d, want -1", r, d, tok)
						}
					}
				}
				if tok := out.Tokens.Int(3); tok < 0 || tok > 1 {
					t.Errorf("valid row: token %d, want one of the top 2", tok)
				}
			})
		}
	}
}

func TestSampleManyDraws(t *testing.T) {
	// 10^5 draws of 64 rows of 4096 tokens through Run, with the row's
	// filters: each row's histogram must follow its distribution.
	if testing.Short() {
		t.Skip("10^5 draws per row")
	}
	rng := rand.New(rand.NewPCG(37, 38))
	const rows, vocab, draws = 8, 4096, 100_000
	run := sampleRun(rng, engine.BF16, rows, vocab)
	run.Params.Draws = draws
	for r := range rows {
		run.Params.TopP[r] = []float64{1, 0.9, 0.6, 0.95}[r%4]
		run.Params.TopK[r] = []int{0, 0, 100, 2000}[r%4]
	}
	out, err := New().Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for r := range rows {
		x := rowFloats(run.Logits, r)
		p := softmax64(x, 1)
		want := restricted(p, filter64(p, run.Params.TopK[r], run.Params.TopP[r], 0, engine.TopKFirst, engine.TiesKeep))
		counts := make([]int, vocab)
		for d := range draws {
			counts[out.Samples.Int(r*draws+d)]++
		}
		pv, impossible := chiSquare(counts, want)
		if impossible > 0 {
			t.Errorf("row %d: %d draws of filtered tokens", r, impossible)
		}
		if pv < 1e-4 {
			failed++
			t.Logf("row %d: p-value %.3g", r, pv)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d rows fail the chi-square test at 1e-4", failed, rows)
	}
}
