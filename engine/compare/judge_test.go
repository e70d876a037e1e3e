package compare

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

func TestTolerancesFor(t *testing.T) {
	bf16, f16, f32 := DefaultTolerance(engine.BF16), DefaultTolerance(engine.F16), DefaultTolerance(engine.F32)
	tests := []struct {
		name           string
		in, out        engine.DType
		o              Options
		strict, native engine.Tolerance
		pvalue         float64
	}{
		{"bf16 logits, f32 probs", engine.BF16, engine.F32, Options{}, bf16, f32, DefaultPValue},
		{"f32 logits, bf16 probs", engine.F32, engine.BF16, Options{}, bf16, bf16, DefaultPValue},
		{"f16 logits, f32 probs", engine.F16, engine.F32, Options{}, f16, f32, DefaultPValue},
		{"f32 logits, tokens", engine.F32, engine.I32, Options{}, f32, DefaultTolerance(engine.F64), DefaultPValue},
		{"overrides in whole", engine.BF16, engine.F32, Options{Strict: &engine.Tolerance{Atol: 1, Rtol: 2}, Native: &engine.Tolerance{Atol: 3, Rtol: 4}, PValue: 0.01},
			engine.Tolerance{Atol: 1, Rtol: 2}, engine.Tolerance{Atol: 3, Rtol: 4}, 0.01},
		{"overrides in part", engine.BF16, engine.F32, Options{Strict: &engine.Tolerance{Atol: -1, Rtol: 1e-3}},
			engine.Tolerance{Atol: bf16.Atol, Rtol: 1e-3}, f32, DefaultPValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TolerancesFor(tt.in, tt.out, tt.o)
			if got.Strict != tt.strict || got.Native != tt.native || got.PValue != tt.pvalue {
				t.Errorf("got %+v, want strict %+v native %+v p %v", got, tt.strict, tt.native, tt.pvalue)
			}
		})
	}
	table := ToleranceTable()
	if len(table) != 4 || table[0].DType != engine.F64 || table[3].DType != engine.BF16 || table[3].Rtol != 1.6e-2 {
		t.Errorf("table %+v", table)
	}
}

func TestArgmaxTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const b, v = 7, 1000
	run := logitsRun(rng, engine.OpArgmax, engine.BF16, b, v, 3)
	tokens := make([]int64, b)
	for r := range b {
		tokens[r] = int64(ref.Argmax(run, r).Tokens[0])
	}
	// Row 4: two tied maxima, the output picks the second.
	run.Logits.SetFloat(4*v+10, 100)
	run.Logits.SetFloat(4*v+20, 100)
	tokens[4] = 20
	// Row 5: a near-tie, the output picks the maximum.
	run.Logits.SetFloat(5*v+30, 100)
	run.Logits.SetFloat(5*v+40, 99.5)
	tokens[5] = 30
	// Row 6: NaN logits.
	run.Logits.SetFloat(6*v+3, math.NaN())
	tokens[1] = (tokens[1] + 1) % v // wrong
	tokens[2] = v                   // out of range
	tokens[3] = -1                  // out of range
	out := &engine.Output{Name: "cpu", Tokens: engine.FromInts("tokens", engine.I32, []int{b}, tokens)}
	rep := judgeRun(t, run, out)
	o := rep.Outputs[0]
	if o.Kind != "tokens" {
		t.Errorf("Kind = %q", o.Kind)
	}
	want := map[int]engine.Rule{1: engine.RuleToken, 2: engine.RuleTokenRange, 3: engine.RuleTokenRange, 6: engine.RuleNaN}
	if got := failedRows(o); !slices.Equal(got, []int{1, 2, 3, 6}) {
		t.Fatalf("failed rows %v, want [1 2 3 6]", got)
	}
	for _, r := range o.Rows {
		if rule, ok := want[r.Row]; ok && !hasRule(r, rule) {
			t.Errorf("row %d: want %s, got %v", r.Row, rule, r.Violations)
		}
		if r.Row == 4 || r.Row == 5 {
			if len(r.Findings) != 1 || r.Findings[0].Rule != engine.RuleFragile {
				t.Errorf("row %d: want one fragile note, got %+v", r.Row, r.Findings)
			}
		}
	}
	if msg := o.Rows[1].Violations[0]; !strings.Contains(msg, "is not the argmax: its logit") {
		t.Errorf("row 1: %q", msg)
	}
}

