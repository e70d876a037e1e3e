package generate

import (
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
	"github.com/sampviz/sampviz/scenarios"
)

// graphVsEager is a sampled batch recorded twice by one engine, eagerly
// and under CUDA-graph replay, with the same seed and offset declared for
// both modes (seed@eager, seed@graph): the graph path draws another token
// on three rows (TokenSpeed #280's bug: the graph captured the generator's
// state once). Every token of both modes is a legal draw, so only the
// agreement between the modes can catch it.
func graphVsEager() (*scenario, error) {
	const rows, vocab = 8, 32000
	parted := []int{1, 4, 6}
	rng := newRand(2301)
	x := rounded(normals(rng, rows*vocab, 2), engine.BF16)
	seeds := make([]int64, rows)
	eager, graph := make([]int64, rows), make([]int64, rows)
	for r := range rows {
		seeds[r] = int64(4200 + r)
		q := samplertest.Softmax(x[r*vocab:(r+1)*vocab], 0.8)
		eager[r] = int64(draw(q, rng.Float64()))
		graph[r] = eager[r]
		if contains(parted, r) {
			for graph[r] == eager[r] {
				graph[r] = int64(draw(q, rng.Float64()))
			}
		}
	}
	var failing []scenarios.RowRules
	for _, r := range parted {
		failing = append(failing, fail(r, engine.RuleAgreement))
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:      "graph-vs-eager",
			Title:     "CUDA graph against eager, same seed",
			Summary:   "One engine's sampler recorded eagerly and under CUDA-graph replay with the same seeds: the graph path draws other tokens on three rows, every one of them a legal draw.",
			Op:        engine.OpSample,
			Overrides: scenarios.Overrides{Draws: intp(300)},
			View:      "?agree=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "tokens@eager", Pass: true},
				{Name: "tokens@graph", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{}, []float64{0.8}),
			i64("seed", []int{rows}, seeds),
			i64("tokens@eager", []int{rows}, eager),
			i64("seed@eager", []int{rows}, seeds),
			i64("tokens@graph", []int{rows}, graph),
			i64("seed@graph", []int{rows}, seeds),
		},
	}, nil
}

// contains reports whether rows holds r.
func contains(rows []int, r int) bool {
	for _, x := range rows {
		if x == r {
			return true
		}
	}
	return false
}

