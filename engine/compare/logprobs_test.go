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

// lpRunParams are the rows of the logprobs tests' run: no filter, top-k at
// T 0.7, a greedy row with top-p, top-p and min-p at T 1.3, T 0.5 alone, and
// a top-k of 5 (fewer tokens kept than a top-20 holds).
var lpRunParams = []rowParams{
	{temp: 1, Filter: ref.NoFilter()},
	{temp: 0.7, Filter: ref.Filter{TopK: 50, TopP: 1}},
	{temp: 0, Filter: ref.Filter{TopP: 0.9}},
	{temp: 1.3, Filter: ref.Filter{TopP: 0.9, MinP: 0.05}},
	{temp: 0.5, Filter: ref.NoFilter()},
	{temp: 1, Filter: ref.Filter{TopK: 5, TopP: 1}},
}

// lpRun returns a renorm run of bf16 logits over lpRunParams, with one
// token of row 4 far below the rest (its probability underflows float32).
func lpRun(rng *rand.Rand) *engine.Run {
	run := logitsRun(rng, engine.OpRenorm, engine.BF16, len(lpRunParams), 3000, 3, lpRunParams...)
	run.Logits.SetFloat(4*3000+7, -120)
	return run
}

// lpKeep returns which tokens of row r the reference of kind k keeps (its
// own decision at boundary tokens), native or strict.
func lpKeep(run *engine.Run, r int, k engine.LogprobsKind, native bool) []bool {
	v := run.Vocab()
	keep := make([]bool, v)
	x := ref.RowLogits(run, r)
	if k == engine.LogprobsRaw {
		for i := range keep {
			keep[i] = !math.IsInf(run.Logits.Float(r*v+i), -1)
		}
		return keep
	}
	eps := ref.BoundaryEps(TolerancesFor(run.InputDType(), engine.F32, Options{}).Strict.Rtol)
	d := ref.Compute(x, ref.LogprobsTemperature(run, r, k), ref.RowFilter(run, r, eps), native)
	for i, p := range d.Probs {
		keep[i] = p > 0 || d.Class[i] == ref.Kept && !math.IsInf(run.Logits.Float(r*v+i), -1)
	}
	return keep
}

// f32LogSoftmax computes a row of logprobs as a float32 kernel does (vLLM:
// logits.float() / T, masked, log_softmax): z = float32(x)/float32(t), or
// the logits scaled in their dtype when native, m its maximum, the exps
// summed in float32 in sequence, out = (z - m) - log Σ; -inf where keep is
// false.
func f32LogSoftmax(x []float64, t float64, keep []bool, native engine.DType) []float64 {
	z := make([]float32, len(x))
	m := float32(math.Inf(-1))
	for i, xi := range x {
		z[i] = float32(xi) / float32(t)
		if native != engine.DTypeInvalid {
			z[i] = float32(engine.RoundToDType(float64(z[i]), native))
		}
		if keep[i] {
			m = max(m, z[i])
		}
	}
	var s float32
	for i := range z {
		if keep[i] {
			s += float32(math.Exp(float64(z[i] - m)))
		}
	}
	logS := float32(math.Log(float64(s)))
	out := make([]float64, len(x))
	for i := range z {
		out[i] = math.Inf(-1)
		if keep[i] {
			out[i] = float64((z[i] - m) - logS)
		}
	}
	return out
}

// lpRows returns every row's logprobs of kind k as a float32 kernel makes
// them, through f, which may change a row's logits, temperature and kept
// tokens first (nil: as they are).
func lpRows(run *engine.Run, k engine.LogprobsKind, native bool, f func(r int, x []float64, t *float64, keep []bool)) [][]float64 {
	v := run.Vocab()
	rows := make([][]float64, run.Rows())
	for r := range rows {
		x := make([]float64, v)
		run.Logits.Floats64(r*v, x)
		t := ref.LogprobsTemperature(run, r, k)
		keep := lpKeep(run, r, k, native && t != 1)
		if f != nil {
			f(r, x, &t, keep)
		}
		var nd engine.DType
		if native && t != 1 {
			nd = run.Logits.DType
		}
		rows[r] = f32LogSoftmax(x, t, keep, nd)
	}
	return rows
}