// drawFrom draws a token from p by inverse CDF.
func drawFrom(rng *rand.Rand, p []float64) int64 {
	u := rng.Float64()
	for i, x := range p {
		u -= x
		if u < 0 {
			return int64(i)
		}
	}
	return int64(slices.IndexFunc(p, func(x float64) bool { return x > 0 }))
}

func TestSampledTokensAndDraws(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	const b, v, n = 6, 2000, 200
	run := logitsRun(rng, engine.OpSample, engine.BF16, b, v, 3,
		rowParams{temp: 0.8, Filter: ref.Filter{TopK: 40, TopP: 0.9}},
		rowParams{temp: 0, Filter: ref.Filter{TopP: 1}})
	eps := ref.BoundaryEps(DefaultTolerance(engine.BF16).Rtol)
	tokens := make([]int64, b)
	draws := make([]int64, b*n)
	dists := make([]ref.Dist, b)
	for r := range b {
		dists[r] = ref.Sample(run, r, eps)
		tokens[r] = drawFrom(rng, dists[r].Probs)
		for k := range n {
			draws[r*n+k] = drawFrom(rng, dists[r].Probs)
		}
	}
	dropped := func(r int) int64 {
		return int64(slices.Index(dists[r].Class, ref.Dropped))
	}
	tokens[2] = dropped(2)     // zero mass
	tokens[3] = dropped(3)     // greedy row, not the argmax
	draws[4*n+17] = v + 5      // out of range
	draws[0*n+3] = dropped(0)  // off the support
	draws[0*n+50] = dropped(0) // again
	out := &engine.Output{
		Name:    "cpu",
		Tokens:  engine.FromInts("tokens", engine.I32, []int{b}, tokens),
		Samples: engine.FromInts("samples", engine.I32, []int{b, n}, draws),
	}
	rep := judgeRun(t, run, out)
	o := rep.Outputs[0]
	if o.Kind != "samples" {
		t.Errorf("Kind = %q", o.Kind)
	}
	if got := failedRows(o); !slices.Equal(got, []int{0, 2, 3, 4}) {
		t.Fatalf("failed rows %v, want [0 2 3 4]", got)
	}
	want := map[int]engine.Rule{0: engine.RuleSupport, 2: engine.RuleSupport, 3: engine.RuleToken, 4: engine.RuleTokenRange}
	for _, r := range o.Rows {
		if rule, ok := want[r.Row]; ok && !hasRule(r, rule) {
			t.Errorf("row %d: want %s, got %v", r.Row, rule, r.Violations)
		}
	}
	if got := o.Rows[0].Violations[0]; !strings.HasPrefix(got, "row 0: 2 of 200 draws are wrong; first, draw 3: token ") {
		t.Errorf("row 0: %q", got)
	}
}

// specRunOf builds a spec_verify run of b rows with K drafts over v tokens,
// random target logits and random draft probs.
func specRunOf(rng *rand.Rand, b, k, v int) *engine.Run {
	target := make([]float64, b*(k+1)*v)
	for i := range target {
		target[i] = rng.NormFloat64() * 2
	}
	drafts := make([]int64, b*k)
	q := make([]float64, b*k*v)
	for i := range b * k {
		s := 0.0
		for j := range v {
			q[i*v+j] = rng.Float64()
			s += q[i*v+j]
		}
		for j := range v {
			q[i*v+j] /= s
		}
		drafts[i] = drawFrom(rng, q[i*v:(i+1)*v])
	}
	run := &engine.Run{
		Op:           engine.OpSpecVerify,
		TargetLogits: engine.FromFloat64s("target_logits", engine.F32, []int{b, k + 1, v}, target),
		DraftTokens:  engine.FromInts("draft_tokens", engine.I64, []int{b, k}, drafts),
		DraftProbs:   engine.FromFloat64s("draft_probs", engine.F32, []int{b, k, v}, q),
	}
	p := &run.Params
	for range b {
		p.Temperature = append(p.Temperature, 1)
		p.TopK = append(p.TopK, 0)
		p.TopP = append(p.TopP, 1)
		p.MinP = append(p.MinP, 0)
	}
	return run
}

