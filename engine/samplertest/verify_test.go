package samplertest_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/samplertest"
)

// judgeDump encodes tensors as a dump, loads it as `sampviz check` does,
// and judges its external outputs.
func judgeDump(t *testing.T, name string, tensors []*engine.Tensor, meta map[string]string) (*engine.Run, *engine.Report) {
	t.Helper()
	data, err := samplertest.Encode(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	run, err := samplertest.Load(name, data)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := compare.Judge(context.Background(), run, compare.ExternalOutputs(run), compare.Options{}, nil)
	if err != nil {
		t.Fatalf("Judge: %v", err)
	}
	return run, rep
}

// output returns the report of the output named name.
func output(t *testing.T, rep *engine.Report, name string) *engine.OutputReport {
	t.Helper()
	for i := range rep.Outputs {
		if rep.Outputs[i].Name == name {
			return &rep.Outputs[i]
		}
	}
	t.Fatalf("no output %q in the report", name)
	return nil
}

// violationRules returns the rules of a row's violations.
func violationRules(r engine.RowReport) []engine.Rule {
	var rules []engine.Rule
	for _, f := range r.Findings {
		if f.Severity == engine.Violation {
			rules = append(rules, f.Rule)
		}
	}
	return rules
}

// describeFailures lists the violations of an output, for test messages.
func describeFailures(o *engine.OutputReport) string {
	var b strings.Builder
	for _, r := range o.Rows {
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "\n  %s", v)
		}
	}
	for _, v := range o.Violations {
		fmt.Fprintf(&b, "\n  %s", v)
	}
	return b.String()
}

// hasNote reports whether an output holds a note containing s.
func hasNote(o *engine.OutputReport, s string) bool {
	return slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, s) })
}

// checkCorrectRows checks that every row of o passes with a p-value that a
// correct sampler gives: at or above the threshold, from a test that had
// something to test.
func checkCorrectRows(t *testing.T, o *engine.OutputReport) {
	t.Helper()
	if !o.Pass {
		t.Fatalf("output %s of a correct sampler fails:%s", o.Name, describeFailures(o))
	}
	for _, r := range o.Rows {
		if r.PValue == nil || !(*r.PValue >= compare.DefaultPValue) {
			t.Errorf("row %d: p-value %v, want one at or above %g", r.Row, r.PValue, compare.DefaultPValue)
		}
	}
	if !hasNote(o, "rows fail at p < 1e-06; chance alone gives") {
		t.Errorf("output %s lacks the chance line; notes %q", o.Name, o.Notes)
	}
}

