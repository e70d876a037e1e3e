package scenarios

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// Mismatches compares a report with the expected verdict and returns one
// sentence per difference (nil when the report is exactly the verdict): the
// overall pass, the outputs and their order, each output's pass, its failing
// rows and their rules, its noted rows for each rule named, and the rows
// that matched each reference.
func (e Expect) Mismatches(rep *engine.Report) []string {
	var diffs []string
	add := func(format string, a ...any) { diffs = append(diffs, fmt.Sprintf(format, a...)) }
	if rep == nil {
		return []string{"no report"}
	}
	if rep.Pass != e.Pass {
		add("run pass is %t, want %t", rep.Pass, e.Pass)
	}
	got := make([]string, len(rep.Outputs))
	for i, o := range rep.Outputs {
		got[i] = o.Name
	}
	want := make([]string, len(e.Outputs))
	for i, o := range e.Outputs {
		want[i] = o.Name
	}
	if !slices.Equal(got, want) {
		add("outputs are %q, want %q", got, want)
		return diffs
	}
	for i, w := range e.Outputs {
		for _, d := range w.mismatches(&rep.Outputs[i]) {
			add("output %s: %s", w.Name, d)
		}
	}
	return diffs
}

// mismatches compares one output's report with its expected verdict.
func (w OutputExpect) mismatches(o *engine.OutputReport) []string {
	var diffs []string
	add := func(format string, a ...any) { diffs = append(diffs, fmt.Sprintf(format, a...)) }
	if o.Pass != w.Pass {
		add("pass is %t, want %t (notes: %q)", o.Pass, w.Pass, o.Notes)
	}
	gotFail := FailingRows(o)
	wantFail := map[int][]engine.Rule{}
	for _, f := range w.Failing {
		wantFail[f.Row] = sortedRules(f.Rules)
	}
	for _, r := range sortedKeys(gotFail, wantFail) {
		g, okG := gotFail[r]
		x, okW := wantFail[r]
		switch {
		case !okW:
			add("row %d fails (%v), want it to pass: %q", r, g, rowViolations(o, r))
		case !okG:
			add("row %d passes, want it to fail for %v", r, x)
		case !slices.Equal(g, x):
			add("row %d fails for %v, want %v: %q", r, g, x, rowViolations(o, r))
		}
	}
	for _, n := range w.Notes {
		if g := NotedRows(o, n.Rule); !slices.Equal(g, n.Rows) {
			add("rows noted %s are %v, want %v", n.Rule, g, n.Rows)
		}
	}
	got := DiagnosedRows(o)
	want := map[string][]int{}
	for _, c := range w.Diagnosed {
		want[c.Class] = c.Rows
	}
	for _, c := range sortedKeys(got, want) {
		if !slices.Equal(got[c], want[c]) {
			add("rows diagnosed %s are %v, want %v", c, got[c], want[c])
		}
	}
	if m := w.Matched; m != nil {
		if g := MatchedRows(o, "strict"); !slices.Equal(g, m.Strict) {
			add("rows matched to the strict reference are %v, want %v", g, m.Strict)
		}
		if g := MatchedRows(o, "native"); !slices.Equal(g, m.Native) {
			add("rows matched to the native reference are %v, want %v", g, m.Native)
		}
	}
	return diffs
}

// DiagnosedRows returns, for each class of sampler bug diagnosed in an
// output report, the rows diagnosed with it, ascending.
func DiagnosedRows(o *engine.OutputReport) map[string][]int {
	out := map[string][]int{}
	for _, r := range o.Rows {
		if r.Fit != nil && r.Fit.Diagnosis != "" {
			out[r.Fit.Diagnosis] = append(out[r.Fit.Diagnosis], r.Row)
		}
	}
	return out
}

// FailingRows returns the failing rows of an output report, each with the
// sorted, distinct rules of its violations.
func FailingRows(o *engine.OutputReport) map[int][]engine.Rule {
	out := map[int][]engine.Rule{}
	for _, r := range o.Rows {
		if r.Pass {
			continue
		}
		var rules []engine.Rule
		for _, f := range r.Findings {
			if f.Severity == engine.Violation {
				rules = append(rules, f.Rule)
			}
		}
		out[r.Row] = sortedRules(rules)
	}
	return out
}

// NotedRows returns the rows, ascending, that carry a note of rule.
func NotedRows(o *engine.OutputReport, rule engine.Rule) []int {
	var rows []int
	for _, r := range o.Rows {
		for _, f := range r.Findings {
			if f.Severity == engine.Note && f.Rule == rule {
				rows = append(rows, r.Row)
				break
			}
		}
	}
	slices.Sort(rows)
	return rows
}

// MatchedRows returns the rows, ascending, that passed against reference
// ("strict" or "native").
func MatchedRows(o *engine.OutputReport, reference string) []int {
	var rows []int
	for _, r := range o.Rows {
		if r.Matched == reference {
			rows = append(rows, r.Row)
		}
	}
	slices.Sort(rows)
	return rows
}

// rowViolations returns the violation messages of row r, for diagnostics.
func rowViolations(o *engine.OutputReport, r int) []string {
	for _, rr := range o.Rows {
		if rr.Row == r {
			return rr.Violations
		}
	}
	return nil
}

// sortedRules returns the distinct rules of rs, sorted.
func sortedRules(rs []engine.Rule) []engine.Rule {
	out := slices.Clone(rs)
	slices.Sort(out)
	return slices.Compact(out)
}

// sortedKeys returns the union of the keys of a and b, ascending.
func sortedKeys[K cmp.Ordered, V any](a, b map[K]V) []K {
	var keys []K
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
