package generate

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// softmaxRows returns rows x vocab logits of dtype, normal with standard
// deviation 1.5 and below top-1, whose first row holds a planted near-tie at
// the top: its maximum at top, and three tokens 1, 2 and 3 steps below it
// (rounded to dtype): the tokens that a temperature of 0.01 leaves alive.
func softmaxRows(seed uint64, rows, vocab int, d engine.DType, top, step float64) []float64 {
	rng := newRand(seed)
	x := normals(rng, rows*vocab, 1.5)
	for i, v := range x {
		x[i] = engine.RoundToDType(min(v, top-1), d)
	}
	for k, t := range rng.Perm(vocab)[:4] {
		x[t] = engine.RoundToDType(top-float64(k)*step, d)
	}
	return x
}

// softmaxFP32 is temperature softmax on fp32 logits of a vocabulary of
// 32000 at four temperatures, one per row: 0.01 (almost one-hot; the
// planted near-tie keeps a few tokens alive), 1, 100 (almost flat) and 0.5.
func softmaxFP32() (*scenario, error) {
	const rows, vocab = 4, 32000
	x := softmaxRows(303, rows, vocab, engine.F32, 9, 0.01)
	return &scenario{
		cfg: scenarios.Config{
			Name:    "softmax-fp32-32000",
			Title:   "Temperature softmax, fp32, 32000 tokens",
			Summary: "Temperatures 0.01, 1, 100 and 0.5, one per row, on fp32 logits: the regimes side by side, judged at fp32's tolerance.",
			Op:      engine.OpSoftmax,
			View:    "",
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true, Matched: &scenarios.Matched{Strict: span(0, rows)}},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.F32, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, []float64{0.01, 1, 100, 0.5}),
		},
	}, nil
}

// torchSoftmax simulates `(logits / T).softmax(-1)` on logits of dtype d
// stored in d: the division in float32, rounded to d (overflowing to ±Inf
// past d's range), the softmax exact, the result rounded to d. It returns the
// scaled logits too.
func torchSoftmax(x []float64, t float64, d engine.DType) (probs, scaled []float64) {
	scaled = make([]float64, len(x))
	for i, v := range x {
		scaled[i] = engine.RoundToDType(float64(float32(v)/float32(t)), d)
	}
	p := samplertest.Softmax(scaled, 1)
	return rounded(p, d), scaled
}

// softmaxBF16 is temperature softmax on bf16 logits of Llama 3's vocabulary
// (128256) at temperatures 0.01, 1 and 100. The external probs are what
// torch computes from bf16 logits, `(logits / T).softmax(-1)` in bf16: at
// T = 0.01 the scaled logits (around 850) are rounded to bf16's step of 4,
// so the near-tied tokens of row 0 move by whole units of log-probability.
// That row is far from the strict reference and exactly the native one; the
// other rows match the strict reference.
func softmaxBF16() (*scenario, error) {
	const rows, vocab = 3, 128256
	temps := []float64{0.01, 1, 100}
	x := softmaxRows(404, rows, vocab, engine.BF16, 8.5, 0.0625)
	probs := make([]float64, 0, rows*vocab)
	for r, t := range temps {
		p, _ := torchSoftmax(x[r*vocab:(r+1)*vocab], t, engine.BF16)
		probs = append(probs, p...)
	}
	// The design: at T = 0.01 the native and strict references of row 0
	// differ far beyond bf16's tolerance, so the external row can only
	// match the native one.
	if g := nativeGap(x[:vocab], temps[0], engine.BF16); g < 10 {
		return nil, fmt.Errorf("softmax-bf16-128256: row 0's native and strict references are only %.3g tolerances apart", g)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "softmax-bf16-128256",
			Title:   "Temperature softmax, bf16, 128256 tokens",
			Summary: "Llama 3's vocabulary in bf16 at T = 0.01, 1 and 100; torch's bf16 softmax fails the strict reference at T = 0.01 and matches the native one.",
			Op:      engine.OpSoftmax,
			View:    "/rows/0",
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true, Matched: &scenarios.Matched{Strict: span(0, rows)}},
				{Name: "probs", Pass: true, Matched: &scenarios.Matched{Strict: []int{1, 2}, Native: []int{0}}},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, temps),
			f64("probs", engine.BF16, []int{rows, vocab}, probs),
		},
	}, nil
}