func TestSamplers(t *testing.T) {
	plain := samplertest.NoFilter()
	warm := samplertest.Params{Temperature: 0.7, TopP: 1}
	filtered := samplertest.Params{Temperature: 0.7, TopK: 500, TopP: 0.9}
	tests := []struct {
		name string
		c    samplertest.SampleCase
		// want is empty for a correct sampler; otherwise a violation of
		// one of these rules must fail every row.
		want []engine.Rule
	}{
		{"multinomial, V 1000", samplertest.SampleCase{V: 1000, Params: plain}, nil},
		{"multinomial, V 32000, temperature, top-k, top-p", samplertest.SampleCase{V: 32000, Params: filtered}, nil},
		{"multinomial, bf16 V 32000, sort-based top-p cuts tied groups", samplertest.SampleCase{V: 32000, DType: engine.BF16, Params: samplertest.Params{Temperature: 0.8, TopK: 2000, TopP: 0.8}}, nil},
		{"multinomial, min-p", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.9, TopP: 1, MinP: 0.05}}, nil},
		{"mass moved from the top token to the second", samplertest.SampleCase{V: 1000, Params: warm, Sampler: samplertest.Sampler{Mistake: samplertest.TopTwoBias, Bias: 0.02}}, []engine.Rule{engine.RuleFit}},
		{"temperature applied after top-p", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.7, TopP: 0.9}, Sampler: samplertest.Sampler{Mistake: samplertest.TemperatureAfterTopP}}, []engine.Rule{engine.RuleSupport}},
		{"top-p drops the crossing token", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.7, TopP: 0.9}, Sampler: samplertest.Sampler{Mistake: samplertest.TopPDropsCrossing}}, []engine.Rule{engine.RuleFit}},
		{"a share of draws shifted to the next token id", samplertest.SampleCase{V: 1000, Params: plain, Sampler: samplertest.Sampler{Mistake: samplertest.ShiftByOne, Bias: 0.02}}, []engine.Rule{engine.RuleFit}},
		{"min-p ignored", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.9, TopP: 1, MinP: 0.1}, Sampler: samplertest.Sampler{Mistake: samplertest.IgnoresMinP}}, []engine.Rule{engine.RuleSupport}},
		{"top-k ignored", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.9, TopK: 50, TopP: 1}, Sampler: samplertest.Sampler{Mistake: samplertest.IgnoresTopK}}, []engine.Rule{engine.RuleSupport}},
		{"top-p on the top-k mass before renormalising", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 1.5, TopK: 30, TopP: 0.8}, Sampler: samplertest.Sampler{Mistake: samplertest.JointOrder}}, []engine.Rule{engine.RuleSupport}},
		{"temperature 5% off", samplertest.SampleCase{V: 1000, Params: warm, Sampler: samplertest.Sampler{Mistake: samplertest.TemperatureOff, Bias: 0.05}}, []engine.Rule{engine.RuleFit}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(1000+i), 77))
			c := tt.c
			c.Rows, c.N, c.Sigma = 4, 100000, 2.5
			if c.DType == engine.DTypeInvalid {
				c.DType = engine.F32
			}
			tensors, meta := samplertest.SampleDump(rng, c)
			_, rep := judgeDump(t, "samples.safetensors", tensors, meta)
			o := output(t, rep, "samples")
			if o.Kind != "samples" {
				t.Fatalf("judged as %q, want samples", o.Kind)
			}
			if tt.want == nil {
				checkCorrectRows(t, o)
				for _, r := range o.Rows {
					if r.Fit == nil || r.Fit.Draws != c.N || r.Fit.DF < 10 {
						t.Errorf("row %d: fit %+v, want one of %d draws over many bins", r.Row, r.Fit, c.N)
					}
				}
				return
			}
			for _, r := range o.Rows {
				if r.Pass || !slices.ContainsFunc(violationRules(r), func(rule engine.Rule) bool { return slices.Contains(tt.want, rule) }) {
					t.Errorf("row %d: pass %v, violations %q; want a violation of %v", r.Row, r.Pass, r.Violations, tt.want)
				}
			}
		})
	}
}

