package lesson

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/f32math"
	"github.com/sampviz/sampviz/engine/philox"
)

// The sampler teaching mode: one draw of a sample row, made the way the
// kernels make it (docs/SEMANTICS.md "sample"), with every number it
// reads: the inverse CDF's uniform and target, the sort-free rejection
// sampler's rounds (the pivot, the candidates and the mass outside the
// filters, the candidate drawn and its test), or the Gumbel-max race's
// noise and scores. The steps are recomputed here in the kernels'
// arithmetic on the CPU twin's pieces (engine/cpu's weights and filters,
// engine/philox's streams and fixed point), so the token they end on is
// the one cpu.SampleInverseCDF, cpu.SampleRejection and cpu.SampleGumbel
// draw for the same (seed, offset, row, draw), and the one our kernels
// drew for it.

// SampleLesson is the state of the sampler teaching mode, all of it in the
// URL: the method, which draw of the row, and the seed.
type SampleLesson struct {
	// Method is the sampler stepped through; SampleAuto takes the run's
	// (and auto is the inverse CDF).
	Method engine.SampleMethod
	// Draw is the Philox draw index d: draw 0 is the row's token, draws
	// 0..N-1 of the inverse CDF its many-draws samples.
	Draw int
	// Seed seeds the stream (nil: the row's seed).
	Seed *uint64
}

// MaxDraw bounds SampleLesson.Draw: the draws a sample run can make.
const MaxDraw = engine.MaxDraws

// SampleState is one draw of a sample row, step by step.
type SampleState struct {
	Row    int    `json:"row"`
	Draw   int    `json:"draw"`
	Seed   uint64 `json:"seed"`
	Offset uint64 `json:"offset"`
	// RowSeed is the row's own seed, the one our kernels drew with;
	// RunDraws the run's many draws per row (0: one token per row).
	RowSeed  uint64 `json:"row_seed"`
	RunDraws int    `json:"run_draws"`
	// RunCounted says the run stored its many draws counted per token
	// (sample_counts), not one by one: it holds no single draw.
	RunCounted bool `json:"run_counted,omitempty"`
	// Method is the method taught (never auto); RunMethod the run's own,
	// auto resolved.
	Method    engine.SampleMethod `json:"method"`
	RunMethod engine.SampleMethod `json:"run_method"`
	Vocab     int                 `json:"vocab"`
	// The row's parameters, as the kernels read them.
	Temperature float64            `json:"temperature"`
	TopK        int                `json:"top_k"`
	TopP        float64            `json:"top_p"`
	MinP        float64            `json:"min_p"`
	Order       engine.FilterOrder `json:"filter_order"`
	Ties        engine.TopKTies    `json:"top_k_ties"`
	// TemperatureLast says the filters were decided at temperature 1.
	TemperatureLast bool `json:"temperature_last,omitempty"`
	// Filtered says a filter is on; Kept counts the tokens the filters keep
	// and Positive those of positive fixed-point weight; KeptMass is the
	// kept tokens' share of the row's fixed-point mass.
	Filtered bool         `json:"filtered"`
	Kept     int          `json:"kept"`
	Positive int          `json:"positive"`
	KeptMass engine.Float `json:"kept_mass"`
	// Invalid says why nothing can be taught on the row (the rest is then
	// empty).
	Invalid string `json:"invalid,omitempty"`
	// Token is the token the draw emits.
	Token int `json:"token"`
	// Tokens are the tokens the lesson shows, in the sampler's order
	// (weight descending, ties by lower index): the most probable, then
	// every token a step names.
	Tokens []SampleToken `json:"tokens"`
	// Rest pools the tokens not shown: their count and share of the mass.
	Rest     int          `json:"rest"`
	RestMass engine.Float `json:"rest_mass"`
	// One of these holds the method's steps.
	CDF    *CDFDraw         `json:"cdf,omitempty"`
	Rounds []RejectionRound `json:"rounds,omitempty"`
	Gumbel *GumbelDraw      `json:"gumbel,omitempty"`
	// Kernel is our kernels' stored draw for this (row, draw, method), when
	// the run's outputs hold it (the session fills it).
	Kernel *KernelDraw `json:"kernel,omitempty"`
	// Text is the visible text of the token ids above, when the run has a
	// tokenizer (NameTokens).
	Text map[int64]string `json:"text,omitempty"`
}

