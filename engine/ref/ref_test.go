package ref

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// ln2 makes logits whose weights are exact powers of two: exp(-k ln 2) is
// exactly 2^-k in float64 for the small k used here.
const ln2 = math.Ln2

var negInf = math.Inf(-1)

// rowRun builds a one-row run of the given logits (stored in dtype) and
// parameters.
func rowRun(dtype engine.DType, logits []float64, temp float64, f Filter) *engine.Run {
	return &engine.Run{
		Op:     engine.OpRenorm,
		Logits: engine.FromFloat64s("logits", dtype, []int{1, len(logits)}, logits),
		Params: engine.Params{
			Temperature: []float64{temp},
			TopK:        []int{f.TopK},
			TopP:        []float64{f.TopP},
			MinP:        []float64{f.MinP},
			FilterOrder: f.Order,
			TopKTies:    f.Ties,

			TemperatureOrder: f.Temperature,
		},
	}
}

// logOf returns the logits log(w_i): weights that a softmax at T = 1 turns
// into w_i / sum(w).
func logOf(w ...float64) []float64 {
	x := make([]float64, len(w))
	for i, v := range w {
		x[i] = math.Log(v)
	}
	return x
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*max(math.Abs(a), math.Abs(b))
}

func nearSlices(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i]) {
			return false
		}
	}
	return true
}

const (
	K = Kept
	B = Boundary
	D = Dropped
)