// nativeGap returns how far the strict and the native softmax of x at t
// are apart, in units of the tolerance of dtype d: the greatest
// |strict - native| / (atol + rtol*strict) over the tokens.
func nativeGap(x []float64, t float64, d engine.DType) float64 {
	tol := map[engine.DType][2]float64{engine.BF16: {1e-5, 1.6e-2}, engine.F16: {1e-5, 1e-3}, engine.F32: {1e-5, 1.3e-6}}[d]
	strict := samplertest.Softmax(x, float64(float32(t)))
	_, scaled := torchSoftmax(x, t, d)
	native := samplertest.Softmax(scaled, 1)
	var gap float64
	for i := range strict {
		gap = max(gap, math.Abs(strict[i]-native[i])/(tol[0]+tol[1]*strict[i]))
	}
	return gap
}

// softmaxFP16 is temperature softmax on fp16 logits of Qwen 2's vocabulary
// (151936), at T = 0.01 and 100: a vocabulary far past what a block keeps
// on chip.
func softmaxFP16() (*scenario, error) {
	const rows, vocab = 2, 151936
	x := softmaxRows(505, rows, vocab, engine.F16, 9, 0.01)
	return &scenario{
		cfg: scenarios.Config{
			Name:    "softmax-fp16-151936",
			Title:   "Temperature softmax, fp16, 151936 tokens",
			Summary: "Qwen 2's vocabulary in fp16 at T = 0.01 and 100: the multi-pass path of the kernels, judged at fp16's tolerance.",
			Op:      engine.OpSoftmax,
			View:    "/rows/0",
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true, Matched: &scenarios.Matched{Strict: span(0, rows)}},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.F16, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, []float64{0.01, 100}),
		},
	}, nil
}

// scaleBeforeMax reproduces the kernel that divides fp16 logits by a tiny
// temperature before it takes the max: rows 1 and 4 hold a logit whose
// scaled value passes fp16's largest (65504), becomes +Inf, and turns the
// whole row into NaN (Inf - Inf). Row 3 has the same tiny temperature but
// its logits stay within ±6, so its scaled logits (up to 60000) stay finite:
// coarse, but exactly what the native reference computes. The other rows
// have ordinary temperatures.
func scaleBeforeMax() (*scenario, error) {
	const rows, vocab = 6, 16384
	temps := []float64{1, 1e-4, 0.5, 1e-4, 2e-4, 1}
	rng := newRand(606)
	x := normals(rng, rows*vocab, 2)
	planted := rng.Perm(vocab)
	for r := range rows {
		row := x[r*vocab : (r+1)*vocab]
		switch r {
		case 1:
			row[planted[r]] = 8 // 8 / 1e-4 = 80000 > 65504
		case 3:
			for i, v := range row {
				row[i] = max(-6, min(6, v*0.75))
			}
		case 4:
			row[planted[r]] = 14 // 14 / 2e-4 = 70000 > 65504
		}
	}
	x = rounded(x, engine.F16)
	probs := make([]float64, 0, rows*vocab)
	overflow := map[int]bool{}
	for r, t := range temps {
		p, scaled := torchSoftmax(x[r*vocab:(r+1)*vocab], t, engine.F16)
		probs = append(probs, p...)
		for _, y := range scaled {
			if math.IsInf(y, 1) {
				overflow[r] = true
			}
			if math.IsInf(y, -1) && r == 3 {
				return nil, fmt.Errorf("scale-before-max: row 3 overflows to -Inf")
			}
		}
	}
	if len(overflow) != 2 || !overflow[1] || !overflow[4] {
		return nil, fmt.Errorf("scale-before-max: rows %v overflow, want rows 1 and 4", overflow)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "scale-before-max",
			Title:   "Scaling before the max",
			Summary: "An fp16 kernel that divides by T = 1e-4 before taking the max overflows to Inf and turns two rows into NaN; sampviz flags exactly those rows.",
			Op:      engine.OpSoftmax,
			View:    "?out=1&failing=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "probs", Pass: false, Failing: []scenarios.RowRules{
					fail(1, engine.RuleNaN, engine.RuleTolerance),
					fail(4, engine.RuleNaN, engine.RuleTolerance),
				}},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.F16, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, temps),
			f64("probs", engine.F16, []int{rows, vocab}, probs),
		},
	}, nil
}
