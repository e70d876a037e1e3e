package compare

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

func TestRevealedSupport(t *testing.T) {
	const (
		K = ref.Kept
		B = ref.Boundary
		D = ref.Dropped
	)
	base := []float64{0.4, 0.3, 0.2, 0.06, 0.04}
	tests := []struct {
		name    string
		probs   []float64 // the reference's decisions (unnormalised is fine)
		class   []ref.Class
		counts  []int64
		n       float64 // expected draws: n times probs
		want    []bool  // the revealed support; nil: the reference's stands
		added   int
		removed int
	}{
		{"no boundary tokens", []float64{0.4, 0.3, 0.2, 0, 0}, []ref.Class{K, K, K, D, D}, []int64{40, 30, 20, 0, 0}, 100, nil, 0, 0},
		{"boundary kept and drawn", []float64{0.4, 0.3, 0.2, 0.06, 0}, []ref.Class{K, K, K, B, D}, []int64{40, 30, 20, 6, 0}, 100, nil, 0, 0},
		{"boundary dropped but drawn", []float64{0.4, 0.3, 0.2, 0, 0}, []ref.Class{K, K, K, B, D}, []int64{40, 30, 20, 6, 0}, 100, []bool{true, true, true, true, false}, 1, 0},
		{"boundary kept, never drawn, many expected", []float64{0.4, 0.3, 0.2, 0.06, 0.04}, []ref.Class{K, K, K, B, B}, []int64{400, 300, 200, 0, 0}, 1000, []bool{true, true, true, false, false}, 0, 2},
		{"boundary kept, never drawn, few expected", []float64{0.4, 0.3, 0.2, 0.06, 0.04}, []ref.Class{K, K, K, B, B}, []int64{4, 3, 2, 0, 0}, 10, nil, 0, 0},
		{"one of a tied group drawn, the rest unseen", []float64{0.4, 0.3, 0.2, 0.06, 0.04}, []ref.Class{K, K, K, B, B}, []int64{400, 300, 200, 60, 0}, 1000, []bool{true, true, true, true, false}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var z float64
			for _, p := range tt.probs {
				z += p
			}
			probs := make([]float64, len(tt.probs))
			for i, p := range tt.probs {
				probs[i] = p / z
			}
			d := &ref.Dist{Probs: probs, Base: base, Class: tt.class}
			got, c := revealedSupport(d, tt.counts, func(i int) float64 { return tt.n * probs[i] }, make([]float64, len(base)))
			if tt.want == nil {
				if got != nil {
					t.Fatalf("support changed to %v (%+v), want the reference's", got, c)
				}
				return
			}
			if got == nil {
				t.Fatalf("support unchanged, want %v", tt.want)
			}
			var z2 float64
			for i, keep := range tt.want {
				if keep {
					z2 += base[i]
				}
			}
			for i, keep := range tt.want {
				want := 0.0
				if keep {
					want = base[i] / z2
				}
				if math.Abs(got[i]-want) > 1e-15 {
					t.Errorf("token %d: %v, want %v", i, got[i], want)
				}
			}
			if c.added != tt.added || c.removed != tt.removed {
				t.Errorf("added %d removed %d, want %d and %d", c.added, c.removed, tt.added, tt.removed)
			}
		})
	}
}

func TestAcceptanceBand(t *testing.T) {
	tests := []struct {
		name              string
		accepted, reached int
		a, slack          float64
		pass              bool
	}{
		{"certain acceptance, all accepted", 10000, 10000, 1, acceptSlack, true},
		{"certain acceptance, one float32 rejection", 9999, 10000, 1, acceptSlack, true},
		{"certain acceptance, 1% rejected", 9900, 10000, 1, acceptSlack, false},
		{"half, on theory", 5012, 10000, 0.5, acceptSlack, true},
		{"half, 40% measured", 4000, 10000, 0.5, acceptSlack, false},
		{"half, 48% measured, boundary slack", 48000, 100000, 0.5, 0.05, true},
		{"half, 48% measured, no boundary", 48000, 100000, 0.5, acceptSlack, false},
		{"never, accepted once", 1, 10000, 0, acceptSlack, false},
		{"nothing reached", 0, 0, 0.3, acceptSlack, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := acceptanceP(tt.accepted, tt.reached, tt.a, tt.slack)
			if (p >= DefaultPValue) != tt.pass {
				t.Errorf("p = %v, want pass %v", p, tt.pass)
			}
		})
	}
}

