package compare

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// histogram counts draws [b, n] per token into [b, v], dropping the draws
// outside [0, v) as a device counter does.
func histogram(draws []int64, b, n, v int) []int64 {
	counts := make([]int64, b*v)
	for r := range b {
		for _, tok := range draws[r*n : (r+1)*n] {
			if tok >= 0 && tok < int64(v) {
				counts[r*v+int(tok)]++
			}
		}
	}
	return counts
}

// TestJudgeFromCounts checks that the same draws judged one by one
// (Samples) and counted per token (SampleCounts) get the same verdict, rules,
// p-value and fit on every row, and that the counted form's sentences name
// the token and its count where they cannot name a draw.
func TestJudgeFromCounts(t *testing.T) {
	const b, v, n = 5, 1500, 3000
	tests := []struct {
		name string
		// spoil changes row r's draws, given the row's distribution.
		spoil    func(rng *rand.Rand, d *ref.Dist, row []int64)
		failRows []int
		rule     engine.Rule
		// words is what row 1's first violation says in the counted form.
		words string
	}{
		{name: "clean", spoil: func(*rand.Rand, *ref.Dist, []int64) {}},
		{
			name: "off the support", failRows: []int{1}, rule: engine.RuleSupport,
			spoil: func(_ *rand.Rand, d *ref.Dist, row []int64) {
				tok := int64(slices.Index(d.Class, ref.Dropped))
				row[10], row[20], row[30] = tok, tok, tok
			},
			words: "row 1: 3 of 3000 draws are wrong; first, token ",
		},
		{
			name: "out of range", failRows: []int{1}, rule: engine.RuleTokenRange,
			spoil: func(_ *rand.Rand, _ *ref.Dist, row []int64) { row[7], row[8] = v+3, -1 },
			words: "row 1: 2 of 3000 draws are wrong: 2 draws are counted on no token of [0, 1500)",
		},
		{
			name: "biased", failRows: []int{1}, rule: engine.RuleFit,
			spoil: func(_ *rand.Rand, d *ref.Dist, row []int64) {
				// Half the draws go to the most probable token.
				for k := 0; k < len(row); k += 2 {
					row[k] = int64(d.Argmax)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(91, uint64(len(tt.name))))
			run := logitsRun(rng, engine.OpSample, engine.BF16, b, v, 2,
				rowParams{temp: 0.9, Filter: ref.Filter{TopK: 60, TopP: 0.95}},
				rowParams{temp: 1.1, Filter: ref.Filter{TopK: 200, TopP: 1}},
				rowParams{temp: 0, Filter: ref.Filter{TopP: 1}})
			eps := ref.BoundaryEps(DefaultTolerance(engine.BF16).Rtol)
			draws := make([]int64, b*n)
			for r := range b {
				d := ref.Sample(run, r, eps)
				for k := range n {
					draws[r*n+k] = drawFrom(rng, d.Probs)
				}
				if r == 1 {
					tt.spoil(rng, &d, draws[r*n:(r+1)*n])
				}
			}
			drawn := judgeRun(t, run, &engine.Output{Name: "drawn", Samples: engine.FromInts("samples", engine.I32, []int{b, n}, draws)})
			counted := judgeRun(t, run, &engine.Output{Name: "counted", SampleDraws: n,
				SampleCounts: engine.FromInts("sample_counts", engine.I32, []int{b, v}, histogram(draws, b, n, v))})
			a, c := drawn.Outputs[0], counted.Outputs[0]
			if c.Kind != "samples" {
				t.Errorf("counted Kind = %q, want samples", c.Kind)
			}
			if got := failedRows(c); !slices.Equal(got, tt.failRows) {
				t.Errorf("counted: failed rows %v, want %v", got, tt.failRows)
			}
			if got := failedRows(a); !slices.Equal(got, tt.failRows) {
				t.Errorf("drawn: failed rows %v, want %v", got, tt.failRows)
			}
			for r := range b {
				ra, rc := a.Rows[r], c.Rows[r]
				if ra.Pass != rc.Pass || !reflect.DeepEqual(ra.PValue, rc.PValue) || !reflect.DeepEqual(ra.Fit, rc.Fit) {
					t.Errorf("row %d: drawn pass %v p %v fit %+v; counted pass %v p %v fit %+v",
						r, ra.Pass, ra.PValue, ra.Fit, rc.Pass, rc.PValue, rc.Fit)
				}
				var rulesA, rulesC []engine.Rule
				for _, f := range ra.Findings {
					rulesA = append(rulesA, f.Rule)
				}
				for _, f := range rc.Findings {
					rulesC = append(rulesC, f.Rule)
				}
				if !slices.Equal(rulesA, rulesC) {
					t.Errorf("row %d: rules drawn %v, counted %v", r, rulesA, rulesC)
				}
			}
			if tt.rule != "" && !hasRule(c.Rows[1], tt.rule) {
				t.Errorf("counted row 1: want %s, got %v", tt.rule, c.Rows[1].Violations)
			}
			if tt.words != "" && (len(c.Rows[1].Violations) == 0 || !strings.HasPrefix(c.Rows[1].Violations[0], tt.words)) {
				t.Errorf("counted row 1 says %q, want it to start %q", c.Rows[1].Violations, tt.words)
			}
		})
	}
}

