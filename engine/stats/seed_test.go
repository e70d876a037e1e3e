package stats

import (
	"math"
	"strings"
	"testing"
)

// seededDraws draws n tokens from cdf with a generator seeded by seed: a
// correct seeded sampler.
func seededDraws(cdf []float64, seed uint64, n int) []int32 {
	rng := newRand(seed)
	out := make([]int32, n)
	for i := range out {
		out[i] = drawOne(rng, cdf)
	}
	return out
}

func TestSameSeedSame(t *testing.T) {
	cdf := cdfOf(zipfDist(newRand(51), 32000))
	a := seededDraws(cdf, 7, 4096)
	changed := append([]int32(nil), a...)
	changed[17] = a[17] + 1
	changed[300] = a[300] + 1
	tests := []struct {
		name     string
		b        []int32
		wantPass bool
		want     string
	}{
		{"same seed", seededDraws(cdf, 7, 4096), true, "the same seed gave the same 4096 draws"},
		{"two draws differ", changed, false, "different draws at 2 of 4096 positions, first at position 17"},
		{"lengths differ", a[:4000], false, "gave 4096 draws, then 4000"},
		{"another seed", seededDraws(cdf, 8, 4096), false, "first at position"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := SameSeedSame(a, tt.b)
			if c.Pass != tt.wantPass || !strings.Contains(c.Message, tt.want) {
				t.Errorf("pass %v %q, want %v and %q", c.Pass, c.Message, tt.wantPass, tt.want)
			}
		})
	}
}

func TestDifferentSeedsDiffer(t *testing.T) {
	zipf := zipfDist(newRand(52), 32000)
	peaked := make([]float64, 1000) // top token 0.999
	rng := newRand(53)
	for i := range peaked {
		peaked[i] = 1e-3 * rng.Float64() / 1000
	}
	peaked[rng.IntN(1000)] = 0.999
	normalise(peaked)
	repeat := func(p []float64, n int) []float64 {
		c := make([]float64, n)
		for i := range c {
			c[i] = CollisionProbability(p)
		}
		return c
	}
	tests := []struct {
		name      string
		p         []float64
		n         int
		sameSeeds int // the first sameSeeds of b's draws use a's seed: there the seed did not reach the sampler
		wantPass  bool
		want      string
	}{
		{"independent seeds", zipf, 1024, 0, true, "different seeds agree at"},
		{"independent seeds, peaked row", peaked, 1000, 0, true, "different seeds agree at"},
		{"seed ignored", zipf, 1024, 1024, false, "different seeds gave the same 1024 draws; independent seeds agree everywhere with probability"},
		{"seed ignored, few draws", zipf, 6, 6, false, "same 6 draws"},
		{"seed ignored on a quarter of the draws", zipf, 1024, 256, false, "agree that often with probability at most"},
		{"seed ignored on 3 of 1024 draws: within chance", zipf, 1024, 3, true, "different seeds agree at"},
		{"peaked row: no evidence", peaked, 100, 100, true, "no evidence either way"},
		{"peaked row, many draws", peaked, 100000, 100000, false, "probability"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cdf := cdfOf(tt.p)
			a := seededDraws(cdf, 1, tt.n)
			b := append(a[:tt.sameSeeds:tt.sameSeeds], seededDraws(cdf, 2, tt.n)[tt.sameSeeds:]...)
			c := DifferentSeedsDiffer(a, b, repeat(tt.p, tt.n), 0)
			if c.Pass != tt.wantPass || !strings.Contains(c.Message, tt.want) {
				t.Errorf("pass %v %q, want %v and %q", c.Pass, c.Message, tt.wantPass, tt.want)
			}
			if want := float64(tt.n) * CollisionProbability(tt.p); math.Abs(c.ExpectedAgree-want) > 1e-9*want {
				t.Errorf("ExpectedAgree %v, want %v", c.ExpectedAgree, want)
			}
		})
	}
	t.Run("mismatched lengths", func(t *testing.T) {
		c := DifferentSeedsDiffer([]int32{1, 2}, []int32{1, 2}, []float64{0.5}, 0)
		if c.Pass || !strings.Contains(c.Message, "cannot compare") {
			t.Errorf("pass %v %q", c.Pass, c.Message)
		}
	})
}

// TestLogChernoffTail checks the bound against exact binomial tails (n
// draws of probability q): it is never below them, and is 0 (no evidence)
// up to the mean.
func TestLogChernoffTail(t *testing.T) {
	tests := []struct {
		name string
		n    int
		q    float64
		k    int
	}{
		{"at the mean", 100, 0.3, 30},
		{"below the mean", 100, 0.3, 10},
		{"a little above", 100, 0.3, 40},
		{"far above", 100, 0.3, 80},
		{"everywhere", 50, 0.5, 50},
		{"rare agreements", 1000, 0.001, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu := float64(tt.n) * tt.q
			got := logChernoffTail(mu, tt.k)
			tail := binomialUpper(tt.k, tt.n, tt.q) // the exact P(K >= k)
			if float64(tt.k) <= mu && got != 0 {
				t.Errorf("k %d <= mean %v: log bound %v, want 0", tt.k, mu, got)
			}
			if got < math.Log(tail)-1e-9 {
				t.Errorf("log bound %v below the exact log tail %v", got, math.Log(tail))
			}
		})
	}
	if got := logChernoffTail(0, 1); !math.IsInf(got, -1) {
		t.Errorf("an agreement with mean 0: %v, want -Inf", got)
	}
}

func TestCollisionProbability(t *testing.T) {
	rng := newRand(54)
	v := 10 + rng.IntN(90)
	tests := []struct {
		name string
		p    []float64
		want float64
	}{
		{"uniform", normalise(func() []float64 {
			u := make([]float64, v)
			for i := range u {
				u[i] = 1
			}
			return u
		}()), 1 / float64(v)},
		{"one-hot", []float64{0, 0, 1, 0}, 1},
		{"unnormalised", []float64{2, 2}, 0.5},
		{"empty", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CollisionProbability(tt.p); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("CollisionProbability = %v, want %v", got, tt.want)
			}
		})
	}
}