func TestRenormHandComputed(t *testing.T) {
	const eps = 1e-6
	tests := []struct {
		name    string
		logits  []float64
		temp    float64
		filter  Filter
		probs   []float64
		class   []Class
		argmax  int
		topK    float64
		topPCut float64
		minP    float64
	}{
		{
			name:   "temperature 0 goes to the lowest index of the maximum",
			logits: []float64{1, 3, 3, 2},
			temp:   0,
			filter: Filter{TopP: 1},
			probs:  []float64{0, 1, 0, 0},
			class:  []Class{D, K, B, D},
			argmax: 1,
		},
		{
			name:   "a temperature that rounds to 0 in float32 is greedy",
			logits: []float64{3, 1, 3},
			temp:   1e-50,
			filter: Filter{TopP: 1},
			probs:  []float64{1, 0, 0},
			class:  []Class{K, D, B},
		},
		{
			name:   "softmax keeps masked tokens at zero",
			logits: []float64{0, negInf, 0, -ln2},
			temp:   1,
			filter: Filter{TopP: 1},
			probs:  []float64{0.4, 0, 0.4, 0.2},
			class:  []Class{K, D, K, K},
		},
		{
			name:   "temperature 2 halves the logits",
			logits: []float64{0, -2 * ln2},
			temp:   2,
			filter: Filter{TopP: 1},
			probs:  []float64{2.0 / 3, 1.0 / 3},
			class:  []Class{K, K},
		},
		{
			name:   "top-k keeps every token tied with the k-th",
			logits: logOf(4, 2, 2, 1),
			temp:   1,
			filter: Filter{TopK: 2, TopP: 1, Ties: engine.TiesKeep},
			probs:  []float64{0.5, 0.25, 0.25, 0},
			class:  []Class{K, K, K, D},
			topK:   2.0 / 9,
		},
		{
			name:   "top-k lowest_index keeps exactly k",
			logits: logOf(2, 4, 2, 1),
			temp:   1,
			filter: Filter{TopK: 2, TopP: 1, Ties: engine.TiesLowestIndex},
			probs:  []float64{2.0 / 6, 4.0 / 6, 0, 0},
			class:  []Class{K, K, D, D},
			argmax: 1,
			topK:   2.0 / 9,
		},
		{
			name:   "top-k near-ties are boundary",
			logits: []float64{0, -1, -1 - 1e-9, -3},
			temp:   1,
			filter: Filter{TopK: 2, TopP: 1, Eps: eps},
			probs:  []float64{1 / (1 + math.Exp(-1)), math.Exp(-1) / (1 + math.Exp(-1)), 0, 0},
			class:  []Class{K, K, B, D}, // the k-th itself follows the declared rule
			topK:   math.Exp(-1) / (1 + math.Exp(-1) + math.Exp(-1-1e-9) + math.Exp(-3)),
		},
		{
			name:    "top-p keeps the token that crosses",
			logits:  logOf(4, 3, 2, 1),
			temp:    1,
			filter:  Filter{TopP: 0.5, Eps: eps},
			probs:   []float64{4.0 / 7, 3.0 / 7, 0, 0},
			class:   []Class{K, K, D, D},
			topPCut: 0.5,
		},
		{
			name:    "top-p decides a tied group together (kept)",
			logits:  logOf(2, 1, 1, 1),
			temp:    1,
			filter:  Filter{TopP: 0.5, Eps: eps},
			probs:   []float64{0.4, 0.2, 0.2, 0.2},
			class:   []Class{K, B, B, B},
			topPCut: 0.5,
		},
		{
			name:    "top-p decides a tied group together (dropped at the exact cut)",
			logits:  []float64{0, -ln2, -ln2},
			temp:    1,
			filter:  Filter{TopP: 0.5, Eps: eps},
			probs:   []float64{1, 0, 0},
			class:   []Class{K, B, B},
			topPCut: 0.5,
		},
		{
			name:   "min-p is inclusive",
			logits: []float64{0, -ln2, -2 * ln2},
			temp:   1,
			filter: Filter{TopP: 1, MinP: 0.5, Eps: eps},
			probs:  []float64{2.0 / 3, 1.0 / 3, 0},
			class:  []Class{K, B, D},
			minP:   0.5 / 1.75,
		},
		{
			name:   "min-p of 1 keeps the tied maxima",
			logits: logOf(3, 1, 3, 2),
			temp:   1,
			filter: Filter{TopP: 1, MinP: 1, Eps: eps},
			probs:  []float64{0.5, 0, 0.5, 0},
			class:  []Class{K, D, K, D},
			minP:   1.0 / 3,
		},
		{
			name:    "top_k_first applies top-p to the top-k mass",
			logits:  logOf(4, 3, 2, 1),
			temp:    1,
			filter:  Filter{TopK: 2, TopP: 0.5, Order: engine.TopKFirst, Eps: eps},
			probs:   []float64{1, 0, 0, 0},
			class:   []Class{K, D, D, D},
			topK:    0.3,
			topPCut: 0.35,
		},
		{
			name:    "joint applies top-p to the whole mass",
			logits:  logOf(4, 3, 2, 1),
			temp:    1,
			filter:  Filter{TopK: 2, TopP: 0.5, Order: engine.Joint, Eps: eps},
			probs:   []float64{4.0 / 7, 3.0 / 7, 0, 0},
			class:   []Class{K, K, D, D},
			topK:    0.3,
			topPCut: 0.5,
		},
		{
			name:   "top-k ties any keeps exactly k, any of the tied",
			logits: logOf(4, 2, 2, 1),
			temp:   1,
			filter: Filter{TopK: 2, TopP: 1, Ties: engine.TiesAny},
			probs:  []float64{4.0 / 6, 2.0 / 6, 0, 0},
			class:  []Class{K, B, B, D},
			topK:   2.0 / 9,
		},
		{
			name:    "min_p_first applies top-p to the mass min-p keeps",
			logits:  logOf(4, 3, 2, 1),
			temp:    1,
			filter:  Filter{TopP: 0.42, MinP: 0.6, Order: engine.MinPFirst, Eps: eps},
			probs:   []float64{1, 0, 0, 0},
			class:   []Class{K, D, D, D},
			topPCut: 0.42 * 0.7,
			minP:    0.6 * 0.4,
		},
		{
			name:    "top_k_first applies min-p after top-p",
			logits:  logOf(4, 3, 2, 1),
			temp:    1,
			filter:  Filter{TopP: 0.42, MinP: 0.6, Order: engine.TopKFirst, Eps: eps},
			probs:   []float64{4.0 / 7, 3.0 / 7, 0, 0},
			class:   []Class{K, K, D, D},
			topPCut: 0.42,
			minP:    0.6 * 0.4,
		},
		{
			name:    "temperature last decides top-p at T = 1",
			logits:  logOf(4, 3, 2, 1),
			temp:    0.5,
			filter:  Filter{TopP: 0.5, Temperature: engine.TemperatureLast, Eps: eps},
			probs:   []float64{16.0 / 25, 9.0 / 25, 0, 0},
			class:   []Class{K, K, D, D},
			topPCut: 25.0 / 30, // the mass top-p keeps, at T = 0.5
		},
		{
			name:    "temperature first decides top-p at T",
			logits:  logOf(4, 3, 2, 1),
			temp:    0.5,
			filter:  Filter{TopP: 0.5, Temperature: engine.TemperatureFirst, Eps: eps},
			probs:   []float64{1, 0, 0, 0},
			class:   []Class{K, D, D, D},
			topPCut: 0.5,
		},
		{
			name:   "temperature last decides min-p at T = 1",
			logits: logOf(4, 3, 2, 1),
			temp:   0.5,
			filter: Filter{TopP: 1, MinP: 0.5, Temperature: engine.TemperatureLast, Eps: eps},
			probs:  []float64{16.0 / 29, 9.0 / 29, 4.0 / 29, 0},
			class:  []Class{K, K, B, D},
			minP:   4.0 / 30, // 0.5^(1/0.5) of the greatest, at T = 0.5
		},
		{
			name:   "one surviving token",
			logits: logOf(4, 3, 2, 1),
			temp:   1,
			filter: Filter{TopK: 1, TopP: 1, Eps: eps},
			probs:  []float64{1, 0, 0, 0},
			class:  []Class{K, D, D, D},
			topK:   0.4,
		},
		{
			name:    "a top-p of 0 keeps only the most probable",
			logits:  logOf(1, 4, 3),
			temp:    1,
			filter:  Filter{TopP: 0, Eps: eps},
			probs:   []float64{0, 1, 0},
			class:   []Class{D, K, D},
			argmax:  1,
			topPCut: 0,
		},
	}
	for _, tt := range tests {
		// F64 logits, so that log(w) and -k ln 2 are exact enough to compute
		// by hand; TestFastPathEqualsSimplePath covers the 16-bit path.
		t.Run(tt.name, func(t *testing.T) {
			run := rowRun(engine.F64, tt.logits, tt.temp, tt.filter)
			d := Renorm(run, 0, false, tt.filter.Eps)
			if !d.Valid() {
				t.Fatalf("invalid: %s", d.Invalid)
			}
			if !nearSlices(d.Probs, tt.probs) {
				t.Errorf("Probs = %v, want %v", d.Probs, tt.probs)
			}
			if !slices.Equal(d.Class, tt.class) {
				t.Errorf("Class = %v, want %v", d.Class, tt.class)
			}
			if d.Argmax != tt.argmax {
				t.Errorf("Argmax = %d, want %d", d.Argmax, tt.argmax)
			}
			if !near(d.TopKProb, tt.topK) || !near(d.TopPCut, tt.topPCut) || !near(d.MinPThreshold, tt.minP) {
				t.Errorf("cuts (k, p, min-p) = %v, %v, %v, want %v, %v, %v", d.TopKProb, d.TopPCut, d.MinPThreshold, tt.topK, tt.topPCut, tt.minP)
			}
			sum := 0.0
			for _, p := range d.Base {
				sum += p
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("Base sums to %v", sum)
			}
		})
	}
}

