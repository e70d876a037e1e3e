package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestLogRow checks the reference log-softmax against its definition on
// fresh random rows: strict, native, with masked tokens and a token whose
// probability underflows float64, and normalised over a kept set.
func TestLogRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 71))
	const v = 500
	tests := []struct {
		name   string
		dtype  engine.DType
		temp   float64
		native bool
		keep   func(i int) bool
	}{
		{"f32 at T 1", engine.F32, 1, false, nil},
		{"bf16 at T 0.7", engine.BF16, 0.7, false, nil},
		{"bf16 at T 0.7, native", engine.BF16, 0.7, true, nil},
		{"f16 at T 1.3 over even tokens", engine.F16, 1.3, false, func(i int) bool { return i%2 == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := make([]float64, v)
			for i := range x {
				x[i] = rng.NormFloat64() * 3
			}
			x[3] = math.Inf(-1)
			x[8] = -1e4 // exp underflows float64; its logprob is finite
			if tt.dtype == engine.F16 {
				x[8] = -6e4
			}
			tensor := engine.FromFloat64s("logits", tt.dtype, []int{1, v}, x)
			tensor.Floats64(0, x) // as stored
			var l LogRow
			if !l.Scaled(Logits{Tensor: tensor, Len: v}, tt.temp, tt.native) {
				t.Fatal("Scaled reports no distribution")
			}
			keep := tt.keep
			if keep == nil {
				keep = func(int) bool { return true }
			}
			l.Normalise(keep)
			// The definition, in float64 with a plain sum.
			y := make([]float64, v)
			m, scale := math.Inf(-1), 0.0
			for i, xi := range x {
				y[i] = xi / tt.temp
				if tt.native {
					y[i] = engine.RoundToDType(float64(float32(xi)/float32(tt.temp)), tt.dtype)
				}
				if !math.IsInf(y[i], -1) {
					m = max(m, y[i])
					scale = max(scale, math.Abs(y[i]))
				}
			}
			var s float64
			for i, yi := range y {
				if keep(i) {
					s += math.Exp(yi - m)
				}
			}
			if math.Abs(l.Scale-scale) > 1e-12*scale {
				t.Errorf("scale %g, want %g", l.Scale, scale)
			}
			for i, yi := range y {
				want := yi - m - math.Log(s)
				if !keep(i) || math.IsInf(yi, -1) {
					want = math.Inf(-1)
				}
				if got := l.LogProbs[i]; !(got == want || math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))) {
					t.Fatalf("token %d: logprob %g, want %g", i, got, want)
				}
			}
			if keep(8) && math.IsInf(l.LogProbs[8], 0) {
				t.Errorf("token 8's logprob is %g: it underflows only as a probability", l.LogProbs[8])
			}
		})
	}
}

// TestLogRowRefuses checks that rows without a distribution are refused.
func TestLogRowRefuses(t *testing.T) {
	nan := engine.FromFloat64s("logits", engine.F32, []int{1, 3}, []float64{1, math.NaN(), 2})
	masked := engine.FromFloat64s("logits", engine.F32, []int{1, 2}, []float64{math.Inf(-1), math.Inf(-1)})
	huge := engine.FromFloat64s("logits", engine.BF16, []int{1, 2}, []float64{3e38, 1})
	var l LogRow
	for _, c := range []struct {
		name   string
		x      *engine.Tensor
		t      float64
		native bool
	}{{"NaN", nan, 1, false}, {"all masked", masked, 1, false}, {"overflow once scaled", huge, 0.01, true}, {"temperature 0", nan, 0, false}} {
		if l.Scaled(Logits{Tensor: c.x, Len: c.x.Dim(1)}, c.t, c.native) {
			t.Errorf("%s: Scaled reports a distribution", c.name)
		}
	}
}

// TestLogprobsTemperature checks the temperature each kind is taken at.
func TestLogprobsTemperature(t *testing.T) {
	run := &engine.Run{Params: engine.Params{Temperature: []float64{0.7, 0, 1e-50}}}
	for _, c := range []struct {
		r    int
		k    engine.LogprobsKind
		want float64
	}{{0, engine.LogprobsRaw, 1}, {0, engine.LogprobsProcessed, 0.7}, {1, engine.LogprobsProcessed, 1}, {2, engine.LogprobsProcessed, 1}, {5, engine.LogprobsProcessed, 1}} {
		if got := LogprobsTemperature(run, c.r, c.k); got != c.want {
			t.Errorf("row %d %s: %g, want %g", c.r, c.k, got, c.want)
		}
	}
}
