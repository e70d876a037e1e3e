package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/philox"
)

// specCase is a spec_verify input built in float32: target logits
// [B][K+1][V], drafts [B][K] and draft probabilities [B][K][V] (nil: one-hot).
type specCase struct {
	target [][][]float32
	drafts [][]int64
	q      [][][]float32
}

// randomDistribution returns a float32 probability row: a softmax of random
// logits.
func randomDistribution(rng *rand.Rand, vocab int, scale float64) []float32 {
	x := randomLogits(rng, vocab, scale)
	p := make([]float32, vocab)
	Softmax(x, 1, p)
	return p
}

// randomSpec builds rows of random targets with drafts drawn from the
// draft distributions (or uniformly for one-hot drafts).
func randomSpec(rng *rand.Rand, rows, k, vocab int, oneHot bool) specCase {
	c := specCase{target: make([][][]float32, rows), drafts: make([][]int64, rows)}
	if !oneHot {
		c.q = make([][][]float32, rows)
	}
	for r := range rows {
		for range k + 1 {
			c.target[r] = append(c.target[r], randomLogits(rng, vocab, 1.5))
		}
		for range k {
			if oneHot {
				c.drafts[r] = append(c.drafts[r], int64(rng.IntN(vocab)))
				continue
			}
			q := randomDistribution(rng, vocab, 1.5)
			c.q[r] = append(c.q[r], q)
			c.drafts[r] = append(c.drafts[r], int64(drawFloat(rng, q)))
		}
	}
	return c
}

// drawFloat draws an index from a float32 distribution with math/rand.
func drawFloat(rng *rand.Rand, q []float32) int {
	u := rng.Float64()
	for i, v := range q {
		u -= float64(v)
		if u < 0 {
			return i
		}
	}
	return len(q) - 1
}

// run builds the spec_verify run of c with inputs stored as dtype.
func (c specCase) run(dtype engine.DType, trials int) *engine.Run {
	rows, positions, vocab := len(c.target), len(c.target[0]), len(c.target[0][0])
	k := positions - 1
	var target, q []float32
	var drafts []int64
	for r := range rows {
		for _, x := range c.target[r] {
			target = append(target, x...)
		}
		drafts = append(drafts, c.drafts[r]...)
		if c.q != nil {
			for _, d := range c.q[r] {
				q = append(q, d...)
			}
		}
	}
	p := defaultParams(rows)
	p.Trials = trials
	run := &engine.Run{
		Source:       "test",
		Op:           engine.OpSpecVerify,
		TargetLogits: engine.FromFloat32s("target_logits", dtype, []int{rows, positions, vocab}, target),
		DraftTokens:  engine.FromInts("draft_tokens", engine.I64, []int{rows, k}, drafts),
		Params:       p,
	}
	if c.q != nil {
		run.DraftProbs = engine.FromFloat32s("draft_probs", dtype, []int{rows, k, vocab}, q)
	}
	return run
}

// checkSpecStructure checks the layout rules of one trial's tokens: the
// accepted draft prefix, one drawn token (or -1 for a target without a
// distribution), then -1.
func checkSpecStructure(tokens []int64, drafts []int64, emitted int, vocab int) error {
	k := len(drafts)
	if emitted < 0 || emitted > k {
		return fmt.Errorf("emitted %d outside [0, %d]", emitted, k)
	}
	for i, tok := range tokens {
		switch {
		case i < emitted && tok != drafts[i]:
			return fmt.Errorf("position %d: %d in the accepted prefix, draft %d", i, tok, drafts[i])
		case i == emitted && (tok < 0 || tok >= int64(vocab)):
			return fmt.Errorf("position %d: drawn token %d outside [0, %d)", i, tok, vocab)
		case i > emitted && tok != -1:
			return fmt.Errorf("position %d: %d after the drawn token, want -1", i, tok)
		}
	}
	return nil
}

// emittedOf infers a trial's emitted length from its tokens: the drawn token
// is the last one that is not -1.
func emittedOf(tokens []int64) int {
	e := -1
	for i, tok := range tokens {
		if tok != -1 {
			e = i
		}
	}
	return e
}

func TestSpecVerifyRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const rows, k, vocab, trials = 6, 4, 300, 40
	for _, dtype := range floatDTypes {
		for _, oneHot := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s one-hot=%v", dtype, oneHot), func(t *testing.T) {
				c := randomSpec(rng, rows, k, vocab, oneHot)
				run := c.run(dtype, trials)
				run.Params.Temperature[1] = 0 // greedy target
				run.Params.TopK[2] = 20
				run.Params.TopP[3] = 0.7
				run.Params.MinP[4] = 0.05
				out := mustRun(t, run)
				if got := out.SpecTrials.Shape; len(got) != 3 || got[0] != trials || got[1] != rows || got[2] != k+1 {
					t.Fatalf("spec_trials shape %v", got)
				}
				tr := out.Trace
				if tr.Trials != 16 || tr.Rows != rows || tr.Steps != k+1 || len(tr.Step) != 16*rows*(k+1) {
					t.Fatalf("trace %d x %d x %d with %d steps", tr.Trials, tr.Rows, tr.Steps, len(tr.Step))
				}
				for r := range rows {
					emitted, accepted := int(out.SpecEmitted.Int(r)), int(out.SpecAccepted.Int(r))
					first := out.SpecTokens.Ints()[r*(k+1) : (r+1)*(k+1)]
					if err := checkSpecStructure(first, c.drafts[r], emitted, vocab); err != nil {
						t.Fatalf("row %d trial 0: %v", r, err)
					}
					if accepted < emitted || accepted > k {
						t.Fatalf("row %d: accepted %d, emitted %d", r, accepted, emitted)
					}
					all := out.SpecTrials.Ints()
					for d := range trials {
						tokens := all[(d*rows+r)*(k+1) : (d*rows+r+1)*(k+1)]
						if d == 0 && fmt.Sprint(tokens) != fmt.Sprint(first) {
							t.Fatalf("row %d: spec_trials[0] %v, spec_tokens %v", r, tokens, first)
						}
						e := emittedOf(tokens)
						if err := checkSpecStructure(tokens, c.drafts[r], e, vocab); err != nil {
							t.Fatalf("row %d trial %d: %v", r, d, err)
						}
						if d >= tr.Trials {
							continue
						}
						passed := 0
						for i := range k + 1 {
							st := tr.At(d, r, i)
							if i == k {
								if st.Draft != -1 || int64(st.Resampled) != tokens[k] {
									t.Fatalf("row %d trial %d: bonus step %+v, tokens %v", r, d, st, tokens)
								}
								continue
							}
							if st.Draft != int32(c.drafts[r][i]) || st.Accepted != (float32(st.U*st.Q) < st.P) {
								t.Fatalf("row %d trial %d position %d: step %+v", r, d, i, st)
							}
							if st.Accepted {
								passed++
							}
							if (i == e) != (st.Resampled >= 0) || i == e && int64(st.Resampled) != tokens[i] {
								t.Fatalf("row %d trial %d position %d: step %+v, tokens %v", r, d, i, st, tokens)
							}
							if i < e && !st.Accepted || i == e && st.Accepted {
								t.Fatalf("row %d trial %d position %d: step %+v but emitted %d", r, d, i, st, e)
							}
						}
						if d == 0 && passed != accepted {
							t.Fatalf("row %d: %d tests passed in the trace, spec_accepted %d", r, passed, accepted)
						}
					}
				}
			})
		}
	}
}

// chainFor builds the SpecChain of row r of c as Run does, at temperature 1
// with no filters.
func chainFor(c specCase, r int) *SpecChain {
	k := len(c.drafts[r])
	vocab := len(c.target[r][0])
	p := make([][]float32, k+1)
	valid := make([]bool, k+1)
	for i := range p {
		p[i] = make([]float32, vocab)
		valid[i] = Softmax(c.target[r][i], 1, p[i])
	}
	var q [][]float32
	if c.q != nil {
		q = c.q[r]
	}
	drafts := make([]int32, k)
	for i, x := range c.drafts[r] {
		drafts[i] = int32(x)
	}
	return NewSpecChain(drafts, p, q, valid)
}

func TestSpecVerifyRunMatchesChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	c := randomSpec(rng, 3, 5, 100, false)
	out := mustRun(t, c.run(engine.F32, 30))
	all := out.SpecTrials.Ints()
	for r := range 3 {
		chain := chainFor(c, r)
		tokens := make([]int32, 6)
		for d := range 30 {
			chain.Verify(philox.NewStream(1234+uint64(r), 0, r, d), tokens, nil)
			for i, tok := range tokens {
				if got := all[(d*3+r)*6+i]; got != int64(tok) {
					t.Fatalf("row %d trial %d position %d: Run %d, SpecChain %d", r, d, i, got, tok)
				}
			}
		}
	}
}

func TestSpecVerifyFullAcceptance(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	const k, vocab, trials = 5, 200, 2000
	for _, oneHot := range []bool{false, true} {
		t.Run(fmt.Sprintf("one-hot=%v", oneHot), func(t *testing.T) {
			c := randomSpec(rng, 1, k, vocab, oneHot)
			for i, x := range c.drafts[0] {
				for j := range c.target[0][i] {
					if int64(j) != x {
						c.target[0][i][j] = ninf
					}
				}
			}
			chain := chainFor(c, 0)
			bonus := make([]int, vocab)
			tokens := make([]int32, k+1)
			for d := range trials {
				emitted, accepted := chain.Verify(philox.NewStream(3, 0, 0, d), tokens, nil)
				if emitted != k || accepted != k {
					t.Fatalf("trial %d: emitted %d, accepted %d, want %d", d, emitted, accepted, k)
				}
				bonus[tokens[k]]++
			}
			pv, impossible := chiSquare(bonus, softmax64(c.target[0][k], 1))
			if impossible > 0 || pv < 1e-4 {
				t.Errorf("bonus tokens: p-value %.3g against p_K, %d impossible", pv, impossible)
			}
		})
	}
}

