package compare

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// torchSoftmax simulates PyTorch's softmax of one row in float32: scale by
// 1/T (rounding the scaled logits to scaledDType, as a division in the input
// dtype does, unless it is F32), subtract the max, exp rounded to float32, a
// sequential-but-pairwise sum (blocks of 1024 in order, then a pairwise tree
// of the block sums, as a GPU reduction does), divide.
func torchSoftmax(x []float32, t float32, scaledDType engine.DType) []float64 {
	z := make([]float32, len(x))
	m := float32(math.Inf(-1))
	for i, v := range x {
		z[i] = float32(engine.RoundToDType(float64(v/t), scaledDType))
		m = max(m, z[i])
	}
	e := make([]float32, len(x))
	for i, v := range z {
		e[i] = float32(math.Exp(float64(v - m)))
	}
	var blocks []float32
	for i := 0; i < len(e); i += 1024 {
		var s float32
		for _, v := range e[i:min(i+1024, len(e))] {
			s += v
		}
		blocks = append(blocks, s)
	}
	for len(blocks) > 1 {
		var next []float32
		for i := 0; i < len(blocks); i += 2 {
			if i+1 < len(blocks) {
				next = append(next, blocks[i]+blocks[i+1])
			} else {
				next = append(next, blocks[i])
			}
		}
		blocks = next
	}
	p := make([]float64, len(x))
	for i, v := range e {
		p[i] = float64(v / blocks[0])
	}
	return p
}

func TestCorrectOutputsPass(t *testing.T) {
	filters := []rowParams{
		{temp: 1, Filter: ref.Filter{TopK: 50, TopP: 1}},
		{temp: 0.7, Filter: ref.Filter{TopP: 0.9}},
		{temp: 1.3, Filter: ref.Filter{TopK: 200, TopP: 0.8, MinP: 0.02}},
		{temp: 0, Filter: ref.Filter{TopP: 1}},
		{temp: 1e-3, Filter: ref.Filter{TopK: 20, TopP: 0.95, Order: engine.Joint, Ties: engine.TiesLowestIndex}},
	}
	tests := []struct {
		name    string
		op      engine.Op
		in, out engine.DType
		v       int
		params  []rowParams
		// make builds the output's values for the run.
		make func(run *engine.Run) []float64
		// matched is the reference every row must match ("" for either).
		matched string
		// sigma is the spread of the logits (0: 3).
		sigma float64
	}{
		{
			name: "strict reference rounded to f32, bf16 logits, 128256 tokens",
			op:   engine.OpSoftmax, in: engine.BF16, out: engine.F32, v: 128256,
			params: []rowParams{{temp: 1}, {temp: 0.7}, {temp: 1e-3}, {temp: 1e-4}},
			make:   func(run *engine.Run) []float64 { return refProbs(run, false, 1e-6) },
		},
		{
			name: "strict reference rounded to bf16",
			op:   engine.OpSoftmax, in: engine.BF16, out: engine.BF16, v: 32000,
			params: []rowParams{{temp: 1}, {temp: 0.7}, {temp: 1e-3}},
			make:   func(run *engine.Run) []float64 { return refProbs(run, false, 1e-6) },
		},
		{
			name: "strict reference rounded to f16, f16 logits",
			op:   engine.OpSoftmax, in: engine.F16, out: engine.F16, v: 32000,
			params: []rowParams{{temp: 1}, {temp: 0.7}, {temp: 1e-3}},
			make:   func(run *engine.Run) []float64 { return refProbs(run, false, 1e-6) },
		},
		{
			name: "strict reference rounded to f32, f32 logits",
			op:   engine.OpSoftmax, in: engine.F32, out: engine.F32, v: 50000,
			params: []rowParams{{temp: 1}, {temp: 0.7}, {temp: 1e-4}},
			make:   func(run *engine.Run) []float64 { return refProbs(run, false, 1e-6) },
		},
		{
			name: "native reference rounded to bf16 at T = 1e-2",
			op:   engine.OpSoftmax, in: engine.BF16, out: engine.BF16, v: 32000,
			params: []rowParams{{temp: 1e-2}},
			make:   func(run *engine.Run) []float64 { return refProbs(run, true, 1e-6) },
		},
		{
			name: "renorm rounded to f32, bf16 logits",
			op:   engine.OpRenorm, in: engine.BF16, out: engine.F32, v: 128256, params: filters,
			make: func(run *engine.Run) []float64 { return refProbs(run, false, ref.BoundaryEps(1.6e-2)) },
		},
		{
			name: "renorm rounded to bf16, f32 logits",
			op:   engine.OpRenorm, in: engine.F32, out: engine.BF16, v: 32000, params: filters,
			make: func(run *engine.Run) []float64 { return refProbs(run, false, ref.BoundaryEps(1.6e-2)) },
		},
		{
			name: "torch softmax(logits.float() / T), bf16 logits",
			op:   engine.OpSoftmax, in: engine.BF16, out: engine.F32, v: 128256,
			params: []rowParams{{temp: 1}, {temp: 0.7}, {temp: 1e-3}, {temp: 1e-4}},
			make:   torchRows(engine.F32),
		},
		{
			name: "torch softmax(logits.float() / T), f32 logits",
			op:   engine.OpSoftmax, in: engine.F32, out: engine.F32, v: 32000,
			params: []rowParams{{temp: 1}, {temp: 0.7}, {temp: 1e-3}},
			make:   torchRows(engine.F32),
		},
		{
			name: "torch (logits_bf16 / T).softmax(-1) in bf16 matches the native reference",
			op:   engine.OpSoftmax, in: engine.BF16, out: engine.BF16, v: 32000,
			params:  []rowParams{{temp: 1e-2}, {temp: 3e-3}},
			make:    torchRows(engine.BF16),
			matched: "native",
			sigma:   0.1, // scaled logits of tens of units, where bf16 steps are coarse
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 77))
			b := len(tt.params) * 2
			for k := range tt.params {
				if tt.params[k].TopP == 0 {
					tt.params[k].TopP = 1
				}
			}
			sigma := tt.sigma
			if sigma == 0 {
				sigma = 3
			}
			run := logitsRun(rng, tt.op, tt.in, b, tt.v, sigma, tt.params...)
			rep := judgeRun(t, run, probsOutput(run, tt.out, tt.make(run)))
			o := rep.Outputs[0]
			if !o.Pass {
				for _, r := range o.Rows {
					if !r.Pass {
						t.Errorf("row %d fails: %v", r.Row, r.Violations)
					}
				}
			}
			for _, r := range o.Rows {
				if tt.matched != "" && r.Matched != tt.matched {
					t.Errorf("row %d matched %q, want %q", r.Row, r.Matched, tt.matched)
				}
			}
		})
	}
}

