package compare

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// named returns out renamed as an external output.
func named(out *engine.Output, name string) *engine.Output {
	out.Name, out.External = name, true
	return out
}

// tokensOutput packages tokens as an external output named name.
func tokensOutput(name string, toks []int64) *engine.Output {
	return &engine.Output{Name: name, External: true, Tokens: engine.FromInts(name, engine.I64, []int{len(toks)}, toks)}
}

func TestModeTableOfProbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	run := logitsRun(rng, engine.OpSoftmax, engine.F32, 4, 300, 2)
	p := refProbs(run, false, 0)
	ours := probsOutput(run, engine.F32, p)
	ours.Name = "cpu"
	bad := slices.Clone(p)
	bad[2*300+7] += 0.01
	rep := judgeRun(t, run, ours, named(probsOutput(run, engine.F32, p), "probs@eager"), named(probsOutput(run, engine.F32, bad), "probs@graph"))
	if len(rep.Modes) != 1 {
		t.Fatalf("%d mode tables, want 1", len(rep.Modes))
	}
	mt := rep.Modes[0]
	if mt.Kind != "probs" || mt.Metric != "abs" || len(mt.Lines) != 3 {
		t.Fatalf("table %s/%s with %d lines, want probs/abs with 3", mt.Kind, mt.Metric, len(mt.Lines))
	}
	tests := []struct {
		name       string
		line       int
		pass       bool
		failed     int
		worstOther float64 // the greatest Against.Max
		worstRow   int
	}{
		{"ours", 0, true, 0, 0.01, 2},
		{"eager", 1, true, 0, 0.01, 2},
		{"graph", 2, false, 1, 0.01, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mt.Lines[tt.line]
			if l.Pass != tt.pass || l.FailedRows != tt.failed || l.Rows != 4 {
				t.Errorf("pass %t, %d of %d rows failed; want %t, %d of 4", l.Pass, l.FailedRows, l.Rows, tt.pass, tt.failed)
			}
			if l.Mean == nil || l.P99 == nil || l.Max == nil {
				t.Fatal("no mean, P99 or max")
			}
			if len(l.Against) != 2 {
				t.Fatalf("%d columns against others, want 2", len(l.Against))
			}
			worst := slices.MaxFunc(l.Against, func(a, b engine.ModeDiff) int { return cmpF(*a.Max, *b.Max) })
			if math.Abs(float64(*worst.Max)-tt.worstOther) > 1e-6 || worst.Row != tt.worstRow {
				t.Errorf("greatest difference %v at row %d, want %g at row %d", *worst.Max, worst.Row, tt.worstOther, tt.worstRow)
			}
		})
	}
	var drift *engine.Agreement
	for i, a := range rep.Agreement {
		if a.A == "probs@eager" && a.B == "probs@graph" {
			drift = &rep.Agreement[i]
		}
	}
	if drift == nil || drift.Rule != "drift" || drift.Agree != 3 || drift.MaxRow != 2 || drift.MaxToken != 7 {
		t.Errorf("eager against graph: %+v, want drift identical on 3 rows, greatest at row 2 token 7", drift)
	}
}

