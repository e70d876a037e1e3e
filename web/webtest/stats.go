package webtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/engine/stats"
)

// This file makes up the statistical judgements of the fake's sample and
// spec_verify dumps, their row details and the teaching mode's lessons,
// with fresh random numbers shaped like the real ones: p-values, fits,
// acceptance by position with Wilson intervals, emitted lengths, a trace
// that obeys the acceptance rule.

// judgeStats makes up the judgement of a sample or spec_verify dump: one
// output of ours, judged statistically, failing on d.Fail rows.
func (p *Pipeline) judgeStats(ctx context.Context, d Dump, job session.Job, tol engine.Tolerances, sink session.Sink) (*engine.Report, error) {
	kind, op := "samples", engine.OpSample
	if d.Op == "spec_verify" {
		kind, op = "spec", engine.OpSpecVerify
	}
	sink.Outputs([]engine.OutputInfo{{Name: "cpu", Kind: kind, Tolerances: &tol}})
	fail := map[int]bool{}
	for _, r := range d.Fail {
		fail[r] = true
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	rep := &engine.Report{
		Pass: true, Op: op, Source: job.FileName, Rows: d.Rows, Vocab: d.Vocab, DType: engine.F32, Device: &CPU, Tolerances: tol,
	}
	or := engine.OutputReport{Name: "cpu", Kind: kind, Pass: true, Timing: &engine.Timing{Wall: 2 * time.Millisecond}}
	var pool *engine.SpecStats
	for r := 0; r < d.Rows; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pv := math.Pow(10, -3*rng.Float64())
		if fail[r] {
			pv = tol.PValue * math.Pow(10, -1-6*rng.Float64())
		}
		row := engine.RowReport{Row: r, Pass: true, Violations: []string{}, PValue: &pv}
		switch kind {
		case "samples":
			row.Fit = &engine.Fit{
				Draws: FakeDraws, Test: "G", Statistic: engine.Float(100 + 50*rng.Float64()), DF: 99, Bins: 100,
				PValue: engine.Float(pv), TV: engine.Float(0.02 + 0.01*rng.Float64()), TVBound: 0.05, Cosine: engine.Float(0.999),
			}
			if fail[r] {
				row.AddFinding(engine.Finding{Rule: engine.RuleFit, Severity: engine.Violation, Token: -1,
					Message: fmt.Sprintf("row %d: %d draws do not follow the reference distribution (%s, threshold %s)", r, FakeDraws, engine.StoredPText(pv), engine.FormatFloat(tol.PValue))})
			}
		case "spec":
			row.Spec = fakeSpecStats(rng, d.K, FakeTrials, fail[r])
			row.Spec.EmittedPValue = engine.Float(pv)
			pool = poolSpec(pool, row.Spec)
			if fail[r] {
				row.AddFinding(engine.Finding{Rule: engine.RuleAcceptance, Severity: engine.Violation, Token: -1,
					Message: fmt.Sprintf("row %d: %d trials do not follow the speculative-sampling laws (%s, threshold %s)", r, FakeTrials, engine.StoredPText(pv), engine.FormatFloat(tol.PValue))})
			}
		}
		or.Rows = append(or.Rows, row)
		if !row.Pass {
			or.Pass, rep.Pass = false, false
			or.FailedRows++
		}
		sink.Row(session.RowUpdate{Output: 0, Report: row})
		if p.RowDelay > 0 {
			time.Sleep(p.RowDelay)
		}
	}
	or.Spec = pool
	rep.Outputs = []engine.OutputReport{or}
	return rep, nil
}

// fakeSpecStats makes up trials of k positions: acceptance drawn per
// position around a theory, far from it when bad.
func fakeSpecStats(rng *rand.Rand, k, trials int, bad bool) *engine.SpecStats {
	s := &engine.SpecStats{Trials: trials}
	accept := make([]float64, k)
	reached := trials
	for i := range k {
		accept[i] = 0.3 + 0.65*rng.Float64()
		rate := accept[i]
		if bad {
			rate *= 0.6
		}
		acc := 0
		for range reached {
			if rng.Float64() < rate {
				acc++
			}
		}
		lo, hi := stats.Wilson(acc, reached, stats.Z95)
		pr := engine.PositionRate{Position: i, Reached: reached, Accepted: acc, Lo: engine.Float(lo), Hi: engine.Float(hi),
			Theory: engine.Float(accept[i]), PValue: engine.Float(stats.BinomialTest(acc, reached, accept[i])), Rate: engine.Float(math.NaN())}
		if reached > 0 {
			pr.Rate = engine.Float(float64(acc) / float64(reached))
		}
		s.Positions = append(s.Positions, pr)
		s.Emitted = append(s.Emitted, reached-acc)
		reached = acc
	}
	s.Emitted = append(s.Emitted, reached)
	accepted := 0
	for j, n := range s.Emitted {
		accepted += j * n
	}
	for _, e := range stats.EmittedDistribution(accept) {
		s.EmittedTheory = append(s.EmittedTheory, engine.Float(e))
	}
	s.MeanAcceptanceLength = engine.Float(1 + float64(accepted)/float64(trials))
	s.TheoryMeanAcceptanceLength = engine.Float(stats.ExpectedAcceptanceLength(accept))
	return s
}

