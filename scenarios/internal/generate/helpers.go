package generate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/scenarios"
)

// newRand returns the generator of one scenario: PCG from a fixed seed.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5a4d50564953)) }

// normals returns n normal values with standard deviation sigma.
func normals(rng *rand.Rand, n int, sigma float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64() * sigma
	}
	return x
}

// rounded returns x rounded to dtype, as the dump will store it.
func rounded(x []float64, d engine.DType) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = engine.RoundToDType(v, d)
	}
	return out
}

// maxOf returns the largest value of x and its first index.
func maxOf(x []float64) (float64, int) {
	best, at := math.Inf(-1), -1
	for i, v := range x {
		if v > best || at < 0 {
			best, at = v, i
		}
	}
	return best, at
}

// logProbs returns log(p), with -Inf for zeros: logits whose softmax is p.
func logProbs(p []float64) []float64 {
	x := make([]float64, len(p))
	for i, v := range p {
		x[i] = math.Log(v)
	}
	return x
}

// normalise returns w divided by its sum.
func normalise(w []float64) []float64 {
	var s float64
	for _, v := range w {
		s += v
	}
	out := make([]float64, len(w))
	for i, v := range w {
		out[i] = v / s
	}
	return out
}

// draw returns the token of p (summing to 1) at uniform u: the first whose
// inclusive prefix sum exceeds u, and the last token with mass otherwise.
func draw(p []float64, u float64) int {
	var c float64
	last := -1
	for i, v := range p {
		if v <= 0 {
			continue
		}
		c += v
		last = i
		if u < c {
			return i
		}
	}
	return last
}

// residual returns normalise(max(p - q, 0)), or p when that is all zero.
func residual(p, q []float64) []float64 {
	r := make([]float64, len(p))
	var s float64
	for i := range p {
		r[i] = max(p[i]-q[i], 0)
		s += r[i]
	}
	if s == 0 {
		return slices.Clone(p)
	}
	return normalise(r)
}

// oneHot returns the distribution with all its mass on token x of v.
func oneHot(v, x int) []float64 {
	q := make([]float64, v)
	q[x] = 1
	return q
}

// filters are one row's top-k, top-p and min-p.
type filters struct {
	topK  int
	topP  float64
	minP  float64
	order engine.FilterOrder
}

// keep returns the tokens of p that survive f (docs/SEMANTICS.md
// "Filters", ties kept). So that the design does not rest on a float
// comparison, it fails when a decision is within a relative margin of its
// threshold, or when the k-th token ties with the next.
func (f filters) keep(p []float64, margin float64) ([]bool, error) {
	v := len(p)
	order := make([]int, v)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		}
		return 0
	})
	inK := make([]bool, v)
	k := v
	if f.topK > 0 && f.topK < v {
		k = f.topK
		if p[order[k]] >= p[order[k-1]]*(1-margin) {
			return nil, fmt.Errorf("top-k %d: token %d (p %g) is within %g of the k-th (p %g)", k, order[k], p[order[k]], margin, p[order[k-1]])
		}
	}
	var zAll, zK float64
	for rank, i := range order {
		zAll += p[i]
		if rank < k {
			inK[i] = true
			zK += p[i]
		}
	}
	inP := make([]bool, v)
	if f.topP < 1 {
		z := zAll
		if f.order == engine.TopKFirst {
			z = zK
		}
		limit := f.topP * z
		var ahead float64
		for rank, i := range order {
			if f.order == engine.TopKFirst && !inK[i] {
				break
			}
			if !inK[i] { // dropped by top-k whatever top-p says
				inP[i] = false
				continue
			}
			if math.Abs(ahead-limit) <= margin*limit {
				return nil, fmt.Errorf("top-p %g: the mass ahead of token %d (%g) is within %g of the cut %g", f.topP, i, ahead, margin, limit)
			}
			if rank > 0 && p[i] == p[order[rank-1]] && ahead < limit {
				return nil, fmt.Errorf("top-p %g: token %d ties with the token ahead of it", f.topP, i)
			}
			inP[i] = ahead < limit
			ahead += p[i]
		}
	} else {
		for i := range inP {
			inP[i] = true
		}
	}
	keep := make([]bool, v)
	best := p[order[0]]
	for i := range keep {
		keep[i] = inK[i] && inP[i] && p[i] > 0
		if f.minP > 0 {
			cut := f.minP * best
			if math.Abs(p[i]-cut) <= margin*cut {
				return nil, fmt.Errorf("min-p %g: token %d (p %g) is within %g of the cut %g", f.minP, i, p[i], margin, cut)
			}
			keep[i] = keep[i] && p[i] >= cut
		}
	}
	keep[order[0]] = true
	return keep, nil
}

// restrict returns p restricted to keep and renormalised.
func restrict(p []float64, keep []bool) []float64 {
	w := make([]float64, len(p))
	for i := range p {
		if keep[i] {
			w[i] = p[i]
		}
	}
	return normalise(w)
}

// fail is one failing row of an expected verdict.
func fail(row int, rules ...engine.Rule) scenarios.RowRules {
	slices.Sort(rules)
	return scenarios.RowRules{Row: row, Rules: rules}
}

// span returns the rows [from, to).
func span(from, to int) []int {
	rows := make([]int, 0, to-from)
	for r := from; r < to; r++ {
		rows = append(rows, r)
	}
	return rows
}

// intp returns a pointer to v, for overrides.
func intp(v int) *int { return &v }

// f64 builds a float tensor of dtype from float64 values.
func f64(name string, d engine.DType, shape []int, v []float64) *engine.Tensor {
	return engine.FromFloat64s(name, d, shape, v)
}

// i64 builds an I64 tensor.
func i64(name string, shape []int, v []int64) *engine.Tensor {
	return engine.FromInts(name, engine.I64, shape, v)
}

// ints converts ints to int64s.
func ints(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
