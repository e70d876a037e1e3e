// Package samplertest simulates samplers and chain speculative sampling in
// float64, correct ones and ones with the subtle mistakes that real kernels
// make, and packages what they draw as dumps (docs/DUMPS.md): the
// end-to-end tests of engine/compare and `sampviz check` judge those dumps
// exactly as they judge a user's.
//
// It is test and scenario support: the tests and the scenario generator
// (scenarios/internal/generate) import it; the product never does. It is
// written independently of the judge: it never uses engine/ref or
// engine/stats to decide what a sampler draws (its filters sort the way
// torch does, so a tied group at the top-p cut is kept in part), it never
// judges, and it never does I/O beyond encoding dumps in memory.
package samplertest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// Params are one row's sampling parameters, as DUMPS.md defines them.
type Params struct {
	Temperature float64 // > 0 here: greedy rows are not simulated
	TopK        int     // 0: off
	TopP        float64 // 1: off
	MinP        float64 // 0: off
}

// NoFilter returns temperature-1 parameters with every filter off.
func NoFilter() Params { return Params{Temperature: 1, TopP: 1} }

// Softmax returns softmax(x / t) in float64, scaled after the maximum is
// taken: what an exact kernel computes. -Inf logits get probability 0; NaN
// and +Inf propagate as IEEE arithmetic makes them (a NaN is the maximum).
func Softmax(x []float64, t float64) []float64 {
	m := slices.Max(x)
	p := make([]float64, len(x))
	var s float64
	for i, v := range x {
		p[i] = math.Exp((v - m) / t)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// Filter applies top-k, then top-p to the renormalised mass, then min-p
// (DUMPS.md's top_k_first order) to probs and returns the renormalised
// result. top-k keeps every token tied with the k-th; top-p sorts by
// descending probability (ties by lower index, as a stable sort does) and
// keeps the tokens whose exclusive prefix sum is below top_p, so a tied
// group at the cut may be kept in part, as torch's sort-based top-p does.
func Filter(probs []float64, p Params) []float64 {
	return filter(probs, p, false)
}

// filter is Filter; joint applies top-p to the unfiltered mass instead of
// the renormalised top-k mass (DUMPS.md's joint order).
func filter(probs []float64, p Params, joint bool) []float64 {
	v := len(probs)
	order := make([]int, v)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
	keep := make([]bool, v)
	for i := range keep {
		keep[i] = probs[i] > 0
	}
	if p.TopK > 0 && p.TopK < v {
		kth := probs[order[p.TopK-1]]
		for i := range keep {
			keep[i] = keep[i] && probs[i] >= kth
		}
	}
	if p.TopP < 1 {
		var z float64
		for i, k := range keep {
			if k || joint {
				z += probs[i]
			}
		}
		var ahead float64
		inP := make([]bool, v)
		for _, i := range order {
			if !keep[i] && !joint {
				continue
			}
			inP[i] = ahead < p.TopP*z
			ahead += probs[i]
		}
		for i := range keep {
			keep[i] = keep[i] && inP[i]
		}
	}
	if p.MinP > 0 {
		top := probs[order[0]]
		for i := range keep {
			keep[i] = keep[i] && probs[i] >= p.MinP*top
		}
	}
	return restrict(probs, keep)
}

// restrict returns probs restricted to keep and renormalised.
func restrict(probs []float64, keep []bool) []float64 {
	out := make([]float64, len(probs))
	var s float64
	for i, k := range keep {
		if k {
			out[i] = probs[i]
			s += probs[i]
		}
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// CDF draws from a discrete law by inverting its cumulative sums in float64.
type CDF struct{ cum []float64 }

// NewCDF returns the CDF of weights w (not necessarily normalised).
func NewCDF(w []float64) *CDF {
	c := &CDF{cum: make([]float64, len(w))}
	var s float64
	for i, x := range w {
		s += x
		c.cum[i] = s
	}
	return c
}

// Draw returns the first token whose cumulative weight exceeds u times the
// total; u is in [0, 1).
func (c *CDF) Draw(u float64) int {
	t := u * c.cum[len(c.cum)-1]
	i := sort.SearchFloat64s(c.cum, t)
	for i < len(c.cum)-1 && c.cum[i] <= t {
		i++
	}
	return i
}

// Multinomial returns n independent draws from probs, as torch.multinomial
// with replacement does: the inverse CDF of one uniform per draw.
func Multinomial(rng *rand.Rand, probs []float64, n int) []int64 {
	c := NewCDF(probs)
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(c.Draw(rng.Float64()))
	}
	return out
}

// SampleMistake is a way a sampler can be subtly wrong.
type SampleMistake int

// The sampler mistakes. Bias sets the size of those that have one.
const (
	// SampleCorrect draws from Filter(Softmax(x, T)).
	SampleCorrect SampleMistake = iota
	// TopTwoBias moves Bias of probability from the most probable token to
	// the second.
	TopTwoBias
	// TemperatureAfterTopP filters the temperature-1 distribution, then
	// applies the temperature to the tokens it kept.
	TemperatureAfterTopP
	// TopPDropsCrossing drops the token whose mass crosses top_p.
	TopPDropsCrossing
	// ShiftByOne returns token+1 (mod V) for a share Bias of the draws.
	ShiftByOne
	// IgnoresMinP never applies min-p.
	IgnoresMinP
	// IgnoresTopK never applies top-k.
	IgnoresTopK
	// JointOrder applies top-p to the unfiltered mass, not to the
	// renormalised top-k mass the dump asks for.
	JointOrder
	// TemperatureOff scales by T·(1 + Bias).
	TemperatureOff
	// TieCollapse sends the draws of every group of tokens of equal
	// probability to its lowest id (a comparison that never moves past the
	// first of equal values).
	TieCollapse
	// ArgmaxFallback returns the argmax for a share Bias of the draws, as a
	// rejection sampler whose retry cap falls back to argmax does.
	ArgmaxFallback
	// TemperatureTwice divides the logits by the temperature twice (T²).
	TemperatureTwice
	// MinPClamped clamps a min_p of 0 up to Bias: a row without min-p is
	// filtered at min_p = Bias.
	MinPClamped
	// MinPPool applies the batch's min-p, Bias, to the rows that have none
	// (the min-p tensor passed for every row when some row asks for it).
	MinPPool
)

// Sampler is a simulated sampler: the distribution it draws from for a row
// of logits, and its draws.
type Sampler struct {
	Mistake SampleMistake
	Bias    float64
}

// Law returns the distribution the sampler draws from for logits x with
// parameters p (before ShiftByOne, which moves draws after the fact).
func (s Sampler) Law(x []float64, p Params) []float64 {
	switch s.Mistake {
	case TemperatureAfterTopP:
		base := Filter(Softmax(x, 1), p)
		keep := make([]bool, len(x))
		for i, v := range base {
			keep[i] = v > 0
		}
		return restrict(Softmax(x, p.Temperature), keep)
	case TopPDropsCrossing:
		probs := Filter(Softmax(x, p.Temperature), Params{Temperature: p.Temperature, TopK: p.TopK, TopP: 1})
		keep := make([]bool, len(x))
		order := make([]int, len(x))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
		var incl float64
		for j, i := range order {
			incl += probs[i]
			keep[i] = probs[i] > 0 && (incl <= p.TopP || j == 0)
		}
		out := restrict(probs, keep)
		if p.MinP > 0 {
			out = Filter(out, Params{Temperature: 1, TopP: 1, MinP: p.MinP})
		}
		return out
	case IgnoresMinP:
		p.MinP = 0
	case IgnoresTopK:
		p.TopK = 0
	case JointOrder:
		return filter(Softmax(x, p.Temperature), p, true)
	case TemperatureOff:
		p.Temperature *= 1 + s.Bias
	case TemperatureTwice:
		p.Temperature *= p.Temperature
	case MinPClamped, MinPPool:
		if p.MinP == 0 {
			p.MinP = s.Bias
		}
	}
	law := Filter(Softmax(x, p.Temperature), p)
	if s.Mistake == TopTwoBias {
		top := slices.Index(law, slices.Max(law))
		second := -1
		for i, v := range law {
			if i != top && (second < 0 || v > law[second]) {
				second = i
			}
		}
		m := math.Min(s.Bias, law[top])
		law[top] -= m
		law[second] += m
	}
	switch s.Mistake {
	case TieCollapse:
		first := map[float64]int{}
		for i, v := range law {
			if v == 0 {
				continue
			}
			if j, ok := first[v]; ok {
				law[j] += v
				law[i] = 0
			} else {
				first[v] = i
			}
		}
	case ArgmaxFallback:
		top := slices.Index(law, slices.Max(law))
		for i := range law {
			law[i] *= 1 - s.Bias
		}
		law[top] += s.Bias
	}
	return law
}

// Draw returns n draws of the sampler for logits x with parameters p.
func (s Sampler) Draw(rng *rand.Rand, x []float64, p Params, n int) []int64 {
	out := Multinomial(rng, s.Law(x, p), n)
	if s.Mistake == ShiftByOne {
		for i, t := range out {
			if rng.Float64() < s.Bias {
				out[i] = (t + 1) % int64(len(x))
			}
		}
	}
	return out
}

// SampleCase describes a sample dump: Rows rows of V logits, normal with
// standard deviation Sigma and stored in DType, every row with Params, and
// N draws per row of Sampler as the external `samples`.
type SampleCase struct {
	Rows, V, N int
	DType      engine.DType
	Sigma      float64
	Params     Params
	Sampler    Sampler
	// RowParams, when set, gives row r the parameters RowParams[r %
	// len(RowParams)] instead of Params.
	RowParams []Params
	// Ties, when above 1, gives tokens 0 to Ties-1 of every row one logit,
	// the row's greatest less 0.5: a tied group near the top.
	Ties int
}

// rowParams returns row r's parameters.
func (c SampleCase) rowParams(r int) Params {
	if len(c.RowParams) > 0 {
		return c.RowParams[r%len(c.RowParams)]
	}
	return c.Params
}

// SampleDump returns the tensors and metadata of c's dump, with fresh
// logits and draws from rng. Rows get seeds 1000+r.
func SampleDump(rng *rand.Rand, c SampleCase) ([]*engine.Tensor, map[string]string) {
	values := normals(rng, c.Rows*c.V, c.Sigma)
	if c.Ties > 1 {
		for r := range c.Rows {
			row := values[r*c.V : (r+1)*c.V]
			top := slices.Max(row) - 0.5
			for i := range min(c.Ties, c.V) {
				row[i] = top
			}
		}
	}
	logits := engine.FromFloat64s("logits", c.DType, []int{c.Rows, c.V}, values)
	samples := make([]int64, 0, c.Rows*c.N)
	x := make([]float64, c.V)
	params := make([]Params, c.Rows)
	for r := range c.Rows {
		params[r] = c.rowParams(r)
		logits.Floats64(r*c.V, x) // the values the dump holds
		samples = append(samples, c.Sampler.Draw(rng, x, params[r], c.N)...)
	}
	tensors := append(paramTensors(params),
		logits,
		engine.FromInts("samples", engine.I64, []int{c.Rows, c.N}, samples))
	return tensors, map[string]string{"op": "sample", "source": "samplertest"}
}

// normals returns n normal values with standard deviation sigma.
func normals(rng *rand.Rand, n int, sigma float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64() * sigma
	}
	return x
}

// paramTensors returns the per-row parameter tensors (temperature, top_k,
// top_p, min_p, seed) of rows with parameters ps, one per row.
func paramTensors(ps []Params) []*engine.Tensor {
	rows := len(ps)
	temp, topP, minP := make([]float64, rows), make([]float64, rows), make([]float64, rows)
	topK, seed := make([]int64, rows), make([]int64, rows)
	for r, p := range ps {
		temp[r], topP[r], minP[r], topK[r], seed[r] = p.Temperature, p.TopP, p.MinP, int64(p.TopK), int64(1000+r)
	}
	return []*engine.Tensor{
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temp),
		engine.FromInts("top_k", engine.I64, []int{rows}, topK),
		engine.FromFloat64s("top_p", engine.F32, []int{rows}, topP),
		engine.FromFloat64s("min_p", engine.F32, []int{rows}, minP),
		engine.FromInts("seed", engine.I64, []int{rows}, seed),
	}
}

// Encode writes tensors and metadata as a safetensors dump.
func Encode(tensors []*engine.Tensor, meta map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		return nil, fmt.Errorf("encode dump: %w", err)
	}
	return buf.Bytes(), nil
}

// Load parses an encoded dump named name and builds its run, as `sampviz
// check` does with a file.
func Load(name string, data []byte) (*engine.Run, error) {
	f, err := dump.Parse(name, data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	run, err := dump.BuildRun(f, engine.Overrides{})
	if err != nil {
		return nil, fmt.Errorf("build run of %s: %w", name, err)
	}
	return run, nil
}