func cmpF(a, b engine.Float) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestSameDrawsAgreement(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2))
	const rows, vocab = 6, 50
	run := logitsRun(rng, engine.OpSample, engine.F32, rows, vocab, 1)
	base := make([]int64, rows)
	for r := range base {
		base[r] = int64(ref.Argmax(run, r).Tokens[0])
	}
	other := slices.Clone(base)
	other[1], other[3] = (base[1]+1)%vocab, (base[3]+1)%vocab
	seeds := func(offset3 uint64) *engine.DeclaredSeeds {
		d := &engine.DeclaredSeeds{Seed: make([]uint64, rows), Offset: make([]uint64, rows)}
		for r := range rows {
			d.Seed[r] = uint64(100 + r)
		}
		d.Offset[3] = offset3
		return d
	}
	eager, graph, rank1, free := tokensOutput("tokens@eager", base), tokensOutput("tokens@graph", other), tokensOutput("tokens@rank1", other), tokensOutput("tokens@free", other)
	eager.Declared, graph.Declared, rank1.Declared = seeds(0), seeds(0), seeds(5)
	rep := judgeRun(t, run, eager, graph, rank1, free)
	tests := []struct {
		name    string
		out     int
		failing []int
	}{
		{"the first of its seeds", 0, nil},
		{"same seeds, parts on two rows", 1, []int{1, 3}},
		{"another offset on row 3", 2, []int{1}},
		{"no declared seed", 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := rep.Outputs[tt.out]
			var got []int
			for _, r := range o.Rows {
				if hasRule(r, engine.RuleAgreement) {
					got = append(got, r.Row)
				}
			}
			if !slices.Equal(got, tt.failing) {
				t.Errorf("rows failing agreement %v, want %v", got, tt.failing)
			}
		})
	}
	want := map[[2]string]struct {
		rule                      string
		compared, agree, firstRow int
		pass                      bool
	}{
		{"tokens@eager", "tokens@graph"}: {"same_draws", 6, 4, 1, false},
		{"tokens@eager", "tokens@rank1"}: {"same_draws", 5, 4, 1, false},
		{"tokens@graph", "tokens@rank1"}: {"same_draws", 5, 5, -1, true},
		{"tokens@eager", "tokens@free"}:  {"draws", 6, 4, 1, true},
	}
	for _, a := range rep.Agreement {
		w, ok := want[[2]string{a.A, a.B}]
		if !ok {
			continue
		}
		if a.Rule != w.rule || a.Compared != w.compared || a.Agree != w.agree || a.FirstRow != w.firstRow || a.Pass != w.pass {
			t.Errorf("%s and %s: %s, %d of %d agree, first part row %d, pass %t; want %s, %d of %d, row %d, %t (%s)",
				a.A, a.B, a.Rule, a.Agree, a.Compared, a.FirstRow, a.Pass, w.rule, w.agree, w.compared, w.firstRow, w.pass, a.Message)
		}
	}
}

func TestArgmaxFlips(t *testing.T) {
	const rows, vocab = 4, 20
	x := make([]float64, rows*vocab)
	for i := range x {
		x[i] = float64(i%vocab) / 10 // token 19 on top, 18 next, 0.1 below
	}
	x[1*vocab+18] = 1.9 - 1e-6 // row 1: a near-tie within F32's tolerance
	run := &engine.Run{Source: "test", Op: engine.OpArgmax, Logits: engine.FromFloat64s("logits", engine.F32, []int{rows, vocab}, x)}
	a := tokensOutput("tokens@a", []int64{19, 19, 19, 19})
	b := tokensOutput("tokens@b", []int64{19, 18, 19, 3})
	rep := judgeRun(t, run, a, b)
	if len(rep.Agreement) != 1 {
		t.Fatalf("%d agreements, want 1", len(rep.Agreement))
	}
	ag := rep.Agreement[0]
	if ag.Rule != "argmax" || ag.Agree != 2 || len(ag.Flips) != 2 || ag.Pass {
		t.Fatalf("%+v, want argmax with 2 agreeing rows, 2 flips, failing", ag)
	}
	if f := ag.Flips[0]; f.Row != 1 || !f.Fragile || f.Token != 18 || f.RefToken != 19 {
		t.Errorf("first flip %+v, want row 1 fragile 19 -> 18", f)
	}
	if f := ag.Flips[1]; f.Row != 3 || f.Fragile || math.Abs(float64(f.Margin)-1.6) > 1e-6 {
		t.Errorf("second flip %+v, want row 3 real with margin 1.6", f)
	}
}

// gateRun builds a logits_gate run of golden f32 logits.
func gateRun(rows, vocab int, golden []float64) *engine.Run {
	run := &engine.Run{Source: "test", Op: engine.OpLogitsGate, Logits: engine.FromFloat64s("logits", engine.F32, []int{rows, vocab}, golden)}
	run.Params.Temperature = make([]float64, rows)
	for r := range rows {
		run.Params.Temperature[r] = 1
	}
	return run
}