// logitsGate is pegainfer #307's gate from one dump: golden fp32 logits
// (Hugging Face) and an engine's bf16 logits in four modes, each rounded
// to bf16 with its own noise of 0.01. Every row has a clear winner at 10,
// except row 6, whose runner-up sits one bf16 step (0.0625) below it. Mode
// graph_pad9 raises another token of row 3 above the winner (a real flip,
// 1.5 or more below the top in the golden logits, far past what bf16's
// tolerance allows: 1.6e-2 of the row's greatest logit, 0.16); mode
// graph_pad5 swaps row 6's near-tie (a fragile flip, within 0.16).
func logitsGate() (*scenario, error) {
	const rows, vocab = 8, 32000
	const realRow, fragileRow = 3, 6
	const top, below = 10.0, 9.9375
	rng := newRand(2302)
	x := normals(rng, rows*vocab, 2)
	winners := rng.Perm(vocab)
	for i := range x {
		x[i] = engine.RoundToDType(min(x[i], 8.5), engine.F32)
	}
	second := make([]int, rows)
	for r := range rows {
		row := x[r*vocab : (r+1)*vocab]
		row[winners[r]] = top
		second[r] = winners[rows+r]
		if r == fragileRow {
			row[second[r]] = below
		}
	}
	modes := []string{"bs1_eager", "batched_eager", "graph_pad9", "graph_pad5"}
	tensors := []*engine.Tensor{f64("logits", engine.F32, []int{rows, vocab}, x)}
	for _, m := range modes {
		e := make([]float64, len(x))
		for i, v := range x {
			e[i] = engine.RoundToDType(v+0.01*rng.NormFloat64(), engine.BF16)
		}
		for r := range rows {
			for _, t := range []int{winners[r], second[r]} {
				e[r*vocab+t] = engine.RoundToDType(x[r*vocab+t], engine.BF16)
			}
		}
		switch m {
		case "graph_pad9":
			e[realRow*vocab+second[realRow]] = top + 1
		case "graph_pad5":
			e[fragileRow*vocab+winners[fragileRow]], e[fragileRow*vocab+second[fragileRow]] = below, top
		}
		if err := checkTop(e, x, rows, vocab, winners, m, realRow, fragileRow); err != nil {
			return nil, err
		}
		tensors = append(tensors, f64("logits@"+m, engine.BF16, []int{rows, vocab}, e))
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "logits-gate",
			Title:   "Golden-logits gate, four modes",
			Summary: "An engine's bf16 logits in four modes against Hugging Face's fp32 ones: mean, P99 and max |Δlogit| per mode, one real top-1 flip and one fragile one.",
			Op:      engine.OpLogitsGate,
			View:    "?modes=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "logits@batched_eager", Pass: true, Notes: []scenarios.RuleRows{{Rule: engine.RuleFragile, Rows: []int{}}}},
				{Name: "logits@bs1_eager", Pass: true, Notes: []scenarios.RuleRows{{Rule: engine.RuleFragile, Rows: []int{}}}},
				{Name: "logits@graph_pad5", Pass: true, Notes: []scenarios.RuleRows{{Rule: engine.RuleFragile, Rows: []int{fragileRow}}}},
				{Name: "logits@graph_pad9", Pass: false, Failing: []scenarios.RowRules{fail(realRow, engine.RuleTolerance, engine.RuleToken)}},
			}},
		},
		tensors: tensors,
	}, nil
}

// checkTop checks that a mode's logits e put the golden winner on top of
// every row but the two built to flip, so that the gate's verdict is the
// design's and not the noise's.
func checkTop(e, x []float64, rows, vocab int, winners []int, mode string, realRow, fragileRow int) error {
	for r := range rows {
		_, at := maxOf(e[r*vocab : (r+1)*vocab])
		flips := mode == "graph_pad9" && r == realRow || mode == "graph_pad5" && r == fragileRow
		if (at != winners[r]) != flips {
			return fmt.Errorf("logits-gate: mode %s, row %d: top-1 is token %d, the golden's %d", mode, r, at, winners[r])
		}
		for i := range vocab {
			if d := math.Abs(e[r*vocab+i] - x[r*vocab+i]); d > 0.15 && !flips {
				return fmt.Errorf("logits-gate: mode %s, row %d, token %d: |Δlogit| %g is near the tolerance", mode, r, i, d)
			}
		}
	}
	return nil
}

// paddedBatch is a softmax launched as a CUDA graph of 8 lanes for 6 real
// rows: the valid mask marks lanes 6 and 7 as padding, whose logits are
// zeros. Mode graph is right on every real row but writes the uniform
// distribution its zero logits give into padded lane 6 (its fill is 0);
// mode shifted put the padding first when it gathered the rows, so real
// rows 1 to 5 hold the probabilities of the row before them.
func paddedBatch() (*scenario, error) {
	const rows, vocab, real = 8, 32000, 6
	rng := newRand(2303)
	x := rounded(normals(rng, rows*vocab, 2), engine.BF16)
	clear(x[real*vocab:])
	valid := make([]int64, rows)
	for r := range real {
		valid[r] = 1
	}
	probs := make([][]float64, rows)
	for r := range rows {
		probs[r] = rounded(samplertest.Softmax(x[r*vocab:(r+1)*vocab], 1), engine.F32)
	}
	graph := make([]float64, rows*vocab)
	shifted := make([]float64, rows*vocab)
	for r := range real {
		copy(graph[r*vocab:], probs[r])
		copy(shifted[r*vocab:], probs[max(r-1, 0)])
	}
	copy(graph[real*vocab:], probs[real]) // the write into padded lane 6
	var failing []scenarios.RowRules
	for r := 1; r < real; r++ {
		failing = append(failing, fail(r, engine.RulePadding, engine.RuleTolerance))
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "padded-batch",
			Title:   "Padded CUDA-graph batch",
			Summary: "Six real rows in a graph of eight lanes: padded lanes are never judged, a kernel that writes into one is caught, and so is one whose real rows are shifted by the padding.",
			Op:      engine.OpSoftmax,
			View:    "?padding=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "probs@graph", Pass: false, Failing: []scenarios.RowRules{fail(real, engine.RulePadding)}},
				{Name: "probs@shifted", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			engine.FromInts("valid", engine.U8, []int{rows}, valid),
			f64("probs@graph", engine.F32, []int{rows, vocab}, graph),
			f64("probs@shifted", engine.F32, []int{rows, vocab}, shifted),
		},
	}, nil
}

