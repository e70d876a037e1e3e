package generate

import (
	"context"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// seededDeterminism is a sample batch with per-row seeds, and the draws our
// backend makes for those seeds recorded in the dump: `tokens` (one draw per
// row, by the row's sampler) and `samples` (256 inverse-CDF draws per row).
// engine/cpu and the CUDA kernels draw the same tokens for the same seed,
// offset, row and draw index (the GPU suite checks it), so any run of this
// dump, on either backend, must reproduce them exactly; another seed must
// not. Rows 0 and 1 have the same logits and the same seed, yet draw
// differently: the row index is part of the Philox counter.
func seededDeterminism() (*scenario, error) {
	const rows, vocab, draws = 4, 32000, 256
	rng := newRand(1515)
	x := rounded(normals(rng, rows*vocab, 2), engine.BF16)
	copy(x[vocab:2*vocab], x[:vocab])
	tensors := []*engine.Tensor{
		f64("logits", engine.BF16, []int{rows, vocab}, x),
		f64("temperature", engine.F32, []int{rows}, []float64{1, 1, 0.7, 1.2}),
		i64("top_k", []int{rows}, []int64{0, 0, 100, 0}),
		f64("top_p", engine.F32, []int{rows}, []float64{1, 1, 0.9, 1}),
		i64("seed", []int{rows}, []int64{42, 42, 42, 7}),
	}
	meta := map[string]string{"op": string(engine.OpSample)}
	over := scenarios.Overrides{Draws: intp(draws)}
	run, err := loadRun("seeded-determinism", tensors, meta, over.Engine())
	if err != nil {
		return nil, err
	}
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		return nil, fmt.Errorf("seeded-determinism: record the draws: %w", err)
	}
	recorded := []*engine.Tensor{
		i64("tokens", []int{rows}, out.Tokens.Ints()),
		i64("samples", []int{rows, draws}, out.Samples.Ints()),
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:        "seeded-determinism",
			Title:       "Seeded determinism",
			Summary:     "The dump records the draws of seeds 42 and 7; every run must draw exactly them again, and another seed must not.",
			Op:          engine.OpSample,
			Overrides:   over,
			View:        "/rows/0",
			Determinism: &scenarios.Determinism{Recorded: []string{"tokens", "samples"}, OtherSeed: 43},
			Expect: scenarios.Expect{Pass: true, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "tokens", Pass: true},
				{Name: "samples", Pass: true},
			}},
		},
		tensors: append(tensors, recorded...),
	}, nil
}

// nanAndMaskedRows is a softmax batch with a NaN in row 2 and every logit of
// row 4 masked (-Inf). Our kernel marks those two rows and leaves the others
// alone. The external probs come from `(logits - logits.max()).softmax(-1)`:
// the max over the whole batch (dim forgotten) is NaN, and NaN spreads to
// every row.
func nanAndMaskedRows() (*scenario, error) {
	const rows, vocab = 6, 4096
	const nanRow, maskedRow = 2, 4
	rng := newRand(1616)
	x := rounded(normals(rng, rows*vocab, 2), engine.F32)
	x[nanRow*vocab+17] = math.NaN()
	x[nanRow*vocab+2000] = math.NaN()
	for i := range vocab {
		x[maskedRow*vocab+i] = math.Inf(-1)
	}
	global := math.Inf(-1)
	for _, v := range x {
		if v > global || v != v {
			global = v
		}
		if global != global {
			break
		}
	}
	probs := make([]float64, 0, rows*vocab)
	var failing []scenarios.RowRules
	for r := range rows {
		row := make([]float64, vocab)
		var s float64
		for i := range row {
			row[i] = math.Exp(x[r*vocab+i] - global)
			s += row[i]
		}
		for i := range row {
			row[i] /= s
		}
		probs = append(probs, row...)
		switch r {
		case nanRow:
			failing = append(failing, fail(r, engine.RuleNaN))
		case maskedRow:
			failing = append(failing, fail(r, engine.RuleMasked))
		default:
			// NaN everywhere: NaN outputs, each off by NaN.
			failing = append(failing, fail(r, engine.RuleNaN, engine.RuleTolerance))
		}
	}
	if !math.IsNaN(global) {
		return nil, fmt.Errorf("nan-and-masked-rows: the batch max is %g, not NaN", global)
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "nan-and-masked-rows",
			Title:   "A NaN row and a masked row in a batch",
			Summary: "Rows without a distribution are reported on their own row, the others are unaffected; a softmax that takes the max over the whole batch lets one NaN poison every row.",
			Op:      engine.OpSoftmax,
			View:    "",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: false, Failing: []scenarios.RowRules{
					fail(nanRow, engine.RuleNaN),
					fail(maskedRow, engine.RuleMasked),
				}},
				{Name: "probs", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.F32, []int{rows, vocab}, x),
			f64("probs", engine.F32, []int{rows, vocab}, probs),
		},
	}, nil
}

// oddVocabulary uses GPT-2's vocabulary of 50257 tokens: odd, so no tile
// or vector width divides it, and its last token (50256) is <|endoftext|>.
// Row 0 wants to stop (end-of-text is its most probable token), row 1
// gives it a tiny probability, row 2 masks it. The external probs come from
// a bf16 kernel that reads rows in 16-byte vectors (8 tokens) and drops the
// remainder: it never sees token 50256. That loses half of row 0's mass,
// drops a token row 1 keeps (however unlikely), and is invisible on row 2.
func oddVocabulary() (*scenario, error) {
	const rows, vocab = 3, 50257
	const eos = vocab - 1
	const seen = vocab / 8 * 8
	rng := newRand(1717)
	x := normals(rng, rows*vocab, 2)
	x[0*vocab+eos] = 13
	x[1*vocab+eos] = -12
	x[2*vocab+eos] = math.Inf(-1)
	x = rounded(x, engine.BF16)
	probs := make([]float64, 0, rows*vocab)
	for r := range rows {
		p := samplertest.Softmax(x[r*vocab:r*vocab+seen], 1)
		probs = append(probs, p...)
		probs = append(probs, make([]float64, vocab-seen)...)
		if full := samplertest.Softmax(x[r*vocab:(r+1)*vocab], 1); r == 0 && full[eos] < 0.3 {
			return nil, fmt.Errorf("odd-vocabulary: end-of-text has only %g of row 0", full[eos])
		}
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "odd-vocabulary",
			Title:   "A vocabulary no tile divides",
			Summary: "GPT-2's 50257 tokens: a kernel reading 8-token vectors that drops the remainder never sees <|endoftext|>, and sampviz finds the rows where that matters.",
			Op:      engine.OpSoftmax,
			View:    "/rows/0",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "probs", Pass: false, Failing: []scenarios.RowRules{
					fail(0, engine.RuleSupport, engine.RuleTolerance),
					fail(1, engine.RuleSupport),
				}},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			f64("probs", engine.BF16, []int{rows, vocab}, probs),
		},
	}, nil
}
