package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"gonum.org/v1/gonum/stat/distuv"
)

// floatDTypes are the input dtypes every op must read.
var floatDTypes = []engine.DType{engine.BF16, engine.F16, engine.F32, engine.F64}

// randomLogits returns n logits drawn from a normal distribution of the
// given scale around a random shift, never all zero.
func randomLogits(rng *rand.Rand, n int, scale float64) []float32 {
	shift := rng.Float64()*20 - 10
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(shift + scale*rng.NormFloat64())
	}
	return x
}

// quantised rounds logits to multiples of step so that rows have ties.
func quantised(x []float32, step float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(math.Round(float64(v/step))) * step
	}
	return out
}

// stored returns x as a kernel reads it from a tensor of dtype d.
func stored(x []float32, d engine.DType) []float32 {
	t := engine.FromFloat32s("x", d, []int{len(x)}, x)
	out := make([]float32, len(x))
	t.Floats32(0, out)
	return out
}

// defaultParams returns parameters for rows rows: temperature 1, filters
// off, seed 1234+r, offset 0.
func defaultParams(rows int) engine.Params {
	p := engine.Params{
		Temperature: make([]float64, rows),
		TopK:        make([]int, rows),
		TopP:        make([]float64, rows),
		MinP:        make([]float64, rows),
		Seed:        make([]uint64, rows),
		Offset:      make([]uint64, rows),
	}
	for r := range rows {
		p.Temperature[r] = 1
		p.TopP[r] = 1
		p.Seed[r] = 1234 + uint64(r)
	}
	return p
}

// logitsRun builds a run of op on rows of logits stored as dtype.
func logitsRun(op engine.Op, dtype engine.DType, rows [][]float32, p engine.Params) *engine.Run {
	vocab := len(rows[0])
	flat := make([]float32, 0, len(rows)*vocab)
	for _, r := range rows {
		flat = append(flat, r...)
	}
	return &engine.Run{
		Source: "test",
		Op:     op,
		Logits: engine.FromFloat32s("logits", dtype, []int{len(rows), vocab}, flat),
		Params: p,
	}
}

// mustRun runs run on a fresh backend and fails the test on error.
func mustRun(t *testing.T, run *engine.Run) *engine.Output {
	t.Helper()
	out, err := New().Run(context.Background(), run)
	if err != nil {
		t.Fatalf("Run(%s): %v", run.Op, err)
	}
	return out
}

// rowFloats returns row r of a [B, V] float tensor.
func rowFloats(t *engine.Tensor, r int) []float32 {
	v := t.Dim(1)
	out := make([]float32, v)
	t.Floats32(r*v, out)
	return out
}

// softmax64 is the float64 softmax((x - m) / T) of the exact values x.
func softmax64(x []float32, temp float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	p := make([]float64, len(x))
	var s float64
	for i, v := range x {
		p[i] = math.Exp((float64(v) - m) / temp)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// filter64 is an independent float64 reading of DUMPS.md's filters on the
// probabilities p: it sorts, where Filter never does.
func filter64(p []float64, k int, topP, minP float64, order engine.FilterOrder, ties engine.TopKTies) []bool {
	n := len(p)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	if k > 0 && k < n {
		for rank, i := range idx {
			if rank >= k && (ties == engine.TiesLowestIndex || p[i] < p[idx[k-1]]) {
				keep[i] = false
			}
		}
	}
	if topP < 1 {
		z := 0.0
		for i, v := range p {
			if order == engine.Joint || keep[i] {
				z += v
			}
		}
		for _, i := range idx {
			ahead := 0.0
			for _, j := range idx {
				if p[j] > p[i] {
					ahead += p[j]
				}
			}
			if ahead >= topP*z {
				keep[i] = false
			}
		}
	}
	if minP > 0 {
		top := p[idx[0]]
		for i, v := range p {
			if v < minP*top {
				keep[i] = false
			}
		}
	}
	return keep
}

// restricted returns p restricted to keep and renormalised.
func restricted(p []float64, keep []bool) []float64 {
	out := make([]float64, len(p))
	var s float64
	for i, v := range p {
		if keep == nil || keep[i] {
			out[i] = v
			s += v
		}
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// chiSquare tests counts of draws against the probabilities want, pooling
// the tokens of small expected count (in increasing order of probability)
// into bins of expected count >= 5. It returns the p-value and the number of
// draws that landed on tokens of zero probability.
func chiSquare(counts []int, want []float64) (pValue float64, impossible int) {
	total := 0
	for _, c := range counts {
		total += c
	}
	idx := make([]int, len(want))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return want[idx[a]] < want[idx[b]] })
	var stat float64
	bins := 0
	var obs, exp float64
	for _, i := range idx {
		if want[i] == 0 {
			impossible += counts[i]
			continue
		}
		obs += float64(counts[i])
		exp += want[i] * float64(total)
		if exp >= 5 {
			stat += (obs - exp) * (obs - exp) / exp
			bins++
			obs, exp = 0, 0
		}
	}
	if exp > 0 { // a last small bin joins the statistic as it is
		stat += (obs - exp) * (obs - exp) / exp
		bins++
	}
	if bins < 2 {
		return 1, impossible
	}
	return distuv.ChiSquared{K: float64(bins - 1)}.Survival(stat), impossible
}