// TestSampleCountsRefused checks that counts that cannot be counts are
// refused in one sentence naming the tensor and the rule.
func TestSampleCountsRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const b, v = 3, 400
	run := logitsRun(rng, engine.OpSample, engine.F32, b, v, 1, rowParams{temp: 1, Filter: ref.Filter{TopP: 1}})
	good := make([]int64, b*v)
	negative := slices.Clone(good)
	negative[v+7] = -2
	// Counts whose row sums past an int64: summed, they wrap to a
	// negative number or zero, and the row would pass with no draws.
	huge := slices.Clone(good)
	for tok := range 8 {
		huge[2*v+tok] = math.MaxInt64 / 4
	}
	tests := []struct {
		name   string
		counts *engine.Tensor
		want   string
	}{
		{"shape", engine.FromInts("sample_counts", engine.I32, []int{b, v - 1}, good[:b*(v-1)]), "sample_counts have shape [3, 399], want [3, 400]"},
		{"negative", engine.FromInts("sample_counts", engine.I32, []int{b, v}, negative), "sample_counts[1, 7] is -2, want a count >= 0"},
		{"row sum past int64", engine.FromInts("sample_counts", engine.I64, []int{b, v}, huge), "sample_counts row 2 sums past 9223372036854775807 at token 4, want a row's draws to fit in an int64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := judgeRun(t, run, &engine.Output{Name: "x", External: true, SampleCounts: tt.counts})
			o := rep.Outputs[0]
			if !strings.Contains(strings.Join(o.Notes, " | "), tt.want) {
				t.Errorf("notes %q, want %q", o.Notes, tt.want)
			}
		})
	}
}

