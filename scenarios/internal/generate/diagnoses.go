package generate

import (
	"fmt"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// samplerDiagnoses is a sample batch drawn by eight samplers, each a named
// output (samples@NAME): a correct one, and one for each class of bug that
// TokenSpeed #280's review found, each shown on the row built for it (its
// other rows are drawn correctly). Every faulty output fails exactly that
// row, and the judge names the class (docs/SEMANTICS.md "Diagnoses"):
//
//	row 0: three tied tokens (T 1)            tie_collapse
//	row 1: top-k 30 and top-p 0.8 (T 1)       top_p_full_mass
//	row 2: T 0.7                              temperature_twice, argmax_fallback
//	row 3: T 0.7 and top-p 0.9                temperature_after_filters
//	row 4: min-p 0.05                         (the value of the pool)
//	row 5: no filter (T 1)                    min_p_pool, min_p_clamp
func samplerDiagnoses() (*scenario, error) {
	const rows, vocab, draws = 6, 2000, 10000
	tied := []int{100, 517, 1304}
	rng := newRand(2626)
	x := rounded(normals(rng, rows*vocab, 2.5), engine.F32)
	top := slices.Max(x[:vocab]) - 0.5
	for _, t := range tied {
		x[t] = top
	}
	params := []samplertest.Params{
		{Temperature: 1, TopP: 1},
		{Temperature: 1, TopK: 30, TopP: 0.8},
		{Temperature: 0.7, TopP: 1},
		{Temperature: 0.7, TopP: 0.9},
		{Temperature: 1, TopP: 1, MinP: 0.05},
		{Temperature: 1, TopP: 1},
	}
	row := func(r int) []float64 { return x[r*vocab : (r+1)*vocab] }
	// The margins the design rests on: each fault changes what its row keeps.
	kept := func(r int, s samplertest.Sampler) int {
		n := 0
		for _, v := range s.Law(row(r), params[r]) {
			if v > 0 {
				n++
			}
		}
		return n
	}
	for _, m := range []struct {
		r int
		s samplertest.Sampler
	}{
		{1, samplertest.Sampler{Mistake: samplertest.JointOrder}},
		{3, samplertest.Sampler{Mistake: samplertest.TemperatureAfterTopP}},
		{5, samplertest.Sampler{Mistake: samplertest.MinPPool, Bias: 0.05}},
		{5, samplertest.Sampler{Mistake: samplertest.MinPClamped, Bias: 0.002}},
	} {
		if a, b := kept(m.r, m.s), kept(m.r, samplertest.Sampler{}); a == b {
			return nil, fmt.Errorf("sampler-diagnoses: mistake %d keeps %d tokens on row %d, as the correct sampler does", m.s.Mistake, a, m.r)
		}
	}

	type output struct {
		mode  string
		row   int // the row the fault is drawn on; -1 for none
		s     samplertest.Sampler
		rule  engine.Rule
		class string
	}
	outputs := []output{ // by mode, the order of the report
		{"argmax_fallback", 2, samplertest.Sampler{Mistake: samplertest.ArgmaxFallback, Bias: 0.1}, engine.RuleFit, compare.DiagnosisArgmaxFallback},
		{"correct", -1, samplertest.Sampler{}, "", ""},
		{"min_p_clamp", 5, samplertest.Sampler{Mistake: samplertest.MinPClamped, Bias: 0.002}, engine.RuleFit, compare.DiagnosisMinPClamp},
		{"min_p_pool", 5, samplertest.Sampler{Mistake: samplertest.MinPPool, Bias: 0.05}, engine.RuleFit, compare.DiagnosisMinPPool},
		{"temperature_after_filters", 3, samplertest.Sampler{Mistake: samplertest.TemperatureAfterTopP}, engine.RuleSupport, compare.DiagnosisTemperaturePlace},
		{"temperature_twice", 2, samplertest.Sampler{Mistake: samplertest.TemperatureTwice}, engine.RuleFit, compare.DiagnosisTemperatureTwice},
		{"tie_collapse", 0, samplertest.Sampler{Mistake: samplertest.TieCollapse}, engine.RuleFit, compare.DiagnosisTieCollapse},
		{"top_p_full_mass", 1, samplertest.Sampler{Mistake: samplertest.JointOrder}, engine.RuleSupport, compare.DiagnosisTopPMass},
	}
	temp, topP, minP := make([]float64, rows), make([]float64, rows), make([]float64, rows)
	topK := make([]int64, rows)
	for r, p := range params {
		temp[r], topP[r], minP[r], topK[r] = p.Temperature, p.TopP, p.MinP, int64(p.TopK)
	}
	tensors := []*engine.Tensor{
		f64("logits", engine.F32, []int{rows, vocab}, x),
		f64("temperature", engine.F32, []int{rows}, temp),
		i64("top_k", []int{rows}, topK),
		f64("top_p", engine.F32, []int{rows}, topP),
		f64("min_p", engine.F32, []int{rows}, minP),
	}
	expect := []scenarios.OutputExpect{{Name: "cpu", Pass: true}}
	for _, o := range outputs {
		samples := make([]int64, 0, rows*draws)
		for r := range rows {
			s := samplertest.Sampler{}
			if r == o.row {
				s = o.s
			}
			samples = append(samples, s.Draw(rng, row(r), params[r], draws)...)
		}
		tensors = append(tensors, engine.FromInts("samples@"+o.mode, engine.I32, []int{rows, draws}, samples))
		e := scenarios.OutputExpect{Name: "samples@" + o.mode, Pass: o.row < 0}
		if o.row >= 0 {
			e.Failing = []scenarios.RowRules{fail(o.row, o.rule)}
			e.Diagnosed = []scenarios.ClassRows{{Class: o.class, Rows: []int{o.row}}}
		}
		expect = append(expect, e)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "sampler-diagnoses",
			Title:     "Sampler bugs, named",
			Summary:   "Seven samplers, each with one of the bugs TokenSpeed #280's review found (ties collapsed, argmax fallback, top-p on the wrong mass, temperature twice or after the filters, min-p pool, min-p clamp), and a correct one: each faulty row is named with its class and numbers.",
			Op:        engine.OpSample,
			Overrides: scenarios.Overrides{Draws: intp(draws)},
			View:      "/rows/2",
			Expect:    scenarios.Expect{Pass: false, Outputs: expect},
		},
		tensors: tensors,
	}, nil
}
