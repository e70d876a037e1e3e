package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestWilson(t *testing.T) {
	// Newcombe (1998), "Two-sided confidence intervals for the single
	// proportion", Table I, method 3 (score interval without continuity
	// correction), to four decimals.
	tests := []struct {
		x, n   int
		lo, hi float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0.0000, 0.1611},
		{1, 29, 0.0061, 0.1718},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.x, tt.n, Z95)
		if math.Abs(lo-tt.lo) > 5e-5 || math.Abs(hi-tt.hi) > 5e-5 {
			t.Errorf("Wilson(%d, %d) = %.4f, %.4f; want %.4f, %.4f", tt.x, tt.n, lo, hi, tt.lo, tt.hi)
		}
	}
	t.Run("all successes mirror none", func(t *testing.T) {
		lo, hi := Wilson(20, 20, Z95)
		if math.Abs(lo-(1-0.1611)) > 5e-5 || hi != 1 {
			t.Errorf("Wilson(20, 20) = %v, %v", lo, hi)
		}
	})
	t.Run("no trials", func(t *testing.T) {
		if lo, hi := Wilson(0, 0, Z95); lo != 0 || hi != 1 {
			t.Errorf("Wilson(0, 0) = %v, %v; want 0, 1", lo, hi)
		}
	})
	t.Run("impossible counts", func(t *testing.T) {
		if lo, hi := Wilson(5, 3, Z95); !math.IsNaN(lo) || !math.IsNaN(hi) {
			t.Errorf("Wilson(5, 3) = %v, %v; want NaNs", lo, hi)
		}
	})
}

func TestBinomialTest(t *testing.T) {
	tests := []struct {
		name string
		k, n int
		p    float64
		want float64
	}{
		{"none of ten fair", 0, 10, 0.5, 2.0 / 1024},
		{"centre", 5, 10, 0.5, 1},
		{"certain and met", 7, 7, 1, 1},
		{"certain and missed", 6, 7, 1, 0},
		{"impossible count", 8, 7, 0.5, 0},
		{"no trials", 0, 0, 0.3, 1},
		{"upper tail", 9, 10, 0.5, 2 * 11.0 / 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BinomialTest(tt.k, tt.n, tt.p); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("BinomialTest(%d, %d, %v) = %v, want %v", tt.k, tt.n, tt.p, got, tt.want)
			}
		})
	}
}

// specRow is one row of chain speculative sampling: K+1 target distributions,
// K draft distributions (nil: one-hot drafts) and the K drafts.
type specRow struct {
	p      [][]float64
	q      [][]float64
	drafts []int32
}

// newSpecRow returns a row of K positions over v tokens whose drafter is
// the target mixed with another distribution at weight mix, drafts drawn
// from the drafter; or, when oneHot, one-hot drafts at the target's argmax.
func newSpecRow(rng *rand.Rand, k, v int, mix float64, oneHot bool) specRow {
	r := specRow{drafts: make([]int32, k)}
	for i := 0; i <= k; i++ {
		r.p = append(r.p, zipfDist(rng, v))
	}
	for i := 0; i < k; i++ {
		if oneHot { // a greedy drafter that agrees with the target's argmax
			r.q = append(r.q, nil)
			r.drafts[i] = int32(slices.Index(r.p[i], slices.Max(r.p[i])))
			continue
		}
		other := flatDist(rng, v)
		q := make([]float64, v)
		for j := range q {
			q[j] = (1-mix)*r.p[i][j] + mix*other[j]
		}
		r.q = append(r.q, q)
		r.drafts[i] = drawOne(rng, cdfOf(q))
	}
	return r
}

// theory returns the acceptance probabilities and the exact law of each
// output position (K+1 of them).
func (r specRow) theory(t *testing.T) ([]float64, [][]float64) {
	t.Helper()
	k := len(r.drafts)
	accept := make([]float64, k)
	laws := make([][]float64, k+1)
	for i := range k {
		a, err := AcceptanceProbability(r.p[i], r.q[i], int(r.drafts[i]))
		if err != nil {
			t.Fatal(err)
		}
		accept[i] = a
		if laws[i], err = PositionDistribution(r.p[i], r.q[i], int(r.drafts[i])); err != nil {
			t.Fatal(err)
		}
	}
	laws[k] = r.p[k]
	return accept, laws
}

