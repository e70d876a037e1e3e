package stats

import (
	"math"
	"slices"
	"testing"
)

// diffuseBias returns p moved by total variation delta in proportion to p:
// the most probable tokens, up to half the mass, gain a share 2·delta of
// their probability, the others lose it (the shape DetectableTV is worst
// at). The tail loses together, so pooled bins see the whole bias.
func diffuseBias(p []float64, delta float64) []float64 {
	order := make([]int, len(p))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		}
		return a - b
	})
	q := make([]float64, len(p))
	var head float64
	for _, i := range order {
		s := -1.0
		if head < 0.5 {
			s = 1
		}
		head += p[i]
		q[i] = p[i] * (1 + 2*delta*s)
	}
	return normalise(q)
}

// TestDetectableTV checks DetectableTV against simulated samplers: a
// diffuse bias 1.3 times its size is caught in most rows, one half its size
// in few, at the default threshold.
func TestDetectableTV(t *testing.T) {
	cases := []struct {
		name string
		v, n int
	}{
		{"zipf 2000 tokens, 2e4 draws", 2000, 20000},
		{"zipf 300 tokens, 1e5 draws", 300, 100000},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRand(uint64(9100 + ci))
			p := zipfDist(rng, c.v)
			f0, err := GoodnessOfFit(drawCounts(rng, cdfOf(p), c.n), p, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			delta := f0.DetectableTV(0, 0)
			if !(delta > 0 && delta < 0.5) {
				t.Fatalf("DetectableTV = %v, want a small positive total variation", delta)
			}
			caught := func(scale float64) int {
				q := diffuseBias(p, scale*delta)
				n := 0
				for range 40 {
					f, err := GoodnessOfFit(drawCounts(rng, cdfOf(q), c.n), p, FitOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if f.PValue < DefaultPValue {
						n++
					}
				}
				return n
			}
			if got := caught(1.3); got < 32 {
				t.Errorf("a diffuse bias of 1.3 × %.3g caught in %d of 40 rows, want at least 32", delta, got)
			}
			if got := caught(0.5); got > 8 {
				t.Errorf("a diffuse bias of 0.5 × %.3g caught in %d of 40 rows, want at most 8", delta, got)
			}
		})
	}
	var one Fit
	if d := one.DetectableTV(0, 0); !math.IsNaN(d) {
		t.Errorf("DetectableTV of a fit without bins = %v, want NaN", d)
	}
}