func TestInvalidRows(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name   string
		logits []float64
		temp   float64
		want   string
		rule   engine.Rule
	}{
		{"NaN", []float64{0, 1, nan, 2, nan}, 1, "input logits contain NaN at 2 of 5 tokens, first at token 2", engine.RuleNaN},
		{"+Inf", []float64{0, math.Inf(1), 1}, 1, "input logits contain +Inf at 1 of 3 tokens, first at token 1", engine.RuleInf},
		{"NaN and +Inf", []float64{math.Inf(1), nan}, 1, "input logits contain NaN at 1 and +Inf at 1 of 2 tokens, first at token 0", engine.RuleNaN},
		{"all masked", []float64{negInf, negInf}, 1, "input logits are all -inf (every token masked)", engine.RuleMasked},
		{"all masked, greedy", []float64{negInf, negInf}, 0, "input logits are all -inf (every token masked)", engine.RuleMasked},
		{"negative temperature", []float64{0, 1}, -1, "temperature -1 is not a temperature (want 0 for greedy, or positive and finite in float32)", RuleParameter},
		{"temperature past float32", []float64{0, 1}, 1e39, "temperature 1e+39 is not a temperature (want 0 for greedy, or positive and finite in float32)", RuleParameter},
	}
	for _, tt := range tests {
		for _, dtype := range []engine.DType{engine.BF16, engine.F16, engine.F32, engine.F64} {
			t.Run(tt.name+"/"+dtype.String(), func(t *testing.T) {
				for _, native := range []bool{false, true} {
					d := Renorm(rowRun(dtype, tt.logits, tt.temp, Filter{TopK: 1}), 0, native, 1e-6)
					if d.Invalid != tt.want || d.InvalidRule != tt.rule {
						t.Errorf("native=%v: Invalid = %q (%s), want %q (%s)", native, d.Invalid, d.InvalidRule, tt.want, tt.rule)
					}
					if len(d.Probs) != 0 || d.Argmax != -1 {
						t.Errorf("an invalid row has %d probabilities and argmax %d", len(d.Probs), d.Argmax)
					}
				}
			})
		}
	}
}

