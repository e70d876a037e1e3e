package stats

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"gonum.org/v1/gonum/stat/distuv"
)

func TestGoodnessOfFitRejectsUnusableInput(t *testing.T) {
	p := flatDist(newRand(1), 4)
	tests := []struct {
		name   string
		counts []int64
		probs  []float64
		opts   FitOptions
		want   string
	}{
		{"lengths differ", []int64{1, 2, 3}, p, FitOptions{}, "counts for 3 tokens against 4"},
		{"empty", nil, nil, FitOptions{}, "empty distribution"},
		{"negative count", []int64{1, -2, 3, 4}, p, FitOptions{}, "negative count -2 at token 1"},
		{"NaN probability", []int64{1, 2, 3, 4}, []float64{0.5, math.NaN(), 0.25, 0.25}, FitOptions{}, "probability NaN at token 1"},
		{"negative probability", []int64{1, 2, 3, 4}, []float64{0.75, -0.25, 0.25, 0.25}, FitOptions{}, "probability -0.25 at token 1"},
		{"infinite probability", []int64{1, 2, 3, 4}, []float64{math.Inf(1), 0, 0, 0}, FitOptions{}, "probability +Inf at token 0"},
		{"not normalised", []int64{1, 2, 3, 4}, []float64{1, 2, 3, 4}, FitOptions{}, "sum to 10, not 1"},
		{"no draws", []int64{0, 0, 0, 0}, p, FitOptions{}, "no draws"},
		{"unknown test", []int64{1, 2, 3, 4}, p, FitOptions{Test: "ks"}, `unknown goodness-of-fit test "ks"`},
		{"bad min expected", []int64{1, 2, 3, 4}, p, FitOptions{MinExpected: -1}, "minimum expected count -1"},
		{"bad confidence", []int64{1, 2, 3, 4}, p, FitOptions{Confidence: 1}, "confidence 1 is not in (0, 1)"},
		{"label in messages", []int64{1, 2}, p, FitOptions{Label: "length"}, "counts for 2 lengths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := GoodnessOfFit(tt.counts, tt.probs, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// checkBins verifies the pooling invariants on the bins GoodnessOfFit would
// use: every bin expects at least minE draws (when there are two or more),
// bins partition the support, and observed and expected totals match.
func checkBins(t *testing.T, counts []int64, p []float64, minE float64) []Bin {
	t.Helper()
	var n int64
	support := 0
	for i, c := range counts {
		if p[i] > 0 {
			n += c
			support++
		}
	}
	s := new(scratch)
	bins := s.pool(counts, p, 1, float64(n), minE)
	var tokens int
	var obs int64
	var exp float64
	for _, b := range bins {
		if len(bins) > 1 && b.Expected < minE {
			t.Errorf("bin %+v expects fewer than %v draws", b, minE)
		}
		if (b.Tokens == 1) != (b.Token >= 0) {
			t.Errorf("bin %+v: a single token must be named, a pool must not", b)
		}
		tokens += b.Tokens
		obs += b.Observed
		exp += b.Expected
	}
	if tokens != support || obs != n || math.Abs(exp-float64(n)) > 1e-6*float64(n) {
		t.Errorf("bins hold %d tokens, %d draws, %v expected; want %d, %d, %d", tokens, obs, exp, support, n, n)
	}
	return append([]Bin(nil), bins...)
}

func TestPooling(t *testing.T) {
	tests := []struct {
		name       string
		p          []float64
		n          int
		wantPooled bool
	}{
		{"zipf 128256 at 1e4", zipfDist(newRand(11), 128256), 1e4, true},
		{"zipf 128256 at 1e6", zipfDist(newRand(12), 128256), 1e6, true},
		{"peaked 32000 at 1e4", peakedDist(newRand(13), 32000), 1e4, true},
		{"flat 100 at 1e4", flatDist(newRand(14), 100), 1e4, false},
		{"two tokens", flatDist(newRand(15), 2), 1e4, false},
		{"fewer draws than a bin", flatDist(newRand(16), 50), 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := drawCounts(newRand(17), cdfOf(tt.p), tt.n)
			bins := checkBins(t, counts, tt.p, DefaultMinExpected)
			pooled := false
			for _, b := range bins {
				pooled = pooled || b.Tokens > 1
			}
			if pooled != tt.wantPooled {
				t.Errorf("pooled = %v, want %v (%d bins)", pooled, tt.wantPooled, len(bins))
			}
		})
	}
	t.Run("remainder joins the smallest singleton", func(t *testing.T) {
		// Two big tokens and a tail too small for a pool of its own.
		rng := newRand(18)
		p := []float64{0.6, 0.3 + 0.05*rng.Float64(), 0, 0, 0}
		rest := 1 - p[0] - p[1]
		p[2], p[3], p[4] = rest*0.5, rest*0.3, rest*0.2
		counts := drawCounts(rng, cdfOf(p), 40) // the tail expects < 5
		bins := checkBins(t, counts, p, DefaultMinExpected)
		if len(bins) != 2 || bins[1].Tokens != 4 || bins[0].Token != 0 {
			t.Errorf("bins %+v, want token 0 alone and tokens 1-4 pooled", bins)
		}
	})
	t.Run("sparse tokens pool in order of expected count", func(t *testing.T) {
		// Tokens of three sizes, interleaved: the pooling order must sort
		// them by octave of expected count, then by token id.
		rng := newRand(19)
		p := make([]float64, 3000)
		for i := range p {
			p[i] = (1 + rng.Float64()) * math.Pow(10, -float64(i%3))
		}
		normalise(p)
		const n = 2000
		counts := drawCounts(rng, cdfOf(p), n)
		s := new(scratch)
		bins := s.pool(counts, p, 1, n, DefaultMinExpected)
		sparse := 0
		for _, pi := range p {
			if n*pi < DefaultMinExpected {
				sparse++
			}
		}
		if sparse < 2000 || len(bins) < 10 {
			t.Fatalf("%d sparse tokens in %d bins: the case does not test pooling", sparse, len(bins))
		}
		order := s.order[:sparse]
		_, prev := math.Frexp(n * p[order[0]])
		for j := 1; j < len(order); j++ {
			_, e := math.Frexp(n * p[order[j]])
			if e < prev || (e == prev && order[j] < order[j-1]) {
				t.Fatalf("pooling order breaks at %d: token %d (octave %d) after token %d (octave %d)", j, order[j], e, order[j-1], prev)
			}
			prev = e
		}
	})
}

func TestZeroMassDraws(t *testing.T) {
	rng := newRand(21)
	p := flatDist(rng, 300)
	zeros := []int{3, 50, 299}
	for _, z := range zeros {
		p[z] = 0
	}
	normalise(p)
	counts := drawCounts(rng, cdfOf(p), 30000)
	tests := []struct {
		name     string
		add      map[int]int64
		wantPass bool
		want     []TokenCount
	}{
		{"none", nil, true, nil},
		{"one draw", map[int]int64{50: 1}, false, []TokenCount{{50, 1}}},
		{"most drawn first", map[int]int64{3: 1, 50: 4, 299: 4}, false, []TokenCount{{50, 4}, {299, 4}, {3, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := append([]int64(nil), counts...)
			var extra int64
			for tok, k := range tt.add {
				c[tok] += k
				extra += k
			}
			f, err := GoodnessOfFit(c, p, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f.Pass(0) != tt.wantPass {
				t.Errorf("Pass = %v, want %v (p = %v)", f.Pass(0), tt.wantPass, f.PValue)
			}
			if f.PValue < 1e-3 {
				t.Errorf("p = %v: zero-mass draws must not move the fit of the others", f.PValue)
			}
			if fmt.Sprint(f.ZeroMassDraws) != fmt.Sprint(tt.want) || f.ZeroMassTotal != extra || f.ZeroMassTokens != len(tt.want) {
				t.Errorf("zero mass %v (%d draws, %d tokens), want %v", f.ZeroMassDraws, f.ZeroMassTotal, f.ZeroMassTokens, tt.want)
			}
			if v := f.Violations(0); tt.wantPass != (len(v) == 0) || (!tt.wantPass && !strings.Contains(v[0], "zero reference mass")) {
				t.Errorf("violations %q", v)
			}
		})
	}
}

// families are the distributions the calibration runs on.
var families = []struct {
	name string
	dist func(seed uint64) []float64
}{
	{"peaked 32000", func(s uint64) []float64 { return peakedDist(newRand(s), 32000) }},
	{"flat 1000", func(s uint64) []float64 { return flatDist(newRand(s), 1000) }},
	{"zipf 128256", func(s uint64) []float64 { return zipfDist(newRand(s), 128256) }},
	{"two tokens", func(s uint64) []float64 { return flatDist(newRand(s), 2) }},
}

// TestCalibration draws from correct samplers and checks that the p-values
// behave as p-values: no failure at DefaultPValue; about 5% of OmnibusP
// below 0.05 (it is uniform); no more than that of WorstP and PValue (they
// are Bonferroni bounds, so below); and that the total variation stays near
// ExpectedTV and under TVBound.
func TestCalibration(t *testing.T) {
	const runs, n = 200, 10000
	tests := []Test{GTest, Pearson}
	var all int
	var omni, worst, combined [2]int // runs below 0.05, per test
	for fi, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			p := fam.dist(uint64(100 + fi))
			cdf := cdfOf(p)
			rng := newRand(uint64(200 + fi))
			var below6, omni05 [2]int
			var overBound int
			var tvSum, tvSq, expected float64
			for range runs {
				counts := drawCounts(rng, cdf, n)
				for ti, test := range tests {
					f, err := GoodnessOfFit(counts, p, FitOptions{Test: test})
					if err != nil {
						t.Fatal(err)
					}
					if !f.Pass(0) {
						below6[ti]++
					}
					if f.OmnibusP < 0.05 {
						omni05[ti]++
						omni[ti]++
					}
					if f.WorstP < 0.05 {
						worst[ti]++
					}
					if f.PValue < 0.05 {
						combined[ti]++
					}
					if ti > 0 {
						continue
					}
					if f.TV > f.TVBound {
						overBound++
					}
					tvSum += f.TV
					tvSq += f.TV * f.TV
					expected = f.ExpectedTV
				}
			}
			all += runs
			for ti, test := range tests {
				// 200 runs at 5%: 10 ± 3.1; allow 3 sigma.
				if below6[ti] > 0 || omni05[ti] < 1 || omni05[ti] > 20 {
					t.Errorf("%s: %d of %d runs fail at 1e-6 (want 0); omnibus p below 0.05 in %d (want about 10)",
						test, below6[ti], runs, omni05[ti])
				}
			}
			mean := tvSum / runs
			if se := math.Sqrt((tvSq/runs - mean*mean) / runs); math.Abs(mean-expected) > 4*se {
				t.Errorf("mean TV %v ± %v, ExpectedTV %v", mean, se, expected)
			}
			// At 99% confidence, 2 of 200 on average; the bound is
			// conservative, so fewer.
			if overBound > 2 {
				t.Errorf("TV above TVBound in %d of %d runs at 99%% confidence", overBound, runs)
			}
		})
	}
	// 800 runs at 5%: 40 ± 6.2.
	for ti, test := range tests {
		t.Logf("%s: of %d runs below 0.05: omnibus %d, worst bin %d, combined %d", test, all, omni[ti], worst[ti], combined[ti])
		if omni[ti] < 22 || omni[ti] > 58 || worst[ti] > 58 || combined[ti] > 58 || combined[ti] < 10 {
			t.Errorf("%s: of %d runs, %d omnibus, %d worst-bin and %d combined p-values below 0.05; want about %d, at most that, and at most that",
				test, all, omni[ti], worst[ti], combined[ti], all/20)
		}
	}
}

func TestMeanAbsDev(t *testing.T) {
	rng := newRand(31)
	tests := []struct {
		name string
		n    float64
		p    float64
		tol  float64
	}{
		{"np below 1", 1000, 0.0004 + 0.0005*rng.Float64(), 1e-12},
		{"tiny p", 1e6, 1e-9 * (1 + rng.Float64()), 1e-9},
		{"np about 1", 50, 0.02 + 0.01*rng.Float64(), 1e-12},
		{"np about 30", 200, 0.15 + 0.01*rng.Float64(), 1e-9},
		{"normal regime", 2000, 0.1 + 0.01*rng.Float64(), 3e-3},
		{"one trial", 1, 0.3 + 0.1*rng.Float64(), 1e-12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lg, _ := math.Lgamma(tt.n + 1)
			got := meanAbsDev(tt.n, lg, tt.p)
			// Brute force over the binomial law.
			b := distuv.Binomial{N: tt.n, P: tt.p}
			var want float64
			for x := 0.0; x <= tt.n; x++ {
				want += b.Prob(x) * math.Abs(x-tt.n*tt.p)
			}
			if math.Abs(got/want-1) > tt.tol {
				t.Errorf("E|X - np| = %v, brute force %v", got, want)
			}
		})
	}
}