// residual64 is normalise(max(p - q, 0)) in float64.
func residual64(p []float64, q []float32) []float64 {
	r := make([]float64, len(p))
	var s float64
	for j := range p {
		r[j] = math.Max(p[j]-float64(q[j]), 0)
		s += r[j]
	}
	for j := range r {
		r[j] /= s
	}
	return r
}

func TestSpecVerifyZeroMassOnFirstDraft(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	const k, vocab, trials = 3, 120, 20000
	for _, oneHot := range []bool{false, true} {
		t.Run(fmt.Sprintf("one-hot=%v", oneHot), func(t *testing.T) {
			c := randomSpec(rng, 1, k, vocab, oneHot)
			c.target[0][0][c.drafts[0][0]] = ninf
			chain := chainFor(c, 0)
			q := make([]float32, vocab)
			if oneHot {
				q[c.drafts[0][0]] = 1
			} else {
				q = c.q[0][0]
			}
			want := residual64(softmax64(c.target[0][0], 1), q)
			counts := make([]int, vocab)
			tokens := make([]int32, k+1)
			for d := range trials {
				emitted, _ := chain.Verify(philox.NewStream(4, 9, 0, d), tokens, nil)
				if emitted != 0 {
					t.Fatalf("trial %d: emitted %d, want 0", d, emitted)
				}
				counts[tokens[0]]++
			}
			pv, impossible := chiSquare(counts, want)
			if impossible > 0 || pv < 1e-4 {
				t.Errorf("resampled tokens: p-value %.3g against the residual, %d of zero residual mass", pv, impossible)
			}
		})
	}
}

func TestSpecVerifyAcceptanceRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	const k, vocab, trials = 6, 50, 20000
	for _, oneHot := range []bool{false, true} {
		t.Run(fmt.Sprintf("one-hot=%v", oneHot), func(t *testing.T) {
			c := randomSpec(rng, 1, k, vocab, oneHot)
			chain := chainFor(c, 0)
			passed := make([]int, k)
			first := make([]int, vocab) // the token at position 0
			tokens := make([]int32, k+1)
			steps := make([]engine.SpecStep, k+1)
			for d := range trials {
				chain.Verify(philox.NewStream(5, 0, 0, d), tokens, steps)
				for i := range k {
					if steps[i].Accepted {
						passed[i]++
					}
				}
				first[tokens[0]]++
			}
			for i := range k {
				x := c.drafts[0][i]
				p := softmax64(c.target[0][i], 1)[x]
				q := 1.0
				if !oneHot {
					q = float64(c.q[0][i][x])
				}
				a := math.Min(1, p/q)
				got := float64(passed[i]) / trials
				if sd := math.Sqrt(a * (1 - a) / trials); math.Abs(got-a) > 5*sd+1e-6 {
					t.Errorf("position %d: acceptance %.4f, theory min(1, p/q) = %.4f (5 sd = %.4f)", i, got, a, 5*sd)
				}
			}
			// Lossless at position 0: a δ(x) + (1 - a) residual.
			p0 := softmax64(c.target[0][0], 1)
			q0 := make([]float32, vocab)
			if oneHot {
				q0[c.drafts[0][0]] = 1
			} else {
				q0 = c.q[0][0]
			}
			x := c.drafts[0][0]
			a := math.Min(1, p0[x]/float64(q0[x]))
			want := residual64(p0, q0)
			for j := range want {
				want[j] *= 1 - a
			}
			want[x] += a
			if pv, impossible := chiSquare(first, want); impossible > 0 || pv < 1e-4 {
				t.Errorf("position 0 tokens: p-value %.3g, %d impossible", pv, impossible)
			}
		})
	}
}

func TestSpecVerifyGreedyAndInvalidTargets(t *testing.T) {
	const vocab = 6
	target := [][]float32{
		{0.5, 3, 1, -1, 2, 0}, // argmax 1
		{4, 0, 1, -1, 2, 0},   // argmax 0
		{0, 1, nan, 2, 3, 4},  // no distribution
		{1, 2, 3, 4, 5, 6},
	}
	tests := []struct {
		name     string
		drafts   []int64
		want     []int64
		emitted  int
		accepted int
	}{
		{"drafts are the argmax, then no distribution", []int64{1, 0, 3}, []int64{1, 0, -1, -1}, 2, 2},
		{"first draft wrong: resampled to the argmax", []int64{4, 0, 3}, []int64{1, -1, -1, -1}, 0, 1},
		{"second draft wrong", []int64{1, 2, 3}, []int64{1, 0, -1, -1}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := specCase{target: [][][]float32{target}, drafts: [][]int64{tt.drafts}}
			run := c.run(engine.F32, 1)
			run.Params.Temperature[0] = 0
			out := mustRun(t, run)
			if got := out.SpecTokens.Ints(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("tokens %v, want %v", got, tt.want)
			}
			if got := int(out.SpecEmitted.Int(0)); got != tt.emitted {
				t.Errorf("emitted %d, want %d", got, tt.emitted)
			}
			if got := int(out.SpecAccepted.Int(0)); got != tt.accepted {
				t.Errorf("accepted %d, want %d", got, tt.accepted)
			}
		})
	}
}