// simulate returns trials of chain speculative sampling of the row. With
// residualBug, a rejected position resamples from the target p_i instead of
// the residual: the classic mistake.
func (r specRow) simulate(t *testing.T, rng *rand.Rand, trials int, residualBug bool) [][]int32 {
	t.Helper()
	k := len(r.drafts)
	accept, _ := r.theory(t)
	resample := make([][]float64, k+1)
	for i := range k {
		res, err := ResidualDistribution(r.p[i], r.q[i], int(r.drafts[i]))
		if err != nil {
			t.Fatal(err)
		}
		if residualBug {
			res = r.p[i]
		}
		resample[i] = cdfOf(res)
	}
	resample[k] = cdfOf(r.p[k])
	out := make([][]int32, trials)
	for n := range out {
		row := make([]int32, k+1)
		for i := range row {
			row[i] = -1
		}
		i := 0
		for ; i < k && rng.Float64() < accept[i]; i++ {
			row[i] = r.drafts[i]
		}
		row[i] = drawOne(rng, resample[i])
		out[n] = row
	}
	return out
}

func TestAcceptanceByPositionCounts(t *testing.T) {
	drafts := []int32{5, 6, 7}
	trials := [][]int32{
		{5, 6, 7, 9},   // emitted 3
		{5, 1, -1, -1}, // emitted 1
		{2, -1, -1, -1},
		{5, 6, 3, -1},
	}
	rates, err := AcceptanceByPosition(trials, drafts)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int{{4, 3}, {3, 2}, {2, 1}}
	for i, r := range rates {
		if r.Position != i || r.Reached != want[i][0] || r.Accepted != want[i][1] {
			t.Errorf("position %d: %+v, want reached %d accepted %d", i, r, want[i][0], want[i][1])
		}
		if lo, hi := Wilson(r.Accepted, r.Reached, Z95); r.Lo != lo || r.Hi != hi || r.Rate != float64(r.Accepted)/float64(r.Reached) {
			t.Errorf("position %d: rate %v in [%v, %v]", i, r.Rate, r.Lo, r.Hi)
		}
	}
	hist, err := EmittedHistogram(trials, drafts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hist, []int64{1, 1, 1, 1}) {
		t.Errorf("histogram %v", hist)
	}
	if got := MeanAcceptanceLength(hist); got != 2.5 {
		t.Errorf("mean acceptance length %v, want 1 + 6/4", got)
	}
	if _, err := AcceptanceByPosition([][]int32{{5, 6}}, drafts); err == nil {
		t.Error("a short trial was accepted")
	}
}

func TestSpeculativeTrials(t *testing.T) {
	const trials = 20000
	tests := []struct {
		name   string
		mix    float64
		oneHot bool
	}{
		{"draft probs", 0.5, false},
		{"one-hot drafts", 0, true},
	}
	for ti, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := newRand(uint64(61 + ti))
			row := newSpecRow(rng, 4, 64, tt.mix, tt.oneHot)
			accept, laws := row.theory(t)
			out := row.simulate(t, rng, trials, false)

			rates, err := AcceptanceByPosition(out, row.drafts)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rates {
				if p := BinomialTest(r.Accepted, r.Reached, accept[i]); p < 1e-6 {
					t.Errorf("position %d accepted %d of %d, theory %v: p = %v", i, r.Accepted, r.Reached, accept[i], p)
				}
			}

			hist, err := EmittedHistogram(out, row.drafts)
			if err != nil {
				t.Fatal(err)
			}
			f, err := GoodnessOfFit(hist, EmittedDistribution(accept), FitOptions{Label: "length"})
			if err != nil || !f.Pass(0) {
				t.Errorf("emitted lengths against their law: p = %v, %v", f.PValue, err)
			}
			mean := MeanAcceptanceLength(hist)
			if want := ExpectedAcceptanceLength(accept); math.Abs(mean-want) > 0.05 {
				t.Errorf("mean acceptance length %v, exact %v", mean, want)
			}

			for j := range laws {
				counts, missing, err := PositionCounts(out, row.drafts, j, 64)
				if err != nil || missing != 0 {
					t.Fatalf("position %d: %v, %d missing", j, err, missing)
				}
				f, err := GoodnessOfFit(counts, laws[j], FitOptions{})
				if err != nil || !f.Pass(0) {
					t.Errorf("position %d is not lossless: %q %v", j, f.Violations(0), err)
				}
			}
		})
	}
}

