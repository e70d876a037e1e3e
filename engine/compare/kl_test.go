package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKLLogged checks klLogged's table log against math.Log, term by term,
// on fresh random outputs around a reference and at the edges (an extra
// token, a zero output, NaN).
func TestKLLogged(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	ref, out := make([]float64, 1), make([]float64, 1)
	idx := []int32{0}
	for range 1_000_000 {
		ref[0] = math.Ldexp(rng.Float64()+0.5, -rng.IntN(60))
		// The terms it serves: |s| >= 0.05, s > -1.
		s := -0.05 - 0.94*rng.Float64()
		if rng.IntN(2) == 0 {
			s = math.Ldexp(0.05+rng.Float64(), rng.IntN(12))
		}
		out[0] = ref[0] * (1 + s)
		got := klLogged(out, ref, idx, nil, 0)
		x := out[0] / ref[0]
		want := ref[0] * ((x - 1) - math.Log(x))
		if math.Abs(got-want) > 1e-14*math.Max(math.Abs(want), ref[0]*math.Abs(x-1)) {
			t.Fatalf("klLogged(out %v, ref %v) = %v, want %v", out[0], ref[0], got, want)
		}
	}
	for _, tt := range []struct {
		name     string
		out, ref float64
		want     float64
	}{
		{"an extra token counts the output's mass", 0.25, 0, 0.25},
		{"a zero output is infinite", 0, 0.5, math.Inf(1)},
	} {
		out[0], ref[0] = tt.out, tt.ref
		if got := klLogged(out, ref, idx, nil, 0); got != tt.want {
			t.Errorf("%s: klLogged = %v, want %v", tt.name, got, tt.want)
		}
	}
	out[0], ref[0] = math.NaN(), 0.5
	if got := klLogged(out, ref, idx, nil, 0); !math.IsNaN(got) {
		t.Errorf("a NaN output: klLogged = %v, want NaN", got)
	}
}
