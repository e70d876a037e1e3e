package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/philox"
)

// filterFormula evaluates docs/SEMANTICS.md's kernel filter rules literally,
// token by token, in O(V^2): the definition that Filter must equal.
func filterFormula(w []float32, k int, topP, minP float32, order engine.FilterOrder, ties engine.TopKTies) []bool {
	n := len(w)
	W := make([]uint64, n)
	for i, v := range w {
		W[i] = philox.Weight(v)
	}
	inK := make([]bool, n)
	for i := range w {
		inK[i] = true
		if k > 0 && k < n {
			exact := ties == engine.TiesLowestIndex || ties == engine.TiesAny
			ahead := 0
			for j := range w {
				if w[j] > w[i] || exact && w[j] == w[i] && j < i {
					ahead++
				}
			}
			inK[i] = ahead < k
		}
	}
	var z uint64
	for i := range w {
		minPKeeps := order != engine.MinPFirst || !(minP > 0) || w[i] >= minP
		if order == engine.Joint || inK[i] && minPKeeps {
			z += W[i]
		}
	}
	keep := make([]bool, n)
	for i := range w {
		keep[i] = inK[i]
		if topP < 1 {
			var mass uint64
			for j := range w {
				if w[j] > w[i] {
					mass += W[j]
				}
			}
			keep[i] = keep[i] && float64(mass) < float64(topP)*float64(z)
		}
		if minP > 0 {
			keep[i] = keep[i] && w[i] >= minP
		}
	}
	return keep
}

func keptIndices(keep []bool) []int {
	var out []int
	for i, k := range keep {
		if k {
			out = append(out, i)
		}
	}
	return out
}

func TestFilterHandCases(t *testing.T) {
	tests := []struct {
		name  string
		w     []float32
		k     int
		topP  float32
		minP  float32
		order engine.FilterOrder
		ties  engine.TopKTies
		want  []int
	}{
		{"top-k keep keeps the tie with the k-th", []float32{1, 0.5, 0.5, 0.25}, 2, 1, 0, engine.TopKFirst, engine.TiesKeep, []int{0, 1, 2}},
		{"top-k lowest_index keeps exactly k", []float32{1, 0.5, 0.5, 0.25}, 2, 1, 0, engine.TopKFirst, engine.TiesLowestIndex, []int{0, 1}},
		{"top-k lowest_index prefers lower indices", []float32{0.5, 0.25, 1, 0.5}, 2, 1, 0, engine.TopKFirst, engine.TiesLowestIndex, []int{0, 2}},
		{"top-k of 1 with tied maxima under keep", []float32{1, 0.125, 1}, 1, 1, 0, engine.TopKFirst, engine.TiesKeep, []int{0, 2}},
		{"top-k off at k >= V", []float32{1, 0.5, 0.25}, 3, 1, 0, engine.TopKFirst, engine.TiesKeep, []int{0, 1, 2}},
		{"top-p exactly at the first token's mass drops the second", []float32{1, 0.5, 0.25, 0.25}, 0, 0.5, 0, engine.TopKFirst, engine.TiesKeep, []int{0}},
		{"top-p keeps the token that crosses p", []float32{1, 0.5, 0.25, 0.25}, 0, 0.6, 0, engine.TopKFirst, engine.TiesKeep, []int{0, 1}},
		{"top-p decides a tied group together", []float32{1, 0.5, 0.25, 0.25}, 0, 0.8, 0, engine.TopKFirst, engine.TiesKeep, []int{0, 1, 2, 3}},
		{"top-p tiny keeps the most probable", []float32{0.5, 1, 0.75}, 0, 1e-6, 0, engine.TopKFirst, engine.TiesKeep, []int{1}},
		{"min-p is inclusive", []float32{1, 0.5, 0.25, 0.125}, 0, 1, 0.25, engine.TopKFirst, engine.TiesKeep, []int{0, 1, 2}},
		{"min-p 1 keeps the maxima", []float32{1, 0.99, 1}, 0, 1, 1, engine.TopKFirst, engine.TiesKeep, []int{0, 2}},
		{"top_k_first: top-p on the renormalised top-k mass", []float32{1, 0.75, 0.5, 0.25}, 2, 0.5, 0, engine.TopKFirst, engine.TiesKeep, []int{0}},
		{"joint: top-p on the whole mass", []float32{1, 0.75, 0.5, 0.25}, 2, 0.5, 0, engine.Joint, engine.TiesKeep, []int{0, 1}},
		{"all three", []float32{0.25, 1, 0.75, 0.5, 0.125, 0.0625}, 4, 0.9, 0.3, engine.TopKFirst, engine.TiesKeep, []int{1, 2, 3}},
		{"min_p_first: top-p on the mass min-p keeps", []float32{1, 0.75, 0.5, 0.25}, 0, 0.42, 0.6, engine.MinPFirst, engine.TiesKeep, []int{0}},
		{"top_k_first: min-p after top-p", []float32{1, 0.75, 0.5, 0.25}, 0, 0.42, 0.6, engine.TopKFirst, engine.TiesKeep, []int{0, 1}},
		{"ties any keeps exactly k, as lowest_index", []float32{0.5, 0.25, 1, 0.5}, 2, 1, 0, engine.TopKFirst, engine.TiesAny, []int{0, 2}},
		{"zero weights count for top-k", []float32{1, 0, 0, 0.5}, 3, 1, 0, engine.TopKFirst, engine.TiesKeep, []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep := make([]bool, len(tt.w))
			Filter(tt.w, tt.k, tt.topP, tt.minP, tt.order, tt.ties, keep)
			if got := keptIndices(keep); !slices.Equal(got, tt.want) {
				t.Errorf("kept %v, want %v", got, tt.want)
			}
			if got := keptIndices(filterFormula(tt.w, tt.k, tt.topP, tt.minP, tt.order, tt.ties)); !slices.Equal(got, tt.want) {
				t.Errorf("the formulas keep %v, want %v (the test's reading of the spec is off)", got, tt.want)
			}
		})
	}
}