// chain runs one speculative chain on the laws of s: the tokens, the emitted
// length, and the acceptances counted at every position.
func chain(rng *rand.Rand, s *ref.SpecRef) (toks []int64, emitted, accepted int64) {
	k := len(s.Drafts)
	toks = slices.Repeat([]int64{-1}, k+1)
	emitted = -1
	for i := range k {
		ok := rng.Float64() < s.Accept[i]
		if ok {
			accepted++
		}
		if emitted >= 0 {
			continue
		}
		if ok {
			toks[i] = s.Drafts[i]
			continue
		}
		toks[i] = drawFrom(rng, s.Residual[i])
		emitted = int64(i)
	}
	if emitted < 0 {
		emitted = int64(k)
		toks[k] = drawFrom(rng, s.Target[k].Probs)
	}
	return toks, emitted, accepted
}

func TestSpecStructure(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	const b, k, v, trials = 6, 3, 8, 40
	run := specRunOf(rng, b, k, v)
	toks := make([]int64, b*(k+1))
	emitted, accepted := make([]int64, b), make([]int64, b)
	tr := make([]int64, trials*b*(k+1))
	specs := make([]ref.SpecRef, b)
	for r := range b {
		specs[r] = ref.SpecVerify(run, r, 1e-6)
		var row []int64
		row, emitted[r], accepted[r] = chain(rng, &specs[r])
		copy(toks[r*(k+1):], row)
		for d := range trials {
			row, _, _ = chain(rng, &specs[r])
			copy(tr[(d*b+r)*(k+1):], row)
		}
	}
	build := func() *engine.Output {
		return &engine.Output{
			Name:         "cpu",
			SpecTokens:   engine.FromInts("spec_tokens", engine.I32, []int{b, k + 1}, toks),
			SpecEmitted:  engine.FromInts("spec_emitted", engine.I32, []int{b}, emitted),
			SpecAccepted: engine.FromInts("spec_accepted", engine.I32, []int{b}, accepted),
			SpecTrials:   engine.FromInts("spec_trials", engine.I32, []int{trials, b, k + 1}, tr),
		}
	}
	if rep := judgeRun(t, run, build()); !rep.Pass {
		for _, r := range rep.Outputs[0].Rows {
			if !r.Pass {
				t.Errorf("row %d of correct chains fails: %v", r.Row, r.Violations)
			}
		}
		t.FailNow()
	}

	// Break one rule per row.
	set := func(r int, row ...int64) { copy(toks[r*(k+1):], row) }
	// Row 0: a token after the -1 fill.
	set(0, specs[0].Drafts[0], -1, 3, -1)
	emitted[0], accepted[0] = 1, 1
	// Row 1: spec_emitted disagrees with the tokens.
	emitted[1] = (emitted[1] + 1) % (k + 1)
	// Row 2: the resampled token has no residual mass (p <= q there).
	zero := int64(slices.IndexFunc(specs[2].Residual[0], func(x float64) bool { return x == 0 }))
	if zero < 0 {
		t.Fatal("row 2 has no token without residual mass")
	}
	set(2, zero, -1, -1, -1)
	emitted[2], accepted[2] = 0, 0
	// Row 3: spec_accepted below spec_emitted.
	set(3, specs[3].Drafts[0], specs[3].Drafts[1], int64(slices.Index(specs[3].Residual[2], slices.Max(specs[3].Residual[2]))), -1)
	emitted[3], accepted[3] = 2, 1
	// Row 4: a wrong accepted prefix.
	set(4, (specs[4].Drafts[0]+1)%v, 2, -1, -1)
	emitted[4], accepted[4] = 1, 1
	// Row 5, trial 7: a token out of range.
	tr[(7*b+5)*(k+1)] = v

	rep := judgeRun(t, run, build())
	o := rep.Outputs[0]
	if o.Kind != "spec" {
		t.Errorf("Kind = %q", o.Kind)
	}
	want := map[int]engine.Rule{0: engine.RuleStructure, 1: engine.RuleStructure, 2: engine.RuleSupport, 3: engine.RuleStructure, 4: engine.RuleStructure, 5: engine.RuleTokenRange}
	if got := failedRows(o); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("failed rows %v", got)
	}
	for _, r := range o.Rows {
		if rule := want[r.Row]; !hasRule(r, rule) {
			t.Errorf("row %d: want %s, got %v", r.Row, rule, r.Violations)
		}
	}
	if got, want := o.Rows[5].Violations[0], "row 5: 1 of 40 trials break the rules; first, trial 7: token 8 at position 0 is outside [-1, 8)"; got != want {
		t.Errorf("row 5: %q, want %q", got, want)
	}
}