// torchRows returns a maker of torchSoftmax outputs whose scaled logits are
// rounded to scaled (F32: not rounded), stored in the run's input dtype.
func torchRows(scaled engine.DType) func(run *engine.Run) []float64 {
	return func(run *engine.Run) []float64 {
		if scaled == engine.F32 {
			scaled = engine.F32
		} else {
			scaled = run.Logits.DType
		}
		b, v := run.Rows(), run.Vocab()
		x := make([]float32, v)
		var out []float64
		for r := range b {
			run.Logits.Floats32(r*v, x)
			out = append(out, torchSoftmax(x, float32(run.Params.Temperature[r]), scaled)...)
		}
		return out
	}
}

func TestTorchBF16DivisionFailsTheStrictReference(t *testing.T) {
	// The native reference is what lets the bf16 torch path pass: the same
	// output against the strict reference alone must fail at T = 1e-2.
	rng := rand.New(rand.NewPCG(1, 99))
	run := logitsRun(rng, engine.OpSoftmax, engine.BF16, 4, 32000, 0.1, rowParams{temp: 1e-2})
	out := probsOutput(run, engine.BF16, torchRows(engine.BF16)(run))
	rep := judgeRun(t, run, out)
	for _, r := range rep.Outputs[0].Rows {
		if r.Strict.Mismatched == 0 {
			t.Errorf("row %d: the strict reference should see the bf16 rounding of x/T", r.Row)
		}
	}
}

// perturbation changes one row of flat probabilities p (v per row) and says
// which rule it must break.
type perturbation struct {
	name  string
	row   int
	rule  engine.Rule
	apply func(p []float64, d *ref.Dist)
}