func TestSpeculativeSamplers(t *testing.T) {
	plain := samplertest.Params{Temperature: 0.8, TopP: 1}
	filtered := samplertest.Params{Temperature: 0.7, TopK: 100, TopP: 0.9}
	either := []engine.Rule{engine.RuleSupport, engine.RuleFit}
	tests := []struct {
		name string
		c    samplertest.SpecCase
		// bad names the output that must fail ("" for a correct chain;
		// the other output may fail too, since it holds the same chain's
		// first trial); want its rules, one of which every failing row must
		// break; rows is how many rows at least must fail (0: all; fewer
		// where the mistake is invisible in some rows: resampling a one-hot
		// draft's rejection from the target goes wrong only when it draws
		// the draft token, rare when the target gives it little mass; a
		// wrong bonus is seen only in the trials that accept every draft); run
		// is a phrase of a run-level violation that must fail it instead.
		bad  string
		want []engine.Rule
		rows int
		run  string
		// equalDraft makes the draft distributions the target's, rounded
		// to float32: every acceptance probability is 1 or a hair below.
		equalDraft bool
	}{
		{name: "exact, draft probabilities", c: samplertest.SpecCase{Params: plain}},
		{name: "exact, one-hot drafts", c: samplertest.SpecCase{Params: plain, OneHot: true}},
		{name: "exact, temperature, top-k and top-p", c: samplertest.SpecCase{Params: filtered}},
		{name: "exact, V 32000", c: samplertest.SpecCase{Rows: 4, V: 32000, Trials: 3000, Params: plain}},
		{name: "exact, bf16 targets, top-p cutting tied groups", c: samplertest.SpecCase{V: 4000, DType: engine.BF16, Params: samplertest.Params{Temperature: 0.8, TopK: 200, TopP: 0.8}}},
		{name: "exact, draft equal to the target", c: samplertest.SpecCase{Params: plain}, equalDraft: true},
		{name: "rejection resampled from the target", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.ResampleFromTarget}, bad: "spec_trials", want: either},
		{name: "rejection resampled from the target, one-hot drafts", c: samplertest.SpecCase{Params: plain, OneHot: true, Mistake: samplertest.ResampleFromTarget}, bad: "spec_trials", want: either, rows: 12},
		{name: "rejection resampled from the draft", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.ResampleFromDraft}, bad: "spec_trials", want: either},
		{name: "residual not renormalised", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.UnnormalisedResidual}, bad: "spec_trials", want: either},
		{name: "bonus drawn from the last draft position's target", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.BonusFromLastDraft}, bad: "spec_trials", want: []engine.Rule{engine.RuleFit}, rows: 12},
		{name: "acceptance ignores the draft probabilities", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.AcceptIgnoresDraft}, bad: "spec_trials", want: []engine.Rule{engine.RuleAcceptance}},
		{name: "acceptance q/p instead of p/q", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.AcceptInverted}, bad: "spec_trials", want: []engine.Rule{engine.RuleAcceptance}},
		{name: "target verified without temperature", c: samplertest.SpecCase{Params: samplertest.Params{Temperature: 0.6, TopP: 1}, Mistake: samplertest.TargetWithoutTemperature}, bad: "spec_trials", want: []engine.Rule{engine.RuleAcceptance, engine.RuleFit}},
		{name: "drafts written after the first rejection", c: samplertest.SpecCase{Params: plain, Mistake: samplertest.ContinueAfterRejection}, bad: "spec_trials", want: []engine.Rule{engine.RuleStructure}},
		{name: "spec_emitted reports the accepted count", c: samplertest.SpecCase{Params: plain, EmittedIsAccepted: true}, bad: "spec_tokens", want: []engine.Rule{engine.RuleCounter}, rows: 1},
		{name: "spec_accepted counts only the accepted prefix", c: samplertest.SpecCase{Rows: 48, Params: plain, AcceptedIsEmitted: true}, bad: "spec_tokens", run: "spec_accepted sums to"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(2000+i), 99))
			c := tt.c
			c.K, c.Sigma, c.DraftNoise = 4, 2.5, 1
			if tt.equalDraft {
				c.DraftNoise = 0
			}
			if c.Rows == 0 {
				c.Rows = 16
			}
			if c.V == 0 {
				c.V = 1000
			}
			switch {
			case c.Trials > 0:
			case tt.bad == "":
				c.Trials = 10000
			default:
				c.Trials = 4000 // every mistake here is plain at far fewer
			}
			tensors, meta := samplertest.SpecDump(rng, c)
			_, rep := judgeDump(t, "spec.safetensors", tensors, meta)
			for _, name := range []string{"spec_tokens", "spec_trials"} {
				o := output(t, rep, name)
				switch {
				case tt.bad == "" && name == "spec_trials":
					checkCorrectRows(t, o)
					checkPooled(t, o, c)
					continue
				case tt.bad == "" && !o.Pass:
					t.Errorf("%s of a correct chain fails:%s", name, describeFailures(o))
					continue
				case name != tt.bad:
					continue
				}
				if o.Pass {
					t.Fatalf("%s of a wrong chain passes", name)
				}
				if tt.run != "" {
					if !slices.ContainsFunc(o.Violations, func(v string) bool { return strings.Contains(v, tt.run) }) {
						t.Errorf("%s: no run-level violation about %q:%s", name, tt.run, describeFailures(o))
					}
					continue
				}
				failed := 0
				for _, r := range o.Rows {
					if r.Pass {
						continue
					}
					failed++
					if !slices.ContainsFunc(violationRules(r), func(rule engine.Rule) bool { return slices.Contains(tt.want, rule) }) {
						t.Errorf("%s row %d: violations %q, want one of %v", name, r.Row, r.Violations, tt.want)
					}
				}
				if want := cmp(tt.rows, len(o.Rows)); failed < want {
					t.Errorf("%s: %d rows fail, want at least %d:%s", name, failed, want, describeFailures(o))
				}
			}
		})
	}
}