// SampleToken is one token of a sampler lesson.
type SampleToken struct {
	Token int `json:"token"`
	// Rank is its place in the sampler's order, from 0.
	Rank  int          `json:"rank"`
	Logit engine.Float `json:"logit"`
	// W is its weight exp((x − m)/T) in float32; P its share of the row's
	// fixed-point mass before the filters, Q after (0 when dropped).
	W    engine.Float `json:"w"`
	P    engine.Float `json:"p"`
	Q    engine.Float `json:"q"`
	Kept bool         `json:"kept"`
	// Z, U, G and Score are the Gumbel race's: the scaled logit
	// (x − m)/T, the uniform, the noise −log(−log u) and z + g (Gumbel
	// lessons only; dropped tokens are not in the race).
	Z     engine.Float `json:"z,omitempty"`
	U     engine.Float `json:"u,omitempty"`
	G     engine.Float `json:"g,omitempty"`
	Score engine.Float `json:"score,omitempty"`
	// Time is its arrival in the exponential race, −log(u)/w, in float64.
	Time engine.Float `json:"time,omitempty"`
}

// CDFDraw is an inverse-CDF draw: U is the 64-bit uniform of block 0 as a
// fraction of 2^64, Total the kept fixed-point mass S, Target
// t = Pick(u, S); the token is the first whose inclusive prefix sum exceeds
// t, Before and After its prefix sums without and with it.
type CDFDraw struct {
	U      engine.Float `json:"u"`
	Total  uint64       `json:"total"`
	Target uint64       `json:"target"`
	Before uint64       `json:"before"`
	After  uint64       `json:"after"`
	// Curve samples the prefix sums over the kept tokens in index order
	// (the order the kernels sum in), as fractions of S.
	Curve []CDFPoint `json:"curve"`
}

// CDFPoint is the prefix sum of the weights up to and with token Token, as
// a fraction of the total.
type CDFPoint struct {
	Token int          `json:"token"`
	Cum   engine.Float `json:"cum"`
}

// RejectionRound is one round of the sort-free rejection sampler.
type RejectionRound struct {
	// Round counts from 0; it reads block Round of the stream.
	Round int `json:"round"`
	// PivotToken and PivotW are the threshold: the candidates are the
	// tokens ordered strictly before the candidate the last round rejected
	// (-1 in round 0: every token of positive weight).
	PivotToken int          `json:"pivot_token"`
	PivotW     engine.Float `json:"pivot_w"`
	// Candidates counts them; Mass is their share of the row's fixed-point
	// mass, Outside the share of their mass the filters drop: the
	// probability that this round rejects.
	Candidates int          `json:"candidates"`
	Total      uint64       `json:"total"`
	Mass       engine.Float `json:"mass"`
	Outside    engine.Float `json:"outside"`
	// U is the round's uniform as a fraction of 2^64 and Target
	// t = Pick(u, Total); Candidate is the first candidate (in index
	// order) whose inclusive prefix sum exceeds t, with its weight and rank.
	U         engine.Float `json:"u"`
	Target    uint64       `json:"target"`
	Candidate int          `json:"candidate"`
	CandW     engine.Float `json:"candidate_w"`
	CandRank  int          `json:"candidate_rank"`
	// Accepted says the filters keep the candidate: it is the token.
	Accepted bool `json:"accepted"`
}

// GumbelDraw is a Gumbel-max draw: Max is the row's largest logit m; the
// winner is the first index of the largest score over the kept tokens,
// RunnerUp the second largest; RaceWinner is the first to arrive in the
// exponential race −log(u_i)/w_i (float64), the same token but at a tie
// closer than float32 can tell.
type GumbelDraw struct {
	Max           engine.Float `json:"max"`
	Winner        int          `json:"winner"`
	WinnerScore   engine.Float `json:"winner_score"`
	RunnerUp      int          `json:"runner_up"`
	RunnerUpScore engine.Float `json:"runner_up_score"`
	RaceWinner    int          `json:"race_winner"`
}

// KernelDraw is our kernels' stored draw of the same (row, draw, method):
// Output names the stored output it comes from ("tokens" or "samples"),
// Backend the backend that drew it.
type KernelDraw struct {
	Token   int    `json:"token"`
	Output  string `json:"output"`
	Backend string `json:"backend"`
}

// sampleTopShown is how many of the most probable tokens a sampler lesson
// lists (beside those its steps name).
const sampleTopShown = 20