func TestPerturbedRowsFail(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const b, v = 10, 4096
	run := logitsRun(rng, engine.OpRenorm, engine.BF16, b, v, 3,
		rowParams{temp: 0.9, Filter: ref.Filter{TopK: 64, TopP: 0.9}},
		rowParams{temp: 1, Filter: ref.Filter{TopP: 0.8, MinP: 0.01}})
	eps := ref.BoundaryEps(DefaultTolerance(engine.BF16).Rtol)
	renorm := func(p []float64) {
		s := 0.0
		for _, x := range p {
			s += x
		}
		for i := range p {
			p[i] /= s
		}
	}
	// firstWith returns the first token of the row with class c, or the most
	// probable one when want is Kept.
	firstWith := func(d *ref.Dist, c ref.Class) int {
		for i, k := range d.Class {
			if k == c && (c != ref.Kept || i != d.Argmax) {
				return i
			}
		}
		t.Fatalf("no token of class %v", c)
		return -1
	}
	perturbations := []perturbation{
		{"a NaN", 1, engine.RuleNaN, func(p []float64, d *ref.Dist) { p[5] = math.NaN() }},
		{"an Inf", 2, engine.RuleInf, func(p []float64, d *ref.Dist) { p[7] = math.Inf(1) }},
		{"one kept token dropped", 3, engine.RuleSupport, func(p []float64, d *ref.Dist) {
			p[firstWith(d, ref.Kept)] = 0
			renorm(p)
		}},
		{"one dropped token added", 5, engine.RuleSupport, func(p []float64, d *ref.Dist) {
			p[firstWith(d, ref.Dropped)] = 1e-3
			renorm(p)
		}},
		{"a biased row", 6, engine.RuleTolerance, func(p []float64, d *ref.Dist) {
			p[d.Argmax] *= 1.05
			renorm(p)
		}},
		{"a uniform row", 8, engine.RuleTolerance, func(p []float64, d *ref.Dist) {
			for i := range p {
				p[i] = 1 / float64(len(p))
			}
		}},
	}
	probs := refProbs(run, false, eps)
	want := map[int]engine.Rule{}
	for _, pt := range perturbations {
		d := ref.Renorm(run, pt.row, false, eps)
		pt.apply(probs[pt.row*v:(pt.row+1)*v], &d)
		want[pt.row] = pt.rule
	}
	for _, dtype := range []engine.DType{engine.F32, engine.BF16} {
		t.Run(dtype.String(), func(t *testing.T) {
			rep := judgeRun(t, run, probsOutput(run, dtype, probs))
			o := rep.Outputs[0]
			if o.Pass || rep.Pass {
				t.Errorf("the output passes")
			}
			wantRows := []int{1, 2, 3, 5, 6, 8}
			if got := failedRows(o); !slices.Equal(got, wantRows) {
				t.Errorf("failed rows %v, want %v", got, wantRows)
			}
			for _, r := range o.Rows {
				if rule, ok := want[r.Row]; ok && !hasRule(r, rule) {
					t.Errorf("row %d: want a %s violation, got %v", r.Row, rule, r.Violations)
				}
			}
			if o.FailedRows != len(wantRows) {
				t.Errorf("FailedRows = %d", o.FailedRows)
			}
		})
	}
}

func TestInvalidInputRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const v = 32000
	run := logitsRun(rng, engine.OpSoftmax, engine.BF16, 4, v, 3)
	run.Logits.SetFloat(3*v+17, math.NaN())
	run.Logits.SetFloat(3*v+400, math.NaN())
	for i := range v {
		run.Logits.SetFloat(v+i, math.Inf(-1))
	}
	probs := refProbs(run, false, 1e-6)
	rep := judgeRun(t, run, probsOutput(run, engine.F32, probs))
	o := rep.Outputs[0]
	if got := failedRows(o); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("failed rows %v, want [1 3]", got)
	}
	wantMsgs := map[int]string{
		1: "row 1: input logits are all -inf (every token masked)",
		3: "row 3: input logits contain NaN at 2 of 32000 tokens, first at token 17",
	}
	for _, r := range o.Rows {
		if w, ok := wantMsgs[r.Row]; ok && !slices.Equal(r.Violations, []string{w}) {
			t.Errorf("row %d: violations %q, want %q", r.Row, r.Violations, w)
		}
	}
	if o.Strict.Elements != 2*v {
		t.Errorf("run-level drift counts %d elements, want the %d of the valid rows", o.Strict.Elements, 2*v)
	}
}