// cmp returns n, or all when n is 0.
func cmp(n, all int) int {
	if n == 0 {
		return all
	}
	return n
}

// checkPooled checks the statistics pooled over the rows of a correct
// chain's trials: every position reached, its rate within a few standard
// errors of theory, the emitted lengths summing to the trials, and the mean
// acceptance length beside its theory.
func checkPooled(t *testing.T, o *engine.OutputReport, c samplertest.SpecCase) {
	t.Helper()
	s := o.Spec
	if s == nil || len(s.Positions) != c.K || len(s.Emitted) != c.K+1 {
		t.Fatalf("pooled statistics %+v, want %d positions", s, c.K)
	}
	if s.Trials != c.Rows*c.Trials {
		t.Errorf("pooled trials %d, want %d", s.Trials, c.Rows*c.Trials)
	}
	sum := 0
	for _, h := range s.Emitted {
		sum += h
	}
	if sum != s.Trials {
		t.Errorf("emitted lengths sum to %d, want %d", sum, s.Trials)
	}
	for _, p := range s.Positions {
		rate, theory := float64(p.Rate), float64(p.Theory)
		se := math.Sqrt(theory*(1-theory)/float64(p.Reached)) + 1e-9
		if p.Reached == 0 || math.Abs(rate-theory) > 6*se || !(p.Lo <= p.Rate && p.Rate <= p.Hi) {
			t.Errorf("position %d: rate %v [%v, %v] of %d, theory %v", p.Position, rate, p.Lo, p.Hi, p.Reached, theory)
		}
	}
	if d := math.Abs(float64(s.MeanAcceptanceLength - s.TheoryMeanAcceptanceLength)); d > 0.05 {
		t.Errorf("mean acceptance length %v, theory %v", s.MeanAcceptanceLength, s.TheoryMeanAcceptanceLength)
	}
}