func TestNgramDrafts(t *testing.T) {
	const b, l, m = 3, 12, 6
	in := []int64{
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
		5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
		9, 8, 7, 9, 8, 6, 0, 0, 0, 0, 0, 0,
	}
	pre := []int64{2, 3, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 9, 8, 0, 0, 0, 0}
	run := &engine.Run{
		Op:          engine.OpNgramMatch,
		InputIDs:    engine.FromInts("input_ids", engine.I64, []int{b, l}, in),
		InputIDsLen: engine.FromInts("input_ids_len", engine.I64, []int{b}, []int64{12, 12, 6}),
		PreIDs:      engine.FromInts("pre_ids", engine.I64, []int{b, m}, pre),
		StepIdx:     engine.FromInts("step_idx", engine.I64, []int{b}, []int64{2, 1, 2}),
		Params:      engine.Params{MaxNgramSize: 3, MaxDraftTokens: 4, Threshold: 1024},
	}
	want := ref.NgramMatch(run)
	flat := slices.Concat(want...)
	good := &engine.Output{Name: "cpu", DraftOut: engine.FromInts("draft_out", engine.I32, []int{b, 4}, flat)}
	flat2 := slices.Clone(flat)
	flat2[4+1] = 42
	bad := &engine.Output{Name: "draft_out", External: true, DraftOut: engine.FromInts("draft_out", engine.I32, []int{b, 4}, flat2)}
	rep := judgeRun(t, run, good, bad)
	if !rep.Outputs[0].Pass {
		t.Errorf("the reference's own drafts fail: %v", rep.Outputs[0].Rows)
	}
	if got := failedRows(rep.Outputs[1]); !slices.Equal(got, []int{1}) {
		t.Errorf("failed rows %v, want [1]", got)
	}
	if got, want := rep.Outputs[1].Rows[1].Violations[0], "row 1: draft [5 42 5 5] differs from the reference [5 5 5 5] at position 1"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestExternalOutputs(t *testing.T) {
	tensor := func(name string) *engine.Tensor { return engine.NewTensor(name, engine.I32, 1) }
	run := &engine.Run{External: map[string]*engine.Tensor{}}
	for _, n := range []string{"draft_out", "spec_trials", "spec_accepted", "spec_emitted", "spec_tokens", "samples", "tokens", "probs"} {
		run.External[n] = tensor(n)
	}
	outs := ExternalOutputs(run)
	var names []string
	for _, o := range outs {
		names = append(names, o.Name)
		if !o.External {
			t.Errorf("%s is not marked external", o.Name)
		}
	}
	if want := []string{"probs", "tokens", "samples", "spec_tokens", "spec_trials", "draft_out"}; !slices.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	spec := outs[3]
	if spec.SpecTokens == nil || spec.SpecEmitted != run.External["spec_emitted"] || spec.SpecAccepted != run.External["spec_accepted"] {
		t.Errorf("spec_tokens output %+v", spec)
	}
	if len(ExternalOutputs(&engine.Run{})) != 0 {
		t.Errorf("a run without external outputs gives some")
	}
}

func TestUnjudgeableOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	run := logitsRun(rng, engine.OpSoftmax, engine.F32, 3, 100, 1)
	good := probsOutput(run, engine.F32, refProbs(run, false, 1e-6))
	bad := &engine.Output{Name: "probs", External: true, Probs: engine.NewTensor("probs", engine.F32, 3, 99)}
	rep := judgeRun(t, run, good, bad)
	if !rep.Outputs[0].Pass || rep.Outputs[1].Pass || rep.Pass {
		t.Errorf("pass: good %v, bad %v, report %v", rep.Outputs[0].Pass, rep.Outputs[1].Pass, rep.Pass)
	}
	o := rep.Outputs[1]
	if len(o.Rows) != 0 || len(o.Notes) != 1 || o.Notes[0] != "probs cannot be judged: probs have shape [3, 99], want [3, 100]" {
		t.Errorf("bad output: %d rows, notes %q", len(o.Rows), o.Notes)
	}
}