func TestToleranceMessage(t *testing.T) {
	// One row of 4 tokens, f32 logits, f64 output: the strict tolerance is
	// F32's (atol 1e-5, rtol 1.3e-6), the native one F64's.
	run := &engine.Run{
		Op:     engine.OpSoftmax,
		Logits: engine.FromFloat64s("logits", engine.F32, []int{1, 4}, []float64{0, 0, 0, 0}),
		Params: engine.Params{Temperature: []float64{2}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}},
	}
	out := probsOutput(run, engine.F64, []float64{0.25, 0.2521, 0.25, 0.2479})
	rep := judgeRun(t, run, out)
	r := rep.Outputs[0].Rows[0]
	want := "row 0: 2 of 4 probabilities off (50%); greatest absolute difference 0.0021 at token 1 (allowed 1e-05 + 1.3e-06·|ref| = 1e-05) (against the native reference: 2 off)"
	if len(r.Violations) != 1 || r.Violations[0] != want {
		t.Errorf("violations %q,\nwant %q", r.Violations, want)
	}
	st := r.Strict
	if st.Mismatched != 2 || math.Abs(float64(st.Abs.Max)-0.0021) > 1e-9 || st.Abs.Index != 1 {
		t.Errorf("strict drift %+v", st)
	}
	if got := float64(st.MinAtol); math.Abs(got-(0.0021-1.3e-6*0.25)) > 1e-9 {
		t.Errorf("MinAtol = %v", got)
	}
	if got := float64(st.MinRtol); math.Abs(got-(0.0021-1e-5)/0.25) > 1e-6 {
		t.Errorf("MinRtol = %v", got)
	}
	if got := float64(st.TV); math.Abs(got-0.0021) > 1e-9 {
		t.Errorf("TV = %v", got)
	}
	// KL(ref || out) = Σ 0.25 log(0.25/out).
	kl := 0.25*math.Log(0.25/0.2521) + 0.25*math.Log(0.25/0.2479)
	if got := float64(st.KL); math.Abs(got-kl) > 1e-9 {
		t.Errorf("KL = %v, want %v", got, kl)
	}
}

func TestBoundaryTokensMayGoEitherWay(t *testing.T) {
	// Three tied tokens at the top-p cut: a sort-based kernel keeps only part
	// of the group. The row passes against the reference renormalised over
	// the output's support, with a note.
	run := &engine.Run{
		Op:     engine.OpRenorm,
		Logits: engine.FromFloat64s("logits", engine.F32, []int{1, 5}, []float64{1, 0, 0, 0, -3}),
		Params: engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{0.7}, MinP: []float64{0}, FilterOrder: engine.TopKFirst, TopKTies: engine.TiesKeep},
	}
	d := ref.Renorm(run, 0, false, 1e-6)
	if !slices.Equal(d.Class, []ref.Class{ref.Kept, ref.Boundary, ref.Boundary, ref.Boundary, ref.Dropped}) {
		t.Fatalf("classes %v: the test needs a boundary group", d.Class)
	}
	e := math.E
	out := []float64{e / (e + 1), 1 / (e + 1), 0, 0, 0}
	rep := judgeRun(t, run, probsOutput(run, engine.F32, out))
	r := rep.Outputs[0].Rows[0]
	if !r.Pass {
		t.Fatalf("row fails: %v", r.Violations)
	}
	var notes []string
	for _, f := range r.Findings {
		notes = append(notes, f.Message)
	}
	want := "row 0: the output drops 2 boundary tokens the reference keeps (first at token 2, unfiltered reference mass"
	if len(notes) != 1 || !strings.HasPrefix(notes[0], want) || !strings.HasSuffix(notes[0], "; the reference was renormalised over the output's support before comparing") {
		t.Errorf("findings %q, want one note starting %q", notes, want)
	}
}

func TestRunDriftSummarisesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const b, v = 6, 3000
	run := logitsRun(rng, engine.OpSoftmax, engine.BF16, b, v, 2, rowParams{temp: 0.8})
	probs := refProbs(run, false, 1e-6)
	for i := range probs {
		probs[i] *= 1 + 1e-3*rng.NormFloat64()
	}
	rep := judgeRun(t, run, probsOutput(run, engine.F32, probs))
	o := rep.Outputs[0]
	st := o.Strict
	if st.Elements != b*v {
		t.Fatalf("Elements = %d", st.Elements)
	}
	// Every statistic against the flat errors of the whole run.
	ref := refProbs(run, false, 1e-6)
	out := make([]float64, b*v)
	o32 := probsOutput(run, engine.F32, probs).Probs
	o32.Floats64(0, out)
	var errs []float64
	maxErr, maxAt, sum := -1.0, 0, 0.0
	for i := range out {
		e := math.Abs(out[i] - ref[i])
		errs = append(errs, e)
		sum += e
		if e > maxErr {
			maxErr, maxAt = e, i
		}
	}
	if float64(st.Abs.Max) != maxErr || st.Abs.Index != maxAt {
		t.Errorf("Abs.Max %v at %d, want %v at %d", st.Abs.Max, st.Abs.Index, maxErr, maxAt)
	}
	if got := float64(st.Abs.Mean); math.Abs(got-sum/float64(len(out))) > 1e-12*got {
		t.Errorf("Abs.Mean %v, want %v", got, sum/float64(len(out)))
	}
	slices.Sort(errs)
	for _, c := range []struct {
		name string
		got  engine.Float
		q    float64
	}{{"median", st.Abs.Median, 0.5}, {"p90", st.Abs.P90, 0.9}, {"p99", st.Abs.P99, 0.99}} {
		exact := errs[int(float64(len(errs)-1)*c.q)]
		if g := float64(c.got); g < exact || g > exact*(1+1.0/16) {
			t.Errorf("run %s = %v, want within [%v, %v]", c.name, g, exact, exact*(1+1.0/16))
		}
	}
	mis := 0
	for _, r := range o.Rows {
		mis += r.Strict.Mismatched
	}
	if st.Mismatched != mis {
		t.Errorf("Mismatched = %d, rows sum to %d", st.Mismatched, mis)
	}
}

func TestRowPercentilesAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	var sel selector
	hist := make([]uint32, histBins)
	for trial := range 300 {
		n := 1 + rng.IntN(5000)
		if trial%5 == 0 {
			n = 20000 + rng.IntN(20000) // buckets large enough for a second radix pass
		}
		vals := make([]float64, n)
		for i := range vals {
			if trial%5 == 0 && rng.IntN(2) == 0 {
				vals[i] = 1 + rng.Float64()/32 // one bucket, many values
				continue
			}
			switch rng.IntN(10) {
			case 0:
				vals[i] = 0
			case 1:
				vals[i] = vals[rng.IntN(i+1)] // repeats
			case 2:
				if trial%7 == 0 {
					vals[i] = math.Inf(1)
				}
			default:
				vals[i] = math.Ldexp(rng.Float64(), -rng.IntN(40))
			}
		}
		bits := make([]uint64, n)
		top := 0
		for i, x := range vals {
			bits[i] = math.Float64bits(x)
			hist[errorKey(bits[i])]++
			top = max(top, errorKey(bits[i]))
		}
		var st engine.ErrorStats
		sel.percentiles(bits, len(bits), hist, 1, top, &st)
		clear(hist)
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		for _, c := range []struct {
			got engine.Float
			q   float64
		}{{st.Median, 0.5}, {st.P90, 0.9}, {st.P95, 0.95}, {st.P99, 0.99}} {
			want := linear(sorted, c.q)
			if g := float64(c.got); g != want && !(math.IsNaN(g) && math.IsNaN(want)) {
				t.Fatalf("trial %d (n=%d): percentile %v = %v, want %v", trial, n, c.q, g, want)
			}
		}
	}
}

// linear is numpy's default percentile of sorted values.
func linear(sorted []float64, q float64) float64 {
	h := float64(len(sorted)-1) * q
	lo := int(h)
	v := sorted[lo]
	if frac := h - float64(lo); frac > 0 && lo+1 < len(sorted) && sorted[lo+1] != v {
		v += frac * (sorted[lo+1] - v)
	}
	return v
}

