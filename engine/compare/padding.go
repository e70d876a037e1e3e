package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// Padded rows (docs/SEMANTICS.md "Padded rows") are never judged against
// the reference: an external output must hold its fill there (a kernel
// that writes into a padded lane is caught), and a failing real row whose
// output matches a nearby row's reference better than its own is reported
// as shifted by the padding.

// fills are what an external output must hold in a padded row, by tensor:
// probabilities 0, tokens and draws -1, the speculative counters 0.
var fills = []struct {
	name string
	get  func(o *engine.Output) *engine.Tensor
	fill float64
}{
	{"probs", func(o *engine.Output) *engine.Tensor { return o.Probs }, 0},
	{"tokens", func(o *engine.Output) *engine.Tensor { return o.Tokens }, -1},
	{"samples", func(o *engine.Output) *engine.Tensor { return o.Samples }, -1},
	{"sample_counts", func(o *engine.Output) *engine.Tensor { return o.SampleCounts }, 0},
	{"spec_tokens", func(o *engine.Output) *engine.Tensor { return o.SpecTokens }, -1},
	{"spec_emitted", func(o *engine.Output) *engine.Tensor { return o.SpecEmitted }, 0},
	{"spec_accepted", func(o *engine.Output) *engine.Tensor { return o.SpecAccepted }, 0},
	{"draft_out", func(o *engine.Output) *engine.Tensor { return o.DraftOut }, -1},
}

// judgeFill checks padded row r of an external output: each of its tensors
// must hold the fill everywhere in the row (logits are not checked: a
// padded lane's logits are whatever the model made of a dummy input;
// FastDeploy's draft buffer keeps what it held, so its draft_out is not
// checked either).
func (w *worker) judgeFill(p *plan, r int, rep *engine.RowReport) {
	for _, f := range fills {
		t := f.get(p.out)
		if t == nil || len(t.Shape) == 0 || t.Dim(0) != w.j.rows {
			continue
		}
		if f.name == "draft_out" && w.j.run.Params.NgramSemantics.FastDeploy() {
			continue
		}
		n := t.NumElements() / w.j.rows
		off, first := 0, -1
		var firstVal float64
		for k := range n {
			x := t.Float(r*n + k)
			if x != f.fill {
				if first < 0 {
					first, firstVal = k, x
				}
				off++
			}
		}
		if off > 0 {
			where := ""
			if n > 1 {
				where = fmt.Sprintf(" (%d of %d values, first at index %d: %s)", off, n, first, engine.FormatSig(firstVal, 2))
			} else {
				where = fmt.Sprintf(" (%s)", engine.FormatSig(firstVal, 2))
			}
			rep.AddFinding(violation(engine.RulePadding, -1, "row %d is padding, but %s holds something other than its fill %s there%s",
				r, withMode(f.name, modeOf(p.out.Name)), engine.FormatSig(f.fill, 2), where))
		}
	}
	if p.trials {
		w.judgeTrialsFill(p, r, rep)
	}
}

// judgeTrialsFill checks padded row r of spec_trials: -1 in every trial.
func (w *worker) judgeTrialsFill(p *plan, r int, rep *engine.RowReport) {
	t := p.out.SpecTrials
	trials, b, n := t.Dim(0), t.Dim(1), t.Dim(2)
	off := 0
	for i := range trials {
		for k := range n {
			if t.Int((i*b+r)*n+k) != -1 {
				off++
			}
		}
	}
	if off > 0 {
		rep.AddFinding(violation(engine.RulePadding, -1, "row %d is padding, but %s holds something other than its fill -1 there (%d of %d values)",
			r, p.rep.Name, off, trials*n))
	}
}

// modeOf returns the mode of an output's name ("" without one).
func modeOf(name string) string {
	_, mode := engine.SplitName(name)
	return mode
}