// fullOutput packages rows as a [B, V] logprobs output of dtype.
func fullOutput(name string, k engine.LogprobsKind, dtype engine.DType, rows [][]float64) *engine.Output {
	flat := slices.Concat(rows...)
	return &engine.Output{Name: name, External: true, LogprobsKind: k,
		Logprobs: engine.FromFloat64s("logprobs", dtype, []int{len(rows), len(rows[0])}, flat)}
}

// topOutput packages the n greatest of each row, most probable first (ties
// by lower index), as a top-N output.
func topOutput(name string, k engine.LogprobsKind, n int, rows [][]float64, edit func(r int, ids []int64, vals []float64)) *engine.Output {
	var ids []int64
	var vals []float64
	for r, row := range rows {
		order := make([]int64, len(row))
		for i := range order {
			order[i] = int64(i)
		}
		slices.SortStableFunc(order, func(a, b int64) int {
			switch {
			case row[a] > row[b]:
				return -1
			case row[a] < row[b]:
				return 1
			}
			return 0
		})
		ri, rv := order[:n], make([]float64, n)
		for j, id := range ri {
			rv[j] = row[id]
		}
		if edit != nil {
			edit(r, ri, rv)
		}
		ids, vals = append(ids, ri...), append(vals, rv...)
	}
	return &engine.Output{Name: name, External: true, LogprobsKind: k,
		Logprobs:        engine.FromFloat64s("logprobs", engine.F32, []int{len(rows), n}, vals),
		LogprobTokenIDs: engine.FromInts("logprob_token_ids", engine.I64, []int{len(rows), n}, ids)}
}

// rowRules returns the rules of a row's violations, sorted and distinct.
func rowRules(r engine.RowReport) []engine.Rule {
	var rules []engine.Rule
	for _, f := range r.Findings {
		if f.Severity == engine.Violation && !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	slices.Sort(rules)
	return rules
}

// notedRules returns the rules of a row's notes, sorted and distinct.
func notedRules(r engine.RowReport) []engine.Rule {
	var rules []engine.Rule
	for _, f := range r.Findings {
		if f.Severity == engine.Note && !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	slices.Sort(rules)
	return rules
}

// rankedToken returns the token of rank k (0: most probable) of a row by
// value, ties by lower index.
func rankedToken(row []float64, k int) int {
	order := make([]int, len(row))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case row[a] > row[b]:
			return -1
		case row[a] < row[b]:
			return 1
		}
		return 0
	})
	return order[k]
}

func TestLogprobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 25))
	run := lpRun(rng)
	raw, proc := engine.LogprobsRaw, engine.LogprobsProcessed
	sup, tol, top := engine.RuleSupport, engine.RuleTolerance, engine.RuleTopN
	type rules = []engine.Rule
	tests := []struct {
		name  string
		out   func() *engine.Output
		fail  map[int]rules
		notes map[int]rules // rows' notes, exactly (rows not named: none)
		// matched lists the rows that matched the native reference.
		native []int
		// outNote is a word of an output note (the other kind).
		outNote string
	}{
		{name: "raw, every token, float32",
			out: func() *engine.Output { return fullOutput("raw", raw, engine.F32, lpRows(run, raw, false, nil)) }},
		{name: "processed, every token, float32",
			out: func() *engine.Output { return fullOutput("proc", proc, engine.F32, lpRows(run, proc, false, nil)) }},
		{name: "processed, rounded to bf16",
			out: func() *engine.Output { return fullOutput("proc", proc, engine.BF16, lpRows(run, proc, false, nil)) }},
		{name: "processed, float64 storage",
			out: func() *engine.Output { return fullOutput("proc", proc, engine.F64, lpRows(run, proc, false, nil)) }},
		{name: "processed, the kernel's log Σ exp off by 5e-5",
			out: func() *engine.Output {
				rows := lpRows(run, proc, false, nil)
				for _, row := range rows {
					for i := range row {
						row[i] -= 5e-5
					}
				}
				return fullOutput("proc", proc, engine.F32, rows)
			}},
		{name: "processed, scaled in bf16 (native)",
			out:    func() *engine.Output { return fullOutput("proc", proc, engine.F32, lpRows(run, proc, true, nil)) },
			native: []int{1, 3}}, // row 4's T = 0.5 scales exactly
		{name: "processed, top-20 (fewer kept in row 5)",
			out: func() *engine.Output { return topOutput("top", proc, 20, lpRows(run, proc, false, nil), nil) }},
		{name: "raw, top-5",
			out: func() *engine.Output { return topOutput("top", raw, 5, lpRows(run, raw, false, nil), nil) }},
		{name: "log(softmax): -inf where float32 probabilities underflow",
			out: func() *engine.Output {
				rows := lpRows(run, raw, false, nil)
				for _, row := range rows {
					for i, l := range row {
						if l < logUnderflow {
							row[i] = math.Inf(-1)
						}
					}
				}
				return fullOutput("raw", raw, engine.F32, rows)
			},
			notes: map[int]rules{4: {sup}}},

		{name: "a wrong temperature (5% high)",
			out: func() *engine.Output {
				return fullOutput("proc", proc, engine.F32, lpRows(run, proc, false, func(_ int, _ []float64, t *float64, _ []bool) { *t *= 1.05 }))
			},
			fail: map[int]rules{0: {tol}, 1: {tol}, 2: {tol}, 3: {tol}, 4: {tol}, 5: {tol}}},
		{name: "a missing renormalisation",
			out: func() *engine.Output {
				rows := lpRows(run, proc, false, nil)
				for r, row := range rows {
					x := make([]float64, run.Vocab())
					run.Logits.Floats64(r*run.Vocab(), x)
					all := f32LogSoftmax(x, ref.LogprobsTemperature(run, r, proc), lpKeep(run, r, raw, false), engine.DTypeInvalid)
					for i := range row {
						if !math.IsInf(row[i], -1) {
							row[i] = all[i] // log of the unfiltered probability
						}
					}
				}
				return fullOutput("proc", proc, engine.F32, rows)
			},
			fail:  map[int]rules{1: {tol}, 2: {tol}, 3: {tol}, 5: {tol}},
			notes: map[int]rules{1: {engine.RuleRowSum}, 2: {engine.RuleRowSum}, 3: {engine.RuleRowSum}, 5: {engine.RuleRowSum}}},
		{name: "one logit one bf16 ulp off",
			out: func() *engine.Output {
				return fullOutput("raw", raw, engine.F32, lpRows(run, raw, false, func(r int, x []float64, _ *float64, _ []bool) {
					if r != 3 {
						return
					}
					for i, xi := range x {
						if a := math.Abs(xi); a >= 1 && a < 4 {
							x[i] = xi + math.Ldexp(1, math.Ilogb(a)-7) // one ulp of bf16
							return
						}
					}
				}))
			},
			fail: map[int]rules{3: {tol}}},
		{name: "two tokens' values swapped",
			out: func() *engine.Output {
				rows := lpRows(run, proc, false, nil)
				a, b := rankedToken(rows[1], 0), rankedToken(rows[1], 9)
				rows[1][a], rows[1][b] = rows[1][b], rows[1][a]
				return fullOutput("proc", proc, engine.F32, rows)
			},
			fail: map[int]rules{1: {tol}}},
		{name: "raw logprobs judged as processed",
			out: func() *engine.Output {
				o := fullOutput("raw", raw, engine.F32, lpRows(run, raw, false, nil))
				o.LogprobsKind = proc
				return o
			},
			fail:    map[int]rules{1: {sup, tol}, 2: {sup, tol}, 3: {sup, tol}, 4: {tol}, 5: {sup, tol}},
			outNote: "every one of them passes as raw logprobs"},
		{name: "processed logprobs judged as raw",
			out: func() *engine.Output {
				o := fullOutput("proc", proc, engine.F32, lpRows(run, proc, false, nil))
				o.LogprobsKind = raw
				return o
			},
			fail:    map[int]rules{1: {sup, tol}, 2: {sup, tol}, 3: {sup, tol}, 4: {tol}, 5: {sup, tol}},
			outNote: "every one of them passes as processed logprobs"},
		{name: "-inf at a token the reference keeps",
			out: func() *engine.Output {
				rows := lpRows(run, proc, false, nil)
				rows[0][rankedToken(rows[0], 3)] = math.Inf(-1)
				return fullOutput("proc", proc, engine.F32, rows)
			},
			fail: map[int]rules{0: {sup}}},
		{name: "a finite logprob at a token top-k drops",
			out: func() *engine.Output {
				rows := lpRows(run, proc, false, nil)
				rows[5][rankedToken(rows[5], 100)] = -9
				return fullOutput("proc", proc, engine.F32, rows)
			},
			fail: map[int]rules{5: {sup}}},
		{name: "NaN and +Inf",
			out: func() *engine.Output {
				rows := lpRows(run, raw, false, nil)
				rows[0][11], rows[2][12] = math.NaN(), math.Inf(1)
				return fullOutput("raw", raw, engine.F32, rows)
			},
			fail: map[int]rules{0: {engine.RuleNaN}, 2: {engine.RuleInf}}},

		{name: "top-20 holding a token ranked 40th",
			out: func() *engine.Output {
				rows := lpRows(run, proc, false, nil)
				return topOutput("top", proc, 20, rows, func(r int, ids []int64, vals []float64) {
					if r == 1 {
						t := rankedToken(rows[1], 39)
						ids[19], vals[19] = int64(t), rows[1][t]
					}
				})
			},
			fail: map[int]rules{1: {top}}},
		{name: "top-20 not sorted",
			out: func() *engine.Output {
				return topOutput("top", proc, 20, lpRows(run, proc, false, nil), func(r int, ids []int64, vals []float64) {
					if r == 0 {
						ids[0], ids[4], vals[0], vals[4] = ids[4], ids[0], vals[4], vals[0]
					}
				})
			},
			fail: map[int]rules{0: {top}}},
		{name: "top-20 naming a token twice",
			out: func() *engine.Output {
				return topOutput("top", proc, 20, lpRows(run, proc, false, nil), func(r int, ids []int64, vals []float64) {
					if r == 4 {
						ids[6], vals[6] = ids[5], vals[5]
					}
				})
			},
			fail: map[int]rules{4: {top}}},
		{name: "top-5 at a temperature off",
			out: func() *engine.Output {
				return topOutput("top", proc, 5, lpRows(run, proc, false, func(_ int, _ []float64, t *float64, _ []bool) { *t *= 1.05 }), nil)
			},
			fail: map[int]rules{0: {tol}, 1: {tol}, 2: {tol}, 3: {tol}, 4: {tol}, 5: {tol}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := judgeRun(t, run, tt.out())
			o := rep.Outputs[0]
			if o.Kind != "logprobs" || o.Logprobs == nil {
				t.Fatalf("kind %q, logprobs %+v (notes %q)", o.Kind, o.Logprobs, o.Notes)
			}
			for _, r := range o.Rows {
				if got, want := rowRules(r), tt.fail[r.Row]; !slices.Equal(got, want) {
					t.Errorf("row %d fails for %v, want %v: %q", r.Row, got, want, r.Violations)
				}
				if got, want := notedRules(r), tt.notes[r.Row]; !slices.Equal(got, want) && tt.fail[r.Row] == nil {
					t.Errorf("row %d noted %v, want %v: %+v", r.Row, got, want, r.Findings)
				}
				if r.Pass && (r.Matched == "native") != slices.Contains(tt.native, r.Row) {
					t.Errorf("row %d matched %q, want native %t", r.Row, r.Matched, slices.Contains(tt.native, r.Row))
				}
				for _, f := range r.Findings {
					if !strings.HasPrefix(f.Message, "row ") {
						t.Errorf("row %d: finding %q does not start with the row", r.Row, f.Message)
					}
				}
			}
			if o.Pass != (len(tt.fail) == 0) {
				t.Errorf("output pass %t, want %t", o.Pass, len(tt.fail) == 0)
			}
			if tt.outNote != "" && !slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, tt.outNote) }) {
				t.Errorf("notes %q lack %q", o.Notes, tt.outNote)
			}
			if tt.outNote == "" && slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, "passes as") }) {
				t.Errorf("unexpected kind note: %q", o.Notes)
			}
		})
	}
}