func TestPoissonDevianceMoments(t *testing.T) {
	rng := newRand(32)
	for _, lam := range []float64{0.3 + 0.5*rng.Float64(), 1 + rng.Float64(), 4, 4 + rng.Float64(), 5 + rng.Float64(), 10 + rng.Float64(), 20 + rng.Float64(), 49.9, 49.999, 50, 80 + 10*rng.Float64(), 400 + 100*rng.Float64()} {
		t.Run(fmt.Sprintf("lambda %.3g", lam), func(t *testing.T) {
			m, v := poissonDevianceMoments(lam)
			// Brute force over a wide range with the Poisson pmf from logs.
			var m1, m2 float64
			for x := 0.0; x < lam+40*math.Sqrt(lam)+50; x++ {
				lg, _ := math.Lgamma(x + 1)
				pr := math.Exp(x*math.Log(lam) - lam - lg)
				d := 2 * (lam - x)
				if x > 0 {
					d += 2 * x * math.Log(x/lam)
				}
				m1 += pr * d
				m2 += pr * d * d
			}
			if math.Abs(m-m1) > 5e-7 || math.Abs(v-(m2-m1*m1)) > 4e-6 {
				t.Errorf("moments %v, %v; brute force %v, %v", m, v, m1, m2-m1*m1)
			}
		})
	}
}