// randomLogits returns n normal(0, sigma) logits with a share of masked
// tokens and of exact repeats.
func randomLogits(rng *rand.Rand, n int, sigma float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		switch u := rng.Float64(); {
		case u < 0.03:
			x[i] = negInf
		case u < 0.1 && i > 0:
			x[i] = x[rng.IntN(i)]
		default:
			x[i] = rng.NormFloat64() * sigma
		}
	}
	return x
}

func TestNaNRowIsolatedFromNeighbours(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const v = 512
	rows := [][]float64{randomLogits(rng, v, 3), randomLogits(rng, v, 3), randomLogits(rng, v, 3)}
	rows[1][17], rows[1][300] = math.NaN(), math.NaN()
	for _, dtype := range []engine.DType{engine.BF16, engine.F32} {
		t.Run(dtype.String(), func(t *testing.T) {
			var flat []float64
			for _, r := range rows {
				flat = append(flat, r...)
			}
			run := &engine.Run{
				Logits: engine.FromFloat64s("logits", dtype, []int{3, v}, flat),
				Params: engine.Params{Temperature: []float64{0.8, 0.8, 0.8}, TopK: []int{40, 40, 40}, TopP: []float64{0.9, 0.9, 0.9}, MinP: []float64{0, 0, 0}},
			}
			mid := Renorm(run, 1, false, 1e-6)
			if want := "input logits contain NaN at 2 of 512 tokens, first at token 17"; mid.Invalid != want {
				t.Errorf("row 1: Invalid = %q, want %q", mid.Invalid, want)
			}
			for _, r := range []int{0, 2} {
				alone := rowRun(dtype, rows[r], 0.8, Filter{TopK: 40, TopP: 0.9})
				got, want := Renorm(run, r, false, 1e-6), Renorm(alone, 0, false, 1e-6)
				if !got.Valid() || !slices.Equal(got.Probs, want.Probs) || !slices.Equal(got.Class, want.Class) {
					t.Errorf("row %d differs from the same row alone", r)
				}
			}
		})
	}
}