// TestLogprobsDrift checks the drift statistics of a logprobs output: per
// row and over the run, the elements, the worst token, the row sum, KL and
// TV of every token's logprobs, and the mode table and agreement between
// two outputs of every token's.
func TestLogprobsDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 26))
	run := lpRun(rng)
	v := run.Vocab()
	good := lpRows(run, engine.LogprobsRaw, false, nil)
	bad := lpRows(run, engine.LogprobsRaw, false, nil)
	// One token of row 2 off by 0.25: the first from 17 on that logitsRun
	// did not mask (-inf plus 0.25 is still -inf).
	tok := 17
	for math.IsInf(bad[2][tok], -1) {
		tok++
	}
	bad[2][tok] += 0.25
	top := topOutput("logprobs@top", engine.LogprobsRaw, 8, good, nil)
	rep := judgeRun(t, run, fullOutput("logprobs@a", engine.LogprobsRaw, engine.F32, good), fullOutput("logprobs@b", engine.LogprobsRaw, engine.F32, bad), top)
	a, b, tp := rep.Outputs[0], rep.Outputs[1], rep.Outputs[2]
	if !a.Pass || b.Pass || !tp.Pass {
		t.Fatalf("pass a %t b %t top %t, want true false true", a.Pass, b.Pass, tp.Pass)
	}
	if a.Strict == nil || a.Strict.Elements != run.Rows()*v || a.Strict.Reference != "strict" {
		t.Fatalf("run drift %+v", a.Strict)
	}
	if d := b.Strict; d.Abs.Index != 2*v+tok || math.Abs(float64(d.Abs.Max)-0.25) > 1e-3 || d.Mismatched != 1 {
		t.Errorf("worst %v at %d (%d off), want 0.25 at %d", d.Abs.Max, d.Abs.Index, d.Mismatched, 2*v+tok)
	}
	row := a.Rows[0].Strict
	if row.KL > 1e-9 || row.RowSumError > 1e-4 || row.TV > 1e-4 || row.ArgmaxAgree != 1 || row.Elements != v {
		t.Errorf("row 0 drift %+v", row)
	}
	if tr := tp.Rows[0].Strict; tr.Elements != 8 || tr.KL != 0 || tr.ArgmaxAgree != 1 {
		t.Errorf("top-8 row 0 drift %+v", tr)
	}
	if tp.Logprobs == nil || tp.Logprobs.TopN != 8 || tp.Logprobs.Kind != engine.LogprobsRaw {
		t.Errorf("top-8 info %+v", tp.Logprobs)
	}
	if len(rep.Modes) != 1 || rep.Modes[0].Metric != "logprob" || len(rep.Modes[0].Lines) != 3 {
		t.Fatalf("modes %+v", rep.Modes)
	}
	if len(rep.Agreement) != 1 || rep.Agreement[0].A != "logprobs@a" || rep.Agreement[0].B != "logprobs@b" ||
		rep.Agreement[0].Agree != run.Rows()-1 || !strings.Contains(rep.Agreement[0].Message, "log probabilities") {
		t.Errorf("agreement %+v", rep.Agreement)
	}
}