func TestChiSquareTail(t *testing.T) {
	rng := newRand(33)
	t.Run("log matches gonum where both hold", func(t *testing.T) {
		for range 50 {
			df := float64(1 + rng.IntN(3000))
			stat := df + (3+20*rng.Float64())*math.Sqrt(2*df) + 5
			want := math.Log(distuv.ChiSquared{K: df}.Survival(stat))
			if math.IsInf(want, -1) {
				continue
			}
			if got := logChiSquareSurvival(stat, df); math.Abs(got-want) > 1e-9*math.Abs(want)+1e-12 {
				t.Errorf("df %v stat %v: log p %v, gonum %v", df, stat, got, want)
			}
		}
	})
	t.Run("underflow keeps a finite log", func(t *testing.T) {
		df := 100.0
		p, logP := chiSquareTail(5000+100*rng.Float64(), df)
		if p != 0 || !(logP < -2000) || math.IsInf(logP, 0) {
			t.Errorf("p = %v, log p = %v: want 0 and a finite log below -2000", p, logP)
		}
		// The log keeps falling as the statistic grows.
		_, l2 := chiSquareTail(6000, df)
		if !(l2 < logP) {
			t.Errorf("log p %v at 6000 is not below %v", l2, logP)
		}
	})
	t.Run("no degrees of freedom", func(t *testing.T) {
		if p, l := chiSquareTail(3, 0); p != 1 || l != 0 {
			t.Errorf("p = %v, log %v", p, l)
		}
	})
}