// TestCountsPowerGain checks that a counts output of 10^7 draws a row states
// the bias its draws catch and what 10^5 draws would catch: ten times
// more, the square root of a hundred times fewer draws.
func TestCountsPowerGain(t *testing.T) {
	const b, v, n = 3, 3000, 10_000_000
	rng := rand.New(rand.NewPCG(17, 18))
	run := logitsRun(rng, engine.OpSample, engine.F32, b, v, 1.5, rowParams{temp: 1, Filter: ref.Filter{TopP: 1}})
	eps := ref.BoundaryEps(DefaultTolerance(engine.F32).Rtol)
	counts := make([]int64, b*v)
	for r := range b {
		// The expected counts, the remainder to the largest fractions
		// (a row that fits its law closely; the power depends on the bins,
		// not on the fit).
		d := ref.Sample(run, r, eps)
		var sum int64
		frac := make([]int, 0, v)
		for tok, p := range d.Probs {
			c := int64(float64(n) * p)
			counts[r*v+tok] = c
			sum += c
			frac = append(frac, tok)
		}
		slices.SortFunc(frac, func(a, c int) int {
			fa, fc := float64(n)*d.Probs[a], float64(n)*d.Probs[c]
			return cmp.Compare(fc-math.Floor(fc), fa-math.Floor(fa))
		})
		for _, tok := range frac[:n-sum] {
			counts[r*v+tok]++
		}
	}
	rep := judgeRun(t, run, &engine.Output{Name: "counted", SampleDraws: n,
		SampleCounts: engine.FromInts("sample_counts", engine.I32, []int{b, v}, counts)})
	o := rep.Outputs[0]
	if got := failedRows(o); len(got) > 0 {
		t.Fatalf("failed rows %v: %v", got, o.Rows[got[0]].Violations)
	}
	pw := o.Power
	if pw == nil || pw.Draws != n {
		t.Fatalf("power %+v, want one of %d draws", pw, n)
	}
	if ratio := float64(pw.BaselineTV / pw.TV); math.Abs(ratio-10) > 1e-9 {
		t.Errorf("baseline %v over TV %v = %v, want 10", pw.BaselineTV, pw.TV, ratio)
	}
	want := fmt.Sprintf("10^7 draws a row catch a total-variation bias of %.2g; 10^5 would catch %.2g", float64(pw.TV), float64(pw.BaselineTV))
	if got := pw.Gain(); got != want || !(pw.TV > 0 && pw.TV < 0.01) {
		t.Errorf("Gain() = %q (TV %v), want %q with TV under 0.01", got, pw.TV, want)
	}
}

// TestSamplesOrCounts checks that an output holding both samples and
// sample_counts is not judged (one of the two would be ignored) and says so
// in one sentence naming the output and the rule, while either alone is
// judged.
func TestSamplesOrCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const b, v, n = 3, 50, 400
	run := logitsRun(rng, engine.OpSample, engine.F32, b, v, 1, rowParams{temp: 1, Filter: ref.Filter{TopP: 1}})
	eps := ref.BoundaryEps(DefaultTolerance(engine.F32).Rtol)
	draws := make([]int64, b*n)
	for r := range b {
		d := ref.Sample(run, r, eps)
		for i := range n {
			draws[r*n+i] = drawFrom(rng, d.Probs)
		}
	}
	samples := func() *engine.Tensor { return engine.FromInts("samples", engine.I32, []int{b, n}, draws) }
	counts := func() *engine.Tensor {
		return engine.FromInts("sample_counts", engine.I32, []int{b, v}, histogram(draws, b, n, v))
	}
	const both = "x cannot be judged: it holds both samples and sample_counts, want one of the two"
	tests := []struct {
		name        string
		out         *engine.Output
		wantRefused bool
		wantKind    string
	}{
		{"samples", &engine.Output{Name: "x", External: true, Samples: samples()}, false, "samples"},
		{"sample_counts", &engine.Output{Name: "x", External: true, SampleCounts: counts()}, false, "samples"},
		{"both", &engine.Output{Name: "x", External: true, Samples: samples(), SampleCounts: counts()}, true, ""},
		{"both, ours", &engine.Output{Name: "x", SampleDraws: n, Samples: samples(), SampleCounts: counts()}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := judgeRun(t, run, tt.out).Outputs[0]
			notes := strings.Join(o.Notes, " | ")
			if refused := strings.Contains(notes, both); refused != tt.wantRefused {
				t.Fatalf("notes %q: refused %v, want %v", notes, refused, tt.wantRefused)
			}
			if tt.wantRefused {
				if o.Pass {
					t.Errorf("an output holding both passed")
				}
				return
			}
			if o.Kind != tt.wantKind || !o.Pass {
				t.Errorf("kind %q, pass %v; want %q, passing (notes %q)", o.Kind, o.Pass, tt.wantKind, notes)
			}
		})
	}
}