// sampleRunWithTokens returns a sample run of b rows at temperature temp
// over v tokens and one correct token per row.
func sampleRunWithTokens(rng *rand.Rand, b, v int, temp float64) (*engine.Run, []int64) {
	run := logitsRun(rng, engine.OpSample, engine.F32, b, v, 1, rowParams{temp: temp, Filter: ref.NoFilter()})
	toks := make([]int64, b)
	for r := range b {
		toks[r] = drawFrom(rng, ref.Sample(run, r, 1e-6).Probs)
	}
	return run, toks
}

func TestSeedRules(t *testing.T) {
	tests := []struct {
		name string
		temp float64
		// same and other derive the reruns' tokens from the first run's.
		same, other func(rng *rand.Rand, first []int64, v int) []int64
		// failRows are the rows that fail; run says whether a run-level
		// violation fails the output; note is a phrase of a note.
		failRows []int
		run      bool
		note     string
	}{
		{"seeds honoured", 1, copyTokens, redraw, nil, false, "different seeds agree at"},
		{"same seed, another token in row 2", 1, changeRow(2), redraw, []int{2}, false, "the same seed gave different draws at 1 of 40 positions"},
		{"other seeds, the same tokens", 1, copyTokens, copyTokens, nil, true, "different seeds gave the same 40 draws"},
		{"other seeds, the same tokens in half the rows", 1, copyTokens, redrawHalf, nil, true, "the seed does not reach the sampler on every row"},
		{"other seeds, the same tokens of greedy rows", 0, copyTokens, copyTokens, nil, false, "no evidence either way"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(300+i), 3))
			const b, v = 40, 500
			run, first := sampleRunWithTokens(rng, b, v, tt.temp)
			out := &engine.Output{Name: "cpu", Tokens: engine.FromInts("tokens", engine.I32, []int{b}, first)}
			rr := &Reruns{
				SameSeed:  engine.FromInts("tokens", engine.I32, []int{b}, tt.same(rng, first, v)),
				OtherSeed: engine.FromInts("tokens", engine.I32, []int{b}, tt.other(rng, first, v)),
			}
			rep, err := Judge(context.Background(), run, []*engine.Output{out}, Options{Reruns: rr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Outputs[0]
			if got := failedRows(o); !slices.Equal(got, tt.failRows) {
				t.Errorf("failed rows %v, want %v", got, tt.failRows)
			}
			for _, r := range tt.failRows {
				if !hasRule(o.Rows[r], engine.RuleExact) {
					t.Errorf("row %d: %q, want a seed violation", r, o.Rows[r].Violations)
				}
			}
			runLevel := len(o.Violations) > 0
			if runLevel != tt.run || o.Pass != (len(tt.failRows) == 0 && !tt.run) {
				t.Errorf("pass %v, run-level violation %v; violations %q", o.Pass, runLevel, o.Violations)
			}
			said := append(slices.Clone(o.Notes), o.Violations...)
			if !slices.ContainsFunc(said, func(n string) bool { return strings.Contains(n, tt.note) }) {
				t.Errorf("no note or violation with %q: notes %q, violations %q", tt.note, o.Notes, o.Violations)
			}
		})
	}
}

func copyTokens(_ *rand.Rand, first []int64, _ int) []int64 { return slices.Clone(first) }

// redraw returns fresh tokens, as another seed gives: uniform ones, which
// agree with the first run's no more often than independent draws of the
// rows would.
func redraw(rng *rand.Rand, first []int64, v int) []int64 {
	out := make([]int64, len(first))
	for r := range out {
		out[r] = int64(rng.IntN(v))
	}
	return out
}

// redrawHalf redraws the odd rows only: a seed that reaches half the rows.
func redrawHalf(rng *rand.Rand, first []int64, v int) []int64 {
	out := slices.Clone(first)
	for r := 1; r < len(out); r += 2 {
		out[r] = (out[r] + 1 + int64(rng.IntN(v-1))) % int64(v)
	}
	return out
}

// changeRow returns a rerun that differs from the first run in row r only.
func changeRow(r int) func(*rand.Rand, []int64, int) []int64 {
	return func(_ *rand.Rand, first []int64, v int) []int64 {
		out := slices.Clone(first)
		out[r] = (out[r] + 1) % int64(v)
		return out
	}
}

func TestSeedRulesNeedSampledTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	run, first := sampleRunWithTokens(rng, 3, 50, 1)
	toks := engine.FromInts("tokens", engine.I32, []int{3}, first)
	tests := []struct {
		name string
		rr   Reruns
		want string
	}{
		{"output out of range", Reruns{Output: 3, SameSeed: toks, OtherSeed: toks}, "the reruns repeat output 3 of 1"},
		{"a rerun missing", Reruns{SameSeed: toks}, "need both reruns"},
		{"a rerun of the wrong length", Reruns{SameSeed: toks, OtherSeed: engine.FromInts("tokens", engine.I32, []int{2}, first[:2])}, "want 3 integer tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &engine.Output{Name: "cpu", Tokens: toks}
			rep, err := Judge(context.Background(), run, []*engine.Output{out}, Options{Reruns: &tt.rr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Outputs[0]
			if !o.Pass || !slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, tt.want) }) {
				t.Errorf("pass %v, notes %q; want a note with %q", o.Pass, o.Notes, tt.want)
			}
		})
	}
}

// TestRunLevelSpecChecks judges one trial per row of many rows, where only
// tests pooled over the rows can see a mistake.
func TestRunLevelSpecChecks(t *testing.T) {
	tests := []struct {
		name string
		// chain runs one row's chain; it returns the tokens, spec_emitted and
		// spec_accepted.
		chain func(rng *rand.Rand, s *ref.SpecRef) ([]int64, int64, int64)
		want  string // a phrase of the run-level violation; "" for none
	}{
		{"exact chains", chain, ""},
		{"every draft accepted", func(rng *rand.Rand, s *ref.SpecRef) ([]int64, int64, int64) {
			k := len(s.Drafts)
			toks := append(slices.Clone(s.Drafts), drawFrom(rng, s.Target[k].Probs))
			return toks, int64(k), int64(k)
		}, "position 0 accepts"},
		{"spec_accepted counts the accepted prefix only", func(rng *rand.Rand, s *ref.SpecRef) ([]int64, int64, int64) {
			toks, emitted, _ := chain(rng, s)
			return toks, emitted, emitted
		}, "spec_accepted sums to"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(400+i), 4))
			const b, k, v = 300, 3, 8
			run := specRunOf(rng, b, k, v)
			toks := make([]int64, 0, b*(k+1))
			emitted, accepted := make([]int64, b), make([]int64, b)
			for r := range b {
				s := ref.SpecVerify(run, r, 1e-6)
				var row []int64
				row, emitted[r], accepted[r] = tt.chain(rng, &s)
				toks = append(toks, row...)
			}
			out := &engine.Output{
				Name:         "spec_tokens",
				SpecTokens:   engine.FromInts("spec_tokens", engine.I32, []int{b, k + 1}, toks),
				SpecEmitted:  engine.FromInts("spec_emitted", engine.I32, []int{b}, emitted),
				SpecAccepted: engine.FromInts("spec_accepted", engine.I32, []int{b}, accepted),
			}
			o := judgeRun(t, run, out).Outputs[0]
			if o.FailedRows != 0 {
				t.Fatalf("rows fail: %v", failedRows(o))
			}
			if o.Spec == nil || o.Spec.Trials != b || len(o.Spec.Positions) != k {
				t.Fatalf("pooled statistics %+v", o.Spec)
			}
			runLevel := o.Violations
			switch {
			case tt.want == "" && (len(runLevel) > 0 || !o.Pass):
				t.Errorf("exact chains fail: %q", runLevel)
			case tt.want != "" && (o.Pass || !slices.ContainsFunc(runLevel, func(n string) bool { return strings.Contains(n, tt.want) })):
				t.Errorf("pass %v, run-level violations %q; want one with %q", o.Pass, runLevel, tt.want)
			}
		})
	}
}

func TestSampleRunProbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const b, v = 4, 600
	run := logitsRun(rng, engine.OpSample, engine.F32, b, v, 2, rowParams{temp: 0.8, Filter: ref.Filter{TopK: 50, TopP: 0.9}})
	renorm := refProbs(run, false, 1e-6)
	softmax := make([]float64, 0, b*v)
	for r := range b {
		d := ref.Compute(ref.RowLogits(run, r), 0.8, ref.NoFilter(), false)
		softmax = append(softmax, d.Probs...)
	}
	tests := []struct {
		name  string
		probs []float64
		pass  bool
	}{
		{"the renorm distribution", renorm, true},
		{"the softmax, filters ignored", softmax, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := judgeRun(t, run, probsOutput(run, engine.F32, tt.probs)).Outputs[0]
			if o.Kind != "probs" || o.Pass != tt.pass {
				t.Fatalf("kind %q pass %v, want probs and %v", o.Kind, o.Pass, tt.pass)
			}
			for _, r := range o.Rows {
				if !tt.pass && !hasRule(r, engine.RuleSupport) {
					t.Errorf("row %d: %q, want a support violation", r.Row, r.Violations)
				}
			}
		})
	}
}
