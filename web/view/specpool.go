package view

import (
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/stats"
)

// RowSpec is what the run page's charts keep of one row's speculative
// statistics (engine.SpecStats without its fits), in stream.json too.
type RowSpec struct {
	Trials        int            `json:"t"`
	Reached       []int          `json:"n"`
	Accepted      []int          `json:"a"`
	Theory        []engine.Float `json:"th"`
	Emitted       []int          `json:"e"`
	EmittedTheory []engine.Float `json:"et"`
	MAL           engine.Float   `json:"mal"`
	MALTheory     engine.Float   `json:"mal_th"`
}

// NewRowSpec keeps the counts of s, or returns nil for no trials.
func NewRowSpec(s *engine.SpecStats) *RowSpec {
	if s == nil || s.Trials <= 0 {
		return nil
	}
	r := &RowSpec{Trials: s.Trials, EmittedTheory: s.EmittedTheory, MAL: s.MeanAcceptanceLength, MALTheory: s.TheoryMeanAcceptanceLength}
	for _, p := range s.Positions {
		r.Reached = append(r.Reached, p.Reached)
		r.Accepted = append(r.Accepted, p.Accepted)
		r.Theory = append(r.Theory, p.Theory)
	}
	r.Emitted = append(r.Emitted, s.Emitted...)
	return r
}

// specPool sums the rows' speculative counts: acceptance by position among
// the trials that reached it, with the theory weighted by those trials, and
// the emitted lengths with the theory weighted by each row's trials.
type specPool struct {
	Trials        int
	Reached       []int
	Accepted      []int
	TheoryW       []float64
	Emitted       []int
	EmittedTheory []float64
	MALW          float64
	MALTheoryW    float64
}

// add pools the counts of one row.
func (p *specPool) add(r *RowSpec) {
	grow := func(n int) {
		for len(p.Reached) < n {
			p.Reached, p.Accepted, p.TheoryW = append(p.Reached, 0), append(p.Accepted, 0), append(p.TheoryW, 0)
		}
	}
	grow(len(r.Reached))
	for i := range r.Reached {
		p.Reached[i] += r.Reached[i]
		if i < len(r.Accepted) {
			p.Accepted[i] += r.Accepted[i]
		}
		if i < len(r.Theory) {
			p.TheoryW[i] += float64(r.Reached[i]) * float64(r.Theory[i])
		}
	}
	for len(p.Emitted) < max(len(r.Emitted), len(r.EmittedTheory)) {
		p.Emitted, p.EmittedTheory = append(p.Emitted, 0), append(p.EmittedTheory, 0)
	}
	for j, n := range r.Emitted {
		p.Emitted[j] += n
	}
	for j, th := range r.EmittedTheory {
		p.EmittedTheory[j] += float64(r.Trials) * float64(th)
	}
	p.Trials += r.Trials
	p.MALW += float64(r.Trials) * float64(r.MAL)
	p.MALTheoryW += float64(r.Trials) * float64(r.MALTheory)
}

// stats returns the pool as engine.SpecStats: rates with 95% Wilson
// intervals, theory as the trial-weighted mean of the rows' theories, and
// emitted-length theory as the expected share of trials.
func (p *specPool) stats() *engine.SpecStats {
	s := &engine.SpecStats{Trials: p.Trials}
	for i := range p.Reached {
		pr := engine.PositionRate{Position: i, Reached: p.Reached[i], Accepted: p.Accepted[i], Rate: engine.Float(math.NaN()), Theory: engine.Float(math.NaN()), PValue: engine.Float(math.NaN())}
		if n := p.Reached[i]; n > 0 {
			pr.Rate = engine.Float(float64(p.Accepted[i]) / float64(n))
			pr.Theory = engine.Float(p.TheoryW[i] / float64(n))
		}
		lo, hi := stats.Wilson(p.Accepted[i], p.Reached[i], stats.Z95)
		pr.Lo, pr.Hi = engine.Float(lo), engine.Float(hi)
		s.Positions = append(s.Positions, pr)
	}
	s.Emitted = append(s.Emitted, p.Emitted...)
	for _, w := range p.EmittedTheory {
		th := math.NaN()
		if p.Trials > 0 {
			th = w / float64(p.Trials)
		}
		s.EmittedTheory = append(s.EmittedTheory, engine.Float(th))
	}
	s.EmittedPValue = engine.Float(math.NaN())
	if p.Trials > 0 {
		s.MeanAcceptanceLength = engine.Float(p.MALW / float64(p.Trials))
		s.TheoryMeanAcceptanceLength = engine.Float(p.MALTheoryW / float64(p.Trials))
	}
	return s
}