func TestOnRowAndCancellation(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	const b, v = 64, 500
	run := logitsRun(rng, engine.OpSoftmax, engine.BF16, b, v, 3, rowParams{temp: 0.5})
	probs := refProbs(run, false, 1e-6)
	outs := []*engine.Output{probsOutput(run, engine.F32, probs), probsOutput(run, engine.BF16, probs)}

	var inside atomic.Int32
	seen := map[[2]int]int{}
	rep, err := Judge(context.Background(), run, outs, Options{Workers: 4}, func(out int, row engine.RowReport) {
		if inside.Add(1) != 1 {
			t.Error("onRow called concurrently")
		}
		seen[[2]int{out, row.Row}]++
		inside.Add(-1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2*b {
		t.Errorf("onRow saw %d (output, row) pairs, want %d", len(seen), 2*b)
	}
	for key, n := range seen {
		if n != 1 {
			t.Errorf("onRow called %d times for %v", n, key)
		}
	}
	for _, o := range rep.Outputs {
		if !slices.IsSortedFunc(o.Rows, func(a, b engine.RowReport) int { return a.Row - b.Row }) || len(o.Rows) != b {
			t.Errorf("rows of %s are not every row in order", o.Name)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("the report does not marshal: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err = Judge(ctx, run, outs, Options{Workers: 2}, func(int, engine.RowReport) {
		calls++
		cancel()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Judge after cancel: %v, want context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("onRow called %d times after the cancel", calls)
	}
}

func TestNaNOutputReportMarshals(t *testing.T) {
	rng := rand.New(rand.NewPCG(111, 112))
	run := logitsRun(rng, engine.OpSoftmax, engine.F32, 2, 50, 1)
	p := refProbs(run, false, 1e-6)
	p[3] = math.NaN()
	rep := judgeRun(t, run, probsOutput(run, engine.F32, p))
	r := rep.Outputs[0].Rows[0]
	if !math.IsNaN(float64(r.Strict.Abs.Max)) || r.Strict.Abs.Index != 3 || r.Strict.NaN != 1 {
		t.Errorf("row 0 strict drift %+v", r.Strict)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"max":"NaN"`) {
		t.Errorf("NaN is not written as \"NaN\"")
	}
}

// A draft the target gives no mass can never be accepted: a chain that goes
// past it breaks the acceptance rule, whatever the token after it.
func TestSpecAcceptedDraftWithoutTargetMass(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const b, k, v = 2, 2, 16
	run := specRunOf(rng, b, k, v)
	// Row 0: position 0's target masks the draft; row 1 stays as drawn.
	x := int(run.DraftTokens.Int(0))
	run.TargetLogits.SetFloat(x, math.Inf(-1))
	specs := []ref.SpecRef{ref.SpecVerify(run, 0, 1e-6), ref.SpecVerify(run, 1, 1e-6)}
	if specs[0].Accept[0] != 0 {
		t.Fatalf("setup: row 0 accepts its first draft with probability %v", specs[0].Accept[0])
	}
	residual := specs[0].Residual[1]
	next := int64(slices.Index(residual, slices.Max(residual)))
	toks := []int64{int64(x), next, -1}
	row1, e1, a1 := chain(rng, &specs[1])
	toks = append(toks, row1...)
	out := &engine.Output{
		Name:         "cpu",
		SpecTokens:   engine.FromInts("spec_tokens", engine.I32, []int{b, k + 1}, toks),
		SpecEmitted:  engine.FromInts("spec_emitted", engine.I32, []int{b}, []int64{1, e1}),
		SpecAccepted: engine.FromInts("spec_accepted", engine.I32, []int{b}, []int64{1, a1}),
	}
	o := judgeRun(t, run, out).Outputs[0]
	if got := failedRows(o); !slices.Equal(got, []int{0}) {
		t.Fatalf("failed rows %v, want [0]; row 0: %v", got, o.Rows[0].Violations)
	}
	if !hasRule(o.Rows[0], engine.RuleAcceptance) {
		t.Errorf("row 0: %v, want an acceptance violation", o.Rows[0].Violations)
	}
}