// TestDiagnoses checks that a failing sampler row whose draws fit a class of
// bug (docs/SEMANTICS.md "Diagnoses") says so in words and numbers, and
// that correct samplers and bugs of no class are given none.
func TestDiagnoses(t *testing.T) {
	plain := samplertest.NoFilter()
	warm := samplertest.Params{Temperature: 0.7, TopP: 1}
	tests := []struct {
		name string
		c    samplertest.SampleCase
		// class is the diagnosis every row must get ("" for none); words
		// are phrases its first violation must hold.
		class string
		words []string
	}{
		{"tie collapse", samplertest.SampleCase{V: 1000, Ties: 3, Params: plain, Sampler: samplertest.Sampler{Mistake: samplertest.TieCollapse}},
			compare.DiagnosisTieCollapse, []string{"3 tokens tie at p = ", "the draws go to the lowest id, token 0", "about 3x its share", "never to the other 2", "ties collapsed onto the lowest id"}},
		{"argmax fallback", samplertest.SampleCase{V: 1000, Params: warm, Sampler: samplertest.Sampler{Mistake: samplertest.ArgmaxFallback, Bias: 0.05}},
			compare.DiagnosisArgmaxFallback, []string{"the argmax, token ", "times as often as expected", "the rest follow the distribution", "a retry cap that falls back to argmax"}},
		{"top-p on the full softmax", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 1.5, TopK: 30, TopP: 0.8}, Sampler: samplertest.Sampler{Mistake: samplertest.JointOrder}},
			compare.DiagnosisTopPMass, []string{"the output's cut matches top-p on the full softmax, not on the top-k-renormalised mass", "the draws fit a cut that keeps"}},
		{"temperature twice", samplertest.SampleCase{V: 1000, Params: warm, Sampler: samplertest.Sampler{Mistake: samplertest.TemperatureTwice}},
			compare.DiagnosisTemperatureTwice, []string{"the draws fit T² = 0.49 (p = ", "and not T = 0.7 (p", "the temperature applied twice?"}},
		{"temperature after top-p", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.7, TopP: 0.9}, Sampler: samplertest.Sampler{Mistake: samplertest.TemperatureAfterTopP}},
			compare.DiagnosisTemperaturePlace, []string{"the draws fit the filters decided at T = 1 and the temperature applied to what they keep", "and not the temperature applied first", "the temperature applied at the wrong place?"}},
		{"min-p pool on a row without min-p", samplertest.SampleCase{V: 1000, RowParams: []samplertest.Params{{Temperature: 1, TopP: 1}, {Temperature: 1, TopP: 1, MinP: 0.05}}, Sampler: samplertest.Sampler{Mistake: samplertest.MinPPool, Bias: 0.05}},
			compare.DiagnosisMinPPool, []string{"min_p is off on this row, but the draws fit min_p = 0.05, the value row 1 asks for", "the batch's min-p pool applied to a row without min-p?"}},
		{"min-p 0 clamped", samplertest.SampleCase{V: 1000, Params: plain, Sampler: samplertest.Sampler{Mistake: samplertest.MinPClamped, Bias: 0.01}},
			compare.DiagnosisMinPClamp, []string{"min_p is 0 (off) on this row, but no token below ", "none came", "min_p = 0 clamped to a cutoff?"}},
		// No class: correct samplers, and bugs of none of the classes.
		{"correct", samplertest.SampleCase{V: 1000, Params: warm}, "", nil},
		{"correct, ties", samplertest.SampleCase{V: 1000, Ties: 3, Params: plain}, "", nil},
		{"mass moved from the top token to the second", samplertest.SampleCase{V: 1000, Params: warm, Sampler: samplertest.Sampler{Mistake: samplertest.TopTwoBias, Bias: 0.02}}, "", nil},
		{"draws shifted to the next token id", samplertest.SampleCase{V: 1000, Params: plain, Sampler: samplertest.Sampler{Mistake: samplertest.ShiftByOne, Bias: 0.02}}, "", nil},
		{"temperature 5% off", samplertest.SampleCase{V: 1000, Params: warm, Sampler: samplertest.Sampler{Mistake: samplertest.TemperatureOff, Bias: 0.05}}, "", nil},
		{"top-k ignored", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.9, TopK: 50, TopP: 1}, Sampler: samplertest.Sampler{Mistake: samplertest.IgnoresTopK}}, "", nil},
		{"min-p ignored", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.9, TopP: 1, MinP: 0.1}, Sampler: samplertest.Sampler{Mistake: samplertest.IgnoresMinP}}, "", nil},
		{"top-p drops the crossing token", samplertest.SampleCase{V: 1000, Params: samplertest.Params{Temperature: 0.7, TopP: 0.9}, Sampler: samplertest.Sampler{Mistake: samplertest.TopPDropsCrossing}}, "", nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(2600+i), 26))
			c := tt.c
			c.Rows, c.N, c.Sigma, c.DType = 4, 50000, 2.5, engine.F32
			tensors, meta := samplertest.SampleDump(rng, c)
			_, rep := judgeDump(t, "samples.safetensors", tensors, meta)
			o := output(t, rep, "samples")
			if pw := o.Power; pw == nil || !(pw.TV >= pw.Best && pw.Best > 0) || pw.Probability != 0.9 {
				t.Errorf("output power %+v, want the weakest and strongest rows' detectable_tv at 9 times in 10", pw)
			}
			if testing.Verbose() && len(o.Rows[0].Violations) > 0 {
				t.Log(o.Rows[0].Violations[0])
			}
			for _, r := range o.Rows {
				got := ""
				if r.Fit != nil {
					got = r.Fit.Diagnosis
					if d := float64(r.Fit.DetectableTV); !(d > 0 && d < 0.1) {
						t.Errorf("row %d: detectable_tv %v, want a small positive total variation at 50000 draws", r.Row, d)
					}
				}
				if tt.class == "" {
					if got != "" {
						t.Errorf("row %d: diagnosed %s, want none: %q", r.Row, got, r.Violations)
					}
					continue
				}
				// The pool applies only to rows without min-p.
				if c.RowParams != nil && c.RowParams[r.Row%len(c.RowParams)].MinP > 0 {
					if !r.Pass {
						t.Errorf("row %d has min-p and fails: %q", r.Row, r.Violations)
					}
					continue
				}
				if r.Pass || got != tt.class {
					t.Errorf("row %d: pass %v, diagnosis %q, want %s: %q", r.Row, r.Pass, got, tt.class, r.Violations)
					continue
				}
				for _, w := range tt.words {
					if !strings.Contains(r.Violations[0], w) {
						t.Errorf("row %d: %q lacks %q", r.Row, r.Violations[0], w)
					}
				}
			}
		})
	}
}

