package f32math

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ulps returns the distance in float32 steps between got and the float64 want.
func ulps(got float32, want float64) float64 {
	w := float32(want)
	if got == w {
		return 0
	}
	step := math.Abs(float64(math.Nextafter32(w, float32(math.Inf(1)))) - float64(w))
	if step == 0 || math.IsInf(step, 0) {
		step = math.Abs(float64(w) - float64(math.Nextafter32(w, 0)))
	}
	return math.Abs(float64(got)-want) / step
}

func TestExpAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for i := 0; i < 2_000_000; i++ {
		x := float32(rng.Float64()*190 - 101) // covers normal and subnormal results
		want := math.Exp(float64(x))
		if want < math.SmallestNonzeroFloat32*(1<<23) { // subnormal: judge absolutely
			if d := math.Abs(float64(Exp(x)) - want); d > 2*math.SmallestNonzeroFloat32 {
				t.Fatalf("Exp(%v) = %v, want %v", x, Exp(x), want)
			}
			continue
		}
		if u := ulps(Exp(x), want); u > worst {
			worst = u
		}
	}
	if worst > 3 {
		t.Errorf("Exp worst error %.2f ulp, want <= 3", worst)
	}
}

func TestExpSpecialValues(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want float32
	}{
		{"zero is exactly one", 0, 1},
		{"minus inf", float32(math.Inf(-1)), 0},
		{"plus inf", float32(math.Inf(1)), float32(math.Inf(1))},
		{"overflow", 89, float32(math.Inf(1))},
		{"underflow", -104, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Exp(tt.in); got != tt.want {
				t.Errorf("Exp(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	if got := Exp(float32(math.NaN())); got == got {
		t.Errorf("Exp(NaN) = %v", got)
	}
	// Monotone: a softmax weight never exceeds the one of a larger logit.
	prev := Exp(-104)
	for x := float32(-103.9); x < 0; x += 0.013 {
		if e := Exp(x); e < prev {
			t.Fatalf("Exp not monotone at %v: %v < %v", x, e, prev)
		} else {
			prev = e
		}
	}
}

func TestLogAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	worst := 0.0
	for i := 0; i < 2_000_000; i++ {
		x := math.Float32frombits(rng.Uint32() & 0x7f7fffff) // positive finite
		if x == 0 {
			continue
		}
		if u := ulps(Log(x), math.Log(float64(x))); u > worst {
			worst = u
		}
	}
	if worst > 3 {
		t.Errorf("Log worst error %.2f ulp, want <= 3", worst)
	}
}

func TestLogSpecialValues(t *testing.T) {
	if got := Log(1); got != 0 {
		t.Errorf("Log(1) = %v", got)
	}
	if got := Log(0); !math.IsInf(float64(got), -1) {
		t.Errorf("Log(0) = %v", got)
	}
	if got := Log(-1); got == got {
		t.Errorf("Log(-1) = %v", got)
	}
	if got := Log(float32(math.Inf(1))); !math.IsInf(float64(got), 1) {
		t.Errorf("Log(Inf) = %v", got)
	}
}
