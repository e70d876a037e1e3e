package compare

import (
	"fmt"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// modes builds a mode table for every kind of output the run has more than
// one of (ours included), in the order of outs: each output's verdict, its
// error against the reference, and how far it is from each other output of
// the table (docs/SEMANTICS.md "The mode table").
func (j *judge) modes(outs []engine.OutputReport) []engine.ModeTable {
	var kinds []string
	byKind := map[string][]int{}
	for i, o := range outs {
		if o.Kind == "" {
			continue
		}
		if byKind[o.Kind] == nil {
			kinds = append(kinds, o.Kind)
		}
		byKind[o.Kind] = append(byKind[o.Kind], i)
	}
	pairAt := map[[2]int]*pair{}
	for _, pr := range j.pairs {
		pairAt[[2]int{pr.a, pr.b}] = pr
		pairAt[[2]int{pr.b, pr.a}] = pr
	}
	var tables []engine.ModeTable
	for _, kind := range kinds {
		idx := byKind[kind]
		if len(idx) < 2 {
			continue
		}
		t := engine.ModeTable{Kind: kind}
		switch kind {
		case "probs":
			t.Metric = "abs"
		case "logits":
			t.Metric = "logit"
		case "logprobs":
			t.Metric = "logprob"
		}
		for _, i := range idx {
			line := modeLine(&outs[i], j.plans[i])
			for _, k := range idx {
				if k != i {
					line.Against = append(line.Against, j.against(i, k, pairAt[[2]int{i, k}]))
				}
			}
			t.Lines = append(t.Lines, line)
		}
		t.Summary = modeSummary(t.Lines)
		tables = append(tables, t)
	}
	return tables
}

// modeLine is output o's line: verdict, rows, and its error against the
// reference (the run's strict drift for float kinds, the rows the
// reference rules out for token kinds).
func modeLine(o *engine.OutputReport, p *plan) engine.ModeLine {
	l := engine.ModeLine{Output: o.Name, External: o.External, Pass: o.Pass, FailedRows: o.FailedRows, Against: []engine.ModeDiff{}}
	for _, r := range o.Rows {
		if !r.Padding {
			l.Rows++
		}
	}
	if p.problem != "" {
		return l
	}
	switch {
	case o.Strict != nil:
		a := o.Strict.Abs
		l.Mean, l.P99, l.Max = &a.Mean, &a.P99, &a.Max
	case p.probs || p.logits || p.logprobs:
	default:
		n := 0
		for _, r := range o.Rows {
			for _, f := range r.Findings {
				if f.Severity == engine.Violation && (f.Rule == engine.RuleToken || f.Rule == engine.RuleTokenRange || f.Rule == engine.RuleSupport) {
					n++
					break
				}
			}
		}
		l.Mismatches = &n
	}
	if g := o.Gate; g != nil {
		l.KL = &g.MeanKL
		l.RealFlips, l.FragileFlips = &g.Real, &g.Fragile
	}
	return l
}

// against says how far output i is from output k: the greatest elementwise
// difference of float kinds (pr), or the real rows whose tokens differ.
func (j *judge) against(i, k int, pr *pair) engine.ModeDiff {
	pi, pk := j.plans[i], j.plans[k]
	d := engine.ModeDiff{Output: pk.rep.Name, Row: -1}
	switch {
	case pi.problem != "" || pk.problem != "":
	case pr != nil:
		t := pr.total()
		if t.compared > 0 {
			d.Max, d.Row = floatPtr(t.max), t.row
		}
	case drawKind(pi) && drawKind(pk):
		n := 0
		var a, b []int64
		for r := range j.rows {
			if j.run.Padding(r) {
				continue
			}
			a, b = rowDraws(pi, r, a), rowDraws(pk, r, b)
			if partAt(a, b) >= 0 {
				if n == 0 {
					d.Row = r
				}
				n++
			}
		}
		d.Differ = &n
	}
	return d
}

// modeSummary says in words which outputs of a table pass, and why the
// others fail.
func modeSummary(lines []engine.ModeLine) string {
	var pass, fail []string
	for _, l := range lines {
		if l.Pass {
			pass = append(pass, l.Output)
			continue
		}
		why := fmt.Sprintf("%d of %s", l.FailedRows, plural(l.Rows, "row"))
		if l.FailedRows == 0 {
			why = "all rows together"
		}
		if l.RealFlips != nil && *l.RealFlips > 0 {
			why += ", " + plural(*l.RealFlips, "real top-1 flip")
		}
		fail = append(fail, fmt.Sprintf("%s (%s)", l.Output, why))
	}
	var parts []string
	switch {
	case len(fail) == 0:
		return "every output passes: " + andList(pass)
	case len(pass) == 1:
		parts = append(parts, pass[0]+" passes")
	case len(pass) > 1:
		parts = append(parts, andList(pass)+" pass")
	}
	verb := "fails"
	if len(fail) > 1 {
		verb = "fail"
	}
	parts = append(parts, andList(fail)+" "+verb)
	return strings.Join(parts, "; ")
}
