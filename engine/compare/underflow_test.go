package compare

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// A float32 or bf16 softmax whose far tail underflows to 0 passes, and its
// KL is finite: the tokens its dtype cannot hold (reference below the
// underflow threshold) count by the mass they lose, never as +Inf. A token
// the output drops above the threshold still makes the KL infinite.
func TestUnderflowedTailKeepsKLFinite(t *testing.T) {
	const v = 512
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			x := make([]float64, v)
			for i := range x {
				x[i] = rand.NormFloat64()
			}
			// The far tail: e^-120 is 8e-53, below float32's smallest subnormal.
			for _, i := range rand.Perm(v)[:8] {
				x[i] = -120 - 10*rand.Float64()
			}
			run := &engine.Run{Source: "test", Op: engine.OpSoftmax, Logits: engine.FromFloat64s("logits", engine.F32, []int{1, v}, x),
				Params: engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}}}
			p := make([]float64, v)
			s := 0.0
			for i, z := range x {
				p[i] = math.Exp(float64(float32(z)))
				s += p[i]
			}
			for i := range p {
				p[i] /= s
			}
			rep := judgeRun(t, run, probsOutput(run, dt, p))
			row := rep.Outputs[0].Rows[0]
			if !row.Pass {
				t.Fatalf("the row fails: %v", row.Violations)
			}
			if kl := float64(row.Strict.KL); math.IsInf(kl, 0) || math.IsNaN(kl) || kl > 1e-3 {
				t.Errorf("KL = %v nats on a passing row whose tail underflows", kl)
			}
			if kl := float64(rep.Outputs[0].Strict.KL); math.IsInf(kl, 0) || math.IsNaN(kl) {
				t.Errorf("run KL = %v", kl)
			}
		})
	}
	out, ref := []float64{0}, []float64{0x1p-130}
	if got := klLogged(out, ref, []int32{0}, nil, 0x1p-126); got != ref[0] {
		t.Errorf("an underflowed token: klLogged = %v, want its mass %v", got, ref[0])
	}
	ref[0] = 1e-30
	if got := klLogged(out, ref, []int32{0}, nil, 0x1p-126); !math.IsInf(got, 1) {
		t.Errorf("a dropped token above the threshold: klLogged = %v, want +Inf", got)
	}
}

// The same for every token's logprobs taken as the log of float32
// probabilities: -inf below float32's range is noted, and the KL stays
// finite.
func TestUnderflowedLogprobsKeepKLFinite(t *testing.T) {
	const v = 256
	x := make([]float64, v)
	for i := range x {
		x[i] = rand.NormFloat64()
	}
	for _, i := range rand.Perm(v)[:5] {
		x[i] = -120 - 10*rand.Float64()
	}
	run := &engine.Run{Source: "test", Op: engine.OpSoftmax, Logits: engine.FromFloat64s("logits", engine.F32, []int{1, v}, x)}
	run.Params = engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}, Seed: []uint64{0}, Offset: []uint64{0}}
	keep := make([]bool, v)
	for i := range keep {
		keep[i] = true
	}
	l := f32LogSoftmax(x, 1, keep, engine.DTypeInvalid)
	for i, z := range l {
		if float32(math.Exp(z)) == 0 {
			l[i] = math.Inf(-1) // log(softmax) in float32
		}
	}
	o := &engine.Output{Name: "lp", External: true, LogprobsKind: engine.LogprobsRaw,
		Logprobs: engine.FromFloat64s("logprobs", engine.F32, []int{1, v}, l)}
	rep := judgeRun(t, run, o)
	row := rep.Outputs[0].Rows[0]
	if !row.Pass {
		t.Fatalf("the row fails: %q", row.Violations)
	}
	if kl := float64(row.Strict.KL); math.IsInf(kl, 0) || math.IsNaN(kl) || kl > 1e-3 {
		t.Errorf("KL = %v nats on a passing row whose tail underflows", kl)
	}
}

// A fragile argmax note writes the two logits with the digits that tell
// them apart: 12.375 against 12.25 once read "logit 12 … maximum 12".
func TestFragileNoteShowsTheDifference(t *testing.T) {
	const v = 16
	x := make([]float64, v)
	for i := range x {
		x[i] = rand.Float64() * 4
	}
	x[3], x[9] = 12.375, 12.25
	run := &engine.Run{Source: "test", Op: engine.OpArgmax, Logits: engine.FromFloat64s("logits", engine.BF16, []int{1, v}, x),
		Params: engine.Params{Temperature: []float64{0}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}}}
	out := &engine.Output{Name: "tokens", External: true, Tokens: engine.FromInts("tokens", engine.I64, []int{1}, []int64{3})}
	rep := judgeRun(t, run, out)
	var msg string
	for _, f := range rep.Outputs[0].Rows[0].Findings {
		if f.Rule == engine.RuleFragile {
			msg = f.Message
		}
	}
	if msg == "" || !strings.Contains(msg, "logit 12.2 at token 9") || !strings.Contains(msg, "maximum 12.4 at token 3") {
		t.Errorf("fragile note %q, want the logits 12.2 and 12.4 told apart", msg)
	}
}
