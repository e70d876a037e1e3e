package samplertest

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFilter(t *testing.T) {
	probs := []float64{0.5, 0.2, 0.2, 0.1}
	tests := []struct {
		name string
		p    Params
		want []float64
	}{
		{"off", NoFilter(), []float64{0.5, 0.2, 0.2, 0.1}},
		{"top-p keeps the crossing token, cuts a tie in index order", Params{Temperature: 1, TopP: 0.6}, []float64{0.5 / 0.7, 0.2 / 0.7, 0, 0}},
		{"top-k keeps ties with the k-th", Params{Temperature: 1, TopK: 2, TopP: 1}, []float64{0.5 / 0.9, 0.2 / 0.9, 0.2 / 0.9, 0}},
		{"top-p on the renormalised top-k mass", Params{Temperature: 1, TopK: 3, TopP: 0.5}, []float64{1, 0, 0, 0}},
		{"min-p relative to the maximum, inclusive", Params{Temperature: 1, TopP: 1, MinP: 0.4}, []float64{0.5 / 0.9, 0.2 / 0.9, 0.2 / 0.9, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Filter(probs, tt.p)
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 1e-15 {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestChainFrequencies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := []float64{0.6, 0.3, 0.1}
	q := []float64{0.2, 0.5, 0.3}
	tests := []struct {
		name    string
		mistake SpecMistake
		// want is the law of the token at position 0.
		want []float64
	}{
		// a = min(1, 0.3/0.5) = 0.6 for draft token 1; the residual is
		// (0.4, 0, 0)/0.4; so the law is 0.4·δ0 + 0.6·δ1, which is not p:
		// with draft probabilities, position 0 follows a·δ(x) + (1-a)·r.
		{"exact", SpecCorrect, []float64{0.4, 0.6, 0}},
		{"resampled from the target", ResampleFromTarget, []float64{0.4 * 0.6, 0.6 + 0.4*0.3, 0.4 * 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Chain{Target: [][]float64{p, p}, Draft: [][]float64{q}, Drafts: []int64{1}, Mistake: tt.mistake}
			const n = 200000
			counts := make([]float64, 3)
			for range n {
				toks, _, _ := c.Trial(rng)
				counts[toks[0]]++
			}
			for i, w := range tt.want {
				if math.Abs(counts[i]/n-w) > 0.005 {
					t.Errorf("token %d: %v, want %v", i, counts[i]/n, w)
				}
			}
		})
	}
}