// poolSpec adds s to the pool as the run page's pooled statistics sum
// rows: counts add, theories average weighted by the trials.
func poolSpec(pool, s *engine.SpecStats) *engine.SpecStats {
	if pool == nil {
		c := *s
		c.Positions = append([]engine.PositionRate(nil), s.Positions...)
		c.Emitted = append([]int(nil), s.Emitted...)
		c.EmittedTheory = append([]engine.Float(nil), s.EmittedTheory...)
		c.EmittedPValue = engine.Float(math.NaN())
		return &c
	}
	w := float64(pool.Trials) / float64(pool.Trials+s.Trials)
	for i := range pool.Positions {
		p, q := &pool.Positions[i], s.Positions[i]
		n := p.Reached + q.Reached
		if n > 0 {
			p.Theory = engine.Float((float64(p.Theory)*float64(p.Reached) + float64(q.Theory)*float64(q.Reached)) / float64(n))
		}
		p.Reached, p.Accepted = n, p.Accepted+q.Accepted
		lo, hi := stats.Wilson(p.Accepted, p.Reached, stats.Z95)
		p.Lo, p.Hi = engine.Float(lo), engine.Float(hi)
		if n > 0 {
			p.Rate = engine.Float(float64(p.Accepted) / float64(n))
		}
		p.PValue = engine.Float(stats.BinomialTest(p.Accepted, p.Reached, float64(p.Theory)))
	}
	for j := range pool.Emitted {
		pool.Emitted[j] += s.Emitted[j]
		pool.EmittedTheory[j] = engine.Float(w*float64(pool.EmittedTheory[j]) + (1-w)*float64(s.EmittedTheory[j]))
	}
	pool.MeanAcceptanceLength = engine.Float(w*float64(pool.MeanAcceptanceLength) + (1-w)*float64(s.MeanAcceptanceLength))
	pool.TheoryMeanAcceptanceLength = engine.Float(w*float64(pool.TheoryMeanAcceptanceLength) + (1-w)*float64(s.TheoryMeanAcceptanceLength))
	pool.Trials += s.Trials
	return pool
}

// sampleRow makes up row r of a sample dump: the random distribution of
// rowDetail with the draws of ours counted against it, and on failing rows
// a token drawn that the reference gives no mass.
func sampleRow(d Dump, r, top int) *explain.RowDetail {
	det := rowDetail(d, r, top)
	det.Op = engine.OpSample
	det.Probs = nil
	for i := range det.Tokens {
		det.Tokens[i].Values = nil
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(r)))
	sd := &explain.SampleDetail{
		Outputs: []engine.OutputInfo{{Name: "cpu", Kind: "samples"}}, Draws: []int{FakeDraws}, OutOfRange: []int64{0},
		Other: explain.SampleToken{Token: -1, Observed: []int64{0}},
	}
	left := int64(FakeDraws)
	mass := 1.0
	for _, t := range det.Tokens {
		n := int64(math.Round(float64(FakeDraws) * float64(t.Ref) * (1 + 0.05*rng.NormFloat64())))
		n = min(max(n, 0), left)
		left -= n
		mass -= float64(t.Ref)
		sd.Tokens = append(sd.Tokens, explain.SampleToken{Token: t.Token, Ref: t.Ref, Class: t.Class, Observed: []int64{n}})
	}
	for _, f := range d.Fail {
		if f == r && left > 0 {
			sd.Tokens = append(sd.Tokens, explain.SampleToken{Token: d.Vocab - 1, Ref: 0, Class: "dropped", Observed: []int64{1}})
			left--
		}
	}
	sd.Other.Ref = engine.Float(math.Max(mass, 0))
	sd.Other.Observed[0] = left
	det.Samples = sd
	return det
}