// kernelFixDiff is a before/after pair for `sampviz diff`: renorm of fp32
// logits at T = 0.8 with top-p 0.9, judged before and after a fix of an
// external kernel. Before, rows 2 and 5 drop the token that crosses top-p
// (the classic < against <= at the cut) and renormalise over the rest;
// the fix keeps it, but the after kernel forgets to renormalise row 7
// (its kept tokens hold their unfiltered probabilities, about 0.9 in all).
// The inputs are the same, so diff compares row by row: two rows fixed, one
// broken, and it exits 1.
func kernelFixDiff() (*scenario, error) {
	const rows, vocab, temp, topP = 8, 4096, 0.8, 0.9
	fixed, broken := []int{2, 5}, 7
	rng := newRand(2304)
	x := rounded(normals(rng, rows*vocab, 2), engine.F32)
	before, after := make([]float64, 0, rows*vocab), make([]float64, 0, rows*vocab)
	for r := range rows {
		p := samplertest.Softmax(x[r*vocab:(r+1)*vocab], temp)
		keep, err := filters{topP: topP, order: engine.TopKFirst}.keep(p, 2e-5)
		if err != nil {
			return nil, fmt.Errorf("kernel-fix-diff row %d: %w", r, err)
		}
		right := restrict(p, keep)
		b, a := right, right
		if contains(fixed, r) {
			cut, least := -1, 2.0
			for i, k := range keep {
				if k && p[i] < least {
					cut, least = i, p[i]
				}
			}
			dropped := slices.Clone(keep)
			dropped[cut] = false
			b = restrict(p, dropped)
		}
		if r == broken {
			a = make([]float64, vocab)
			for i, k := range keep {
				if k {
					a[i] = p[i]
				}
			}
		}
		before = append(before, rounded(b, engine.F32)...)
		after = append(after, rounded(a, engine.F32)...)
	}
	inputs := []*engine.Tensor{
		f64("logits", engine.F32, []int{rows, vocab}, x),
		f64("temperature", engine.F32, []int{}, []float64{temp}),
		f64("top_p", engine.F32, []int{}, []float64{topP}),
	}
	var failing []scenarios.RowRules
	for _, r := range fixed {
		failing = append(failing, fail(r, engine.RuleSupport, engine.RuleTolerance))
	}
	return &scenario{
		cfg: scenarios.Config{
			Name:    "kernel-fix-diff",
			Title:   "Before and after a kernel fix",
			Summary: "A top-p kernel judged before and after its fix: `sampviz diff` lists two rows fixed and one broken by the fix, row by row on the same inputs.",
			Op:      engine.OpRenorm,
			View:    "?compare=after",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "probs", Pass: false, Failing: failing},
			}},
			Diff: &scenarios.DiffExpect{Worse: true, Output: "probs", Fixed: fixed, Broken: []int{broken}},
		},
		tensors: append(slices.Clone(inputs), f64("probs", engine.F32, []int{rows, vocab}, before)),
		after:   append(slices.Clone(inputs), f64("probs", engine.F32, []int{rows, vocab}, after)),
	}, nil
}