func TestNativeDiffersFromStrictAtLowTemperature(t *testing.T) {
	// In bf16, 1.0078125/0.01 = 100.78 rounds to 101: the native reference
	// sees logits 100 and 101, the strict one a gap of 0.78125.
	run := rowRun(engine.BF16, []float64{1, 1.0078125}, 0.01, Filter{TopP: 1})
	strict, native := Softmax(run, 0, false), Softmax(run, 0, true)
	wantStrict := 1 / (1 + math.Exp(-0.78125))
	wantNative := 1 / (1 + math.Exp(-1))
	if !near(strict.Probs[1], wantStrict) {
		t.Errorf("strict p1 = %v, want %v", strict.Probs[1], wantStrict)
	}
	if !near(native.Probs[1], wantNative) {
		t.Errorf("native p1 = %v, want %v", native.Probs[1], wantNative)
	}
	// At T = 1 bf16 scaling is exact: both references agree bit for bit.
	run = rowRun(engine.BF16, []float64{1, 1.0078125, -3}, 1, Filter{TopP: 1})
	if a, b := Softmax(run, 0, false), Softmax(run, 0, true); !slices.Equal(a.Probs, b.Probs) {
		t.Errorf("at T = 1: strict %v, native %v", a.Probs, b.Probs)
	}
}

func TestNativeOverflowIsInvalid(t *testing.T) {
	run := rowRun(engine.F16, []float64{7, -8, negInf}, 1e-4, Filter{TopP: 1})
	d := Softmax(run, 0, true)
	want := "input logits divided by T = 0.0001 overflow F16 at 2 of 3 tokens, first at token 0"
	if d.Invalid != want || d.InvalidRule != engine.RuleInf {
		t.Errorf("Invalid = %q (%s), want %q", d.Invalid, d.InvalidRule, want)
	}
	if s := Softmax(run, 0, false); !s.Valid() || s.Probs[0] != 1 {
		t.Errorf("the strict reference should be valid and one-hot: %+v", s)
	}
	// A temperature read from a float32 tensor reads as the dump wrote it,
	// not "T = 9.999999747378752e-05".
	run = rowRun(engine.F16, []float64{7, -8, negInf}, float64(float32(1e-4)), Filter{TopP: 1})
	if d := Softmax(run, 0, true); d.Invalid != want {
		t.Errorf("Invalid = %q, want %q", d.Invalid, want)
	}
}

// randomFilter draws filters that are often active and often tied.
func randomFilter(rng *rand.Rand, v int) Filter {
	// An eps of 0.3 makes neighbouring groups of a 0.25 logit grid
	// (probability ratio e^0.25) near-ties of each other.
	f := Filter{TopP: 1, Eps: []float64{1e-6, 1.6e-2, 0.3}[rng.IntN(3)]}
	if rng.IntN(2) == 0 {
		f.TopK = 1 + rng.IntN(v)
	}
	if rng.IntN(2) == 0 {
		f.TopP = rng.Float64()
	}
	if rng.IntN(3) == 0 {
		f.MinP = rng.Float64() * 0.3
	}
	f.Order = []engine.FilterOrder{engine.TopKFirst, engine.Joint, engine.MinPFirst}[rng.IntN(3)]
	f.Ties = []engine.TopKTies{engine.TiesKeep, engine.TiesLowestIndex, engine.TiesAny}[rng.IntN(3)]
	if rng.IntN(3) == 0 {
		f.Temperature = engine.TemperatureLast
	}
	return f
}