// TestLogprobsTopNCut checks a top-N against ties and near-ties at its cut:
// any of the tokens tied with the N-th may stand in for another, but not a
// token clearly below it.
func TestLogprobsTopNCut(t *testing.T) {
	const v = 64
	x := make([]float64, v)
	for i := range x {
		x[i] = -float64(i) / 4 // token 0 most probable
	}
	x[3], x[40] = x[2], x[2] // tokens 2, 3 and 40 tie for ranks 3 to 5
	run := &engine.Run{Source: "test", Op: engine.OpSoftmax, Logits: engine.FromFloat64s("logits", engine.F32, []int{1, v}, x)}
	run.Params = engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}, Seed: []uint64{0}, Offset: []uint64{0}}
	l := make([]float64, v)
	keep := make([]bool, v)
	for i := range keep {
		keep[i] = true
	}
	l = f32LogSoftmax(x, 1, keep, engine.DTypeInvalid)
	tests := []struct {
		name string
		ids  []int64
		pass bool
	}{
		{"the lowest indices of the tie", []int64{0, 1, 2, 3}, true},
		{"another of the tie", []int64{0, 1, 40, 2}, true},
		{"a token below the tie", []int64{0, 1, 2, 4}, false},
		{"the tie, but not the most probable", []int64{1, 2, 3, 40}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := make([]float64, len(tt.ids))
			for k, id := range tt.ids {
				vals[k] = l[id]
			}
			o := &engine.Output{Name: "top", External: true, LogprobsKind: engine.LogprobsRaw,
				Logprobs:        engine.FromFloat64s("logprobs", engine.F32, []int{1, len(vals)}, vals),
				LogprobTokenIDs: engine.FromInts("logprob_token_ids", engine.I32, []int{1, len(vals)}, tt.ids)}
			rep := judgeRun(t, run, o)
			if got := rep.Outputs[0].Pass; got != tt.pass {
				t.Errorf("pass %t, want %t: %q", got, tt.pass, rep.Outputs[0].Rows[0].Violations)
			}
		})
	}
}