// specRow makes up row r of a spec_verify dump: the laws on a few tokens
// per position and a trace of FakeTraceTrials trials that obeys the
// acceptance rule u·q(x) < p(x).
func specRow(d Dump, r int) *explain.RowDetail {
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(r)))
	det := &explain.RowDetail{Row: r, Vocab: d.Vocab, Op: engine.OpSpecVerify, Temperature: 1, TopP: 1, Probs: []engine.OutputInfo{}}
	sd := &explain.SpecDetail{K: d.K}
	accept := make([]float64, d.K)
	for i := 0; i <= d.K; i++ {
		pos := explain.SpecPosition{Position: i}
		toks := rng.Perm(d.Vocab)[:min(8, d.Vocab)]
		pw, qw := make([]float64, len(toks)), make([]float64, len(toks))
		ps, qs := 0.0, 0.0
		for j := range toks {
			pw[j], qw[j] = math.Exp(2*rng.NormFloat64()), math.Exp(2*rng.NormFloat64())
			ps, qs = ps+pw[j], qs+qw[j]
		}
		rs := 0.0
		for j := range toks {
			pw[j], qw[j] = pw[j]/ps, qw[j]/qs
			rs += math.Max(pw[j]-qw[j], 0)
		}
		for j, t := range toks {
			tk := explain.SpecToken{Token: t, P: engine.Float(pw[j])}
			if i < d.K {
				tk.Q = engine.Float(qw[j])
				tk.Residual = engine.Float(math.Max(pw[j]-qw[j], 0) / rs)
			}
			pos.Tokens = append(pos.Tokens, tk)
		}
		if i < d.K {
			x := rng.IntN(len(toks))
			sd.Drafts = append(sd.Drafts, int64(toks[x]))
			accept[i] = math.Min(1, pw[x]/qw[x])
			sd.Accept = append(sd.Accept, engine.Float(accept[i]))
		}
		sd.Positions = append(sd.Positions, pos)
	}
	mal := 1.0
	for j, e := range stats.EmittedDistribution(accept) {
		sd.Emitted = append(sd.Emitted, engine.Float(e))
		mal += float64(j) * e
	}
	sd.MeanAcceptanceLength = engine.Float(mal)
	tr := &explain.RowTrace{Trials: FakeTraceTrials, Steps: d.K + 1}
	for range FakeTraceTrials {
		steps := make([]engine.SpecStep, d.K+1)
		stopped := false
		for i := range d.K {
			x := sd.Drafts[i]
			var p, q float32
			for _, tk := range sd.Positions[i].Tokens {
				if int64(tk.Token) == x {
					p, q = float32(tk.P), float32(tk.Q)
				}
			}
			u := float32(rng.Float64())
			s := engine.SpecStep{Draft: int32(x), U: u, P: p, Q: q, Accepted: u*q < p, Resampled: -1}
			if !s.Accepted && !stopped {
				stopped = true
				for _, tk := range sd.Positions[i].Tokens {
					if tk.Residual > 0 {
						s.Resampled = int32(tk.Token)
						break
					}
				}
			}
			steps[i] = s
		}
		steps[d.K] = engine.SpecStep{Draft: -1, Resampled: -1}
		if !stopped {
			steps[d.K].Resampled = int32(sd.Positions[d.K].Tokens[0].Token)
		}
		tr.Step = append(tr.Step, steps)
	}
	sd.Trace = tr
	det.Spec = sd
	return det
}

// lesson makes up a lesson on six tokens: the steps are drawn (seeded by the
// lesson, so the same lesson gives the same steps) by the real rule: a
// draft from q, accepted with min(1, p/q), else a draw from the residual.
func fakeLesson(d Dump, r int, l lesson.Lesson) *lesson.State {
	st := &lesson.State{Row: r, Position: l.Position, K: d.K, Vocab: d.Vocab, Temperature: 1, TopP: 1,
		Distance: l.Distance, Seed: 7, Steps: l.Steps, Draft: 0}
	l.Override(st)
	const n = 6
	p := []float64{0.4, 0.25, 0.15, 0.1, 0.06, 0.04}
	q := make([]float64, n)
	qrow := []float64{0.1, 0.5, 0.05, 0.25, 0.05, 0.05}
	for i := range q {
		q[i] = (1-l.Distance)*p[i] + l.Distance*qrow[i]
		st.Beta += engine.Float(math.Min(p[i], q[i]))
		st.TV += engine.Float(math.Abs(p[i]-q[i]) / 2)
	}
	res := make([]float64, n)
	for i := range res {
		res[i] = math.Max(p[i]-q[i], 0) / math.Max(float64(1-st.Beta), 1e-300)
	}
	draw := func(u float64, w []float64) int {
		for i, x := range w {
			if u < x {
				return i
			}
			u -= x
		}
		return len(w) - 1
	}
	toks := make([]lesson.Token, n)
	for i := range toks {
		toks[i] = lesson.Token{Token: i, P: engine.Float(p[i]), Q: engine.Float(q[i])}
	}
	rng := rand.New(rand.NewPCG(st.Seed, uint64(r)))
	next := 1
	for s := 1; s <= l.Steps; s++ {
		x := draw(rng.Float64(), q)
		u := rng.Float64()
		step := lesson.Step{Step: s, Draft: x, U: engine.Float(u), P: engine.Float(p[x]), Q: engine.Float(q[x]), Accepted: u*q[x] < p[x], Token: x}
		toks[x].Drafted++
		if step.Accepted {
			toks[x].Accepted++
			st.Accepted++
		} else {
			step.Token = draw(rng.Float64(), res)
			toks[step.Token].Resampled++
			st.Resampled++
		}
		if s > l.Steps-8 {
			st.Last = append(st.Last, step)
		}
		if s == next || s == l.Steps {
			em, dr := 0.0, 0.0
			for i, t := range toks {
				em += math.Abs(float64(t.Accepted+t.Resampled)/float64(s) - p[i])
				dr += math.Abs(float64(t.Drafted)/float64(s) - p[i])
			}
			st.Running = append(st.Running, lesson.TVPoint{Steps: s, Emitted: engine.Float(em / 2), Drafts: engine.Float(dr / 2)})
			next *= 2
		}
	}
	st.Tokens = toks
	st.Other = lesson.Token{Token: -1}
	return st
}