func TestFastPathEqualsSimplePath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var fast, simple Workspace
	for _, dtype := range []engine.DType{engine.BF16, engine.F16} {
		for trial := range 300 {
			v := 1 + rng.IntN(3000)
			sigma := []float64{0.05, 1, 3, 30}[rng.IntN(4)]
			x := randomLogits(rng, v, sigma)
			temp := []float64{1e-4, 1e-3, 0.01, 0.7, 1, 1.3, 10}[rng.IntN(7)]
			f := randomFilter(rng, v)
			if trial%3 == 0 {
				f = NoFilter()
			}
			native := rng.IntN(2) == 0
			row := Logits{Tensor: engine.FromFloat64s("logits", dtype, []int{1, v}, x), Len: v}
			var a, b Dist
			fast.Compute(&a, row, temp, f, native)
			if !a.Valid() && a.InvalidRule == engine.RuleMasked {
				continue
			}
			simple.computeSimple(&b, row, temp, f, native)
			if a.Invalid != b.Invalid {
				t.Fatalf("%v trial %d: Invalid %q vs %q", dtype, trial, a.Invalid, b.Invalid)
			}
			if !slices.Equal(a.Probs, b.Probs) || !slices.Equal(a.Base, b.Base) || !slices.Equal(a.Class, b.Class) ||
				a.Argmax != b.Argmax || a.TopKProb != b.TopKProb || a.TopPCut != b.TopPCut || a.MinPThreshold != b.MinPThreshold {
				t.Fatalf("%v trial %d (v=%d T=%v %+v native=%v): fast and simple paths differ", dtype, trial, v, temp, f, native)
			}
		}
	}
}

// literalFilters decides every token straight from the words of SEMANTICS.md
// ("Filters", "Boundary tokens"), in O(V^2), with exact sums rounded once.
func literalFilters(p []float64, f Filter) (keep []bool, class []Class) {
	v := len(p)
	pmax := slices.Max(p)
	exact := func(ok func(j int) bool) float64 {
		s := new(big.Float).SetPrec(2000)
		for j := range p {
			if ok(j) {
				s.Add(s, big.NewFloat(p[j]))
			}
		}
		r, _ := s.Float64()
		return r
	}
	inTopK := func(i int) bool {
		if !f.topKOn(v) {
			return true
		}
		exactK := f.Ties == engine.TiesLowestIndex || f.Ties == engine.TiesAny
		n := 0
		for j := range p {
			if p[j] > p[i] || (exactK && p[j] == p[i] && j < i) {
				n++
			}
		}
		return n < f.TopK
	}
	// The k-th most probable probability, and whether more tokens share
	// it than top-k has room for.
	sorted := slices.Clone(p)
	slices.SortFunc(sorted, func(a, b float64) int { return cmpDesc(a, b) })
	tiedOver := false
	if f.topKOn(v) {
		above, at := 0, 0
		for _, q := range p {
			above += b2i(q > sorted[f.TopK-1])
			at += b2i(q == sorted[f.TopK-1])
		}
		tiedOver = above+at > f.TopK
	}
	// Top-p's mass: every token (joint), the top-k set (top_k_first), the
	// tokens top-k and min-p both keep (min_p_first).
	zPrime := exact(func(j int) bool {
		switch {
		case f.Order == engine.Joint:
			return true
		case f.Order == engine.MinPFirst && f.minPOn() && p[j] < f.MinP*pmax:
			return false
		}
		return inTopK(j)
	})
	keep, class = make([]bool, v), make([]Class, v)
	for i := range p {
		c := Kept
		k := inTopK(i)
		if f.topKOn(v) {
			pk := sorted[f.TopK-1]
			switch {
			case p[i] == pk && tiedOver && f.Ties == engine.TiesAny:
				c = Boundary // which of the tied survive is not specified
			case p[i] == pk && !k:
				c = Dropped
			case p[i] == pk || p[i] == pmax:
			case math.Abs(p[i]-pk) <= f.Eps*pk:
				c = Boundary
			case !k:
				c = Dropped
			}
		}
		kp, km := true, true
		if f.topPOn() {
			cut := f.TopP * zPrime
			ahead := exact(func(j int) bool { return p[j] > p[i] })
			// The mass ahead with every tied or near-tied token ahead, and
			// the mass ahead by more than a relative eps.
			nearAhead := exact(func(j int) bool { return j != i && p[j] >= p[i]*(1-f.Eps) })
			farAhead := exact(func(j int) bool { return p[j] > p[i]*(1+f.Eps) })
			kp = ahead < cut || p[i] == pmax
			switch {
			case p[i] == pmax || nearAhead < cut*(1-f.Eps):
			case farAhead >= cut*(1+f.Eps):
				c = max(c, Dropped)
			default:
				c = max(c, Boundary)
			}
		}
		if f.minPOn() {
			thr := f.MinP * pmax
			km = p[i] >= thr || p[i] == pmax
			switch {
			case p[i] == pmax:
			case math.Abs(p[i]-thr) <= f.Eps*thr:
				c = max(c, Boundary)
			case p[i] < thr:
				c = max(c, Dropped)
			}
		}
		keep[i] = k && kp && km && p[i] > 0
		if p[i] == 0 {
			c = Dropped
		}
		class[i] = c
	}
	return keep, class
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestFiltersFollowTheLiteralDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 2000 {
		v := 1 + rng.IntN(40)
		// Few distinct logits, so that ties are everywhere.
		levels := 1 + rng.IntN(8)
		x := make([]float64, v)
		for i := range x {
			x[i] = float64(rng.IntN(levels)) * 0.25
			if rng.IntN(20) == 0 {
				x[i] = negInf
			}
		}
		x[rng.IntN(v)] = 1 // at least one finite logit
		f := randomFilter(rng, v)
		d := Compute(Logits{Tensor: engine.FromFloat64s("logits", engine.BF16, []int{1, v}, x), Len: v}, 1, f, false)
		keep, class := literalFilters(d.Base, f)
		for i := range keep {
			if (d.Probs[i] > 0) != keep[i] || d.Class[i] != class[i] {
				t.Fatalf("trial %d (%+v): logits %v: token %d kept=%v class=%v, want kept=%v class=%v",
					trial, f, x, i, d.Probs[i] > 0, d.Class[i], keep[i], class[i])
			}
		}
		// Kept tokens are renormalised Base.
		var kept float64
		for i, k := range keep {
			if k {
				kept += d.Base[i]
			}
		}
		for i, k := range keep {
			if k && math.Abs(d.Probs[i]-d.Base[i]/kept) > 1e-12 {
				t.Fatalf("trial %d: token %d: prob %v, want %v", trial, i, d.Probs[i], d.Base[i]/kept)
			}
		}
	}
}

func TestExactSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 500 {
		var s exactSum
		want := new(big.Float).SetPrec(4000)
		for range 1 + rng.IntN(200) {
			x := math.Ldexp(rng.Float64(), rng.IntN(200)-100)
			if rng.IntN(3) == 0 {
				x = -x
			}
			if rng.IntN(4) == 0 {
				n := 1 + rng.IntN(100000)
				s.addProduct(n, x)
				want.Add(want, new(big.Float).SetPrec(200).Mul(big.NewFloat(float64(n)), big.NewFloat(x)))
				continue
			}
			s.add(x)
			want.Add(want, big.NewFloat(x))
		}
		w, _ := want.Float64()
		if got := s.value(); got != w {
			t.Fatalf("trial %d: sum %v, want %v", trial, got, w)
		}
	}
}

func TestTop(t *testing.T) {
	d := Dist{Base: []float64{0.1, 0.3, 0.05, 0.3, 0.25}}
	tests := []struct {
		n    int
		want []int
	}{
		{0, nil},
		{1, []int{1}},
		{3, []int{1, 3, 4}},
		{9, []int{1, 3, 4, 0, 2}},
	}
	for _, tt := range tests {
		if got := d.Top(tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("Top(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestArgmax(t *testing.T) {
	tests := []struct {
		name     string
		logits   []float64
		tokens   []int
		runnerUp int
		invalid  engine.Rule
	}{
		{"single maximum", []float64{1, 5, 3}, []int{1}, 2, ""},
		{"tied maxima", []float64{5, 1, 5, negInf}, []int{0, 2}, 1, ""},
		{"+Inf is an ordinary maximum", []float64{1, math.Inf(1), 3}, []int{1}, 2, ""},
		{"one finite token", []float64{negInf, 2, negInf}, []int{1}, -1, ""},
		{"NaN", []float64{1, math.NaN()}, nil, -1, engine.RuleNaN},
		{"all masked", []float64{negInf, negInf}, nil, -1, engine.RuleMasked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Argmax(rowRun(engine.F32, tt.logits, 1, NoFilter()), 0)
			if a.InvalidRule != tt.invalid || !slices.Equal(a.Tokens, tt.tokens) || a.RunnerUpToken != tt.runnerUp {
				t.Errorf("got %+v, want tokens %v runner-up %d invalid %q", a, tt.tokens, tt.runnerUp, tt.invalid)
			}
		})
	}
}

func TestWorkspaceReuse(t *testing.T) {
	// One Workspace serving the strict and native references of a row, then
	// other rows, gives what fresh ones give.
	rng := rand.New(rand.NewPCG(15, 16))
	const b, v = 4, 3000
	var flat []float64
	for range b {
		flat = append(flat, randomLogits(rng, v, 3)...)
	}
	for _, dtype := range []engine.DType{engine.BF16, engine.F16} {
		logits := engine.FromFloat64s("logits", dtype, []int{b, v}, flat)
		var ws Workspace
		for _, r := range []int{0, 0, 1, 1, 0, 2, 3, 3} {
			for _, native := range []bool{false, true, false} {
				x := Logits{Tensor: logits, Offset: r * v, Len: v}
				f := Filter{TopK: 40, TopP: 0.9, Eps: 1e-6}
				var got Dist
				ws.Compute(&got, x, 0.7, f, native)
				want := Compute(x, 0.7, f, native)
				if !slices.Equal(got.Probs, want.Probs) || !slices.Equal(got.Class, want.Class) || got.Invalid != want.Invalid {
					t.Fatalf("%v row %d native=%v: a reused Workspace differs from a fresh one", dtype, r, native)
				}
			}
		}
	}
}

// TestTemperatureLastFollowsTheLiteralDefinition: under temperature_order
// last the filters decide on the softmax at T = 1 (literalFilters on it),
// and the kept tokens take the softmax at T, renormalised.
func TestTemperatureLastFollowsTheLiteralDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for trial := range 500 {
		v := 1 + rng.IntN(40)
		levels := 1 + rng.IntN(8)
		x := make([]float64, v)
		for i := range x {
			x[i] = float64(rng.IntN(levels)) * 0.25
			if rng.IntN(20) == 0 {
				x[i] = negInf
			}
		}
		x[rng.IntN(v)] = 1
		f := randomFilter(rng, v)
		f.Temperature = engine.TemperatureLast
		temp := []float64{0.3, 0.7, 1.6}[rng.IntN(3)]
		dtype := []engine.DType{engine.BF16, engine.F32}[rng.IntN(2)]
		row := Logits{Tensor: engine.FromFloat64s("logits", dtype, []int{1, v}, x), Len: v}
		d := Compute(row, temp, f, false)
		unit := Compute(row, 1, NoFilter(), false).Base
		keep, class := literalFilters(unit, f)
		var kept float64
		for i, k := range keep {
			if k {
				kept += d.Base[i]
			}
		}
		for i := range keep {
			want := 0.0
			if keep[i] {
				want = d.Base[i] / kept
			}
			if d.Class[i] != class[i] || math.Abs(d.Probs[i]-want) > 1e-12 {
				t.Fatalf("trial %d (%+v, T=%v, %v): logits %v: token %d prob %v class %v, want %v and %v",
					trial, f, temp, dtype, x, i, d.Probs[i], d.Class[i], want, class[i])
			}
		}
	}
}
