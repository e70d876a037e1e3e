package compare

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// worker judges rows one at a time with its own scratch memory and its own
// share of the run-level histograms.
type worker struct {
	j     *judge
	ws    ref.Workspace
	dists []*distEntry

	argmax    ref.ArgmaxRef
	argmaxRow int
	spec      ref.SpecRef
	specRow   int
	specEps   float64

	out  []float64
	bufs *rowBuffers
	// pairRows holds, per plan compared with others elementwise (float
	// outputs of one kind), the row decoded last; decoded says which plans
	// decoded the current row.
	pairRows [][]float64
	decoded  []bool
	// gate and gateOut are the golden and the engine's logits of the row
	// being judged (logits_gate); gateRow is the golden's row.
	gate, gateOut ref.GateRow
	gateRow       int
	// drawsA and drawsB hold two outputs' draws of a row (agree).
	drawsA, drawsB []int64
	hists          []planHists
	counts         []int64
	// fitRef holds a reference renormalised over the support a sampler
	// revealed (revealedSupport).
	fitRef []float64
	strict measurement
	native measurement
}

// distEntry is a reference distribution kept for the row being judged.
type distEntry struct {
	renorm, native bool
	eps            float64
	row            int
	d              ref.Dist
}

func newWorker(j *judge) *worker {
	w := &worker{j: j, argmaxRow: -1, specRow: -1, gateRow: -1, hists: make([]planHists, len(j.plans)), decoded: make([]bool, len(j.plans))}
	v := j.vocab
	for _, p := range j.plans {
		if p.probs || p.logits {
			w.out = make([]float64, v)
			w.bufs = newRowBuffers(v)
			break
		}
	}
	w.pairRows = make([][]float64, len(j.plans))
	for _, pr := range j.pairs {
		for _, i := range []int{pr.a, pr.b} {
			if w.pairRows[i] == nil {
				w.pairRows[i] = make([]float64, v)
			}
		}
	}
	return w
}

// row returns the buffer that plan i's output row is decoded into: its own
// when the row is compared with other outputs afterwards (pairs), else the
// shared one.
func (w *worker) row(i int) []float64 {
	if b := w.pairRows[i]; b != nil {
		return b
	}
	return w.out[:w.j.vocab]
}

// judgeRow judges row r of every output that can be judged.
func (w *worker) judgeRow(r int) []*engine.RowReport {
	reports := make([]*engine.RowReport, len(w.j.plans))
	clear(w.decoded)
	for i, p := range w.j.plans {
		if p.problem != "" {
			continue
		}
		rep := &engine.RowReport{Row: r, Pass: true, Violations: []string{}}
		reports[i] = rep
		if w.j.run.Padding(r) {
			rep.Padding = true
			if p.out.External {
				w.judgeFill(p, r, rep)
			}
			continue
		}
		if p.logits {
			w.judgeLogits(i, p, r, rep)
		}
		if p.probs {
			w.judgeProbs(i, p, r, rep)
		}
		switch {
		case p.tokens && p.argmax:
			w.judgeArgmax(p, r, rep)
		case p.tokens:
			w.judgeSampledToken(p, r, rep)
		}
		if p.samples {
			w.judgeSamples(p, r, rep)
		}
		if p.spec || p.trials {
			w.judgeSpec(p, r, rep)
		}
		if p.draft {
			w.judgeDraft(p, r, rep)
		}
	}
	w.agree(r, reports)
	return reports
}

// dist returns the reference distribution of row r: softmax or renorm (with
// boundary band eps), strict or native. The native reference of a row at
// temperature 0 or 1 is the strict one (scaling by 1 is exact), so it is not
// computed twice.
func (w *worker) dist(r int, renorm, native bool, eps float64) *ref.Dist {
	run := w.j.run
	t := ref.Temperature(run, r)
	if ref.Greedy(t) || t == 1 {
		native = false
	}
	if !renorm {
		eps = 0 // softmax classes do not depend on it
	}
	var e *distEntry
	for _, c := range w.dists {
		if c.renorm == renorm && c.native == native && c.eps == eps {
			e = c
			break
		}
	}
	if e == nil {
		e = &distEntry{renorm: renorm, native: native, eps: eps, row: -1}
		w.dists = append(w.dists, e)
	}
	if e.row != r {
		f := ref.NoFilter()
		if renorm {
			f = ref.RowFilter(run, r, eps)
		}
		w.ws.Compute(&e.d, ref.RowLogits(run, r), t, f, native)
		e.row = r
	}
	return &e.d
}

// argmaxRef returns the argmax reference of row r.
func (w *worker) argmaxRef(r int) *ref.ArgmaxRef {
	if w.argmaxRow != r {
		w.argmax, w.argmaxRow = ref.Argmax(w.j.run, r), r
	}
	return &w.argmax
}

// specRef returns the speculative-sampling reference of row r.
func (w *worker) specRef(r int, eps float64) *ref.SpecRef {
	if w.specRow != r || w.specEps != eps {
		w.spec, w.specRow, w.specEps = ref.SpecVerify(w.j.run, r, eps), r, eps
	}
	return &w.spec
}

// addOnce adds f unless the row already holds a finding with its message
// (an invalid input row is reported once, whatever judges it).
func addOnce(rep *engine.RowReport, f engine.Finding) {
	for _, g := range rep.Findings {
		if g.Message == f.Message {
			return
		}
	}
	rep.AddFinding(f)
}

// invalidRow reports an input row without a reference.
func invalidRow(rep *engine.RowReport, r int, reason string, rule engine.Rule) {
	addOnce(rep, violation(rule, -1, "row %d: %s", r, reason))
}

// resizeInts returns s with length n, reusing its memory when it can.
func resizeInts(s []int64, n int) []int64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int64, n)
}

// resizeFloats returns s with length n, reusing its memory when it can.
func resizeFloats(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}
