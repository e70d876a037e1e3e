package lesson

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/philox"
	"github.com/sampviz/sampviz/engine/ref"
)

// Step s (from 0) reads two streams of the row: draw 2s+1 draws the draft
// token x ~ q (inverse CDF, block 0), and draw 2s is the stream a one-position
// chain verifies x with (its u is word 0 of block 0, its residual draw block
// 1), exactly as trial 2s of a spec_verify kernel with K = 1 would.

// LastSteps is how many of the last steps a lesson returns (State.Last).
const LastSteps = 8

// Tokens a lesson lists: the most probable under the target, then the most
// probable under the draft among the rest.
const (
	lessonTopP = 14
	lessonTopQ = 6
	// tvGrowth spaces the running total variation's points: each is at
	// least this factor more steps than the one before.
	tvGrowth = 1.2
)

// Teach runs lesson l on row r of run, a spec_verify run: l.Steps
// accept/reject steps on the row's real target logits at l.Position with
// the lesson's controls. A run that is not spec_verify, or a row, position
// or control out of range, gives an *Error; ctx's end, ctx's error.
func Teach(ctx context.Context, run *engine.Run, r int, l Lesson) (*State, error) {
	if run.Op != engine.OpSpecVerify || run.TargetLogits == nil || run.DraftTokens == nil {
		return nil, &Error{Msg: fmt.Sprintf("The teaching mode steps through speculative sampling, and %s is a %s dump, not spec_verify.", run.Source, run.Op)}
	}
	if r < 0 || r >= run.Rows() {
		return nil, &Error{Msg: fmt.Sprintf("There is no row %d: this run has rows 0 to %d.", r, run.Rows()-1)}
	}
	if err := checkLesson(l, run.DraftLen()); err != nil {
		return nil, err
	}
	return teach(ctx, run, r, l)
}

// checkLesson says, as an *Error, what is out of range in l for a row with
// k draft positions; the controls a run also has are checked against the
// parameter table, in its words.
func checkLesson(l Lesson, k int) error {
	msg := ""
	param := func(name string, err error) {
		if err != nil && msg == "" {
			msg = sentence(err.Error())
		}
	}
	switch {
	case k == 0:
		msg = "This dump has no draft positions to teach on."
	case l.Position < 0 || l.Position >= k:
		msg = fmt.Sprintf("Position %d is not a draft position: this row has positions 0 to %d.", l.Position, k-1)
	case !(l.Distance >= 0 && l.Distance <= 1):
		msg = fmt.Sprintf("Distance must be in [0, 1], not %v.", l.Distance)
	case l.Steps < 0 || l.Steps > MaxSteps:
		msg = fmt.Sprintf("Steps must be in [0, %d], not %d.", MaxSteps, l.Steps)
	}
	if l.Temperature != nil {
		param("temperature", engine.ParamByName("temperature").CheckFloat(*l.Temperature))
	}
	if l.TopK != nil {
		param("top_k", engine.ParamByName("top_k").CheckInt(int64(*l.TopK)))
	}
	if l.TopP != nil {
		param("top_p", engine.ParamByName("top_p").CheckFloat(*l.TopP))
	}
	if msg != "" {
		return &Error{Msg: msg}
	}
	return nil
}

// sentence capitalises msg and ends it with a full stop.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

