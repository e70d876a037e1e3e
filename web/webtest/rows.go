package webtest

import (
	"math"
	"math/rand/v2"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// RandomUpdate is a judged row with fresh random errors, some of them
// non-finite.
func RandomUpdate(out, row, vocab int) session.RowUpdate {
	worst := math.Pow(10, -9+8*rand.Float64())
	switch rand.IntN(20) {
	case 0:
		worst = math.NaN()
	case 1:
		worst = math.Inf(1)
	}
	allowed := 1e-5 + 1e-3*rand.Float64()
	rep := engine.RowReport{Row: row, Pass: worst <= allowed, Violations: []string{}}
	if !rep.Pass {
		rep.AddFinding(engine.Finding{Rule: engine.RuleTolerance, Severity: engine.Violation, Message: "row: off", Token: 3})
	}
	rep.Strict = &engine.Drift{Reference: "strict", Abs: engine.ErrorStats{Max: engine.Float(worst)}}
	e := &session.RowErrors{Token: rand.IntN(vocab), Worst: engine.Float(worst), Allowed: engine.Float(allowed), Buckets: make([]engine.Float, session.HeatBuckets)}
	for b := range e.Buckets {
		e.Buckets[b] = engine.Float(rand.Float64() * 2)
	}
	e.Buckets[rand.IntN(session.HeatBuckets)] = engine.Float(worst / allowed)
	e.Hist[session.HistBin(worst)]++
	e.Hist[0] += vocab - 1
	return session.RowUpdate{Output: out, Report: rep, Errors: e}
}

// RandomSpecStats makes up one row's speculative statistics over k
// positions, with NaN where a position was never reached.
func RandomSpecStats(k, trials int) *engine.SpecStats {
	s := &engine.SpecStats{Trials: trials}
	reached := trials
	for i := range k {
		acc := rand.IntN(reached + 1)
		pr := engine.PositionRate{Position: i, Reached: reached, Accepted: acc, Theory: engine.Float(rand.Float64()), PValue: engine.Float(rand.Float64())}
		if reached > 0 {
			pr.Rate = engine.Float(float64(acc) / float64(reached))
			pr.Lo, pr.Hi = pr.Rate*0.9, min(pr.Rate*1.1, 1)
		} else {
			pr.Rate, pr.Lo, pr.Hi = engine.Float(math.NaN()), engine.Float(math.NaN()), engine.Float(math.NaN())
		}
		s.Positions = append(s.Positions, pr)
		s.Emitted = append(s.Emitted, reached-acc)
		s.EmittedTheory = append(s.EmittedTheory, engine.Float(rand.Float64()/float64(k+1)))
		reached = acc
	}
	s.Emitted = append(s.Emitted, reached)
	s.EmittedTheory = append(s.EmittedTheory, engine.Float(rand.Float64()/float64(k+1)))
	s.MeanAcceptanceLength = engine.Float(1 + rand.Float64()*float64(k))
	s.TheoryMeanAcceptanceLength = engine.Float(1 + rand.Float64()*float64(k))
	s.EmittedPValue = engine.Float(math.NaN())
	return s
}