// TestRedrawnDrafts judges spec_trials whose drafts are drawn anew for
// every trial (draft_tokens [T, B, K]): an exact chain passes; a drafter
// that draws from its top-k while reporting the raw q (transformers #47932)
// fails on its drafts' fit to draft_probs and on the lossless rule.
func TestRedrawnDrafts(t *testing.T) {
	base := samplertest.SpecCase{Rows: 4, K: 3, V: 200, Trials: 20000, Sigma: 2, DraftNoise: 1, Params: samplertest.Params{Temperature: 0.8, TopP: 1}, Redraw: true}
	tests := []struct {
		name    string
		topK    int
		mistake samplertest.SpecMistake
		pass    bool
		// words are phrases the failing rows' violations must hold.
		words []string
	}{
		{"exact chain, drafts drawn per trial", 0, samplertest.SpecCorrect, true, nil},
		{"drafts drawn from the top-5 of the q reported", 5, samplertest.SpecCorrect, false,
			[]string{"drafts do not follow draft_probs", "the drafter draws from another q than it reports", "do not follow the target"}},
		{"drafts accepted after the first rejection", 0, samplertest.ContinueAfterRejection, false,
			[]string{"trials break the rules"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(4700+i), 26))
			c := base
			c.DraftTopK, c.Mistake = tt.topK, tt.mistake
			tensors, meta := samplertest.SpecDump(rng, c)
			run, rep := judgeDump(t, "redrawn.safetensors", tensors, meta)
			if run.DraftTrials == nil || run.DraftTokens.Dim(0) != c.Rows || run.DraftTokens.Dim(1) != c.K {
				t.Fatalf("draft_tokens [T, B, K] read as trials %v, drafts %s", run.DraftTrials != nil, run.DraftTokens.ShapeString())
			}
			o := output(t, rep, "spec_trials")
			if tt.pass {
				if !o.Pass {
					t.Fatalf("an exact chain with redrawn drafts fails:%s", describeFailures(o))
				}
				for _, r := range o.Rows {
					if r.Spec == nil || len(r.Spec.Drafts) != c.K || len(r.Spec.Lossless) != c.K+1 {
						t.Errorf("row %d: statistics %+v, want %d draft fits and %d lossless", r.Row, r.Spec, c.K, c.K+1)
					}
				}
				return
			}
			if testing.Verbose() {
				t.Log(strings.Join(o.Rows[0].Violations, "\n"))
			}
			for _, r := range o.Rows {
				all := strings.Join(r.Violations, "\n")
				for _, w := range tt.words {
					if r.Pass || !strings.Contains(all, w) {
						t.Errorf("row %d: pass %v, violations %q; want %q", r.Row, r.Pass, r.Violations, w)
					}
				}
			}
		})
	}
}