func TestMeasureSparseEqualsDense(t *testing.T) {
	// A filtered row is measured on its compacted nonzero tokens; every
	// statistic must be what the full pass gives.
	rng := rand.New(rand.NewPCG(131, 132))
	for trial := range 20 {
		run := logitsRun(rng, engine.OpRenorm, engine.BF16, 1, 5000, 3,
			rowParams{temp: 0.8, Filter: ref.Filter{TopK: 1 + rng.IntN(400), TopP: rng.Float64()}})
		d := ref.Renorm(run, 0, false, 1e-6)
		out := make([]float64, len(d.Probs))
		for i, p := range d.Probs {
			out[i] = p * (1 + 1e-3*rng.NormFloat64())
			if p == 0 && rng.IntN(500) == 0 {
				out[i] = 1e-4 // an extra token
			}
			if p > 0 && rng.IntN(50) == 0 {
				out[i] = 0 // a missing token
			}
		}
		scan := scanOutput(out)
		var dense, sparse measurement
		bd, bs := newRowBuffers(len(out)), newRowBuffers(len(out))
		measure(&dense, out, &scan, d.Probs, d.Base, d.Class, d.Argmax, false, DefaultTolerance(engine.BF16), 0x1p-126, bd)
		measure(&sparse, out, &scan, d.Probs, d.Base, d.Class, d.Argmax, true, DefaultTolerance(engine.BF16), 0x1p-126, bs)
		bd.sel.percentiles(bd.absBits[:dense.measured], len(out), bd.absHist, dense.loAbs, dense.topAbs, &dense.drift.Abs)
		bd.sel.percentiles(bd.relBits[:dense.measured], len(out), bd.relHist, dense.loRel, dense.topRel, &dense.drift.Rel)
		bs.sel.percentiles(bs.absBits[:sparse.measured], len(out), bs.absHist, sparse.loAbs, sparse.topAbs, &sparse.drift.Abs)
		bs.sel.percentiles(bs.relBits[:sparse.measured], len(out), bs.relHist, sparse.loRel, sparse.topRel, &sparse.drift.Rel)
		dense.measured, sparse.measured = 0, 0
		if !reflect.DeepEqual(dense, sparse) {
			t.Fatalf("trial %d: dense %+v\nsparse %+v", trial, dense, sparse)
		}
	}
}

func TestKLMatchesDirectSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(141, 142))
	for _, spread := range []float64{1e-7, 1e-3, 3e-2, 0.3} {
		run := logitsRun(rng, engine.OpSoftmax, engine.F32, 1, 20000, 2, rowParams{temp: 1})
		d := ref.Softmax(run, 0, false)
		out := make([]float64, len(d.Probs))
		want := 0.0
		for i, p := range d.Probs {
			out[i] = p * math.Exp(spread*rng.NormFloat64())
			if p > 0 {
				want += p*math.Log(p/out[i]) - p + out[i]
			} else {
				want += out[i]
			}
		}
		scan := scanOutput(out)
		var m measurement
		measure(&m, out, &scan, d.Probs, d.Base, d.Class, d.Argmax, false, DefaultTolerance(engine.F32), 0x1p-126, newRowBuffers(len(out)))
		// The direct sum cancels badly for small spreads; compare at the
		// precision it has there.
		tol := 1e-6*want + 1e-16*float64(len(out))
		if got := float64(m.drift.KL); math.Abs(got-want) > tol {
			t.Errorf("spread %v: KL = %v, direct sum %v", spread, got, want)
		}
	}
}

func TestSubnormalWeightsMayTieAtTheTopKCut(t *testing.T) {
	// Tokens 2 and 3 differ in float64 but their float32 weights are
	// subnormals that a kernel may see as tied, so its top-k keeps both:
	// the extra token is a boundary, and its value is still checked.
	run := &engine.Run{
		Op:     engine.OpRenorm,
		Logits: engine.FromFloat64s("logits", engine.F32, []int{1, 5}, []float64{0, -1, -90, -90.25, -5}),
		Params: engine.Params{Temperature: []float64{1}, TopK: []int{4}, TopP: []float64{1}, MinP: []float64{0}, FilterOrder: engine.TopKFirst, TopKTies: engine.TiesKeep},
	}
	d := ref.Renorm(run, 0, false, 1e-6)
	if d.Class[3] != ref.Dropped || d.Base[3] >= 0x1p-126 || d.Base[3] < 0x1p-149 {
		t.Fatalf("setup: token 3 is %v with base mass %g; the test needs a dropped token of subnormal float32 mass", d.Class[3], d.Base[3])
	}
	z := 1 + math.Exp(-1) + math.Exp(-90) + math.Exp(-90.25) + math.Exp(-5)
	kept := []float64{1 / z, math.Exp(-1) / z, math.Exp(-90) / z, math.Exp(-90.25) / z, math.Exp(-5) / z}
	if r := judgeRun(t, run, probsOutput(run, engine.F32, kept)).Outputs[0].Rows[0]; !r.Pass {
		t.Errorf("a subnormal tie kept at the cut fails: %v", r.Violations)
	}
	// The same token with real mass is an extra token, whatever its base.
	wrong := slices.Clone(kept)
	wrong[3] = 0.01
	if r := judgeRun(t, run, probsOutput(run, engine.F32, wrong)).Outputs[0].Rows[0]; r.Pass {
		t.Errorf("a subnormal-base token with mass 0.01 passes")
	}
}