func TestLogitsGate(t *testing.T) {
	const rows, vocab = 6, 40
	rng := rand.New(rand.NewPCG(23, 3))
	golden := make([]float64, rows*vocab)
	for i := range golden {
		golden[i] = float64(float32(rng.NormFloat64()))
		if i%vocab == 5 {
			golden[i] = 10 // the winner of every row
		}
	}
	golden[2*vocab+6] = 9.95 // row 2: a near-tie
	golden[4*vocab+9] = math.Inf(-1)
	engineLogits := slices.Clone(golden)
	engineLogits[2*vocab+6] = 10.0625 // a fragile flip: 0.05 below in the golden, 0.16 allowed
	engineLogits[3*vocab+7] = 11      // a real flip
	engineLogits[4*vocab+9] = 0       // the golden masks token 9 of row 4
	engineLogits[5*vocab+1] = math.NaN()
	run := gateRun(rows, vocab, golden)
	out := &engine.Output{Name: "logits@engine", External: true, Logits: engine.FromFloat64s("logits@engine", engine.BF16, []int{rows, vocab}, engineLogits)}
	rep := judgeRun(t, run, out)
	o := rep.Outputs[0]
	if o.Kind != "logits" || o.Gate == nil {
		t.Fatalf("kind %q, gate %v", o.Kind, o.Gate)
	}
	tests := []struct {
		name  string
		row   int
		pass  bool
		rules []engine.Rule
		flip  string // "", "fragile", "real"
	}{
		{"rounding only", 0, true, nil, ""},
		{"fragile flip", 2, true, nil, "fragile"},
		{"real flip", 3, false, []engine.Rule{engine.RuleTolerance, engine.RuleToken}, "real"},
		{"a masked token kept", 4, false, []engine.Rule{engine.RuleSupport}, ""},
		{"NaN", 5, false, []engine.Rule{engine.RuleNaN}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := o.Rows[tt.row]
			if r.Pass != tt.pass {
				t.Errorf("pass %t, want %t: %q", r.Pass, tt.pass, r.Violations)
			}
			for _, rule := range tt.rules {
				if !hasRule(r, rule) {
					t.Errorf("no %s violation in %q", rule, r.Violations)
				}
			}
			switch {
			case tt.flip == "" && r.Flip != nil:
				t.Errorf("flip %+v, want none", r.Flip)
			case tt.flip != "" && (r.Flip == nil || r.Flip.Fragile != (tt.flip == "fragile")):
				t.Errorf("flip %+v, want a %s one", r.Flip, tt.flip)
			}
		})
	}
	if o.Gate.Real != 1 || o.Gate.Fragile != 1 || len(o.Gate.Flips) != 2 {
		t.Errorf("gate %+v, want 1 real and 1 fragile flip", o.Gate)
	}
	if d := o.Rows[0].Strict; d == nil || d.KL > 1e-3 || d.Abs.Max > 0.1 {
		t.Errorf("row 0 drift %+v, want bf16 rounding only", d)
	}
}

func TestPaddedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 4))
	const rows, vocab = 6, 30
	run := logitsRun(rng, engine.OpArgmax, engine.F32, rows, vocab, 2)
	run.Params.ValidRows = 4
	right := make([]int64, rows)
	for r := range rows {
		right[r] = int64(4 * r) // a clear winner of its own on every row
		run.Logits.SetFloat(r*vocab+4*r, 20)
	}
	filled := slices.Clone(right)
	filled[4], filled[5] = -1, -1
	written := slices.Clone(filled)
	written[5] = 3
	shifted := slices.Clone(filled)
	for r := 1; r < 4; r++ {
		shifted[r] = right[r-1]
	}
	rep := judgeRun(t, run, tokensOutput("tokens@filled", filled), tokensOutput("tokens@written", written), tokensOutput("tokens@shifted", shifted), &engine.Output{Name: "cpu", Tokens: engine.FromInts("t", engine.I64, []int{rows}, right)})
	if !slices.Equal(rep.Padding, []int{4, 5}) {
		t.Errorf("padding %v, want [4 5]", rep.Padding)
	}
	tests := []struct {
		name    string
		out     int
		failing map[int][]engine.Rule
	}{
		{"fill kept", 0, nil},
		{"a padded lane written", 1, map[int][]engine.Rule{5: {engine.RulePadding}}},
		{"real rows shifted", 2, map[int][]engine.Rule{1: {engine.RulePadding, engine.RuleToken}, 2: {engine.RulePadding, engine.RuleToken}, 3: {engine.RulePadding, engine.RuleToken}}},
		{"ours: padded rows not judged", 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := rep.Outputs[tt.out]
			for _, r := range o.Rows {
				if r.Padding != (r.Row >= 4) {
					t.Errorf("row %d: padding %t", r.Row, r.Padding)
				}
				want := tt.failing[r.Row]
				if r.Pass != (len(want) == 0) {
					t.Errorf("row %d: pass %t, want failing for %v: %q", r.Row, r.Pass, want, r.Violations)
				}
				for _, rule := range want {
					if !hasRule(r, rule) {
						t.Errorf("row %d: no %s violation in %q", r.Row, rule, r.Violations)
					}
				}
			}
		})
	}
}