// TestRedrawnDraftsRefused checks that per-trial drafts that cannot be
// judged are refused when the dump is read, in one sentence naming the
// file, the tensor and the rule.
func TestRedrawnDraftsRefused(t *testing.T) {
	c := samplertest.SpecCase{Rows: 2, K: 2, V: 50, Trials: 10, Sigma: 2, DraftNoise: 1, Params: samplertest.Params{Temperature: 1, TopP: 1}, Redraw: true}
	tests := []struct {
		name  string
		edit  func(ts []*engine.Tensor) []*engine.Tensor
		words []string
	}{
		{"no draft_probs", func(ts []*engine.Tensor) []*engine.Tensor {
			return slices.DeleteFunc(ts, func(x *engine.Tensor) bool { return x.Name == "draft_probs" })
		}, []string{"bad.safetensors", "draft_tokens", "needs draft_probs"}},
		{"a draft outside the vocabulary", func(ts []*engine.Tensor) []*engine.Tensor {
			for _, x := range ts {
				if x.Name == "draft_tokens" {
					d := x.Ints()
					d[len(d)-1] = 50
					*x = *engine.FromInts("draft_tokens", engine.I64, x.Shape, d)
				}
			}
			return ts
		}, []string{"bad.safetensors", "draft_tokens", "trial 9, row 1, position 1 holds token 50, outside the vocabulary [0, 50)"}},
		{"fewer trials than drafts", func(ts []*engine.Tensor) []*engine.Tensor {
			for _, x := range ts {
				if x.Name == "spec_trials" {
					d := x.Ints()
					*x = *engine.FromInts("spec_trials", engine.I32, []int{9, 2, 3}, d[:9*2*3])
				}
			}
			return ts
		}, []string{"bad.safetensors", "spec_trials", "holds 9 trials, but draft_tokens [10, 2, 2] holds drafts for 10"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tensors, meta := samplertest.SpecDump(rand.New(rand.NewPCG(uint64(4800+i), 26)), c)
			data, err := samplertest.Encode(tt.edit(tensors), meta)
			if err != nil {
				t.Fatal(err)
			}
			_, err = samplertest.Load("bad.safetensors", data)
			if err == nil {
				t.Fatal("the dump was read, want it refused")
			}
			for _, w := range tt.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// TestDiagnosesTopPOtherWay checks top-p on the wrong mass the other way
// round: a dump whose engine applies top-p to the full softmax (joint),
// drawn by a sampler that applies it to the top-k-renormalised mass.
func TestDiagnosesTopPOtherWay(t *testing.T) {
	c := samplertest.SampleCase{Rows: 4, V: 1000, N: 50000, Sigma: 2.5, DType: engine.F32, Params: samplertest.Params{Temperature: 1.5, TopK: 30, TopP: 0.8}}
	tensors, meta := samplertest.SampleDump(rand.New(rand.NewPCG(2690, 26)), c)
	meta["filter_order"] = "joint"
	_, rep := judgeDump(t, "samples.safetensors", tensors, meta)
	o := output(t, rep, "samples")
	for _, r := range o.Rows {
		if r.Pass || r.Fit == nil || r.Fit.Diagnosis != compare.DiagnosisTopPMass {
			t.Errorf("row %d: pass %v, violations %q; want the diagnosis %s", r.Row, r.Pass, r.Violations, compare.DiagnosisTopPMass)
			continue
		}
		if w := "the output's cut matches top-p on the top-k-renormalised mass, not on the full softmax"; !strings.Contains(r.Violations[0], w) {
			t.Errorf("row %d: %q lacks %q", r.Row, r.Violations[0], w)
		}
	}
}