// TeachSample steps through draw l.Draw of row r of a sample run with
// method l.Method. A run that is not sample, a row, draw or method out of
// range, or a greedy row (which takes its argmax and draws nothing) gives
// an *Error; ctx's end, ctx's error.
func TeachSample(ctx context.Context, run *engine.Run, r int, l SampleLesson) (*SampleState, error) {
	if run.Op != engine.OpSample || run.Logits == nil {
		return nil, &Error{Msg: fmt.Sprintf("The sampler teaching mode steps through one draw of a sample row, and %s is a %s dump, not sample.", run.Source, run.Op)}
	}
	if r < 0 || r >= run.Rows() {
		return nil, &Error{Msg: fmt.Sprintf("There is no row %d: this run has rows 0 to %d.", r, run.Rows()-1)}
	}
	if l.Draw < 0 || l.Draw >= MaxDraw {
		return nil, &Error{Msg: fmt.Sprintf("Draw %d is out of range: a row's draws are numbered 0 to %d.", l.Draw, MaxDraw-1)}
	}
	method := l.Method
	if method == engine.SampleAuto {
		method = run.Params.Method
	}
	if method == engine.SampleAuto {
		method = engine.SampleInverseCDF
	}
	switch method {
	case engine.SampleInverseCDF, engine.SampleRejection, engine.SampleGumbel:
	default:
		return nil, &Error{Msg: fmt.Sprintf("There is no sampler %q: the methods are inverse_cdf, rejection and gumbel.", method)}
	}
	kp, err := run.Params.ForOp(run.Op, run.Rows())
	if err != nil {
		return nil, &Error{Msg: sentence(err.Error())}
	}
	if kp.Temperature[r] == 0 {
		return nil, &Error{Msg: fmt.Sprintf("Row %d is greedy (temperature 0): it takes its argmax, so no sampler draws there and %s has nothing to step through.", r, method)}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return teachSample(run, kp, r, l, method), nil
}

// teachSample makes the draw of a checked lesson.
func teachSample(run *engine.Run, kp *engine.KernelParams, r int, l SampleLesson, method engine.SampleMethod) *SampleState {
	v := run.Vocab()
	runMethod := run.Params.Method
	if runMethod == engine.SampleAuto {
		runMethod = engine.SampleInverseCDF
	}
	st := &SampleState{
		Row: r, Draw: l.Draw, Seed: kp.Seed[r], Offset: kp.Offset[r], Method: method, RunMethod: runMethod, Vocab: v,
		Temperature: float64(kp.Temperature[r]), TopK: kp.TopK[r], TopP: float64(kp.TopP[r]), MinP: float64(kp.MinP[r]),
		Order: kp.Order, Ties: kp.Ties, Token: -1, RowSeed: kp.Seed[r], RunDraws: run.Params.Draws,
	}
	if l.Seed != nil {
		st.Seed = *l.Seed
	}
	x := make([]float32, v)
	run.Logits.Floats32(r*v, x)
	t := kp.Temperature[r]
	w := make([]float32, v)
	if !cpu.Weights(x, t, w) {
		st.Invalid = fmt.Sprintf("Row %d has no distribution (a NaN or +Inf logit, or every token masked), so no sampler draws there: the kernels write -1.", r)
		return st
	}
	var keep []bool
	if kp.Filtered(r, v) {
		st.Filtered = true
		keep = make([]bool, v)
		fw := w
		if kp.TemperatureOrder == engine.TemperatureLast && t != 1 {
			st.TemperatureLast = true
			fw = make([]float32, v)
			cpu.Weights(x, 1, fw)
		}
		cpu.Filter(fw, kp.TopK[r], kp.TopP[r], kp.MinP[r], kp.Order, kp.Ties, keep)
	}
	kept := func(i int) bool { return keep == nil || keep[i] }
	W := make([]uint64, v)
	var all, keptSum uint64
	for i, wi := range w {
		W[i] = philox.Weight(wi)
		all += W[i]
		if W[i] > 0 {
			st.Positive++
		}
		if kept(i) {
			st.Kept++
			keptSum += W[i]
		}
	}
	st.KeptMass = engine.Float(frac(keptSum, all))
	s := philox.NewStream(st.Seed, st.Offset, r, l.Draw)
	named := []int{}
	switch method {
	case engine.SampleInverseCDF:
		st.CDF = cdfDraw(W, kept, keptSum, s)
		if st.CDF != nil {
			st.Token = cdfToken(W, kept, st.CDF.Target)
			named = append(named, st.Token)
		}
	case engine.SampleRejection:
		st.Rounds = rejectionRounds(w, W, kept, kp.Ties, all, s)
		for _, rd := range st.Rounds {
			named = append(named, rd.Candidate)
			if rd.Accepted {
				st.Token = rd.Candidate
			}
		}
	case engine.SampleGumbel:
		st.Gumbel, named = gumbelDraw(x, t, kept, s)
		st.Token = st.Gumbel.Winner
	}
	if st.Token < 0 && st.Invalid == "" {
		st.Invalid = fmt.Sprintf("No token of row %d has a fixed-point weight the sampler can draw, so the kernels write -1.", r)
	}

	// The tokens shown, in the sampler's order.
	order := func(i, j int) bool { return w[i] > w[j] || (w[i] == w[j] && i < j) }
	seen := map[int]bool{}
	var shown []int
	for _, i := range topOrder(w, sampleTopShown) {
		seen[i] = true
		shown = append(shown, i)
	}
	for _, i := range named {
		if i >= 0 && !seen[i] {
			seen[i] = true
			shown = append(shown, i)
		}
	}
	sort.Slice(shown, func(a, b int) bool { return order(shown[a], shown[b]) })
	var shownMass uint64
	var m float32
	if st.Gumbel != nil {
		m = float32(st.Gumbel.Max)
	}
	for _, i := range shown {
		tk := SampleToken{Token: i, Rank: rank(w, i), Logit: engine.Float(x[i]), W: engine.Float(w[i]),
			P: engine.Float(frac(W[i], all)), Kept: kept(i)}
		if tk.Kept {
			tk.Q = engine.Float(frac(W[i], keptSum))
		}
		if st.Gumbel != nil {
			z, u, g, score := gumbelScore(x[i], m, t, s, i)
			tk.Z, tk.U = engine.Float(z), engine.Float(u)
			if tk.Kept {
				tk.G, tk.Score = engine.Float(g), engine.Float(score)
				tk.Time = engine.Float(raceTime(z, u))
			}
		}
		shownMass += W[i]
		st.Tokens = append(st.Tokens, tk)
	}
	st.Rest = v - len(shown)
	st.RestMass = engine.Float(frac(all-shownMass, all))
	return st
}

// frac returns a/b in float64 (0 when b is 0).
func frac(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// unit returns a 64-bit uniform as a fraction of 2^64.
func unit(u uint64) float64 { return float64(u) / (1 << 64) }

// cdfDraw is the inverse CDF's draw (nil when no kept token has weight).
func cdfDraw(W []uint64, kept func(int) bool, total uint64, s philox.Stream) *CDFDraw {
	if total == 0 {
		return nil
	}
	u := s.U64(0)
	d := &CDFDraw{U: engine.Float(unit(u)), Total: total, Target: philox.Pick(u, total)}
	var n int
	for i, v := range W {
		if v > 0 && kept(i) {
			n++
		}
	}
	// The curve: up to cdfCurvePoints prefix sums, evenly spaced over the
	// kept tokens, with the token drawn and the one before it.
	every := max(n/cdfCurvePoints, 1)
	var sum uint64
	j := 0
	prev := -1
	for i, v := range W {
		if v == 0 || !kept(i) {
			continue
		}
		before := sum
		sum += v
		hit := before <= d.Target && sum > d.Target
		if hit {
			d.Before, d.After = before, sum
			if prev >= 0 && j%every != 0 {
				d.Curve = append(d.Curve, CDFPoint{Token: prev, Cum: engine.Float(frac(before, total))})
			}
		}
		if j%every == 0 || hit || j == n-1 {
			d.Curve = append(d.Curve, CDFPoint{Token: i, Cum: engine.Float(frac(sum, total))})
		}
		prev = i
		j++
	}
	return d
}

// cdfCurvePoints is about how many points CDFDraw.Curve holds.
const cdfCurvePoints = 200

// cdfToken returns the first kept token whose inclusive prefix sum exceeds
// target.
func cdfToken(W []uint64, kept func(int) bool, target uint64) int {
	var sum uint64
	for i, v := range W {
		if v > 0 && kept(i) {
			sum += v
			if sum > target {
				return i
			}
		}
	}
	return -1
}

// rejectionRounds runs the sort-free rejection sampler round by round, as
// cpu.SampleRejection does, recording each round.
func rejectionRounds(w []float32, W []uint64, kept func(int) bool, ties engine.TopKTies, all uint64, s philox.Stream) []RejectionRound {
	bw, bi := float32(math.Inf(1)), -1
	before := func(i int) bool {
		if bi < 0 {
			return true
		}
		return w[i] > bw || (ties == engine.TiesLowestIndex && w[i] == bw && i < bi)
	}
	var rounds []RejectionRound
	for round := 0; round < len(w)+1; round++ {
		rd := RejectionRound{Round: round, PivotToken: bi, Candidate: -1}
		if bi >= 0 {
			rd.PivotW = engine.Float(bw)
		}
		var total, outside uint64
		for i, v := range W {
			if v > 0 && before(i) {
				rd.Candidates++
				total += v
				if !kept(i) {
					outside += v
				}
			}
		}
		rd.Total, rd.Mass, rd.Outside = total, engine.Float(frac(total, all)), engine.Float(frac(outside, total))
		if total == 0 {
			rounds = append(rounds, rd)
			return rounds
		}
		u := s.U64(uint64(round))
		rd.U, rd.Target = engine.Float(unit(u)), philox.Pick(u, total)
		var sum uint64
		for i, v := range W {
			if v > 0 && before(i) {
				sum += v
				if sum > rd.Target {
					rd.Candidate = i
					break
				}
			}
		}
		c := rd.Candidate
		rd.CandW, rd.CandRank, rd.Accepted = engine.Float(w[c]), rank(w, c), kept(c)
		rounds = append(rounds, rd)
		if rd.Accepted {
			return rounds
		}
		bw, bi = w[c], c
	}
	return rounds
}

// gumbelScore returns token i's scaled logit z = (x_i − m)/T, its uniform,
// its noise g = −Log(−Log(u)) and its score float32(z + g), in the float32
// arithmetic of cpu.SampleGumbel.
func gumbelScore(xi, m, t float32, s philox.Stream, i int) (z, u, g, score float32) {
	words := s.Block(uint64(i / 4))
	u = philox.OpenU01(words[i%4])
	g = -f32math.Log(-f32math.Log(u))
	z = float32(float32(xi-m) / t)
	return z, u, g, float32(z + g)
}

// raceTime is a token's arrival in the exponential race: an exponential
// E = −log(u) divided by its weight exp(z), in float64.
func raceTime(z, u float32) float64 {
	return -math.Log(float64(u)) * math.Exp(-float64(z))
}

// gumbelDraw runs the Gumbel-max race over the kept tokens as
// cpu.SampleGumbel does, and returns it with the tokens worth naming: the
// winner and the nearest scores behind it.
func gumbelDraw(x []float32, t float32, kept func(int) bool, s philox.Stream) (*GumbelDraw, []int) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	d := &GumbelDraw{Max: engine.Float(m), Winner: -1, RunnerUp: -1, RaceWinner: -1}
	type scored struct {
		i     int
		score float32
	}
	var best []scored // the few highest scores, highest first
	const near = 5
	bestTime := math.Inf(1)
	var words [4]uint32
	block := uint64(math.MaxUint64)
	for i, v := range x {
		if !kept(i) {
			continue
		}
		if b := uint64(i / 4); b != block {
			words, block = s.Block(b), b
		}
		u := philox.OpenU01(words[i%4])
		g := -f32math.Log(-f32math.Log(u))
		z := float32(float32(v-m) / t)
		score := float32(z + g)
		if d.Winner < 0 || score > float32(d.WinnerScore) {
			d.Winner, d.WinnerScore = i, engine.Float(score)
		}
		if tm := raceTime(z, u); tm < bestTime {
			d.RaceWinner, bestTime = i, tm
		}
		if len(best) < near || score > best[len(best)-1].score {
			k := sort.Search(len(best), func(j int) bool { return best[j].score < score })
			best = append(best, scored{})
			copy(best[k+1:], best[k:])
			best[k] = scored{i, score}
			if len(best) > near {
				best = best[:near]
			}
		}
	}
	var named []int
	for _, b := range best {
		named = append(named, b.i)
		if b.i != d.Winner && d.RunnerUp < 0 {
			d.RunnerUp, d.RunnerUpScore = b.i, engine.Float(b.score)
		}
	}
	return d, named
}

// rank returns token i's place in the order of w descending, ties by lower
// index, from 0.
func rank(w []float32, i int) int {
	n := 0
	for j, v := range w {
		if v > w[i] || (v == w[i] && j < i) {
			n++
		}
	}
	return n
}

// topOrder returns the n first tokens in the order of w descending, ties by
// lower index.
func topOrder(w []float32, n int) []int {
	idx := make([]int, len(w))
	for i := range idx {
		idx[i] = i
	}
	if n > len(w) {
		n = len(w)
	}
	// A partial selection would do; rows are at most a few hundred
	// thousand tokens and a lesson is one request.
	sort.SliceStable(idx, func(a, b int) bool { return w[idx[a]] > w[idx[b]] })
	return idx[:n]
}

// NameTokens fills st.Text with the visible text of every token id the
// lesson shows (name gives it, false for an id it does not define).
func (st *SampleState) NameTokens(name func(id int64) (string, bool)) {
	if name == nil {
		return
	}
	text := map[int64]string{}
	for _, t := range st.Tokens {
		if s, ok := name(int64(t.Token)); ok {
			text[int64(t.Token)] = s
		}
	}
	if len(text) > 0 {
		st.Text = text
	}
}
