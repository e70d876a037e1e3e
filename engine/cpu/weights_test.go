package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine/f32math"
)

var (
	inf  = float32(math.Inf(1))
	nan  = float32(math.NaN())
	ninf = float32(math.Inf(-1))
)

func TestArgmax(t *testing.T) {
	tests := []struct {
		name string
		x    []float32
		want int
	}{
		{"single maximum", []float32{0.5, 2.25, -1}, 1},
		{"ties go to the lowest index", []float32{-3, 7.5, 1, 7.5}, 1},
		{"negative row", []float32{-9, -8.5, -8.75}, 1},
		{"masked tokens ignored", []float32{ninf, -2, ninf}, 1},
		{"plus inf is a maximum", []float32{1, inf, 3, inf}, 1},
		{"nan anywhere gives -1", []float32{5, 1, nan}, -1},
		{"all minus inf gives -1", []float32{ninf, ninf}, -1},
		{"empty gives -1", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Argmax(tt.x); got != tt.want {
				t.Errorf("Argmax(%v) = %d, want %d", tt.x, got, tt.want)
			}
		})
	}
}

func TestWeights(t *testing.T) {
	tests := []struct {
		name  string
		x     []float32
		temp  float32
		want  []float32
		valid bool
	}{
		{"formula", []float32{1.5, 3, 2.25}, 0.75, []float32{f32math.Exp(float32(float32(1.5-3) / 0.75)), 1, f32math.Exp(float32(float32(2.25-3) / 0.75))}, true},
		{"masked token weighs zero", []float32{ninf, 0.5, -0.25}, 2, []float32{0, 1, f32math.Exp(float32(float32(-0.25-0.5) / 2))}, true},
		{"greedy is one-hot at the first maximum", []float32{4, 9, 9, -1}, 0, []float32{0, 1, 0, 0}, true},
		{"tiny temperature does not overflow", []float32{3, 3.1, -2}, 1e-4, []float32{0, 1, 0}, true},
		{"nan row", []float32{1, nan, 2}, 1, nil, false},
		{"plus inf row", []float32{1, inf, 2}, 1, nil, false},
		{"plus inf row is invalid even when greedy", []float32{1, inf, 2}, 0, nil, false},
		{"all masked row", []float32{ninf, ninf}, 1, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := make([]float32, len(tt.x))
			if got := Weights(tt.x, tt.temp, w); got != tt.valid {
				t.Fatalf("Weights valid = %v, want %v", got, tt.valid)
			}
			for i := range w {
				if !tt.valid {
					if w[i] == w[i] {
						t.Errorf("w[%d] = %v, want NaN", i, w[i])
					}
					continue
				}
				if w[i] != tt.want[i] {
					t.Errorf("w[%d] = %v, want %v", i, w[i], tt.want[i])
				}
			}
		})
	}
}

func TestWeightsRandomRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, temp := range []float32{1e-4, 0.01, 0.7, 1, 3, 100} {
		x := randomLogits(rng, 4096, 4)
		w := make([]float32, len(x))
		if !Weights(x, temp, w) {
			t.Fatalf("T=%g: valid row reported invalid", temp)
		}
		top := Argmax(x)
		for i, v := range w {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("T=%g: w[%d] = %v outside [0, 1]", temp, i, v)
			}
			if x[i] < x[top] && v > w[top] || x[i] == x[top] && v != 1 {
				t.Fatalf("T=%g: w[%d] = %v for logit %v (max %v)", temp, i, v, x[i], x[top])
			}
		}
	}
}

func TestSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 7, 8, 255, 256, 257, 1000, 32000, 128256, 151936} {
		w := make([]float32, n)
		var exact float64
		for i := range w {
			w[i] = float32(math.Exp(-6 * rng.Float64()))
			exact += float64(w[i])
		}
		got := float64(Sum(w))
		// 32 sequential adds per lane, 3 lane levels, log2(chunks) tree levels.
		bound := (32 + 3 + math.Log2(float64(n)/256+1) + 1) * 0x1p-24
		if rel := math.Abs(got-exact) / exact; rel > bound {
			t.Errorf("n=%d: Sum relative error %.3g, bound %.3g", n, rel, bound)
		}
	}
	if got := Sum(nil); got != 0 {
		t.Errorf("Sum(nil) = %v", got)
	}
}

// sequentialSum is the naive float32 loop that the blocked Sum replaces.
func sequentialSum(w []float32) float32 {
	var s float32
	for _, v := range w {
		s += v
	}
	return s
}

// softmaxViolations counts the elements of p outside rtol 1.3e-6 + atol 1e-5
// of the float64 softmax want.
func softmaxViolations(p []float32, want []float64) (bad int, worst float64) {
	for i, v := range p {
		d := math.Abs(float64(v) - want[i])
		if allowed := 1e-5 + 1.3e-6*want[i]; d > allowed {
			bad++
		}
		worst = math.Max(worst, d)
	}
	return bad, worst
}

// heavyTailRow is a logits row with one token of mass about one half and
// a tail of 151935 others: the row that a sequential float32 sum gets wrong.
func heavyTailRow(rng *rand.Rand) []float32 {
	const v = 151936
	x := make([]float32, v)
	for i := range x {
		x[i] = float32(rng.Float64()*0.01 - 2)
	}
	x[rng.IntN(v)] = float32(math.Log(v) - 2 + math.Log(0.135)) // ~half the mass
	return x
}

func TestSoftmaxMatchesFloat64AtLargeVocab(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const v = 151936
	tests := []struct {
		name  string
		x     []float32
		temps []float64
	}{
		{"normal logits", randomLogits(rng, v, 3), []float64{1e-4, 0.05, 0.6, 1, 2.5, 100}},
		{"flat logits", randomLogits(rng, v, 0.01), []float64{1e-4, 1, 100}},
		{"heavy tail", heavyTailRow(rng), []float64{1, 1.3}},
	}
	p := make([]float32, v)
	for _, tt := range tests {
		for _, temp := range tt.temps {
			if !Softmax(tt.x, float32(temp), p) {
				t.Fatalf("%s T=%g: invalid", tt.name, temp)
			}
			want := softmax64(tt.x, temp)
			if bad, worst := softmaxViolations(p, want); bad > 0 {
				t.Errorf("%s T=%g: %d of %d probabilities outside rtol 1.3e-6 + atol 1e-5 (worst |diff| %.3g)", tt.name, temp, bad, v, worst)
			}
		}
	}
}

// TestSequentialSumFailsTheTolerance shows that the tolerance test above has
// teeth: the same weights divided by a sequential float32 sum fail it.
func TestSequentialSumFailsTheTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	x := heavyTailRow(rng)
	w := make([]float32, len(x))
	Weights(x, 1, w)
	s := sequentialSum(w)
	for i := range w {
		w[i] /= s
	}
	if bad, _ := softmaxViolations(w, softmax64(x, 1)); bad == 0 {
		t.Errorf("a sequential sum passed the float32 tolerance; the precision test cannot tell the sums apart")
	}
}