// shifted looks, on a padded batch, for failing real rows of plan p whose
// output matches another row's reference better than their own, among the
// rows as many away as the batch has padded lanes: a launch that shifted
// the real rows by the padding. Each such row gets a violation, and the
// output a note with the shift. Argmax tokens, probabilities and logits
// are looked at; single draws are too weak to tell.
func (j *judge) shifted(p *plan, or *engine.OutputReport) {
	padded := len(j.run.PaddedRows())
	if padded == 0 || p.problem != "" || !(p.probs || p.logits || p.tokens && p.argmax) {
		return
	}
	w := newWorker(j)
	shifts := map[int]int{}
	for k := range or.Rows {
		rep := &or.Rows[k]
		r := rep.Row
		if rep.Padding || rep.Pass {
			continue
		}
		to, what := j.bestOther(w, p, r, padded)
		if to < 0 {
			continue
		}
		shifts[to-r]++
		rep.AddFinding(violation(engine.RulePadding, -1, "row %d: the output matches row %d's reference better than its own (%s): the real rows look shifted by the padding", r, to, what))
	}
	if len(shifts) == 0 {
		return
	}
	var by []int
	for s := range shifts {
		by = append(by, s)
	}
	slices.Sort(by)
	var parts []string
	for _, s := range by {
		parts = append(parts, fmt.Sprintf("%s by %+d", plural(shifts[s], "row"), s))
	}
	or.Notes = append(or.Notes, fmt.Sprintf("padding: failing real rows match a shifted row's reference (%s): the launch shifts the real rows by the padding", andList(parts)))
}

// bestOther returns the row, within window rows of r, whose reference row
// r's output of plan p matches best, when it matches better than r's own
// (and how much better, in words), or -1.
func (j *judge) bestOther(w *worker, p *plan, r, window int) (int, string) {
	v := j.vocab
	var own float64
	var score func(c int) float64
	switch {
	case p.tokens:
		tok := p.out.Tokens.Int(r)
		for c := max(r-window, 0); c <= min(r+window, j.rows-1); c++ {
			if c == r {
				continue
			}
			if a := ref.Argmax(j.run, c); a.Invalid == "" && a.Has(tok) && len(a.Tokens) == 1 {
				return c, fmt.Sprintf("token %d is row %d's argmax", tok, c)
			}
		}
		return -1, ""
	case p.probs:
		out := make([]float64, v)
		decodeRow(p.out.Probs, r*v, out)
		score = func(c int) float64 {
			d := w.dist(c, p.renorm, false, p.eps)
			if !d.Valid() {
				return math.Inf(1)
			}
			return tv(out, d.Probs)
		}
	case p.logits:
		var e ref.GateRow
		ref.ReadGate(&e, ref.Logits{Tensor: p.out.Logits, Offset: r * v, Len: v})
		score = func(c int) float64 {
			g := w.gateRef(c)
			return maxAbsDiff(e.Logits, g.Logits)
		}
	}
	own = score(r)
	best, at := own, -1
	for c := max(r-window, 0); c <= min(r+window, j.rows-1); c++ {
		if c == r {
			continue
		}
		if s := score(c); s < best/2 {
			best, at = s, c
		}
	}
	if at < 0 {
		return -1, ""
	}
	what := "total variation"
	if p.logits {
		what = "greatest |Δlogit|"
	}
	return at, fmt.Sprintf("%s %s against %s", what, engine.FormatSig(best, 2), engine.FormatSig(own, 2))
}

// tv returns the total variation between two distributions.
func tv(a, b []float64) float64 {
	var s float64
	for i, x := range a {
		s += math.Abs(x - b[i])
	}
	return s / 2
}

// maxAbsDiff returns the greatest |a - b| over the elements where both are
// finite or equal (+Inf where only one is masked).
func maxAbsDiff(a, b []float64) float64 {
	var m float64
	for i, x := range a {
		if y := b[i]; x != y {
			if d := math.Abs(x - y); d > m || d != d {
				m = d
			}
		}
	}
	return m
}

// andList writes items as "a, b and c".
func andList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	s := items[0]
	for _, it := range items[1 : len(items)-1] {
		s += ", " + it
	}
	return s + " and " + items[len(items)-1]
}
