package generate

import (
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/scenarios"
)

// logprobsKinds is one batch's logprobs as a vLLM engine returns them, four
// ways: every token's raw logprobs (vLLM V1's default, raw_logprobs), the
// top-20 of its processed ones (processed_logprobs: after temperature and
// top-k or top-p), the same top-20 in a dump that does not say they are
// processed (what V0 returned, judged as V1's raw default: the confusion of
// vllm #15420 and #18352's comparisons), and a top-20 from an engine that
// divides by the temperature twice. Each row's 25 most probable tokens are
// laid out a quarter of a logit apart (bf16 holds them exactly) above a
// normal body, so that every cut falls between two of them with room to
// spare; the builder checks that no top-p cut comes within 5% of the mass
// it cuts at.
func logprobsKinds() (*scenario, error) {
	const rows, vocab, n, head = 8, 4096, 20, 25
	temps := []float64{1, 0.7, 0, 1.3, 1, 1, 0.5, 0.9}
	topK := []int{0, 22, 0, 20, 0, 10, 24, 0}
	topP := []float64{1, 1, 0.5, 1, 0.7, 1, 1, 1}
	rng := newRand(2501)
	x := normals(rng, rows*vocab, 1.5)
	for r := range rows {
		row := x[r*vocab : (r+1)*vocab]
		for i := range row {
			row[i] = min(row[i], 3.5)
		}
		for j, tok := range rng.Perm(vocab)[:head] {
			row[tok] = 10 - 0.25*float64(j)
		}
	}
	x = rounded(x, engine.BF16)

	var raw []float64
	var procV, v0V, twiceV []float64
	var procI, twiceI []int64
	var v0Fail, twiceFail []scenarios.RowRules
	for r := range rows {
		row := x[r*vocab : (r+1)*vocab]
		raw = append(raw, f32LogSoftmax(row, 1, nil)...)
		t := temps[r]
		if t == 0 {
			t = 1 // vLLM divides a greedy row by 1
		}
		keep, err := kept(row, t, topK[r], topP[r])
		if err != nil {
			return nil, fmt.Errorf("logprobs-kinds row %d: %w", r, err)
		}
		proc := f32LogSoftmax(row, t, keep)
		ids, vals := topN(proc, row, n)
		procV, procI = append(procV, vals...), append(procI, ids...)
		v0V = append(v0V, vals...)

		// Judged as raw: every value is off by the temperature or the
		// renormalisation (more than 0.05 nats, far past 1e-4), and a row
		// that keeps fewer than 20 tokens holds -inf where raw keeps them.
		switch k := count(keep); {
		case t == 1 && k == vocab:
		case k < n:
			v0Fail = append(v0Fail, fail(r, engine.RuleSupport, engine.RuleTolerance))
		default:
			v0Fail = append(v0Fail, fail(r, engine.RuleTolerance))
		}
		if err := apart(vals, f32LogSoftmax(row, 1, nil), ids, t == 1 && count(keep) == vocab); err != nil {
			return nil, fmt.Errorf("logprobs-kinds row %d: %w", r, err)
		}

		// Divided twice: the rows at a temperature other than 0 and 1 take
		// T², whose filters (top-k alone there) keep the same tokens.
		t2 := t
		if temps[r] != 0 && temps[r] != 1 {
			t2 = t * t
			if topP[r] != 1 {
				return nil, fmt.Errorf("logprobs-kinds row %d: top-p would keep other tokens at T²", r)
			}
			twiceFail = append(twiceFail, fail(r, engine.RuleTolerance))
		}
		twice := f32LogSoftmax(row, t2, keep)
		ids2, vals2 := topN(twice, row, n)
		if !slices.Equal(ids2, ids) {
			return nil, fmt.Errorf("logprobs-kinds row %d: T² reorders the top-%d", r, n)
		}
		if err := apart(vals2, proc, ids2, t2 == t); err != nil {
			return nil, fmt.Errorf("logprobs-kinds row %d at T²: %w", r, err)
		}
		twiceV, twiceI = append(twiceV, vals2...), append(twiceI, ids2...)
	}

	tempsT := make([]float64, rows)
	copy(tempsT, temps)
	return &scenario{
		cfg: scenarios.Config{
			Name:    "logprobs-kinds",
			Title:   "Logprobs: raw, processed, and the two confused",
			Summary: "One batch's logprobs four ways: vLLM's raw ones, the top-20 of its processed ones, the same top-20 judged as raw because the dump does not say they are processed (vLLM V0 against V1), and an engine that divides by the temperature twice.",
			Op:      engine.OpRenorm,
			View:    "?modes=1",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "logprobs@processed", Pass: true},
				{Name: "logprobs@raw", Pass: true},
				{Name: "logprobs@temperature_twice", Pass: false, Failing: twiceFail},
				{Name: "logprobs@v0_style", Pass: false, Failing: v0Fail},
			}},
		},
		meta: map[string]string{
			"logprobs_kind@processed":         "processed",
			"logprobs_kind@temperature_twice": "processed",
		},
		tensors: []*engine.Tensor{
			f64("logits", engine.BF16, []int{rows, vocab}, x),
			f64("temperature", engine.F32, []int{rows}, tempsT),
			i64("top_k", []int{rows}, ints(topK)),
			f64("top_p", engine.F32, []int{rows}, topP),
			f64("logprobs@raw", engine.F32, []int{rows, vocab}, raw),
			f64("logprobs@processed", engine.F32, []int{rows, n}, procV),
			i64("logprob_token_ids@processed", []int{rows, n}, procI),
			f64("logprobs@v0_style", engine.F32, []int{rows, n}, v0V),
			i64("logprob_token_ids@v0_style", []int{rows, n}, procI),
			f64("logprobs@temperature_twice", engine.F32, []int{rows, n}, twiceV),
			i64("logprob_token_ids@temperature_twice", []int{rows, n}, twiceI),
		},
	}, nil
}