// TestResidualMistakeCaught runs the classic bug, resampling a rejected
// position from the target instead of the residual, and checks that the
// lossless check of some position fails.
func TestResidualMistakeCaught(t *testing.T) {
	rng := newRand(63)
	row := newSpecRow(rng, 4, 64, 0.5, false)
	_, laws := row.theory(t)
	out := row.simulate(t, rng, 20000, true)
	failed := 0
	for j := range laws {
		counts, _, err := PositionCounts(out, row.drafts, j, 64)
		if err != nil {
			t.Fatal(err)
		}
		f, err := GoodnessOfFit(counts, laws[j], FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !f.Pass(0) {
			failed++
		}
	}
	if failed == 0 {
		t.Error("resampling from the target instead of the residual passed every position")
	}
}

func TestOneHotDraftsAreLossless(t *testing.T) {
	rng := newRand(64)
	for range 20 {
		p := zipfDist(rng, 100)
		x := rng.IntN(100)
		a, err := AcceptanceProbability(p, nil, x)
		if err != nil || a != p[x] {
			t.Fatalf("one-hot acceptance %v, want p(x) = %v (%v)", a, p[x], err)
		}
		law, err := PositionDistribution(p, nil, x)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p {
			if math.Abs(law[i]-p[i]) > 1e-15 {
				t.Fatalf("token %d: %v, target %v", i, law[i], p[i])
			}
		}
	}
}

func TestAcceptanceProbability(t *testing.T) {
	p := []float64{0.5, 0.3, 0.2, 0}
	q := []float64{0.25, 0.6, 0, 0.15}
	tests := []struct {
		name  string
		q     []float64
		draft int
		want  float64
		err   string
	}{
		{"p above q", q, 0, 1, ""},
		{"p below q", q, 1, 0.5, ""},
		{"q zero", q, 2, 1, ""},
		{"p zero", q, 3, 0, ""},
		{"one-hot", nil, 1, 0.3, ""},
		{"draft outside", q, 4, 0, "draft token 4 outside [0, 4)"},
		{"lengths differ", q[:3], 0, 0, "draft distribution of 3 tokens against a target of 4"},
		{"NaN draft prob", []float64{0.5, math.NaN(), 0.25, 0.25}, 0, 0, "draft probability NaN at token 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AcceptanceProbability(p, tt.q, tt.draft)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("a = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
	t.Run("residual falls back to the target", func(t *testing.T) {
		r, err := ResidualDistribution(p, p, 0)
		if err != nil || !slices.Equal(r, p) {
			t.Errorf("residual of p against itself = %v (%v), want p", r, err)
		}
	})
}

func TestEmittedDistribution(t *testing.T) {
	rng := newRand(65)
	accept := []float64{rng.Float64(), rng.Float64(), rng.Float64()}
	d := EmittedDistribution(accept)
	a0, a1, a2 := accept[0], accept[1], accept[2]
	want := []float64{1 - a0, a0 * (1 - a1), a0 * a1 * (1 - a2), a0 * a1 * a2}
	for j := range want {
		if math.Abs(d[j]-want[j]) > 1e-15 {
			t.Errorf("P(E = %d) = %v, want %v", j, d[j], want[j])
		}
	}
	if got, want := ExpectedAcceptanceLength(accept), 1+a0+a0*a1+a0*a1*a2; math.Abs(got-want) > 1e-15 {
		t.Errorf("expected acceptance length %v, want %v", got, want)
	}
}

func TestPositionCountsRejectsBadInput(t *testing.T) {
	drafts := []int32{1, 2}
	trials := [][]int32{{1, 2, 3}}
	tests := []struct {
		name     string
		trials   [][]int32
		j, vocab int
		want     string
	}{
		{"position past the bonus", trials, 3, 10, "position 3 outside [0, 2]"},
		{"negative position", trials, -1, 10, "position -1"},
		{"no vocabulary", trials, 0, 0, "vocabulary of 0 tokens"},
		{"short trial", [][]int32{{1, 2}}, 0, 10, "trial 0 holds 2 tokens, want 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := PositionCounts(tt.trials, drafts, tt.j, tt.vocab)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("tokens outside the vocabulary are missing", func(t *testing.T) {
		counts, missing, err := PositionCounts([][]int32{{1, 2, 3}, {1, 2, 99}, {1, 2, -1}}, drafts, 2, 10)
		if err != nil || missing != 2 || counts[3] != 1 {
			t.Errorf("counts %v missing %d (%v)", counts, missing, err)
		}
	})
}