func TestLogprobTolerances(t *testing.T) {
	tests := []struct {
		out  engine.DType
		o    Options
		want engine.Tolerance
	}{
		{engine.F32, Options{}, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-23}},
		{engine.F64, Options{}, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-23}},
		{engine.BF16, Options{}, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-7}},
		{engine.F16, Options{}, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-10}},
		{engine.F32, Options{Strict: &engine.Tolerance{Atol: 1e-3, Rtol: -1}}, engine.Tolerance{Atol: 1e-3, Rtol: 0x1p-23}},
	}
	for _, tt := range tests {
		got := LogprobTolerancesFor(tt.out, tt.o)
		if got.Strict != tt.want || got.PValue != DefaultPValue {
			t.Errorf("%s %+v: got %+v, want strict %+v", tt.out, tt.o, got, tt.want)
		}
	}
}

// TestLogprobsCannotJudge checks outputs a judge refuses with a note rather
// than a panic, as built by hand (a dump never holds them: engine/dump
// refuses them first).
func TestLogprobsCannotJudge(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 27))
	run := lpRun(rng)
	b, v := run.Rows(), run.Vocab()
	tests := []struct {
		name string
		out  *engine.Output
		word string
	}{
		{"a top-N without ids", &engine.Output{Name: "x", Logprobs: engine.NewTensor("logprobs", engine.F32, b, 3)}, "want [6, 3000]"},
		{"ids of another shape", &engine.Output{Name: "x", Logprobs: engine.NewTensor("logprobs", engine.F32, b, 3), LogprobTokenIDs: engine.NewTensor("logprob_token_ids", engine.I32, b, 4)}, "logprob_token_ids have"},
		{"integer logprobs", &engine.Output{Name: "x", Logprobs: engine.NewTensor("logprobs", engine.I32, b, v)}, "want a float dtype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Judge(context.Background(), run, []*engine.Output{tt.out}, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Outputs[0]
			if o.Pass || len(o.Rows) != 0 || !slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, tt.word) }) {
				t.Errorf("pass %t, %d rows, notes %q; want a failure noting %q", o.Pass, len(o.Rows), o.Notes, tt.word)
			}
		})
	}
}