func TestFormatP(t *testing.T) {
	tests := []struct {
		p, logP float64
		want    string
	}{
		{0.0123, math.Log(0.0123), "0.012"},
		// Past float64's range the digits say nothing (issue 27: "p =
		// 9.8e-10653"): every such p is written the one way.
		{0, -412.3 * math.Ln10, "< 1e-300"},
		{0, -1000 * math.Ln10, "< 1e-300"},
		{1e-310, math.Log(1e-310), "< 1e-300"},
		{0, math.Inf(-1), "0"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := engine.FormatP(tt.p, tt.logP); got != tt.want {
				t.Errorf("FormatP = %q, want %q", got, tt.want)
			}
		})
	}
	if got := engine.PText(0, -1000*math.Ln10); got != "p < 1e-300" {
		t.Errorf("PText = %q, want p < 1e-300", got)
	}
	if got := engine.PText(0.0123, math.Log(0.0123)); got != "p = 0.012" {
		t.Errorf("PText = %q, want p = 0.012", got)
	}
}

func TestFitDetectsGrossBias(t *testing.T) {
	rng := newRand(34)
	p := zipfDist(rng, 128256)
	biased := softmaxAt(p, 1.3)
	counts := drawCounts(rng, cdfOf(biased), 1e6)
	f, err := GoodnessOfFit(counts, p, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Pass(0) || f.PValue != 0 || !(f.LogPValue < -1000) {
		t.Fatalf("p = %v, log p = %v: want an underflowed p with a finite log", f.PValue, f.LogPValue)
	}
	if f.TV <= f.TVBound {
		t.Errorf("TV %v within the noise bound %v", f.TV, f.TVBound)
	}
	v := f.Violations(0)
	if len(v) != 1 || !strings.Contains(v[0], "draws do not follow the reference (p < 1e-300 < ") {
		t.Errorf("violations %q", v)
	}
}

func TestCosine(t *testing.T) {
	rng := newRand(35)
	p := flatDist(rng, 50)
	tests := []struct {
		name   string
		counts func() []int64
		lo, hi float64
	}{
		{"proportional", func() []int64 {
			c := make([]int64, len(p))
			for i := range c {
				c[i] = int64(math.Round(p[i] * 1e9))
			}
			return c
		}, 1 - 1e-9, 1 + 1e-12},
		{"all on one token", func() []int64 {
			c := make([]int64, len(p))
			c[7] = 1000
			return c
		}, 0, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := GoodnessOfFit(tt.counts(), p, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f.Cosine < tt.lo || f.Cosine > tt.hi {
				t.Errorf("cosine %v, want in [%v, %v]", f.Cosine, tt.lo, tt.hi)
			}
		})
	}
}

func TestExpNear0(t *testing.T) {
	rng := newRand(36)
	for range 1000 {
		y := -1.2 + 1.4*rng.Float64()
		if got, want := expNear0(y), math.Exp(y); math.Abs(got/want-1) > 3e-12 {
			t.Fatalf("expNear0(%v) = %v, want %v", y, got, want)
		}
	}
}

func TestLogBinomialTestFar(t *testing.T) {
	// Where the exact tail still holds (down to 1e-280), the approximation
	// used beyond it must agree with its log to within 3%.
	rng := newRand(37)
	compared := 0
	for range 200 {
		n := 1000 + rng.IntN(1000000)
		pi := math.Pow(10, -4*rng.Float64())
		e := float64(n) * pi
		sd := math.Sqrt(e * (1 - pi))
		z := 12 + 20*rng.Float64()
		if rng.IntN(2) == 0 && e-z*sd > 0 {
			z = -z
		}
		k := int(math.Round(e + z*sd))
		if k < 0 || k > n {
			continue
		}
		exact := BinomialTest(k, n, pi)
		if !(exact > smallestTrustedP) || exact > 1e-30 {
			continue
		}
		want := math.Log(exact)
		if got := logBinomialTestFar(float64(k), e, float64(n)); math.Abs(got/want-1) > 0.03 {
			t.Errorf("k %d of n %d at p %.3g: log p %v, exact %v", k, n, pi, got, want)
		}
		compared++
	}
	if compared < 20 {
		t.Errorf("only %d cases compared", compared)
	}
}

var calibrationRuns = flag.Int("calibration.runs", 0, "run TestCalibrationDeep over this many correct rows (60000: minutes)")

// TestCalibrationDeep measures, with -calibration.runs, the false-alarm rates
// at small thresholds that the package doc quotes: the omnibus G-test's
// p-value from the nominal χ², from Williams' correction, and from the
// moment-matched law GoodnessOfFit uses, on a flat 2000-token row at N =
// 10^4 where most bins expect about 5 draws.
func TestCalibrationDeep(t *testing.T) {
	runs := *calibrationRuns
	if runs == 0 {
		t.Skip("measures deep calibration; run with -calibration.runs 60000")
	}
	const n = 10000
	p := flatDist(newRand(1), 2000)
	cdf := cdfOf(p)
	rng := newRand(99)
	thresholds := []float64{1e-2, 1e-3, 1e-4}
	names := []string{"nominal", "Williams", "moment-matched", "combined"}
	below := make([][]int, len(names))
	for i := range below {
		below[i] = make([]int, len(thresholds))
	}
	s := new(scratch)
	for range runs {
		counts := drawCounts(rng, cdf, n)
		f, err := GoodnessOfFit(counts, p, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bins := s.pool(counts, p, 1, n, DefaultMinExpected)
		var inv float64
		for _, b := range bins {
			inv += 1 / b.Expected
		}
		df := float64(len(bins) - 1)
		williams := 1 + (inv-1.0/n)/(6*df)
		ps := []float64{
			distuv.ChiSquared{K: df}.Survival(f.Statistic),
			distuv.ChiSquared{K: df}.Survival(f.Statistic / williams),
			f.OmnibusP,
			f.PValue,
		}
		for i, pv := range ps {
			for j, th := range thresholds {
				if pv < th {
					below[i][j]++
				}
			}
		}
	}
	for i, name := range names {
		t.Logf("%-15s below %v: %v of %d rows (expected %v)", name, thresholds, below[i], runs,
			[]float64{float64(runs) * 1e-2, float64(runs) * 1e-3, float64(runs) * 1e-4})
	}
	if mm := below[2]; float64(mm[0]) > 1.3*float64(runs)*1e-2 {
		t.Errorf("moment-matched omnibus test fails %d rows at 1e-2 of %d", mm[0], runs)
	}
}
