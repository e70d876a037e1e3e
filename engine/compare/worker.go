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

	out  []float64
	bufs *rowBuffers
	// pairRows holds, per plan compared with others elementwise (float
	// outputs of one kind), the row decoded last, and groupVals per plan
	// the row read by group last; read says how each plan read the
	// current row.
	pairRows  [][]float64
	paired    []bool
	groupVals [][]float64
	read      []rowRead
	// ungrouped counts, per plan, the rows in a row its output could not be
	// read by group (readProbs stops trying at giveUpGroups).
	ungrouped []int
	// grouped groups the current row's 16-bit logits by pattern.
	grouped *rowGroups
	// gate and gateOut are the golden and the engine's logits of the row
	// being judged (logits_gate); gateRow is the golden's row.
	gate, gateOut ref.GateRow
	gateRow       int
	// lrStrict, lrNative and lrOther are the reference log-softmax of the
	// row being judged (logprobs): strict, native, and the other kind's;
	// lmStrict, lmNative and lmOther the output measured against each.
	lrStrict, lrNative, lrOther ref.LogRow
	lmStrict, lmNative, lmOther lpMeasure
	// lpIDs and lpVals hold a top-N's row; lpAt maps each token to 1 + its
	// entry in the row (outputDecisions), lpAtFull says it is the identity.
	lpIDs    []int64
	lpVals   []float64
	lpAt     []int32
	lpAtFull bool
	// drawsA and drawsB hold two outputs' draws of a row (agree).
	drawsA, drawsB []int64
	hists          []planHists
	counts         []int64
	// fitRef holds a reference renormalised over the support a sampler
	// revealed (revealedSupport).
	fitRef []float64
	// diagWS, diagDist and diagLaw hold the law of a class of sampler bug
	// that a failing row's draws are fitted to (diagnoseSamples).
	diagWS   ref.Workspace
	diagDist ref.Dist
	diagLaw  []float64
	strict   measurement
	native   measurement
}

// distEntry is a reference distribution kept for the row being judged,
// with its values by group of logit pattern once an output read by group
// needed them.
type distEntry struct {
	renorm, native, unit bool
	// t is the temperature the row was computed at.
	eps, t float64
	row    int
	d      ref.Dist
	groups groupRef
}

func newWorker(j *judge) *worker {
	w := &worker{j: j, argmaxRow: -1, specRow: -1, treeRow: -1, gateRow: -1, hists: make([]planHists, len(j.plans)),
		read: make([]rowRead, len(j.plans)), groupVals: make([][]float64, len(j.plans)), ungrouped: make([]int, len(j.plans))}
	v := j.vocab
	for _, p := range j.plans {
		if p.probs || p.logits || p.logprobs {
			w.out = make([]float64, v)
			w.bufs = newRowBuffers(v)
			break
		}
	}
	w.pairRows = make([][]float64, len(j.plans))
	w.paired = make([]bool, len(j.plans))
	for _, pr := range j.pairs {
		w.paired[pr.a], w.paired[pr.b] = true, true
	}
	return w
}

// rowRead says how a plan's output row was read.
type rowRead uint8

const (
	readNone   rowRead = iota // not read (an invalid row, or no float output)
	readTokens                // token by token, into worker.row
	readGroups                // by group of logit pattern, into worker.groupVals
)

// row returns the buffer that plan i's output row is decoded into: its own
// when the row is compared with other outputs afterwards (pairs), else the
// shared one.
func (w *worker) row(i int) []float64 {
	if !w.paired[i] {
		return w.out[:w.j.vocab]
	}
	if w.pairRows[i] == nil {
		w.pairRows[i] = make([]float64, w.j.vocab)
	}
	return w.pairRows[i]
}

// judgeRow judges row r of every output that can be judged.
func (w *worker) judgeRow(r int) []*engine.RowReport {
	reports := make([]*engine.RowReport, len(w.j.plans))
	clear(w.read)
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
		if p.logprobs {
			w.judgeLogprobs(i, p, r, rep)
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
	}
	w.agree(r, reports)
	return reports
}

// dist returns the reference distribution of row r: softmax or renorm (with
// boundary band eps), strict or native. The native reference of a row at
// temperature 0 or 1 is the strict one (scaling by 1 is exact), so it is not
// computed twice.
func (w *worker) dist(r int, renorm, native bool, eps float64) *ref.Dist {
	return w.distAt(r, ref.Temperature(w.j.run, r), renorm, native, eps)
}

// distAt is dist at temperature t rather than the row's (logprobs: a raw
// reference is at temperature 1, and so is a greedy row's processed one).
func (w *worker) distAt(r int, t float64, renorm, native bool, eps float64) *ref.Dist {
	run := w.j.run
	if ref.Greedy(t) || t == 1 {
		native = false
	}
	if !renorm {
		eps = 0 // softmax classes do not depend on it
	}
	// An entry holds the references at the rows' own temperatures, or at
	// another (unit): one of each kind, whatever the temperatures.
	unit := t != ref.Temperature(run, r)
	var e *distEntry
	for _, c := range w.dists {
		if c.renorm == renorm && c.native == native && c.eps == eps && c.unit == unit {
			e = c
			break
		}
	}
	if e == nil {
		e = &distEntry{renorm: renorm, native: native, eps: eps, unit: unit, row: -1, groups: groupRef{row: -1}}
		w.dists = append(w.dists, e)
	}
	if e.row != r || e.t != t {
		e.t = t
		f := ref.NoFilter()
		if renorm {
			f = ref.RowFilter(run, r, eps)
		}
		w.ws.Compute(&e.d, ref.RowLogits(run, r), t, f, native)
		e.row, e.groups.row = r, -1
	}
	return &e.d
}

// groupRef returns the cache by group of d, one of the worker's reference
// distributions.
func (w *worker) groupRef(d *ref.Dist) *groupRef {
	for _, e := range w.dists {
		if &e.d == d {
			return &e.groups
		}
	}
	panic("compare: groupRef of a distribution the worker does not hold")
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
	rep.InvalidInput = true
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