func TestFilterMatchesFormulas(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	type params struct {
		k          int
		topP, minP float32
	}
	sets := []params{
		{1, 1, 0}, {5, 1, 0}, {40, 1, 0}, {0, 0.3, 0}, {0, 0.9, 0}, {0, 0.999, 0},
		{0, 1, 0.05}, {0, 1, 0.5}, {20, 0.8, 0}, {7, 0.5, 0.1}, {100, 0.95, 0.01},
	}
	sizes := []struct {
		v, trials int
		temps     []float32
	}{{64, 6, []float32{0.3, 1, 4}}, {300, 4, []float32{0.3, 1, 4}}, {1500, 1, []float32{1}}}
	for _, size := range sizes {
		v := size.v
		for trial := range size.trials {
			x := randomLogits(rng, v, 1+float64(trial))
			if trial%2 == 0 {
				x = quantised(x, 0.25) // ties, and tied weights
			}
			if trial == 5 {
				for i := 0; i < v; i += 3 {
					x[i] = ninf
				}
			}
			for _, temp := range size.temps {
				w := make([]float32, v)
				Weights(x, temp, w)
				for _, ps := range sets {
					for _, order := range []engine.FilterOrder{engine.TopKFirst, engine.Joint, engine.MinPFirst} {
						for _, ties := range []engine.TopKTies{engine.TiesKeep, engine.TiesLowestIndex, engine.TiesAny} {
							name := fmt.Sprintf("V=%d trial=%d T=%g k=%d p=%g minp=%g %s %s", v, trial, temp, ps.k, ps.topP, ps.minP, order, ties)
							keep := make([]bool, v)
							Filter(w, ps.k, ps.topP, ps.minP, order, ties, keep)
							want := filterFormula(w, ps.k, ps.topP, ps.minP, order, ties)
							if !slices.Equal(keep, want) {
								t.Fatalf("%s: Filter keeps %v, the formulas %v", name, keptIndices(keep), keptIndices(want))
							}
							if !keep[Argmax(x)] {
								t.Fatalf("%s: the most probable token was dropped", name)
							}
						}
					}
				}
			}
		}
	}
}

func TestDescendFindsThresholds(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 20 {
		w := make([]float32, 1+rng.IntN(5000))
		for i := range w {
			w[i] = float32(rng.Float64())
			if rng.IntN(4) == 0 {
				w[i] = w[rng.IntN(i+1)] // ties
			}
		}
		k := 1 + rng.IntN(len(w))
		var f filter
		got := f.descend(w, nil, func(above int, _ uint64) bool { return above < k })
		sorted := slices.Clone(w)
		slices.Sort(sorted)
		slices.Reverse(sorted)
		if want := sorted[k-1]; got != want {
			t.Errorf("trial %d: %d-th largest of %d = %v, want %v", trial, k, len(w), got, want)
		}
	}
}

// TestTemperatureLast: under temperature_order last, renorm and sample
// decide the filters on the weights at temperature 1 and keep the weights
// at T: bit for bit what Filter on Weights(x, 1) and Renorm of Weights(x, T)
// give, and draws from that CDF.
func TestTemperatureLast(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	const rows, v = 6, 400
	x := make([][]float32, rows)
	p := defaultParams(rows)
	for r := range rows {
		x[r] = randomLogits(rng, v, 1.5)
		p.Temperature[r] = []float64{0.4, 0.8, 1.7}[r%3]
		p.TopK[r] = 10 + rng.IntN(40)
		p.TopP[r] = 0.5 + 0.4*rng.Float64()
		p.MinP[r] = 0.05 * float64(r%2)
	}
	p.TemperatureOrder = engine.TemperatureLast
	p.Draws = 64
	renorm := mustRun(t, logitsRun(engine.OpRenorm, engine.F32, x, p))
	sample := mustRun(t, logitsRun(engine.OpSample, engine.F32, x, p))
	first := p
	first.TemperatureOrder = engine.TemperatureFirst
	before := mustRun(t, logitsRun(engine.OpRenorm, engine.F32, x, first))
	differ := 0
	for r := range rows {
		t32 := float32(p.Temperature[r])
		w1, w := make([]float32, v), make([]float32, v)
		Weights(x[r], 1, w1)
		Weights(x[r], t32, w)
		keep := make([]bool, v)
		Filter(w1, p.TopK[r], float32(p.TopP[r]), float32(p.MinP[r]), engine.TopKFirst, engine.TiesKeep, keep)
		want := make([]float32, v)
		Renorm(w, keep, want)
		if got := rowFloats(renorm.Probs, r); !slices.Equal(got, want) {
			t.Errorf("row %d (T=%g): renorm differs from the filters at T = 1", r, t32)
		}
		var cdf CDF
		cdf.Reset(w, keep)
		for d := range p.Draws {
			s := philox.NewStream(p.Seed[r], p.Offset[r], r, d)
			if got, want := sample.Samples.Int(r*p.Draws+d), cdf.Draw(s.U64(0)); got != int64(want) {
				t.Fatalf("row %d draw %d: token %d, want %d", r, d, got, want)
			}
		}
		if !slices.Equal(rowFloats(before.Probs, r), rowFloats(renorm.Probs, r)) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("temperature first and last keep the same tokens on every row: the test data do not tell them apart")
	}
}