// teach runs lesson l on row r of run.
func teach(ctx context.Context, run *engine.Run, r int, l Lesson) (*State, error) {
	pp := &run.Params
	k, v := run.DraftLen(), run.Vocab()
	st := &State{
		Row: r, Position: l.Position, K: k, Vocab: v, Temperature: 1, TopP: 1,
		Distance: l.Distance, Steps: l.Steps, OneHot: run.DraftProbs == nil, Draft: -1,
	}
	if r < len(pp.Temperature) {
		st.Temperature, st.TopK, st.TopP, st.MinP = pp.Temperature[r], pp.TopK[r], pp.TopP[r], pp.MinP[r]
	}
	if r < len(pp.Seed) {
		st.Seed = pp.Seed[r]
	}
	l.Override(st)
	pos := l.Position
	st.Draft = int(run.DraftTokens.Int(r*k + pos))
	if st.Draft < 0 || st.Draft >= v {
		st.Invalid = fmt.Sprintf("The row's draft token at position %d is %d, outside [0, %d).", pos, st.Draft, v)
		return st, nil
	}

	// p: the target, renormalised with the lesson's controls, in float32 as
	// the kernels compute it.
	x := make([]float32, v)
	run.TargetLogits.Floats32((r*(k+1)+pos)*v, x)
	w := make([]float32, v)
	t := float32(st.Temperature)
	if !cpu.Weights(x, t, w) {
		st.Invalid = fmt.Sprintf("The target logits at position %d have no distribution (a NaN or +Inf logit, or every token masked).", pos)
		return st, nil
	}
	p := make([]float32, v)
	var keep []bool
	if t > 0 && ((st.TopK > 0 && st.TopK < v) || st.TopP < 1 || st.MinP > 0) {
		keep = make([]bool, v)
		fw := w
		if pp.TemperatureOrder == engine.TemperatureLast && t != 1 {
			// The filters come before the temperature: decide them at T = 1.
			fw = make([]float32, v)
			cpu.Weights(x, 1, fw)
		}
		cpu.Filter(fw, st.TopK, float32(st.TopP), float32(st.MinP), pp.FilterOrder, pp.TopKTies, keep)
	}
	cpu.Renorm(w, keep, p)

	// q: the row's draft, normalised, moved toward p by 1 - d.
	qrow := make([]float64, v)
	if run.DraftProbs != nil {
		run.DraftProbs.Floats64((r*k+pos)*v, qrow)
		sum := 0.0
		for i, q := range qrow {
			if math.IsNaN(q) || math.IsInf(q, 0) || q < 0 {
				st.Invalid = fmt.Sprintf("The row's draft probabilities at position %d hold %v at token %d; they are not a distribution.", pos, q, i)
				return st, nil
			}
			sum += q
		}
		if sum <= 0 {
			st.Invalid = fmt.Sprintf("The row's draft probabilities at position %d are all zero.", pos)
			return st, nil
		}
		for i := range qrow {
			qrow[i] /= sum
		}
	} else {
		qrow[st.Draft] = 1
	}
	d := l.Distance
	q := make([]float32, v)
	if d == 0 {
		copy(q, p) // exactly the target: every proposal is accepted
	} else {
		qsum := 0.0
		mix := make([]float64, v)
		for i := range mix {
			mix[i] = (1-d)*float64(p[i]) + d*qrow[i]
			qsum += mix[i]
		}
		for i := range q {
			q[i] = float32(mix[i] / qsum)
		}
	}
	// β and TV on p and q normalised in float64 (their float32 sums are off
	// 1 by rounding), so that q = p gives exactly β = 1.
	psum, qsum := 0.0, 0.0
	for i := range q {
		psum += float64(p[i])
		qsum += float64(q[i])
	}
	beta, tv := 0.0, 0.0
	for i := range q {
		pi, qi := float64(p[i])/psum, float64(q[i])/qsum
		beta += math.Min(pi, qi)
		tv += math.Abs(pi - qi)
	}
	st.Beta, st.TV = engine.Float(math.Min(beta, 1)), engine.Float(tv/2)
	if d == 0 {
		st.Beta, st.TV = 1, 0 // q is p: exactly, not up to the float64 sum
	}

	// The histogram's bars: the most probable tokens under p, then under q,
	// and the rest pooled (bar -1). The running total variation is taken
	// over these bars, which is what the histogram shows converging.
	bar := make([]int32, v)
	for i := range bar {
		bar[i] = -1
	}
	var shown []int
	skip := map[int]bool{}
	for _, i := range topIndices32(p, lessonTopP, nil) {
		skip[i] = true
		shown = append(shown, i)
	}
	shown = append(shown, topIndices32(q, lessonTopQ, skip)...)
	pBar := make([]float64, len(shown)+1) // the last is the rest
	qBar := make([]float64, len(shown)+1)
	pBar[len(shown)], qBar[len(shown)] = 1, 1
	for b, i := range shown {
		bar[i] = int32(b)
		pBar[b], qBar[b] = float64(p[i])/psum, float64(q[i])/qsum
		pBar[len(shown)] -= pBar[b]
		qBar[len(shown)] -= qBar[b]
	}
	pBar[len(shown)], qBar[len(shown)] = max(pBar[len(shown)], 0), max(qBar[len(shown)], 0)
	st.TVBars = engine.Float(barTV(qBar, nil, 1, pBar))

	// The steps.
	drafts := []int32{0}
	chain := cpu.NewSpecChain(drafts, [][]float32{p, p}, [][]float32{q}, nil)
	var qcdf cpu.CDF
	qcdf.Reset(q, nil)
	if qcdf.Total() == 0 {
		st.Invalid = "The draft gives no token a weight the sampler can draw."
		return st, nil
	}
	accepted := make([]int32, v)
	resampled := make([]int32, v)
	drafted := make([]int32, v)
	emittedBars := make([]int, len(pBar))
	draftBars := make([]int, len(pBar))
	binOf := func(i int) int {
		if b := bar[i]; b >= 0 {
			return int(b)
		}
		return len(shown)
	}
	tokens := make([]int32, 2)
	steps := make([]engine.SpecStep, 2)
	next := 1 // the next step count with a running TV point
	for s := 0; s < l.Steps; s++ {
		if s%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		xs := qcdf.Draw(philox.NewStream(st.Seed, 0, r, 2*s+1).U64(0))
		drafts[0] = int32(xs)
		chain.Verify(philox.NewStream(st.Seed, 0, r, 2*s), tokens, steps)
		tok := int(tokens[0])
		if tok < 0 || tok >= v {
			return nil, fmt.Errorf("teach row %d position %d: step %d emitted token %d", r, pos, s+1, tok)
		}
		drafted[xs]++
		draftBars[binOf(xs)]++
		emittedBars[binOf(tok)]++
		if steps[0].Accepted {
			accepted[tok]++
			st.Accepted++
		} else {
			resampled[tok]++
			st.Resampled++
		}
		if s >= l.Steps-LastSteps {
			st.Last = append(st.Last, Step{
				Step: s + 1, Draft: xs, U: engine.Float(steps[0].U), P: engine.Float(steps[0].P), Q: engine.Float(steps[0].Q),
				Accepted: steps[0].Accepted, Token: tok,
			})
		}
		if n := s + 1; n == next || n == l.Steps {
			st.Running = append(st.Running, TVPoint{
				Steps:   n,
				Emitted: engine.Float(barTV(nil, emittedBars, n, pBar)),
				Drafts:  engine.Float(barTV(nil, draftBars, n, pBar)),
			})
			next = max(n+1, int(math.Ceil(float64(n)*tvGrowth)))
		}
	}

	// The bars, and the rest pooled.
	st.Other = Token{Token: -1, P: engine.Float(pBar[len(shown)]), Q: engine.Float(qBar[len(shown)]),
		Drafted: l.Steps, Accepted: st.Accepted, Resampled: st.Resampled}
	for b, i := range shown {
		tk := Token{
			Token: i, P: engine.Float(pBar[b]), Q: engine.Float(qBar[b]),
			Drafted: int(drafted[i]), Accepted: int(accepted[i]), Resampled: int(resampled[i]),
		}
		st.Tokens = append(st.Tokens, tk)
		st.Other.Drafted -= tk.Drafted
		st.Other.Accepted -= tk.Accepted
		st.Other.Resampled -= tk.Resampled
	}
	return st, nil
}

// barTV returns the total variation ½ Σ |f_b - p_b| between frequencies and
// the distribution p over the same bars: f is freq when counts is nil, else
// counts[b]/n.
func barTV(freq []float64, counts []int, n int, p []float64) float64 {
	sum := 0.0
	for b := range p {
		f := 0.0
		if counts != nil {
			f = float64(counts[b]) / float64(n)
		} else {
			f = freq[b]
		}
		sum += math.Abs(f - p[b])
	}
	return sum / 2
}

// topIndices32 returns the indices of the n largest positive values of x not
// in skip, largest first, ties by lower index.
func topIndices32(x []float32, n int, skip map[int]bool) []int {
	y := make([]float64, len(x))
	for i, v := range x {
		if !skip[i] {
			y[i] = float64(v)
		}
	}
	return ref.TopIndices(y, n)
}