// f32LogSoftmax is a float32 kernel's log-softmax (vLLM's: logits.float()
// / T, the dropped tokens -inf, log_softmax): z = float32(x)/float32(t), the
// exps summed in float32 in order, out = (z - max) - log Σ; -inf where keep
// (nil: every token) is false.
func f32LogSoftmax(x []float64, t float64, keep []bool) []float64 {
	in := func(i int) bool { return keep == nil || keep[i] }
	z := make([]float32, len(x))
	m := float32(math.Inf(-1))
	for i, xi := range x {
		z[i] = float32(xi) / float32(t)
		if in(i) {
			m = max(m, z[i])
		}
	}
	var s float32
	for i := range z {
		if in(i) {
			s += float32(math.Exp(float64(z[i] - m)))
		}
	}
	ls := float32(math.Log(float64(s)))
	out := make([]float64, len(x))
	for i := range z {
		out[i] = math.Inf(-1)
		if in(i) {
			out[i] = float64((z[i] - m) - ls)
		}
	}
	return out
}

// kept returns the tokens top-k (ties kept) or top-p (the crossing token
// kept) keep at temperature t, and an error when a top-p cut falls within
// 5% of the mass it cuts at, where a float32 engine might decide it either
// way.
func kept(x []float64, t float64, k int, p float64) ([]bool, error) {
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return 0
	})
	keep := make([]bool, len(x))
	if k > 0 && k < len(x) {
		kth := x[order[k-1]]
		if x[order[k]] > kth-0.2 {
			return nil, fmt.Errorf("the %d-th and %d-th logits are %g apart", k, k+1, kth-x[order[k]])
		}
		for i, v := range x {
			keep[i] = v >= kth
		}
		return keep, nil
	}
	m := x[order[0]]
	w := make([]float64, len(x))
	var z float64
	for i, v := range x {
		w[i] = math.Exp((v - m) / t)
		z += w[i]
	}
	ahead := 0.0
	for _, i := range order {
		if ahead >= p*z {
			if ahead < p*z*1.05 {
				return nil, fmt.Errorf("top-p %g cuts at %g of the mass", p, ahead/z)
			}
			break
		}
		if p < 1 && ahead+w[i] >= p*z && ahead+w[i] < p*z*1.05 {
			return nil, fmt.Errorf("top-p %g cuts at %g of the mass", p, (ahead+w[i])/z)
		}
		keep[i] = true
		ahead += w[i]
	}
	return keep, nil
}

// topN returns the n greatest values of l, most probable first, and their
// token ids; ties (the -inf of dropped tokens) go by the logits x, as the
// raw logprobs order them.
func topN(l, x []float64, n int) ([]int64, []float64) {
	order := make([]int, len(l))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case l[a] > l[b]:
			return -1
		case l[a] < l[b]:
			return 1
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return 0
	})
	ids, vals := make([]int64, n), make([]float64, n)
	for j, i := range order[:n] {
		ids[j], vals[j] = int64(i), l[i]
	}
	return ids, vals
}

// apart checks that the top-N values vals (of tokens ids) are either all
// within 1e-6 of other's (same), or some finite one is more than 0.05
// nats from it: a verdict that rests on no margin.
func apart(vals, other []float64, ids []int64, same bool) error {
	worst := 0.0
	for j, id := range ids {
		if a, b := vals[j], other[id]; !math.IsInf(a, -1) && !math.IsInf(b, -1) {
			worst = max(worst, math.Abs(a-b))
		}
	}
	switch {
	case same && worst > 1e-6:
		return fmt.Errorf("values meant to agree are %g apart", worst)
	case !same && worst < 0.05:
		return fmt.Errorf("values meant to differ are only %g apart", worst)
	}
	return nil
}

// count returns the number of true values.
func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
