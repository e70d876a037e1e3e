package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFastLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(121, 122))
	for range 1_000_000 {
		x := math.Ldexp(rng.Float64()+0.5, rng.IntN(400)-200)
		got, want := fastLog(x), math.Log(x)
		if math.Abs(got-want) > 1e-15*math.Max(1, math.Abs(want)) {
			t.Fatalf("fastLog(%v) = %v, want %v", x, got, want)
		}
	}
	for _, x := range []float64{0, -1, math.Inf(1), math.NaN(), 5e-324, 1} {
		if got, want := fastLog(x), math.Log(x); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("fastLog(%v) = %v, want %v", x, got, want)
		}
	}
}

func TestLog1p(t *testing.T) {
	rng := rand.New(rand.NewPCG(123, 124))
	for range 1_000_000 {
		s := math.Ldexp(rng.Float64(), -rng.IntN(60)) * float64(1-2*rng.IntN(2))
		got, want := log1p(s), math.Log1p(s)
		if math.Abs(got-want) > 1e-15*math.Abs(want) {
			t.Fatalf("log1p(%v) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []float64{-1, 0, math.Inf(1), math.NaN()} {
		if got, want := log1p(s), math.Log1p(s); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("log1p(%v) = %v, want %v", s, got, want)
		}
	}
}
