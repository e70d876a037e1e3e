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
	tree      ref.TreeRef
	treeRow   int
	treeEps   float64

	out    []float64
	bufs   *rowBuffers
	hists  []planHists
	counts []int64
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
	w := &worker{j: j, argmaxRow: -1, specRow: -1, treeRow: -1, hists: make([]planHists, len(j.plans))}
	v := j.vocab
	for _, p := range j.plans {
		if p.probs {
			w.out = make([]float64, v)
			w.bufs = newRowBuffers(v)
			break
		}
	}
	return w
}

// judgeRow judges row r of every output that can be judged.
func (w *worker) judgeRow(r int) []*engine.RowReport {
	reports := make([]*engine.RowReport, len(w.j.plans))
	for i, p := range w.j.plans {
		if p.problem != "" {
			continue
		}
		rep := &engine.RowReport{Row: r, Pass: true, Violations: []string{}}
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
		if p.tree || p.treeTrials {
			w.judgeTree(p, r, rep)
		}
		if p.draft {
			w.judgeDraft(p, r, rep)
		}
		reports[i] = rep
	}
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

// treeRef returns the tree speculative-sampling reference of row r.
func (w *worker) treeRef(r int, eps float64) *ref.TreeRef {
	if w.treeRow != r || w.treeEps != eps {
		w.tree, w.treeRow, w.treeEps = ref.SpecTreeVerify(w.j.run, r, eps), r, eps
	}
	return &w.tree
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
